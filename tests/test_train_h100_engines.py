"""The h100-bf16 / h100-fp16 engine presets (accelsim.arith) used by the AMP recipes.

The model (arith/engine.py, with its sources): 16 products per step (one Hopper FP16/BF16 MMA
K), every term aligned to 25 fraction bits below the step's largest exponent by truncation, the
fused sum written back to the FP32 accumulator by truncation; no promotion. The hand-derived
values below pin each of those three features; the real-H100 bit check is external."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.arith import get_engine, matmul

U = 2.0**-23  # FP32 ulp at 1


@pytest.mark.parametrize("name,fmt", [("h100-fp16", "fp16"), ("h100-bf16", "bf16")])
def test_preset_fields(name, fmt):
    e = get_engine(name)
    assert (e.a_format, e.b_format, e.out_format) == (fmt, fmt, "fp32")
    assert (e.block_width, e.align_bits, e.align_rounding, e.step_format, e.step_rounding, e.chunk) == (
        16, 25, "rz", "fp32", "rz", None)


def _dot(name, terms):
    """The engine's dot of products equal to ``terms`` (powers of two or +-1), each product
    built as sqrt(t) * sqrt(t) so that every operand is a normal FP16/BF16 number."""
    t = np.array(terms, dtype=np.float64)
    root = np.where(t == 0, 0.0, np.sqrt(np.abs(t)))
    a = (np.sign(t) * root)[None, :]
    b = root[:, None]
    return float(matmul(a, b, get_engine(name))[0, 0])


@pytest.mark.parametrize("name", ["h100-fp16", "h100-bf16"])
def test_fused_block_keeps_25_bits_and_truncates(name):
    # 1 + 15 * 2^-24 = 1 + 7.5 ulp: every 2^-24 survives the 25-bit alignment; the fused sum is
    # then truncated to FP32 -> 1 + 7 ulp. (Sequential FP32 FMAs give 1.0: each 1 + 2^-24 is a
    # tie to even; a correctly rounded sum gives 1 + 8 ulp.)
    assert _dot(name, [1.0] + [2.0**-24] * 15) == 1.0 + 7 * U


@pytest.mark.parametrize("name", ["h100-fp16", "h100-bf16"])
def test_terms_below_the_alignment_window_vanish(name):
    # 2^-26 sits below 25 bits under 2^0: cut to zero, however many of them
    assert _dot(name, [1.0] + [2.0**-26] * 15) == 1.0
    # but a block without the large term keeps them exactly: 15 * 2^-26
    assert _dot(name, [2.0**-26] * 15 + [0.0]) == 15 * 2.0**-26


@pytest.mark.parametrize("name", ["h100-fp16", "h100-bf16"])
def test_accumulator_joins_the_next_block_as_a_term(name):
    # block 1: 1 + 7 ulp (above); block 2: sixteen 2^-24 terms join the FP32 accumulator
    # 1 + 7 ulp: 1 + 7 ulp + 8 ulp = 1 + 15 ulp exactly (no truncation needed)
    assert _dot(name, [1.0] + [2.0**-24] * 15 + [2.0**-24] * 16) == 1.0 + 15 * U


def test_negative_sums_truncate_toward_zero():
    assert _dot("h100-fp16", [-1.0] + [-(2.0**-24)] * 15) == -(1.0 + 7 * U)
