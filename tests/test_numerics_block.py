"""block_quantize against an oracle written here from the definitions (OCP MX v1.0 sec. 6.3;
NVFP4: arXiv 2509.25149 sec. 2; DeepSeek-V3 arXiv 2412.19437 sec. 3.3.2), block by block in
exact Fraction arithmetic, with the element values and their codes taken from ml_dtypes'
float4_e2m1fn / float6_e2m3fn / float6_e3m2fn / float8_e4m3fn / float8_e5m2 (numpy int8 / 64
for the MXINT8 element): not from accelsim's own decode tables or rounding code."""

from __future__ import annotations

import bisect
from fractions import Fraction
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.numerics import BLOCK_FORMAT_NAMES, block_quantize, get_block_format

ML_ELEM = {
    "e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn, "e2m1": ml_dtypes.float4_e2m1fn,
}
MX = [n for n in BLOCK_FORMAT_NAMES if n.startswith("mx")]


@lru_cache(maxsize=None)
def _grid(elem: str):
    """Sorted non-negative finite element values (Fractions), parallel list of their codes."""
    if elem == "int8-mx":
        pairs = [(Fraction(k, 64), k) for k in range(128)]  # +-127/64: symmetric saturation
    else:
        t = ML_ELEM[elem]
        bits = ml_dtypes.finfo(t).bits
        codes = np.arange(1 << (bits - 1), dtype=np.uint8)
        vals = codes.view(t).astype(np.float64)
        pairs = sorted((Fraction(float(v)), int(c)) for v, c in zip(vals, codes) if np.isfinite(v))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _emax(elem: str) -> int:
    if elem == "int8-mx":
        return 0
    m = Fraction(float(ml_dtypes.finfo(ML_ELEM[elem]).max))
    return m.numerator.bit_length() - m.denominator.bit_length() - (1 if m < 2 ** (m.numerator.bit_length() - m.denominator.bit_length()) else 0)


def _round_elem(v: Fraction, elem: str) -> Fraction:
    """RNE to the element grid (ties to the even code), saturating at +-max."""
    vals, codes = _grid(elem)
    a = abs(v)
    i = bisect.bisect_right(vals, a)
    if i == len(vals):
        r = vals[-1]
    else:
        lo, hi = vals[i - 1], vals[i]
        d_lo, d_hi = a - lo, hi - a
        r = lo if d_lo < d_hi or (d_lo == d_hi and codes[i - 1] % 2 == 0) else hi
    return -r if v < 0 else r


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e if Fraction(2) ** e <= a else e - 1


def _fp32(q: Fraction) -> Fraction:
    """RNE of a positive rational to float32: numpy's float32 neighbours, decided exactly."""
    c = np.float32(float(q))
    with np.errstate(over="ignore"):
        cands = {f for f in (c, np.nextafter(c, np.float32(0)), np.nextafter(c, np.float32(np.inf))) if np.isfinite(f)}
    best = min(cands, key=lambda f: (abs(Fraction(float(f)) - q), int(np.array(f).view(np.uint32)) & 1))
    return Fraction(float(best))


def _mx_oracle(block: list[float], elem: str) -> list[float]:
    if any(not np.isfinite(v) for v in block):
        return [float("nan")] * len(block)
    amax = max(abs(Fraction(v)) for v in block)
    e = -127 if amax == 0 else _floor_log2(amax) - _emax(elem)
    if e > 127:
        return [float("nan")] * len(block)
    X = Fraction(2) ** max(e, -127)
    return [float(_round_elem(Fraction(v) / X, elem) * X) for v in block]


def _nvfp4_oracle(x32: np.ndarray) -> np.ndarray:
    flat = x32.reshape(-1, x32.shape[-1])
    blocks = [(r, j) for r in range(flat.shape[0]) for j in range(0, flat.shape[1], 16)]
    amaxes = {}
    for r, j in blocks:
        b = flat[r, j : j + 16]
        amaxes[r, j] = None if not np.isfinite(b).all() else max(abs(Fraction(float(v))) for v in b)
    fin = [a for a in amaxes.values() if a is not None]
    tmax = max(fin) if fin else Fraction(0)
    f32max = Fraction(float(np.finfo(np.float32).max))
    s_enc = Fraction(1) if tmax == 0 else min(_fp32(min(Fraction(6 * 448) / tmax, f32max)), f32max)  # clamped
    out = np.empty(flat.shape)
    for r, j in blocks:
        b = flat[r, j : j + 16]
        if amaxes[r, j] is None:
            out[r, j : j + 16] = np.nan
            continue
        S = _round_elem(amaxes[r, j] * s_enc / 6, "e4m3fn")
        out[r, j : j + 16] = [0.0 if S == 0 else float(_round_elem(Fraction(float(v)) * s_enc / S, "e2m1") * S / s_enc)
                              for v in b]
    return out.reshape(x32.shape)


def _dsv3_oracle_block(block: np.ndarray) -> np.ndarray:
    if not np.isfinite(block).all():
        return np.full(block.shape, np.nan)
    amax = max(abs(Fraction(float(v))) for v in block.ravel())
    s = _fp32(amax / 448) if amax > 0 else Fraction(0)
    if s == 0:
        return np.zeros(block.shape)
    return np.array([float(_round_elem(Fraction(float(v)) / s, "e4m3fn") * s) for v in block.ravel()]).reshape(block.shape)


def _spread(rng, shape, binades=60):
    """N(0,1) times 2^U(-binades/2, binades/2) per element, plus a per-row offset."""
    e = rng.integers(-binades // 2, binades // 2, shape) + rng.integers(-40, 40, shape[:-1] + (1,))
    return rng.standard_normal(shape) * np.ldexp(1.0, e)


def _same(a, b):
    return np.array_equal(a.view(np.uint64), b.view(np.uint64)) or (
        np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)]))


# ------------------------------------------------------------------ MX
@pytest.mark.parametrize("name", MX)
def test_mx_equals_oracle_over_60_binades(name):
    bf = get_block_format(name)
    rng = np.random.default_rng(1)
    x = np.concatenate([_spread(rng, (40, 96)), _spread(rng, (40, 96), binades=4), rng.standard_normal((8, 96))])
    x[3, 5] = 0.0
    x[4, :32] = 0.0  # an all-zero block
    x[5, 32:64] *= 2.0**-1000  # float64 values far below 2^-127 (the scale clamps)
    x[6, 64:] = np.ldexp(rng.standard_normal(32), -140)
    q = block_quantize(x, name)
    ours = q.dequantize()
    for r in range(x.shape[0]):
        for j in range(0, 96, 32):
            ref = np.array(_mx_oracle(x[r, j : j + 32].tolist(), bf.element))
            assert _same(ours[r, j : j + 32], ref), (name, r, j)


@pytest.mark.parametrize("name", MX)
def test_mx_every_element_code_and_midpoint(name):
    """Blocks holding every element value (and every midpoint) next to the largest one, times
    2^k for k over 60 binades: the scale is 2^k and every value (code) comes back; midpoints
    round to the even code."""
    bf = get_block_format(name)
    vals, codes = _grid(bf.element)
    top = vals[-1]
    mids = [(a + b) / 2 for a, b in zip(vals[:-1], vals[1:])]
    for k in (-60, -7, 0, 3, 30):
        for pool in (vals, mids):
            items = [v for v in pool] + [-v for v in pool]
            for start in range(0, len(items), 31):
                chunk = items[start : start + 31] + [top]
                x = np.array([float(v * Fraction(2) ** k) for v in chunk])
                q = block_quantize(x, name)
                assert q.scales[0] == 2.0**k
                ref = np.array(_mx_oracle(x.tolist(), bf.element))
                assert _same(q.dequantize(), ref), (name, k, start)
                if pool is vals:
                    assert np.array_equal(q.dequantize(), x)


@pytest.mark.parametrize("name", ["mxfp8-e4m3", "mxfp4", "mxint8"])
def test_mx_edge_blocks(name):
    x = np.zeros((5, 32))
    x[1, 7] = np.nan
    x[2, 0] = -np.inf
    x[3, :] = 1e300  # shared exponent far above 127
    x[4, :] = 2.0**-149  # float32-subnormal-only block
    q = block_quantize(x, name)
    assert q.scale_codes[:, 0].tolist()[:4] == [0, 255, 255, 255]
    d = q.dequantize()
    assert (d[0] == 0).all() and np.isnan(d[1:4]).all()
    assert np.array_equal(q.codes[1:4], np.zeros((3, 32), q.codes.dtype))
    assert q.scale_codes[4, 0] == 0  # clamped at 2^-127; the elements underflow to 0
    assert (d[4] == 0).all()


# ------------------------------------------------------------------ NVFP4, DeepSeek
def test_nvfp4_equals_oracle_over_60_binades():
    rng = np.random.default_rng(2)
    x = _spread(rng, (24, 64)).astype(np.float32)
    x[0, :16] = 0.0
    x[1, 16:32] = np.nan
    x[2, 32:48] *= np.float32(2.0**-40)  # S_b underflows E4M3 -> zero-scale block
    q = block_quantize(x, "nvfp4")
    ref = _nvfp4_oracle(x)
    ours = q.dequantize()
    assert _same(ours, ref)  # P * S_b exact, one division by s_enc: bit-equal here
    assert q.scales.shape == (24, 4) and q.scale_codes[1, 1] == 0x7F


def test_nvfp4_tensor_scale_maps_largest_block_scale_to_448():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    q = block_quantize(x, "nvfp4")
    assert q.scales.max() == 448.0
    assert q.tensor_scale == float(np.float32(2688.0 / np.abs(x).max()))  # (the tie-free case)
    assert block_quantize(np.zeros((2, 16)), "nvfp4").tensor_scale == 1.0


@pytest.mark.parametrize("name", ["dsv3-fp8-act", "dsv3-fp8-weight"])
def test_deepseek_equals_oracle(name):
    rng = np.random.default_rng(4)
    shape = (3, 300) if name == "dsv3-fp8-act" else (200, 260)
    x = _spread(rng, shape, binades=30).astype(np.float32)
    x[0, :5] = np.inf if name == "dsv3-fp8-act" else x[0, :5]
    q = block_quantize(x, name)
    ours = q.dequantize()
    bs = get_block_format(name).block
    for i in range(0, shape[0], bs[0]):
        for j in range(0, shape[1], bs[1]):
            blk = x[i : i + bs[0], j : j + bs[1]]
            assert _same(ours[i : i + bs[0], j : j + bs[1]], _dsv3_oracle_block(blk)), (i, j)


# ------------------------------------------------------------------ hypothesis
_vals = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(min_value=-(2.0**-126), max_value=2.0**-126, width=32),
    st.sampled_from([0.0, -0.0, 448.0, 6.0, 7.5, 28.0, 57344.0, 2.0**-149, 3.0 * 2.0**-140]),
    st.sampled_from([np.nan, np.inf, -np.inf]),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MX), st.lists(_vals, min_size=1, max_size=70), st.integers(-60, 60))
def test_mx_hypothesis_blocks(name, values, shift):
    x = np.ldexp(np.array(values, dtype=np.float64), shift)
    q = block_quantize(x, name)
    ours = q.dequantize()
    elem = get_block_format(name).element
    for j in range(0, x.size, 32):
        assert _same(ours[j : j + 32], np.array(_mx_oracle(x[j : j + 32].tolist(), elem))), (j, x[j : j + 32])


@settings(max_examples=60, deadline=None)
@given(st.lists(_vals, min_size=16, max_size=48))
def test_nvfp4_hypothesis(values):
    x = np.array(values[: len(values) // 16 * 16], dtype=np.float32).reshape(1, -1)
    assert _same(block_quantize(x, "nvfp4").dequantize(), _nvfp4_oracle(x))


# ------------------------------------------------------------------ layout, options, errors
def test_axis_and_partial_blocks():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((70, 3, 5))
    q0 = block_quantize(x, "mxfp8-e4m3", axis=0)
    qt = block_quantize(np.moveaxis(x, 0, -1), "mxfp8-e4m3")
    assert q0.scales.shape == (3, 3, 5) and q0.codes.shape == x.shape
    assert np.array_equal(np.moveaxis(q0.dequantize(), 0, -1), qt.dequantize())
    # the last, partial block (70 = 32 + 32 + 6) is scaled from its own 6 elements
    tail = x[64:, 0, 0]
    assert np.array_equal(q0.dequantize()[64:, 0, 0], _mx_oracle(tail.tolist(), "e4m3fn"))
    assert q0.expanded_scales().shape == x.shape


def test_ceil_scale_never_saturates():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((50, 32)) * 7.9
    qf = block_quantize(x, "mxfp4")
    qc = block_quantize(x, "mxfp4", scale_rounding="ceil")
    amax = np.abs(x).max(axis=1)
    assert (amax / qc.scales[:, 0] <= 6).all()
    assert (qc.scales[:, 0] >= qf.scales[:, 0]).all()


def test_stochastic_rounding_unbiased_and_reproducible():
    x = np.full((1, 32), 0.3)
    x[0, 0] = 6.0
    a = block_quantize(x, "mxfp4", rounding="sr", rng=np.random.default_rng(9))
    b = block_quantize(x, "mxfp4", rounding="sr", rng=np.random.default_rng(9))
    assert np.array_equal(a.codes, b.codes)
    reps = np.stack([block_quantize(np.repeat(x, 200, 0), "mxfp4", rounding="sr", rng=np.random.default_rng(s))
                     .dequantize()[:, 1:] for s in range(10)])
    m, sd = reps.mean(), reps.std() / np.sqrt(reps.size)
    assert abs(m - 0.3) < 5 * sd  # 0.3 lies between E2M1 grid points 0 and 0.5: unbiased
    with pytest.raises(ValueError, match="stochastic"):
        block_quantize(x, "mxfp4", rounding="sr")


def test_result_is_frozen_and_bad_input_errors():
    q = block_quantize(np.ones(32), "mxfp4")
    with pytest.raises(ValueError):
        q.elements[0] = 1
    with pytest.raises(Exception):
        q.axis = 1
    with pytest.raises(ValueError, match="unknown block format 'mxfp5'"):
        block_quantize(np.ones(32), "mxfp5")
    with pytest.raises(ValueError, match="scale_rounding 'rne' is not valid for mxfp4"):
        block_quantize(np.ones(32), "mxfp4", scale_rounding="rne")
    with pytest.raises(ValueError, match="axis 3 out of range"):
        block_quantize(np.ones((2, 32)), "mxfp4", axis=3)
    with pytest.raises(ValueError, match="tiles the last two axes"):
        block_quantize(np.ones(300), "dsv3-fp8-weight")
    with pytest.raises(TypeError, match="real numeric array"):
        block_quantize(np.array(["a"] * 32), "mxfp4")


def test_bits_per_element():
    assert get_block_format("mxfp4").bits_per_element == 4.25
    assert get_block_format("nvfp4").bits_per_element == 4.5
    assert get_block_format("mxfp8-e4m3").bits_per_element == 8.25
    assert get_block_format("dsv3-fp8-act").bits_per_element == 8.25


@pytest.mark.parametrize("scale_rounding", ["rne", "rz", "rna"])
def test_nvfp4_scale_and_element_ties(scale_rounding):
    """s_enc = 1 (tensor amax 2688); block amaxes 6 x every E4M3 midpoint in [0.5, 448): S_b
    sits exactly on a tie; elements sit on E2M1 midpoints of their block."""
    vals, _ = _grid("e4m3fn")
    mids = [(a + b) / 2 for a, b in zip(vals[:-1], vals[1:]) if a >= Fraction(1, 2)]
    rows = []
    for m in mids:
        amax = 6 * m
        row = [float(amax)] + [float(amax * t / 6) for t in (Fraction(1, 4), Fraction(3, 4), Fraction(5, 4), Fraction(7, 4), Fraction(5, 2), Fraction(7, 2), 5)]
        rows.append(row + [-v for v in row])
    x = np.array(rows, dtype=np.float32)
    x = np.concatenate([x, np.full((1, 16), 2688.0, np.float32)])
    q = block_quantize(x, "nvfp4", scale_rounding=scale_rounding)
    assert q.tensor_scale == 1.0
    mode = {"rne": None, "rz": "rz", "rna": "rna"}[scale_rounding]
    for i, m in enumerate(mids):
        j = bisect.bisect_left(vals, m)
        lo, hi = vals[j - 1], vals[j]
        if mode == "rz":
            S = lo
        elif mode == "rna":
            S = hi
        else:
            S = _round_elem(m, "e4m3fn")
        assert Fraction(float(q.scales[i, 0])) == S, (m, q.scales[i, 0])
    if mode is None:
        assert _same(q.dequantize(), _nvfp4_oracle(x))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MX), st.lists(_vals, min_size=1, max_size=70))
def test_mx_float32_input_path(name, values):
    """float32 input is scaled in float32 (power-of-two products lose bits only below 2^-126,
    where every element rounds to 0): the same oracle values as the float64 path."""
    x = np.array(values, dtype=np.float32)
    ours = block_quantize(x, name).dequantize()
    elem = get_block_format(name).element
    for j in range(0, x.size, 32):
        assert _same(ours[j : j + 32], np.array(_mx_oracle(x[j : j + 32].astype(np.float64).tolist(), elem)))
    assert _same(ours, block_quantize(x.astype(np.float64), name).dequantize())


@pytest.mark.parametrize("name", MX)
def test_mx_float32_spread_and_tiny_blocks(name):
    rng = np.random.default_rng(7)
    x = _spread(rng, (30, 64), binades=60).astype(np.float32)
    x[0, :32] = np.float32(2.0**-149) * np.arange(32, dtype=np.float32)  # float32 subnormals only
    x[1, :32] = np.float32(3e38)
    x[1, 5] = -np.float32(3.4e38)
    q = block_quantize(x, name)
    assert _same(q.dequantize(), block_quantize(x.astype(np.float64), name).dequantize())
    elem = get_block_format(name).element
    for r in range(3):
        for j in (0, 32):
            assert _same(q.dequantize()[r, j : j + 32], np.array(_mx_oracle(x[r, j : j + 32].astype(np.float64).tolist(), elem)))


@pytest.mark.parametrize("s", [1.0, 3.0, 5.0 / 7.0, 1e-3])
def test_deepseek_element_ties(s):
    """Tiles whose FP32 scale is s (amax = 448 s) holding s x every E4M3 midpoint and its float32
    neighbours: the float32 quotient may land on a midpoint the exact one misses (redone rounded
    to odd); equal to the exact oracle."""
    s32 = float(np.float32(s))
    vals, _ = _grid("e4m3fn")
    mids = [float((a + b) / 2) for a, b in zip(vals[:-1], vals[1:])]
    base = np.array(mids, dtype=np.float64) * s32
    x = np.concatenate([base, np.nextafter(base.astype(np.float32), np.float32(np.inf)),
                        np.nextafter(base.astype(np.float32), np.float32(0))]).astype(np.float32)
    x = np.concatenate([x, -x])
    pad = (-x.size) % 127
    x = np.concatenate([x, np.zeros(pad, np.float32)]).reshape(-1, 127)
    x = np.concatenate([x, np.full((x.shape[0], 1), np.float32(448 * s32))], axis=1)  # amax -> s
    q = block_quantize(x, "dsv3-fp8-act")
    for r in range(x.shape[0]):
        assert _same(q.dequantize()[r], _dsv3_oracle_block(x[r])), r
