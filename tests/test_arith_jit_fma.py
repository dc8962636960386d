"""The compiled datapaths (accelsim.arith._jit_fma and _jit_aligned, extra ``jit``) equal the
numpy datapaths they twin bit for bit: the reference kernel equals the float64 reference, runs
for the training presets on typical data, and gives up (None, the reference then runs) where a
running sum leaves the step format's normal range; the compiled FmaPath and AlignedPath equal
the numpy FmaPath and AlignedPath on one and two threads.

The hypothesis test in tests/test_arith_fastpaths.py compares ``matmul(fast=True)`` -- which
takes these kernels whenever numba is installed -- with the reference over random engines,
roundings, chunks and operand mixes (subnormals, extremes, NaN/Inf); this file pins that each
kernel is the path actually taken and checks the give-up route.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.arith import dot, get_engine, matmul
from accelsim.arith import _jit_fma
from accelsim.numerics import decode, get_format, quantize


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("name,fa,fb,rounding", [
    ("fp32-fma", "fp32", "fp32", "rne"), ("fp32-fma", "fp32", "fp32", "rz"),
    ("fp32-fma", "bf16", "e5m2", "rna"), ("hfp8", "hfp8-143", "hfp8-152", "rna"),
    ("hfp8", "dlfloat16", "dlfloat16", "rna"), ("hfp8", "dlfloat16", "dlfloat16", "rne"),
])
def test_kernel_runs_and_equals_reference(name, fa, fb, rounding):
    rng = np.random.default_rng(7)
    eng = get_engine(name, a_format=fa, b_format=fb, step_rounding=rounding)
    a = quantize(rng.standard_normal((9, 70)), fa)
    b = quantize(rng.standard_normal((70, 11)) * 0.05, fb)
    b[3, 2] = -0.0
    acc = _jit_fma.accumulate(a, b, eng, paired=False)
    assert acc is not None  # typical training data stays in the normal range: the kernel ran
    assert np.array_equal(_bits(matmul(a, b, eng)), _bits(matmul(a, b, eng, fast=False)))
    bt = quantize(rng.standard_normal((9, 70)), fb)
    assert _jit_fma.accumulate(a, bt, eng, paired=True) is not None
    assert np.array_equal(_bits(dot(a, bt, eng)), _bits(dot(a, bt, eng, fast=False)))


@pytest.mark.parametrize("name,fmt,rounding", [("fp16-fma", "fp16", "rne"), ("fp16-fma", "fp16", "rz"),
                                              ("fp16-fma", "fp16", "rna"), ("hfp8", "dlfloat16", "rna"),
                                              ("hfp8", "dlfloat16", "rne"), ("hfp8", "dlfloat16", "rz")])
def test_kernel_rounds_below_the_normal_range_as_the_reference(name, fmt, rounding):
    """Running sums below the step format's smallest normal (fp16: its subnormal grid;
    DLFloat16, no subnormals: flush or round up to the smallest normal)."""
    eng = get_engine(name, a_format=fmt, b_format=fmt, step_rounding=rounding, chunk=None)
    tiny = get_format(fmt).min_normal
    rng = np.random.default_rng(3)
    a = quantize(rng.standard_normal((6, 40)) * 0.5, fmt)
    b = quantize(rng.standard_normal((40, 5)) * tiny * 2, fmt)
    assert _jit_fma.accumulate(a, b, eng, paired=False) is not None
    assert np.array_equal(_bits(matmul(a, b, eng)), _bits(matmul(a, b, eng, fast=False)))


def test_kernel_gives_up_on_overflow():
    """fp16 running sums past fp16's largest value: the kernel returns None and matmul's answer
    is still the reference's (inf from the general rule)."""
    eng = get_engine("fp16-fma", a_format="fp16", b_format="fp16")
    a = np.full((2, 8), 200.0)
    b = np.full((8, 3), 100.0)
    assert _jit_fma.accumulate(a, b, eng, paired=False) is None
    assert np.array_equal(_bits(matmul(a, b, eng)), _bits(matmul(a, b, eng, fast=False)))


def _probe_values(fmt: str, rng) -> np.ndarray:
    """Every finite value of a <= 16-bit format, the midpoints between neighbours and points a
    quarter-step either side of them (ties and near-ties of every rounding), both signs; for
    wider formats random values over the whole exponent range and the subnormal range."""
    f = get_format(fmt)
    if f.bits <= 16:
        v = decode(np.arange(2**f.bits, dtype=np.uint32).astype(f.code_dtype), fmt)
        v = np.unique(np.abs(v[np.isfinite(v)]))
        mid = (v[1:] + v[:-1]) / 2
        q = (v[1:] - v[:-1]) / 4
        x = np.concatenate([v, mid, mid - q, mid + q, v[1:] - q])
    else:
        x = np.concatenate([2.0 ** rng.uniform(np.log2(f.min_subnormal) - 2, np.log2(f.max), 20000),
                            rng.random(2000) * f.min_normal])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("rounding", ["rne", "rna", "rz"])
def test_round_finite_equals_quantize(rounding):
    """round_finite (the compiled rounding the training datapath uses) gives quantize's bits for
    every format but the tapered HiF8 (None there), and None exactly where a value overflows."""
    from accelsim.arith import round_finite
    from accelsim.numerics import FORMAT_NAMES

    rng = np.random.default_rng(11)
    for fmt in FORMAT_NAMES:
        f = get_format(fmt)
        x = _probe_values(fmt, rng)
        got = round_finite(x, fmt, rounding)
        if f.layout == "hif8":
            assert got is None
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            want = quantize(x, fmt, rounding)
        over = ~np.isfinite(want) | (np.abs(want) > f.max)
        if over.any():
            assert got is None, fmt
            got = round_finite(x[~over], fmt, rounding)
            want = want[~over]
        assert got is not None, fmt
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), fmt
        for bad in (2 * f.max, -4 * f.max, np.nan, np.inf):  # overflow, non-finite: general route
            assert round_finite(np.array([1.0, bad]), fmt, rounding) is None, (fmt, bad)


_NATIVE_CASES = [  # (preset, overrides, operands on a coarse grid, the plan's dtype, rounds steps, promotions)
    ("fp32-fma", {"chunk": 64}, False, np.float32, False, False),  # native fp32 adds
    ("hfp8", {}, False, np.float32, True, True),  # DLFloat16 rna steps and promotions on float32 bits
    ("hfp8", {"chunk": None, "step_rounding": "rne"}, False, np.float32, True, False),
    ("fp32-fma", {"a_format": "bf16", "b_format": "bf16", "step_rounding": "rz"}, True, np.float64, True, False),
    ("fp16-fma", {"step_format": None}, True, np.float64, False, False),  # exact float64 sums
]


def _operands(shape, fmt, rng, grid: bool):
    """N(0, 1) values in ``fmt``, or multiples of 1/4 in [-8, 8] (few bits: float64 sums exact)."""
    x = rng.standard_normal(shape)
    return quantize(np.clip(np.rint(x * 16) / 4, -8, 8) if grid else x, fmt)


@pytest.mark.parametrize("name,overrides,grid,dtype,step,promote", _NATIVE_CASES)
def test_native_kernel_equals_the_numpy_fast_path(name, overrides, grid, dtype, step, promote):
    """The compiled FmaPath (what matmul takes with numba installed wherever fma_plan holds) gives
    the numpy FmaPath's bits -- and so the reference's -- on one and two threads, for shapes
    that leave partial row blocks, a K that is no multiple of the chunk, and one big enough to
    split its rows over threads; row-wise dots too."""
    from accelsim.arith.datapath import choose_path
    from accelsim.arith.fastpath import FmaPath
    from accelsim.arith.kloop import run_tiles

    eng = get_engine(name, **overrides)
    rng = np.random.default_rng(5)
    for M, K, N in [(1, 1, 1), (9, 70, 11), (17, 129, 3), (40, 300, 200)]:
        a = _operands((M, K), eng.a_format, rng, grid)
        for paired, b in ((False, _operands((K, N), eng.b_format, rng, grid)),
                          (True, _operands((M, K), eng.b_format, rng, grid))):
            path = choose_path(eng, a, b, paired=paired)
            assert isinstance(path, FmaPath) and path.dtype is dtype, (M, K, N, paired)
            assert (path.round_step is not None, path.round_promote is not None) == (step, promote)
            want = run_tiles(path, K, eng.chunk, threads=1)  # the numpy FmaPath
            for threads in (1, 2):
                got = _jit_fma.native(path, eng.chunk, threads)
                assert np.array_equal(got.view(np.int64), want.view(np.int64)), (M, K, N, paired, threads)
            if paired:
                assert np.array_equal(_bits(dot(a, b, eng)), _bits(dot(a, b, eng, fast=False)))
            else:
                assert np.array_equal(_bits(matmul(a, b, eng)), _bits(matmul(a, b, eng, fast=False)))


_ALIGNED_CASES = [  # (overrides of h100-fp8, scales of A and B, the plan's dtype, exponent dtype)
    ({}, (1.0, 1.0), np.float32, np.int8),  # the preset: 13-bit rz cuts, promotion every 128
    ({"fast_accum": True, "b_format": "e5m2", "align_rounding": "rne"}, (1.0, 1.0), np.float32, np.int8),
    ({"step_bits": None, "chunk": 64}, (1.0, 1.0), np.float32, np.int8),
    ({"a_format": "bf16", "b_format": "bf16", "block_width": 16}, (2.0**60, 2.0**-80), np.float32, np.int16),
    ({"a_format": "bf16", "b_format": "bf16", "align_bits": 24, "step_bits": 23, "block_width": 16},
     (1.0, 1.0), np.float64, np.int8),  # float64 blocks, promotions rounded to float32
]


@pytest.mark.parametrize("overrides,scales,dtype,edtype", _ALIGNED_CASES)
def test_aligned_kernel_equals_the_numpy_fast_path(overrides, scales, dtype, edtype):
    """The compiled AlignedPath (what matmul takes with numba installed wherever aligned_plan
    holds) gives the numpy AlignedPath's bits -- and so the reference's -- on one and two
    threads; zeros in the operands (their exponent code sits below every real term's)."""
    from accelsim.arith import _jit_aligned
    from accelsim.arith.datapath import choose_path
    from accelsim.arith.fastpath import AlignedPath
    from accelsim.arith.kloop import run_tiles

    eng = get_engine("h100-fp8", **overrides)
    rng = np.random.default_rng(9)
    for M, K, N in [(1, 5, 1), (9, 70, 11), (17, 300, 130)]:
        a = quantize(rng.standard_normal((M, K)) * scales[0], eng.a_format, saturate=True)
        a[:, ::7] = 0
        for paired, shape in ((False, (K, N)), (True, (M, K))):
            b = quantize(rng.standard_normal(shape) * scales[1], eng.b_format, saturate=True)
            b[1::5] = 0
            path = choose_path(eng, a, b, paired=paired)
            assert isinstance(path, AlignedPath) and path.dtype is dtype and path.exps.A.dtype == edtype
            want = run_tiles(path, K, eng.chunk, threads=1)  # the numpy AlignedPath
            for threads in (1, 2):
                got = _jit_aligned.aligned(path, eng.chunk, threads)
                assert np.array_equal(got.view(np.int64), want.view(np.int64)), (M, K, N, paired, threads)
            if paired:
                assert np.array_equal(_bits(dot(a, b, eng)), _bits(dot(a, b, eng, fast=False)))
            else:
                assert np.array_equal(_bits(matmul(a, b, eng)), _bits(matmul(a, b, eng, fast=False)))
