"""The bit-trick fast paths (``fast.py``) against the general path, bit for bit: float32 inputs
on every rounding boundary of the 16-bit formats (each kept-bit pattern times the critical
discarded-bit patterns), float64 inputs on and beside every grid point and midpoint (where
float32(x) double-rounds), specials, ``saturate`` and ``nan_to_zero``; hypothesis over arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from accelsim.numerics import FORMAT_NAMES, decode, encode, get_format, quantize
from accelsim.numerics import fast
from accelsim.numerics.general import encode_general, quantize_general

SIXTEEN = ["fp16", "bf16", "dlfloat16"]
EIGHT = [n for n in FORMAT_NAMES if get_format(n).bits == 8]
MODES = list(fast.FAST_MODES)


def _general_codes(x, name, mode, saturate=False, nan_to_zero=False):
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    return encode_general(x64, get_format(name), mode, saturate=saturate, rng=None, nan_to_zero=nan_to_zero)


def _assert_same_codes(ours, ref, x, what):
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, f"{what}: {bad.size} mismatches; x={x[bad[:4]]!r} fast={ours[bad[:4]]} general={ref[bad[:4]]}"


def boundary_float32(name) -> np.ndarray:
    """Every kept-bit pattern of a 16-bit format in float32 (sign, exponent, kept fraction) with
    the discarded bits at 0, 1, half-1, half, half+1 and all ones: every grid point, every tie,
    both sides of each, across normals, subnormals, overflow, inf and NaN patterns."""
    f = get_format(name)
    shift = 23 - f.mbits
    half = 1 << (shift - 1)
    kept = np.arange(1 << (32 - shift), dtype=np.uint64) << np.uint64(shift)
    lows = np.array([0, 1, half - 1, half, half + 1, (1 << shift) - 1], dtype=np.uint64)
    return (kept[:, None] | lows[None, :]).astype(np.uint32).reshape(-1).view(np.float32)


@pytest.mark.parametrize("name", SIXTEEN)
@pytest.mark.parametrize("mode", MODES)
def test_16bit_float32_every_boundary(name, mode):
    x = boundary_float32(name)
    _assert_same_codes(encode(x, name, mode), _general_codes(x, name, mode), x, f"{name}/{mode}")


def _edge_float32(name):
    """Near the top and bottom of the range, zeros, infs, NaNs with payloads and signs."""
    f = get_format(name)
    v = np.array([f.max, f.min_normal, f.min_subnormal, 2.0 ** f.emin, 1.0], dtype=np.float64)
    v = np.concatenate([v, v * 1.5, v * 0.75, v * 2, v / 2, v * (1 + 2.0 ** -(f.mbits + 1))])
    with np.errstate(over="ignore"):
        v = v.astype(np.float32)
    v = np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(0))])
    special = np.array([0, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7F7FFFFF, 1], dtype=np.uint32)
    v = np.concatenate([v, special.view(np.float32)])
    return np.concatenate([v, -v])


@pytest.mark.parametrize("name", SIXTEEN + EIGHT)
@pytest.mark.parametrize("mode", MODES)
def test_saturate_and_nan_to_zero(name, mode):
    x = _edge_float32(name)
    for dt in (np.float32, np.float64):
        with np.errstate(invalid="ignore"):
            xx = x.astype(dt)
        for saturate in (False, True):
            for ntz in (False, True):
                ours = encode(xx, name, mode, saturate=saturate, nan_to_zero=ntz)
                ref = _general_codes(xx, name, mode, saturate, ntz)
                _assert_same_codes(ours, ref, xx, f"{name}/{mode}/{dt.__name__}/sat={saturate}/ntz={ntz}")


def boundary_float64(name) -> np.ndarray:
    """Grid points and midpoints of the format, and float64 values just beside them, where
    float32(x) lands exactly on the boundary (double rounding) or on the far side."""
    f = get_format(name)
    t = decode(np.arange(1 << f.bits), name)
    v = np.unique(t[np.isfinite(t) & (t >= 0)])
    v = np.concatenate([v, [f.max + (v[-1] - v[-2])]])  # the virtual value above max
    mids = (v[1:] + v[:-1]) / 2
    pts = np.concatenate([v, mids])
    near = [pts, np.nextafter(pts, np.inf), np.nextafter(pts, 0.0)]
    for k in (30, 40, 52):  # inside float32's rounding reach, beyond its precision
        near += [pts * (1 + 2.0**-k), pts * (1 - 2.0**-k)]
    x = np.concatenate(near + [[0.0, 1e-300, 5e-324, 1e300, np.inf, np.nan, 3.5e38, 3.4028235677973366e38]])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("name", SIXTEEN + EIGHT)
@pytest.mark.parametrize("mode", MODES)
def test_float64_boundaries(name, mode):
    x = boundary_float64(name)
    _assert_same_codes(encode(x, name, mode), _general_codes(x, name, mode), x, f"{name}/{mode}")
    ours = quantize(x, name, mode)
    ref = quantize_general(x, get_format(name), mode, saturate=False, rng=None, nan_to_zero=False)
    num = ~np.isnan(ref)  # a NaN's sign is not a value (decode tables hold +NaN for fnuz/hif8)
    assert np.array_equal(ours, ref, equal_nan=True) and np.array_equal(np.signbit(ours[num]), np.signbit(ref[num]))


def test_float64_exact_on_grid_takes_whole_chunk_round_to_odd():
    """Chunks where most elements sit on the float32 boundary patterns (values already in the
    format, exact or slightly off) take the whole-chunk round-to-odd branch: same codes."""
    rng = np.random.default_rng(5)
    for name in ("bf16", "fp16", "e4m3fn"):
        t = decode(np.arange(1 << get_format(name).bits), name)
        v = rng.choice(t[np.isfinite(t)], 100_000)
        x = v * np.where(rng.random(v.size) < 0.5, 1.0, 1 + rng.choice([-1, 1], v.size) * 2.0**-40)
        for mode in MODES:
            _assert_same_codes(encode(x, name, mode), _general_codes(x, name, mode), x, f"{name}/{mode}")


def test_round_to_odd32():
    x = np.array([1.0, 1 + 2.0**-30, 1 - 2.0**-30, 3.5e38, 1e-50, -1e-50, 0.0, -0.0, np.inf, -np.inf])
    u = fast.round_to_odd32(x)
    f32 = u.view(np.float32).astype(np.float64)
    one_up = np.nextafter(np.float32(1), np.float32(2))
    assert f32[0] == 1.0 and f32[1] == one_up and f32[2] == np.nextafter(np.float32(1), np.float32(0))
    assert f32[3] == np.finfo(np.float32).max and f32[4] == 2.0**-149 and f32[5] == -(2.0**-149)
    assert list(u[6:]) == [0, 0x80000000, 0x7F800000, 0xFF800000]
    assert np.isnan(fast.round_to_odd32(np.array([np.nan]))[0].view(np.float32))


@settings(max_examples=40, deadline=None)
@given(
    x=hnp.arrays(st.sampled_from([np.float32, np.float64]), st.integers(1, 300),
                 elements=st.floats(width=32, allow_nan=True, allow_infinity=True)),
    name=st.sampled_from(SIXTEEN + EIGHT), mode=st.sampled_from(MODES),
    saturate=st.booleans(), ntz=st.booleans(), scale=st.sampled_from([1.0, 2.0**-20, 2.0**-130, 2.0**12]),
)
def test_fast_equals_general_hypothesis(x, name, mode, saturate, ntz, scale):
    with np.errstate(all="ignore"):
        x = (x * scale).astype(x.dtype)
    ours = encode(x, name, mode, saturate=saturate, nan_to_zero=ntz)
    _assert_same_codes(ours, _general_codes(x, name, mode, saturate, ntz), x, f"{name}/{mode}")


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_chunks_with_nans_and_subnormals_scattered(name):
    """Multi-chunk arrays with a few NaNs, infs and subnormals in some chunks only."""
    rng = np.random.default_rng(9)
    n = 3 * fast.CHUNK + 17
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    x[rng.integers(0, n, 7)] = np.nan
    x[rng.integers(0, n, 3)] = -np.inf
    x[rng.integers(0, n, 5)] = 1e-7
    x[fast.CHUNK + 1] = 1e30
    for mode in MODES:
        for sat in (False, True):
            _assert_same_codes(encode(x, name, mode, saturate=sat), _general_codes(x, name, mode, sat), x, name)


@pytest.mark.parametrize("name", SIXTEEN)
@pytest.mark.parametrize("saturate", [False, True])
def test_sr_float32_16bit_equals_general_same_draws(name, saturate):
    """Stochastic rounding's bit trick (draw < discarded bits / 2^k) takes the same draws, in
    the same order, as the general path: same codes on every boundary pattern, several chunks."""
    x = boundary_float32(name)
    f = get_format(name)
    ours = encode(x, name, "sr", saturate=saturate, rng=np.random.default_rng(11))
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    ref = encode_general(x64, f, "sr", saturate=saturate, rng=np.random.default_rng(11), nan_to_zero=False)
    _assert_same_codes(ours, ref, x, f"{name}/sr/sat={saturate}")
    q = quantize(x, name, "sr", saturate=saturate, rng=np.random.default_rng(11))
    assert np.array_equal(q, decode(ours, name), equal_nan=True)
    edges = _edge_float32(name)
    for ntz in (False, True):
        ours = encode(edges, name, "sr", saturate=saturate, nan_to_zero=ntz, rng=np.random.default_rng(4))
        with np.errstate(invalid="ignore"):
            e64 = edges.astype(np.float64)
        ref = encode_general(e64, f, "sr", saturate=saturate, rng=np.random.default_rng(4), nan_to_zero=ntz)
        _assert_same_codes(ours, ref, edges, f"{name}/sr/edges")


def test_sr_fast_path_is_taken_only_where_exact():
    assert fast.eligible(np.dtype(np.float32), get_format("bf16"), "sr")
    assert not fast.eligible(np.dtype(np.float64), get_format("bf16"), "sr")  # fraction needs float64 bits
    assert not fast.eligible(np.dtype(np.float32), get_format("e4m3fn"), "sr")


def test_custom_16bit_formats_fast_or_general_agree():
    """A 16-bit format outside the presets either gets a plan that matches the general path or
    is left to the general path (an ieee layout without subnormals, a range beyond float32)."""
    from accelsim.numerics import FloatFormat

    x = boundary_float32("fp16")[::7]
    for g in (FloatFormat("e6m9", 16, 6, 9, 31, True, "ieee"), FloatFormat("e5m10-ftz", 16, 5, 10, 15, False, "ieee"),
              FloatFormat("e8m7-b126", 16, 8, 7, 126, True, "ieee")):
        for mode in MODES:
            with np.errstate(invalid="ignore"):
                ref = encode_general(x.astype(np.float64), g, mode, saturate=False, rng=None, nan_to_zero=False)
            _assert_same_codes(encode(x, g, mode), ref, x, f"{g.name}/{mode}")
    assert fast._plan16(get_format("fp16"), "rne", False) is not None
    assert fast._plan16(FloatFormat("e5m10-ftz", 16, 5, 10, 15, False, "ieee"), "rne", False) is None


def test_fp32_fast_path_equals_general():
    """float32 in (rne/rna/rz: the value itself) and float64 in (rne: the hardware cast): every
    float32 tie at several binades, subnormals, the overflow threshold, specials, saturate, ntz."""
    rng = np.random.default_rng(8)
    b = rng.integers(0, 1 << 32, 50_000, dtype=np.uint64).astype(np.uint32)
    b = np.concatenate([b, np.arange(0, 4096, dtype=np.uint32), 0x7F7FFFFF - np.arange(4096, dtype=np.uint32)])
    f32 = b.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        lo = f32.astype(np.float64)
        hi = np.nextafter(f32, np.float32(np.inf)).astype(np.float64)
    mid = lo + (hi - lo) / 2  # float32 ties, exact in float64 (inf/NaN rows give inf/NaN)
    x64 = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), lo, -mid,
                          [3.4028235677973366e38, 3.402823669209385e38, 1e300, 1e-300, 5e-324]])
    f = get_format("fp32")
    for saturate in (False, True):
        for ntz in (False, True):
            ref = encode_general(x64, f, "rne", saturate=saturate, rng=None, nan_to_zero=ntz)
            _assert_same_codes(encode(x64, "fp32", saturate=saturate, nan_to_zero=ntz), ref, x64, "fp32/f64")
            for mode in MODES:
                ref = _general_codes(f32, "fp32", mode, saturate, ntz)
                _assert_same_codes(encode(f32, "fp32", mode, saturate=saturate, nan_to_zero=ntz), ref, f32,
                                   f"fp32/f32/{mode}")
                q = quantize(f32, "fp32", mode, saturate=saturate, nan_to_zero=ntz)
                with np.errstate(invalid="ignore"):
                    qref = quantize_general(f32.astype(np.float64), f, mode, saturate=saturate, rng=None,
                                            nan_to_zero=ntz)
                assert np.array_equal(q, qref, equal_nan=True)
    assert np.isnan(f32).any() and np.isinf(x64).any()
    assert np.array_equal(f32.view(np.uint32), b)  # the caller's array is untouched
