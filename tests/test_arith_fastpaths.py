"""The fast datapaths equal the float64 reference datapath bit for bit (hypothesis over engines,
formats, chunk sizes, shapes and operand mixes with subnormals, extremes, NaN and Inf), they are
the ones actually taken for the presets, and threads never change a bit.

The reference datapath itself is checked against exact Fraction arithmetic in
tests/test_arith_exact.py and against H100 bits in tests/test_arith_h100.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arith import dot, get_engine, matmul
from accelsim.arith.datapath import GeneralPath, choose_path
from accelsim.arith.fastpath import AlignedPath, FmaPath
from accelsim.numerics import decode, get_format, quantize


def _values(fmt: str) -> np.ndarray:
    f = get_format(fmt)
    if f.bits <= 16:
        v = decode(np.arange(2**f.bits, dtype=np.uint32).astype(f.code_dtype), fmt)
        return np.unique(v[np.isfinite(v)])
    return None  # fp32: drawn by quantizing


def _operand(rng, fmt: str, shape, mix: str) -> np.ndarray:
    """Values of ``fmt``: every code alike ("codes"), N(0,1), only tiny ones, only huge ones,
    or N(0,1) sprinkled with NaN/Inf ("specials")."""
    vals = _values(fmt)
    f = get_format(fmt)
    if mix == "codes" and vals is not None:
        return vals[rng.integers(0, vals.size, shape)]
    if mix == "tiny":
        x = rng.standard_normal(shape) * f.min_normal * 4
    elif mix == "huge":
        x = rng.standard_normal(shape) * f.max / 4
    else:
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 4, shape)
    x = quantize(x, fmt, saturate=True)
    if mix == "specials":
        pick = rng.random(shape)
        x[pick < 0.03] = np.nan
        if f.has_inf:
            x[(pick >= 0.03) & (pick < 0.06)] = np.inf
            x[(pick >= 0.06) & (pick < 0.09)] = -np.inf
    return x


def _fp8_pair(draw):
    return draw(st.sampled_from([("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e5m2"),
                                 ("hfp8-143", "hfp8-152"), ("hif8", "hif8"), ("e5m2", "hfp8-143"),
                                 ("dlfloat16", "e4m3fn")]))


@st.composite
def _engine(draw):
    kind = draw(st.sampled_from(["fp32", "fp32-wide", "narrow", "aligned", "aligned-wide", "fp64", "exact"]))
    chunk = draw(st.sampled_from([None, 1, 8, 32, 64, 128]))
    rnd = st.sampled_from(["rne", "rna", "rz"])
    out = draw(st.sampled_from(["fp32", "bf16", "fp16", "dlfloat16"]))
    if kind in ("fp32", "fp32-wide"):
        fa, fb = (_fp8_pair(draw) if kind == "fp32"
                  else draw(st.sampled_from([("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "e4m3fn")])))
        return get_engine("fp32-fma", a_format=fa, b_format=fb, chunk=chunk, out_format=out,
                          step_rounding=draw(st.sampled_from(["rne", "rne", "rz", "rna"])),
                          outer_rounding=draw(st.sampled_from(["rne", "rne", "rna"])))
    if kind == "exact":  # one limb: a BLAS product; two limbs: the limb loop either way
        fa, fb = draw(st.sampled_from([("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e5m2"),
                                       ("hfp8-143", "hfp8-152"), ("hif8", "hif8")]))
        return get_engine("exact", a_format=fa, b_format=fb, out_format=out)
    if kind == "fp64":  # exact float64 running sums (operands whose sums always fit 53 bits)
        fa, fb = draw(st.sampled_from([("e4m3fn", "e4m3fn"), ("hfp8-143", "hfp8-143")]))
        return get_engine("fp32-fma", a_format=fa, b_format=fb, step_format=None, outer_format=None,
                          chunk=chunk, out_format=out)
    if kind == "narrow":
        fa, fb = _fp8_pair(draw)
        step = draw(st.sampled_from(["dlfloat16", "fp16", "bf16"]))
        outer = draw(st.sampled_from([step, "fp32", "dlfloat16"]))
        return get_engine("hfp8", a_format=fa, b_format=fb, step_format=step, step_rounding=draw(rnd),
                          chunk=chunk, outer_format=outer, outer_rounding=draw(rnd), out_format=out)
    if kind == "aligned-wide":  # 16-bit operands, many alignment bits: float64 blocks
        fa, fb = draw(st.sampled_from([("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "fp16")]))
        f = draw(st.integers(15, 30))
    else:
        fa, fb = draw(st.sampled_from([("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e5m2"),
                                       ("hfp8-143", "hfp8-152"), ("bf16", "bf16"), ("fp16", "fp16")]))
        f = draw(st.integers(3, 14))
    W = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    c = None if chunk is None else W * draw(st.sampled_from([1, 2, 4]))
    return get_engine("h100-fp8", a_format=fa, b_format=fb, block_width=W, align_bits=f,
                      step_bits=draw(st.sampled_from([None, f, f - 1, 20, 23])), chunk=c,
                      align_rounding=draw(st.sampled_from(["rz", "rne"])),
                      step_bits_rounding=draw(st.sampled_from(["rz", "rne"])),
                      out_format=out if out != "dlfloat16" else "fp32")


def _same_bits(x, y) -> bool:
    return np.array_equal(np.asarray(x, np.float32).view(np.uint32), np.asarray(y, np.float32).view(np.uint32))


@given(eng=_engine(), seed=st.integers(0, 2**32 - 1), M=st.integers(1, 5), N=st.integers(1, 5),
       K=st.integers(0, 160), mix=st.sampled_from(["codes", "normal", "tiny", "huge", "specials"]))
@settings(max_examples=250, deadline=None)
def test_fast_paths_equal_reference_bit_for_bit(eng, seed, M, N, K, mix):
    rng = np.random.default_rng(seed)
    a = _operand(rng, eng.a_format, (M, K), mix)
    b = _operand(rng, eng.b_format, (K, N), mix)
    assert _same_bits(matmul(a, b, eng), matmul(a, b, eng, fast=False))
    bt = _operand(rng, eng.b_format, (M, K), mix)  # row-wise dots: the paired layout
    assert _same_bits(dot(a, bt, eng), dot(a, bt, eng, fast=False))


def _typical(eng, rng, shape_a, shape_b):
    return (_operand(rng, eng.a_format, shape_a, "normal"), _operand(rng, eng.b_format, shape_b, "normal"))


@pytest.mark.parametrize("name,overrides,path", [
    ("fp32-fma", {}, FmaPath),
    ("fp32-fma", {"chunk": 64}, FmaPath),
    ("fp32-fma", {"a_format": "bf16", "b_format": "bf16", "chunk": 64}, FmaPath),
    ("fp32-fma", {"a_format": "fp16", "b_format": "fp16"}, FmaPath),
    ("hfp8", {}, FmaPath),
    ("hfp8", {"a_format": "e4m3fn", "b_format": "e5m2", "chunk": None}, FmaPath),
    ("hfp8", {"step_format": "fp16", "outer_format": "fp16", "a_format": "e4m3fn", "b_format": "e5m2"}, FmaPath),
    ("h100-fp8", {}, AlignedPath),
    ("h100-fp8", {"fast_accum": True, "b_format": "e5m2"}, AlignedPath),
    ("h100-fp8", {"a_format": "bf16", "b_format": "bf16", "block_width": 16}, AlignedPath),
    ("h100-fp8", {"a_format": "fp16", "b_format": "fp16", "align_bits": 12}, AlignedPath),
    ("h100-fp8", {"a_format": "bf16", "b_format": "bf16", "align_bits": 24, "step_bits": 23,
                  "block_width": 16}, AlignedPath),  # float64 blocks
    ("fp32-fma", {"step_format": None, "outer_format": None, "chunk": 64}, FmaPath),  # exact float64
    ("fp16-fma", {}, GeneralPath),  # fp16 x fp16 products do not fit an fp16 grid: reference path
])
def test_fast_paths_are_taken(name, overrides, path):
    """The equality test above means something only if the fast paths run: they do, for the
    presets and for bf16/fp16 operands into fp32 partial sums."""
    rng = np.random.default_rng(1)
    eng = get_engine(name, **overrides)
    a, b = _typical(eng, rng, (8, 256), (256, 8))
    assert type(choose_path(eng, a, b, paired=False)) is path
    assert _same_bits(matmul(a, b, eng), matmul(a, b, eng, fast=False))


def test_unprovable_operands_fall_back_to_the_reference():
    """A long dlfloat16 chain whose bound could overflow, and bf16 products below fp32's normal
    range, are not given to the fast paths."""
    eng = get_engine("hfp8", chunk=None)
    big = np.full((1, 4096), get_format("hfp8-143").max)
    assert type(choose_path(eng, big, big.T * 0 + get_format("hfp8-152").max, paired=False)) is GeneralPath
    bf = get_engine("fp32-fma", a_format="bf16", b_format="bf16")
    tiny = np.full((2, 3), 2.0**-100)
    path = choose_path(bf, tiny, tiny.T, paired=False)
    assert type(path) is not FmaPath or path.dtype == np.float64


def test_threads_never_change_a_bit():
    rng = np.random.default_rng(2)
    for name in ("hfp8", "h100-fp8", "fp32-fma", "fp16-fma"):
        eng = get_engine(name)
        a, b = _typical(eng, rng, (300, 40), (40, 700))  # several output tiles
        one = matmul(a, b, eng, threads=1)
        assert _same_bits(one, matmul(a, b, eng, threads=2)), name
        assert _same_bits(one, matmul(a, b, eng, fast=False, threads=1)), name


def test_native_fp32_overflow_and_inf_minus_inf():
    """fp32 partial sums that overflow to +-inf, and a promotion of +inf into -inf (NaN), on the
    native float32 path: the same bits as the reference."""
    big = 2.0**63  # bf16 products 2^126: exact in float32, eight of them overflow
    a = np.array([[big] * 8 + [-big] * 8, [big] * 4 + [-big] * 12, [big, -big] * 8])
    b = np.full((16, 1), big)
    for chunk in (None, 8, 4):
        eng = get_engine("fp32-fma", a_format="bf16", b_format="bf16", chunk=chunk)
        path = choose_path(eng, a, b, paired=False)
        assert type(path) is FmaPath and path.dtype == np.float32
        got = matmul(a, b, eng)
        assert _same_bits(got, matmul(a, b, eng, fast=False)), chunk
        assert not np.isfinite(got[:2]).any()
    assert np.isnan(matmul(a, b, get_engine("fp32-fma", a_format="bf16", b_format="bf16", chunk=8))[0, 0])


@pytest.mark.parametrize("fast", [True, False])
def test_empty_shapes(fast):
    for name in ("hfp8", "h100-fp8", "fp32-fma", "fp16-fma", "exact"):
        eng = get_engine(name)
        for sa, sb in [((0, 5), (5, 3)), ((3, 5), (5, 0)), ((3, 0), (0, 2))]:
            out = matmul(np.zeros(sa), np.zeros(sb), eng, fast=fast)
            assert out.shape == (sa[0], sb[1]) and not out.any(), (name, sa, sb)
        assert dot(np.zeros((0, 4)), np.zeros((0, 4)), eng, fast=fast).shape == (0,)
