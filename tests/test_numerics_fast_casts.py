"""The cast fast paths of issue #12 against the general path, bit for bit: bf16 RNE through
ml_dtypes' compiled cast (float32 in; float64 in with the float32-midpoint redo), the same inputs
with that path switched off (the numpy bit trick), and fp32 codes cast straight into the output
(one max finds NaNs; saturate also looks for infs). Arrays cross chunk boundaries at odd sizes,
with NaN (payloads, both signs), +-inf, overflow, subnormals and exact/near ties placed by
hypothesis."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.numerics import decode, encode, get_format, quantize
from accelsim.numerics import fast
from accelsim.numerics.general import encode_general, quantize_general

ml_dtypes = pytest.importorskip("ml_dtypes")
MODES = ["rne", "rna", "rz"]


def _ref_codes(x, name, mode, saturate=False, nan_to_zero=False):
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    return encode_general(x64, get_format(name), mode, saturate=saturate, rng=None, nan_to_zero=nan_to_zero)


def _ref_values(x, name, mode, saturate=False, nan_to_zero=False):
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    return quantize_general(x64, get_format(name), mode, saturate=saturate, rng=None, nan_to_zero=nan_to_zero)


def _same(ours, ref, x, what):
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, f"{what}: {bad.size} mismatches; x={x[bad[:4]]!r} ours={ours[bad[:4]]} ref={ref[bad[:4]]}"


def _same_values(ours, ref, what):
    assert np.array_equal(ours, ref, equal_nan=True), what
    num = ~np.isnan(ref)
    assert np.array_equal(np.signbit(ours[num]), np.signbit(ref[num])), what


def _bf16_midpoints(rng, k):
    """Exact float64 midpoints between random adjacent finite bf16 values (normals and subnormals,
    both signs), and the values a float64 ulp-scale step either side (float32(x) lands on them)."""
    c = rng.integers(0, 0x7F7F, k)  # up to the code below max: c + 1 is finite
    v = decode(c, "bf16")
    w = decode(c + 1, "bf16")
    m = (v + w) / 2  # exact in float64
    step = rng.choice([-1.0, 0.0, 1.0], k) * 2.0 ** rng.integers(-52, -25, k)
    x = m * (1 + step)
    return np.where(rng.random(k) < 0.5, x, -x)


def _specials():
    f32max = float(np.finfo(np.float32).max)
    bmax = get_format("bf16").max
    nans = np.array([0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0xFF808000], np.uint32).view(np.float32)
    vals = [0.0, -0.0, np.inf, -np.inf, bmax, -bmax, bmax * (1 + 2.0**-9), bmax * (1 + 2.0**-8), f32max,
            1e-40, -1e-40, 2.0**-133, 2.0**-134, 3 * 2.0**-134, 1e300, -1e300, 1e-300]
    with np.errstate(invalid="ignore"):  # signalling NaN patterns quieten
        return np.concatenate([np.array(vals), nans.astype(np.float64)])


@contextmanager
def _chunk(k):
    """Run the fast paths with ``k`` elements per chunk: many chunk boundaries in a small array."""
    old, fast.CHUNK = fast.CHUNK, k
    try:
        yield
    finally:
        fast.CHUNK = old


CHUNKS = st.sampled_from([1 << 9, 1 << 12])


def _array(seed, n, dtype, n_special):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.uniform(-140, 130, n))
    k = min(n, 64)
    x[rng.integers(0, n, k)] = _bf16_midpoints(rng, k)
    sp = _specials()
    with np.errstate(invalid="ignore"):  # the float64 NaNs keep their payload bits
        x[rng.integers(0, n, n_special)] = sp[rng.integers(0, sp.size, n_special)]
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


def test_ml_dtypes_probe_is_checked_against_the_general_path():
    """The probe's numpy definition of bf16 RNE is itself the general path's answer, and the
    installed ml_dtypes passes it (so the fast path below is the one taken)."""
    u = fast._bf16_probe()
    x = u.view(np.float32)
    _same(fast._bf16_rne_numpy(u), _ref_codes(x, "bf16", "rne"), x, "probe")
    assert fast.ml_bfloat16() is not None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), extra=st.integers(-3, 3), chunks=st.integers(0, 3), chunk=CHUNKS,
       dtype=st.sampled_from([np.float32, np.float64]), n_special=st.integers(0, 40))
def test_bf16_rne_ml_path_equals_general(seed, extra, chunks, chunk, dtype, n_special):
    n = max(1, chunks * chunk + 97 + extra)
    x = _array(seed, n, dtype, n_special)
    with _chunk(chunk):
        codes, values = encode(x, "bf16"), quantize(x, "bf16")
    _same(codes, _ref_codes(x, "bf16", "rne"), x, f"bf16 {np.dtype(dtype)} n={n}")
    _same_values(values, _ref_values(x, "bf16", "rne"), f"bf16 values {np.dtype(dtype)} n={n}")


def test_bf16_float64_ties_in_every_chunk():
    """float64 values just beside bf16 midpoints (float32(x) lands on the midpoint: the double
    rounding ml_dtypes makes) in every chunk, and exact midpoints (ties to even)."""
    rng = np.random.default_rng(3)
    n = fast.CHUNK + 5000  # one chunk boundary of the bf16 path
    x = _bf16_midpoints(rng, n)
    x[[0, fast.CHUNK - 1, fast.CHUNK, n - 1]] = [np.nan, -np.inf, 3.5e38, -1e-42]
    with np.errstate(over="ignore", invalid="ignore"):
        twice = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.count_nonzero(twice != _ref_codes(x, "bf16", "rne")) > 1000  # the redo has work in every chunk
    _same(encode(x, "bf16"), _ref_codes(x, "bf16", "rne"), x, "bf16 ties")
    _same_values(quantize(x, "bf16"), _ref_values(x, "bf16", "rne"), "bf16 ties values")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bf16_numpy_path_when_ml_dtypes_is_unusable(monkeypatch, dtype):
    """With the ml_dtypes path refused (not installed, or a build failing the probe) the numpy
    bit trick gives the same codes and values; every mode, saturate and nan_to_zero."""
    x = _array(7, fast.CHUNK + 11, dtype, 40)
    with_ml = encode(x, "bf16"), quantize(x, "bf16")
    monkeypatch.setattr(fast, "ml_bfloat16", lambda: None)
    assert np.array_equal(encode(x, "bf16"), with_ml[0])
    _same_values(quantize(x, "bf16"), with_ml[1], "numpy path values")
    for mode in MODES:
        for sat in (False, True):
            for ntz in (False, True):
                _same(encode(x, "bf16", mode, saturate=sat, nan_to_zero=ntz), _ref_codes(x, "bf16", mode, sat, ntz),
                      x, f"bf16/{mode}/sat={sat}/ntz={ntz}")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), extra=st.integers(-3, 3), chunks=st.integers(0, 3), chunk=CHUNKS,
       dtype=st.sampled_from([np.float32, np.float64]), n_special=st.integers(0, 40),
       mode=st.sampled_from(MODES), saturate=st.booleans(), ntz=st.booleans())
def test_16bit_every_mode_equals_general(seed, extra, chunks, chunk, dtype, n_special, mode, saturate, ntz):
    n = max(1, chunks * chunk + 97 + extra)
    x = _array(seed, n, dtype, n_special)
    if np.dtype(dtype) == np.float64:
        x = x * 2.0 ** np.random.default_rng(seed).integers(-30, 10)  # fp16 and bf16 ranges both
    for name in ("bf16", "fp16"):
        with _chunk(chunk):
            ours = encode(x, name, mode, saturate=saturate, nan_to_zero=ntz)
        _same(ours, _ref_codes(x, name, mode, saturate, ntz), x, f"{name}/{mode}/sat={saturate}/ntz={ntz}")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), extra=st.integers(-3, 3), chunks=st.integers(0, 3), chunk=CHUNKS,
       dtype=st.sampled_from([np.float32, np.float64]), n_special=st.integers(0, 40),
       saturate=st.booleans(), ntz=st.booleans())
def test_fp32_cast_path_equals_general(seed, extra, chunks, chunk, dtype, n_special, saturate, ntz):
    """NaNs with payloads become the canonical code (or 0), infs stay, float64 overflow goes to
    inf or (saturate) to max: found by one max over the cast, anywhere in the array."""
    n = max(1, chunks * chunk + 97 + extra)
    x = _array(seed, n, dtype, n_special)
    x[-1] = 3.5e38 if np.dtype(dtype) == np.float64 else x[-1]  # overflow in the last chunk
    with _chunk(chunk):
        codes = encode(x, "fp32", saturate=saturate, nan_to_zero=ntz)
        values = quantize(x, "fp32", saturate=saturate, nan_to_zero=ntz)
    _same(codes, _ref_codes(x, "fp32", "rne", saturate, ntz), x, f"fp32 sat={saturate} ntz={ntz}")
    _same_values(values, _ref_values(x, "fp32", "rne", saturate, ntz), "fp32 values")


def test_empty_and_scalar_inputs():
    for dtype in (np.float32, np.float64):
        for name in ("bf16", "fp32", "fp16"):
            assert encode(np.zeros(0, dtype), name).shape == (0,)
            assert quantize(np.zeros((0, 3), dtype), name).shape == (0, 3)
            x = np.array(np.nan, dtype)
            assert encode(x, name).shape == () and int(encode(x, name)) == get_format(name).nan_code


def test_sr_draws_do_not_depend_on_the_chunk_size():
    """sr takes one draw per element in element order, so the chunk size never changes a code."""
    x = _array(11, 3000, np.float32, 20)
    for name in ("bf16", "fp16"):
        whole = encode(x, name, "sr", rng=np.random.default_rng(2))
        with _chunk(1 << 9):
            small = encode(x, name, "sr", rng=np.random.default_rng(2))
        assert np.array_equal(whole, small), name
