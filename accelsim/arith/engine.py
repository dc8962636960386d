"""Dot-product engine configuration: one frozen dataclass and the presets.

An engine consumes K products per output in *steps*. Each step fuses ``block_width`` products
with the running inner sum: products are exact (or rounded to ``product_format``); with
``align_bits`` set, every term is cut to ``align_bits`` fraction bits below the step's largest
exponent (``align_rounding``); the step result is then cut to ``step_bits`` fraction bits of its
own exponent and/or rounded to ``step_format``. Every ``chunk`` products the inner sum is added
into an outer accumulator (``outer_format``), which is how both IBM's two-level chunk
accumulation (HFP8, NeurIPS 2019 sec. 4 and app. D) and cuBLAS' FP32 promotion of Hopper FP8
tensor-core partial sums (DeepSeek-V3 sec. 3.3.2) are expressed. ``split_k`` cuts K into
contiguous partitions whose results are summed in fp32.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from accelsim.errors import check_int
from accelsim.numerics import FORMAT_NAMES, get_format

_ROUNDINGS = ("rne", "rna", "rz")
_ALIGN_ROUNDINGS = ("rz", "rne")


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides the bits of a dot product (see the module docstring)."""

    name: str
    a_format: str
    b_format: str
    product_format: str | None = None  # None: products exact
    product_rounding: str = "rne"
    block_width: int | None = 1  # products per step; None: the whole K in one exact step
    align_bits: int | None = None  # fraction bits kept below the step's max exponent; None: exact
    align_rounding: str = "rz"  # how the alignment cut rounds: rz (truncate) or rne
    align_exponent: str = "field"  # product exponent used to align: "field" (ea + eb) or "value"
    step_bits: int | None = None  # step result cut to this many fraction bits (own exponent)
    step_bits_rounding: str = "rz"
    step_format: str | None = "fp32"  # step result rounded to this format (None: no rounding)
    step_rounding: str = "rne"
    chunk: int | None = None  # promote the inner sum every `chunk` products (None: never)
    outer_format: str | None = "fp32"  # None: exact (float64, checked exact at run time)
    outer_rounding: str = "rne"
    split_k: int = 1
    out_format: str = "fp32"
    out_rounding: str = "rne"
    zero_result: str = "ieee"  # "ieee": IEEE sign rules; "positive": every zero result is +0
    nan_bits: int | None = None  # NaN bit pattern of the float32 result array (None: numpy's)

    def __post_init__(self):
        for key in ("a_format", "b_format", "out_format"):
            _check_format(key, getattr(self, key))
        for key in ("product_format", "step_format", "outer_format"):
            if getattr(self, key) is not None:
                _check_format(key, getattr(self, key))
        for key in ("product_rounding", "step_rounding", "outer_rounding", "out_rounding"):
            _check_choice(key, getattr(self, key), _ROUNDINGS)
        for key in ("align_rounding", "step_bits_rounding"):
            _check_choice(key, getattr(self, key), _ALIGN_ROUNDINGS)
        _check_choice("align_exponent", self.align_exponent, ("field", "value"))
        _check_choice("zero_result", self.zero_result, ("ieee", "positive"))
        for key in ("align_bits", "step_bits"):
            v = getattr(self, key)
            if v is not None and (not _is_int(v) or v < 0):
                raise ValueError(f"{key} must be a non-negative integer or None, got {v!r}")
        for key in ("block_width", "chunk"):
            if getattr(self, key) is not None:
                check_int(key, getattr(self, key))  # or None
        check_int("split_k", self.split_k)
        if self.block_width is None:
            if self.align_bits is not None or self.chunk is not None or self.step_bits is not None:
                raise ValueError("block_width=None (one exact step over all of K) excludes "
                                 "align_bits, step_bits and chunk")
        else:
            if self.block_width > 1 and self.align_bits is None:
                raise ValueError(f"block_width={self.block_width} needs align_bits: an exact "
                                 "multi-term fused sum is offered only as block_width=None")
            if self.align_bits is not None:
                # every aligned term is an integer multiple of u = 2^(emax - align_bits) below
                # 2^(align_bits + 2) u; the sum of block_width + 1 of them must fit in 53 bits
                need = self.align_bits + 2 + math.ceil(math.log2(self.block_width + 1))
                if need > 53:
                    raise ValueError(f"align_bits={self.align_bits} with block_width="
                                     f"{self.block_width} needs {need} > 53 bits for an exact "
                                     "float64 step sum")
            if self.chunk is not None and self.chunk % self.block_width:
                raise ValueError(f"chunk={self.chunk} must be a multiple of block_width="
                                 f"{self.block_width}")
        if self.nan_bits is not None and (not _is_int(self.nan_bits) or not 0 <= self.nan_bits < 2**32
                                          or (self.nan_bits >> 23) & 0xFF != 0xFF
                                          or not self.nan_bits & 0x7FFFFF):
            raise ValueError(f"nan_bits={self.nan_bits!r} is not a float32 NaN bit pattern")

    @property
    def fast_accum(self) -> bool:
        """True when the inner sum is never promoted (cuBLAS ``use_fast_accum=True``)."""
        return self.chunk is None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_format(key: str, value) -> None:
    if value not in FORMAT_NAMES:
        raise ValueError(f"{key}={value!r} is not a known format; choose from {', '.join(FORMAT_NAMES)}")
    get_format(value)


def _check_choice(key: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


# Hopper FP8 (H100 SXM, cuBLASLt via torch._scaled_mm): pinned on every bit of
# ../shared/data/h100_fp8 (tests/test_arith_h100.py). Matches Khattak & Mikaitis,
# arXiv:2512.07004 (13 fraction bits, truncation) and DeepSeek-V3 sec. 3.3.2 (promotion every
# 128 elements); block width 32 = the K of one Hopper FP8 wgmma instruction.
H100_PROMOTION_INTERVAL = 128

PRESETS: dict[str, EngineConfig] = {
    "hfp8": EngineConfig(
        # IBM HFP8 (Sun et al., NeurIPS 2019): 1-4-3 x 1-5-2 products accumulated by FMA in
        # DLFloat 1-6-9 (Agrawal et al., ARITH 2019: round-nearest-up = rna), chunk 64, the
        # chunk sums accumulated in DLFloat too.
        name="hfp8", a_format="hfp8-143", b_format="hfp8-152",
        block_width=1, step_format="dlfloat16", step_rounding="rna",
        chunk=64, outer_format="dlfloat16", outer_rounding="rna",
        out_format="dlfloat16", out_rounding="rna",
    ),
    "fp16-fma": EngineConfig(
        name="fp16-fma", a_format="fp16", b_format="fp16",
        block_width=1, step_format="fp16", step_rounding="rne", out_format="fp16",
    ),
    "fp32-fma": EngineConfig(
        name="fp32-fma", a_format="e4m3fn", b_format="e4m3fn",
        block_width=1, step_format="fp32", step_rounding="rne", out_format="fp32",
    ),
    "h100-fp8": EngineConfig(
        name="h100-fp8", a_format="e4m3fn", b_format="e4m3fn",
        block_width=32, align_bits=13, align_rounding="rz", align_exponent="field",
        step_bits=13, step_bits_rounding="rz", step_format=None,
        chunk=H100_PROMOTION_INTERVAL, outer_format="fp32", outer_rounding="rne",
        out_format="fp32", out_rounding="rne", zero_result="positive", nan_bits=0x7FFFFFFF,
    ),
    # Hopper 16-bit tensor cores (H100, cuBLAS HGEMM/BF16 GEMM with FP32 output, no promotion:
    # the FP32 accumulator register is the C of the next MMA). 16 products per step = the K of
    # one Hopper FP16/BF16 MMA (PTX ISA: wgmma/mma .f16/.bf16 K=16); the step's terms are
    # aligned to 25 bits with truncation and the sum written back as FP32 by truncation:
    # huweim/emulation_sys README ("H100 (sm_90a) FP16 -> FP32 wmma: 25 bits, RZ"), the same
    # multi-term-sum / truncated-alignment model as Khattak & Mikaitis, arXiv:2512.07004 and
    # Fasi et al., PeerJ CS 2021 (V100/A100). NaN pattern and +0 results as h100-fp8.
    "h100-fp16": EngineConfig(
        name="h100-fp16", a_format="fp16", b_format="fp16",
        block_width=16, align_bits=25, align_rounding="rz", align_exponent="field",
        step_format="fp32", step_rounding="rz", chunk=None,
        out_format="fp32", out_rounding="rne", zero_result="positive", nan_bits=0x7FFFFFFF,
    ),
    "h100-bf16": EngineConfig(
        name="h100-bf16", a_format="bf16", b_format="bf16",
        block_width=16, align_bits=25, align_rounding="rz", align_exponent="field",
        step_format="fp32", step_rounding="rz", chunk=None,
        out_format="fp32", out_rounding="rne", zero_result="positive", nan_bits=0x7FFFFFFF,
    ),
    "exact": EngineConfig(
        name="exact", a_format="e4m3fn", b_format="e4m3fn",
        block_width=None, step_format=None, out_format="fp32", out_rounding="rne",
    ),
}
PRESET_NAMES = tuple(PRESETS)
_FIELDS = tuple(f.name for f in dataclasses.fields(EngineConfig) if f.name != "name")


def get_engine(name: str, **overrides: Any) -> EngineConfig:
    """A scalar-datapath preset by name with fields replaced, e.g. ``get_engine("h100-fp8",
    fast_accum=True)`` (the package's :func:`accelsim.arith.get_engine` also knows the
    block-scaled engines).

    ``fast_accum=True`` disables promotion (chunk=None); ``fast_accum=False`` keeps the preset's
    promotion interval (an error for presets that have none).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown engine preset {name!r}; choose from "
                         f"{', '.join(PRESET_NAMES)}")
    base = PRESETS[name]
    kw = dict(overrides)
    if "fast_accum" in kw:
        fa = kw.pop("fast_accum")
        if not isinstance(fa, bool):
            raise ValueError(f"fast_accum must be True or False, got {fa!r}")
        if fa:
            if kw.get("chunk") is not None:
                raise ValueError(f"fast_accum=True means no promotion; it contradicts chunk={kw['chunk']!r}")
            kw["chunk"] = None
        elif base.chunk is None and kw.get("chunk") is None:
            raise ValueError(f"fast_accum=False needs a promotion interval; preset {name!r} has "
                             "none (pass chunk=...)")
    unknown = sorted(set(kw) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown engine parameter(s) {', '.join(map(repr, unknown))}; valid: "
                         f"fast_accum, {', '.join(_FIELDS)}")
    return dataclasses.replace(base, **kw)
