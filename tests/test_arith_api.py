"""arith API: bad input, split_k partition rule, per-step traces, NaN/Inf, systolic dataflows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from accelsim.arith import (PRESET_NAMES, dot, dot_reference, get_engine, matmul, partial_sums,
                            systolic_matmul)
from accelsim.numerics import decode, get_format, quantize


def _vals(fmt, rng, shape, scale=1.0):
    return quantize(rng.standard_normal(shape) * scale, fmt, saturate=True)


# ---- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    ({"block_widht": 4}, r"unknown engine parameter.*'block_widht'.*valid: fast_accum, a_format"),
    ({"align_bits": -1}, r"align_bits must be a non-negative integer.*-1"),
    ({"chunk": 0}, r"chunk must be a positive integer.*0"),
    ({"block_width": 0}, r"block_width must be a positive integer.*0"),
    ({"split_k": 0}, r"split_k must be a positive integer.*0"),
    ({"chunk": 100}, r"chunk=100 must be a multiple of block_width=32"),
    ({"a_format": "e4m3"}, r"a_format='e4m3' is not a known format"),
    ({"out_rounding": "up"}, r"out_rounding='up' is not one of rne, rna, rz"),
    ({"align_bits": 60}, r"align_bits=60 with block_width=32 needs 68 > 53 bits"),
    ({"fast_accum": "yes"}, r"fast_accum must be True or False"),
    ({"fast_accum": True, "chunk": 64}, r"fast_accum=True means no promotion; it contradicts chunk=64"),
])
def test_bad_parameters_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_engine("h100-fp8", **kwargs)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match=r"unknown engine preset 'h200'.*h100-fp8"):
        get_engine("h200")
    with pytest.raises(ValueError, match="fast_accum=False needs a promotion interval"):
        get_engine("fp16-fma", fast_accum=False)


def test_bad_operands():
    eng = get_engine("h100-fp8")
    a = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"shape mismatch: a is \(2, 3\), b is \(4, 2\)"):
        matmul(a, np.ones((4, 2)), eng)
    bad = a.copy()
    bad[1, 2] = 0.3
    with pytest.raises(ValueError, match=r"a\[1, 2\] = .*0.3.* is not representable in e4m3fn"):
        matmul(bad, np.ones((3, 2)), eng)
    with pytest.raises(ValueError, match=r"b\[0, 0\] = .*inf.* not representable in e4m3fn"):
        matmul(a, np.full((3, 2), np.inf), eng)
    with pytest.raises(ValueError, match="must be 2-D"):
        matmul(np.ones(3), np.ones((3, 2)), eng)
    with pytest.raises(ValueError, match="split_k=5 exceeds K=3"):
        matmul(a, np.ones((3, 2)), get_engine("h100-fp8", split_k=5))
    with pytest.raises(TypeError, match="EngineConfig"):
        matmul(a, np.ones((3, 2)), "h100-fp8")
    with pytest.raises(dataclasses.FrozenInstanceError):
        eng.chunk = 64


def test_every_preset_runs_and_is_frozen():
    rng = np.random.default_rng(0)
    for name in PRESET_NAMES:
        eng = get_engine(name)
        a, b = _vals(eng.a_format, rng, (3, 40)), _vals(eng.b_format, rng, (40, 2))
        out = matmul(a, b, eng)
        assert out.dtype == np.float32 and out.shape == (3, 2)
        assert np.array_equal(quantize(out, eng.out_format), out)


# ---- split_k ----------------------------------------------------------------------------------

def test_split_k_is_contiguous_partitions_summed_in_fp32():
    rng = np.random.default_rng(1)
    a, b = _vals("e4m3fn", rng, (4, 300), 8), _vals("e4m3fn", rng, (300, 5), 8)
    eng = get_engine("h100-fp8", split_k=4)
    got = matmul(a, b, eng)
    one = get_engine("h100-fp8")
    total = np.zeros((4, 5), dtype=np.float32)
    for ks in (slice(0, 75), slice(75, 150), slice(150, 225), slice(225, 300)):
        total = total + matmul(a[:, ks], b[ks], one)  # float32 + float32: RNE in fp32
    assert np.array_equal(got, total)
    # 301 = 76 + 75 + 75 + 75: the first K % split_k partitions get one more element
    a2, b2 = _vals("e4m3fn", rng, (2, 301), 8), _vals("e4m3fn", rng, (301, 2), 8)
    parts = (slice(0, 76), slice(76, 151), slice(151, 226), slice(226, 301))
    total = np.zeros((2, 2), dtype=np.float32)
    for ks in parts:
        total = total + matmul(a2[:, ks], b2[ks], one)
    assert np.array_equal(matmul(a2, b2, eng), total)


# ---- traces, specials, 1-D/2-D consistency ----------------------------------------------------

def test_partial_sums_trace_matches_reference_and_result():
    rng = np.random.default_rng(2)
    eng = get_engine("h100-fp8")
    a, b = _vals("e4m3fn", rng, 300, 4), _vals("e4m3fn", rng, 300, 4)
    df = partial_sums(a, b, eng)
    assert list(df["k_end"]) == list(range(32, 300, 32)) + [300]
    assert df["promoted"].sum() == 3  # after 128, 256 and the tail
    ref_trace = []
    dot_reference(a, b, eng, trace=ref_trace)
    assert [float(t[1]) for t in ref_trace] == list(df["inner"])
    assert df["outer"].iloc[-1] == dot(a, b, eng)


def test_matmul_equals_rowwise_dot():
    rng = np.random.default_rng(3)
    for name in ("hfp8", "h100-fp8"):
        eng = get_engine(name)
        a, b = _vals(eng.a_format, rng, (5, 70)), _vals(eng.b_format, rng, (70, 4))
        full = matmul(a, b, eng)
        for i in range(5):
            row = dot(np.repeat(a[i:i + 1], 4, axis=0), b.T, eng)
            assert np.array_equal(row, full[i])


def test_nan_inf_propagation():
    eng = get_engine("h100-fp8", a_format="e5m2", b_format="e5m2")
    a = np.array([[1.0, np.inf, 2.0], [np.inf, -np.inf, 1.0], [0.0, np.inf, 1.0], [np.nan, 1.0, 1.0],
                  [1.0, 1.0, 1.0]])
    b = np.array([[1.0], [2.0], [3.0]])
    b2 = np.array([[1.0], [0.0], [-2.0]])
    r = matmul(a, b, eng)[:, 0]
    assert r[0] == np.inf and math.isnan(r[1]) and r[2] == np.inf and math.isnan(r[3]) and r[4] == 6
    assert r.view(np.uint32)[1] == 0x7FFFFFFF  # the H100's NaN bits
    r2 = matmul(a, b2, eng)[:, 0]
    assert math.isnan(r2[0])  # inf * 0
    assert r2[4] == -1.0
    # zero results are +0: the accumulator starts at +0 and IEEE +0 + -0 = +0
    z = np.array([[-1.0, 1.0]]), np.array([[1.0], [1.0]])
    assert not np.signbit(matmul(*z, eng)[0, 0])
    neg0 = np.array([[-0.0]]), np.array([[1.0]])
    assert not np.signbit(matmul(*neg0, get_engine("fp32-fma"))[0, 0])


def test_fp32_overflow_is_inf_and_dlfloat_overflow_is_nan():
    big = get_format("e4m3fn").max
    a = np.full((1, 4096), big)
    assert matmul(a, a.T, get_engine("fp32-fma"))[0, 0] == float(np.float32(big * big * 4096))
    h = get_format("hfp8-143").max, get_format("hfp8-152").max
    a, b = np.full((1, 70000), h[0]), np.full((70000, 1), h[1])
    assert math.isnan(matmul(a, b, get_engine("hfp8"))[0, 0])  # DLFloat has no infinity


# ---- systolic array -----------------------------------------------------------------------------

@pytest.mark.parametrize("dataflow", ["ws", "os"])
@pytest.mark.parametrize("rows,cols", [(4, 3), (16, 8), (1, 1)])
def test_systolic_exact_arithmetic_equals_matmul(dataflow, rows, cols):
    """float64 steps and accumulator (provably exact for e4m3 products): order cannot matter."""
    rng = np.random.default_rng(4)
    a, b = _vals("e4m3fn", rng, (7, 53), 16), _vals("e4m3fn", rng, (53, 5), 16)
    exact_pe = get_engine("fp32-fma", step_format=None, outer_format=None)
    got = systolic_matmul(a, b, exact_pe, rows=rows, cols=cols, dataflow=dataflow)
    assert np.array_equal(got, matmul(a, b, get_engine("exact")))


def test_systolic_rounded_order():
    """OS = matmul (sequential K); WS = the engine promoted every rows*W products, and differs."""
    rng = np.random.default_rng(5)
    eng = get_engine("hfp8", chunk=None)
    a = np.abs(_vals("hfp8-143", rng, (6, 512)))  # positive data: long dlfloat16 chains swamp
    b = np.abs(_vals("hfp8-152", rng, (512, 6)))
    os_ = systolic_matmul(a, b, eng, rows=8, cols=4, dataflow="os")
    ws = systolic_matmul(a, b, eng, rows=16, cols=4, dataflow="ws")
    assert np.array_equal(os_, matmul(a, b, eng))
    assert np.array_equal(ws, matmul(a, b, get_engine("hfp8", chunk=16)))
    assert not np.array_equal(ws, os_)
    exact = matmul(a, b, get_engine("exact", a_format="hfp8-143", b_format="hfp8-152"))
    err = lambda r: np.abs(r.astype(np.float64) / exact - 1).mean()  # noqa: E731
    assert err(ws) < err(os_)  # shorter chains swamp less


def test_systolic_bad_input():
    eng = get_engine("h100-fp8")
    with pytest.raises(ValueError, match="rows must be a positive integer, got 0"):
        systolic_matmul(np.ones((2, 2)), np.ones((2, 2)), eng, rows=0, cols=2)
    with pytest.raises(ValueError, match="dataflow='is' is not one of ws, os"):
        systolic_matmul(np.ones((2, 2)), np.ones((2, 2)), eng, rows=2, cols=2, dataflow="is")


def test_decode_of_codes_feeds_matmul():
    codes = np.arange(256, dtype=np.uint8)
    v = decode(codes, "e4m3fn")
    v = v[np.isfinite(v)]
    out = matmul(v[None, :], np.ones((v.size, 1)), get_engine("exact"))
    assert out[0, 0] == 0.0  # the finite e4m3fn values are symmetric about zero


@pytest.mark.parametrize("threads", [0, -3, 2.5, True, "4"])
@pytest.mark.parametrize("preset", ["exact", "hfp8"])
def test_a_bad_thread_count_is_refused_naming_it(threads, preset):
    """``threads`` was silently ignored (0 and -3 ran on one thread, 2.5 on the default), also
    on engines that never tile (exact sums)."""
    from accelsim.errors import InputError

    a = np.ones((4, 8))
    with pytest.raises(InputError, match=rf"threads must be a positive integer, got {threads!r}"):
        matmul(a, a.T, get_engine(preset), threads=threads)


def test_a_good_thread_count_never_changes_a_bit():
    rng = np.random.default_rng(0)
    eng = get_engine("hfp8")
    a = quantize(rng.standard_normal((16, 64)), eng.a_format)
    b = quantize(rng.standard_normal((64, 8)), eng.b_format)
    ref = matmul(a, b, eng, threads=1)
    for t in (2, np.int64(3), None):
        assert np.array_equal(matmul(a, b, eng, threads=t), ref)
