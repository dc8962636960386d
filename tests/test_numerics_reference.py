"""The fast vectorized codec against the slow exact Fraction reference, every format x mode,
and the float32 lookup-table fast path against the general path over all 2^17 table indices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.numerics import FORMAT_NAMES, ROUNDING_MODES, decode, encode, get_format, quantize
from accelsim.numerics.codec import _encode_general, _encode_lut
from accelsim.numerics.reference import round_reference


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))


def _edge_values(name):
    """Values at the edges of a format: its representable values, the midpoints and their
    float64 neighbours, overflow threshold, underflow region, specials."""
    f = get_format(name)
    if f.bits <= 8:
        t = decode(np.arange(1 << f.bits), f)
        v = np.unique(np.abs(t[np.isfinite(t)]))
    else:  # a slice of binades around 1, the bottom and the top
        v = np.concatenate([np.ldexp(1 + np.arange(0, 1 << min(f.mbits, 4)) / (1 << min(f.mbits, 4)), e)
                            for e in (f.emin - 1, f.emin, 0, 1, f.emax)])
        v = np.concatenate([[0.0, f.min_subnormal, f.max], v])
    mids = (v[1:] + v[:-1]) / 2
    pts = np.concatenate([v, mids, [f.max * 1.25, f.max * 2, f.min_subnormal / 2, 1e-300, 1e300]])
    pts = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, 0)])
    pts = np.concatenate([pts, [np.inf, np.nan]])
    return np.concatenate([pts, -pts])


@pytest.mark.parametrize("name", FORMAT_NAMES)
@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_edges_against_reference(name, mode):
    x = _edge_values(name)
    if x.size > 600:
        x = np.random.default_rng(0).choice(x, 600, replace=False)
    for saturate in (False, True):
        u = np.random.default_rng(3).random(x.shape)
        fast = quantize(x, name, mode, saturate=saturate, rng=np.random.default_rng(3))
        slow = np.array([round_reference(float(v), name, mode, saturate=saturate, u=float(w))
                         for v, w in zip(x, u)])
        bad = ~np.array([_same(np.array([a]), np.array([b])) for a, b in zip(fast, slow)])
        assert not bad.any(), f"{name}/{mode}/sat={saturate}: x={x[bad][:4]} fast={fast[bad][:4]} ref={slow[bad][:4]}"


any_doubles = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(any_doubles, min_size=1, max_size=20), seed=st.integers(0, 2**32 - 1),
       saturate=st.booleans())
def test_random_doubles_against_reference_all_formats_modes(xs, seed, saturate):
    x = np.array(xs, dtype=np.float64)
    for name in FORMAT_NAMES:
        for mode in ROUNDING_MODES:
            u = np.random.default_rng(seed).random(x.shape)
            fast = quantize(x, name, mode, saturate=saturate, rng=np.random.default_rng(seed))
            slow = np.array([round_reference(float(v), name, mode, saturate=saturate, u=float(w))
                             for v, w in zip(x, u)])
            assert _same(fast, slow), (name, mode, x, fast, slow)


@settings(max_examples=60, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20))
def test_random_float32_patterns_against_reference(bits):
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    for name in FORMAT_NAMES:
        for mode in ("rne", "rna", "rz", "sr14", "hybrid"):
            fast = quantize(x, name, mode)
            slow = np.array([round_reference(float(v), name, mode) for v in x])
            assert _same(fast, slow), (name, mode, x, fast, slow)


@pytest.mark.parametrize("name", [n for n in FORMAT_NAMES if get_format(n).bits == 8])
@pytest.mark.parametrize("mode", ["rne", "rna", "rz"])
@pytest.mark.parametrize("saturate", [False, True])
def test_lut_fast_path_equals_general_path_all_indices(name, mode, saturate):
    """Every one of the 2^17 (top-16-bits, sticky) indices, with random low 16 bits."""
    f = get_format(name)
    lut = _encode_lut(f, mode, saturate, False)
    rng = np.random.default_rng(1)
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    for low in (np.zeros(1 << 16, np.uint32), rng.integers(1, 1 << 16, 1 << 16).astype(np.uint32),
                np.full(1 << 16, 0xFFFF, np.uint32), np.full(1 << 16, 0x8000, np.uint32)):
        x = (hi | low).view(np.float32)
        with np.errstate(invalid="ignore"):
            x64 = x.astype(np.float64)
        general = _encode_general(x64, f, mode, saturate=saturate, rng=None, nan_to_zero=False)
        assert np.array_equal(encode(x, f, mode, saturate=saturate), general)
    assert lut.dtype == np.uint8 and lut.size == 1 << 17


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_quantize_is_decode_of_encode(name):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(20000) * np.exp2(rng.uniform(-40, 40, 20000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    for mode in ROUNDING_MODES:
        q = quantize(x, name, mode, rng=np.random.default_rng(4))
        c = encode(x, name, mode, rng=np.random.default_rng(4))
        assert c.dtype == get_format(name).code_dtype
        assert _same(decode(c, name), q)
        assert _same(quantize(q, name, "rne"), q)  # representable values are fixed points
