"""The OCP MX element and scale formats (E2M1, E2M3, E3M2, E8M0, the MXINT8 element) against
references nobody here wrote: ml_dtypes' float4_e2m1fn / float6_e2m3fn / float6_e3m2fn /
float8_e8m0fnu casts (every code, every grid point and midpoint with their float32 neighbours,
random data), numpy's int8 and rint for the INT8 element, and the exact Fraction reference for
every rounding mode and float64 inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from accelsim.numerics import FORMAT_NAMES, decode, encode, get_format, quantize
from accelsim.numerics.formats import MX_FORMAT_NAMES
from accelsim.numerics.reference import round_reference

ML = {
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e8m0": ml_dtypes.float8_e8m0fnu,
}


def test_names_kept_apart_from_general_formats():
    assert MX_FORMAT_NAMES == ("e2m1", "e2m3", "e3m2", "e8m0", "int8-mx")
    assert not set(MX_FORMAT_NAMES) & set(FORMAT_NAMES)
    for n in MX_FORMAT_NAMES:
        assert get_format(n).name == n


@pytest.mark.parametrize("name", list(ML))
def test_properties_like_ml_dtypes(name):
    f, fi = get_format(name), ml_dtypes.finfo(ML[name])
    assert f.max == float(fi.max)
    assert f.min_positive == float(fi.smallest_subnormal)
    assert f.min_normal == float(fi.smallest_normal)
    assert f.bits == fi.bits


@pytest.mark.parametrize("name", list(ML))
def test_every_code_decodes_like_ml_dtypes(name):
    f = get_format(name)
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    ref = codes.view(ML[name]).astype(np.float64)
    ours = decode(codes, name)
    assert np.array_equal(ours.view(np.uint64)[~np.isnan(ref)], ref.view(np.uint64)[~np.isnan(ref)])  # -0 too
    assert np.array_equal(np.isnan(ours), np.isnan(ref))


def _grid_probe(name: str) -> np.ndarray:
    """float32: every finite value, every midpoint between neighbours (and above max), each with
    its float32 neighbours, x2^k copies far outside the range, infinities, zeros."""
    v = np.unique(decode(np.arange(1 << get_format(name).bits, dtype=np.uint8), name))
    v = v[np.isfinite(v)]
    mids = (v[1:] + v[:-1]) / 2
    top = v.max() + (v.max() - v[v < v.max()].max()) / 2
    with np.errstate(over="ignore"):  # E8M0's top midpoints are above float32's range: inf
        pts = np.concatenate([v, mids, [top, 2 * top]]).astype(np.float32)
        near = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(-np.inf))])
        far = near * np.float32(2.0**40)
        tiny = near * np.float32(2.0**-40)
    out = np.concatenate([near, far, tiny, [np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e-45]]).astype(np.float32)
    return np.concatenate([out, -out])


def _random32(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-140, 130, n)
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


@pytest.mark.parametrize("name", list(ML))
def test_rne_encode_and_quantize_like_ml_dtypes(name):
    """ml_dtypes' cast (RNE, saturating for the no-inf/no-NaN fp4/fp6, min-clamping for E8M0)
    on every grid point, midpoint and neighbour plus 400,000 random float32 over all binades."""
    x = np.concatenate([_grid_probe(name), _random32(400_000, 1)])
    if name == "e8m0":
        # ml_dtypes 0.6 sends the float32 subnormals strictly between 2^-127 and 1.5 x 2^-127 to
        # 2^-126 (code 1); RNE gives 2^-127 (code 0), as the Fraction reference says: excluded
        # here, pinned in test_e8m0_ml_dtypes_subnormal_disagreement
        odd = (np.abs(x) > 2.0**-127) & (np.abs(x) < 1.5 * 2.0**-127)
        x = x[~odd]
        ours_c = encode(x, name)
        ref_c = x.astype(ML[name]).view(np.uint8)
        assert np.array_equal(ours_c, ref_c), x[ours_c != ref_c][:5]
    else:
        ok = ~np.isnan(x)
        ours_c = encode(x[ok], name)
        ref_c = x[ok].astype(ML[name]).view(np.uint8)
        assert np.array_equal(ours_c, ref_c), x[ok][ours_c != ref_c][:5]
    ref_v = x.astype(ML[name]).astype(np.float64)
    ours_v = quantize(x, name)
    same = (ours_v == ref_v) | (np.isnan(ours_v) & np.isnan(ref_v))
    assert same.all(), x[~same][:5]


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2", "int8-mx"])
def test_no_nan_formats(name):
    f = get_format(name)
    assert not f.has_nan and not f.has_inf and f.nan_code is None
    q = quantize(np.array([np.nan, np.inf, -np.inf, 1e30, -1e30]), name)
    assert np.isnan(q[0]) and list(q[1:]) == [f.max, -f.max, f.max, -f.max]  # saturate always
    with pytest.raises(ValueError, match=f"format '{name}' has no NaN code"):
        encode(np.array([1.0, np.nan]), name)


def test_e8m0_rules():
    q = quantize(np.array([0.0, -0.0, -1.0, np.nan, -np.inf, np.inf, 2.0**-130, 2.0**-127, 0.75, 3.0, 1.5 * 2.0**127]), "e8m0")
    assert np.isnan(q[:6]).all()
    assert list(q[6:10]) == [2.0**-127, 2.0**-127, 1.0, 4.0]  # no zero; ties up (significand 1 is odd)
    assert np.isnan(q[10])  # overflow: no inf
    assert quantize(np.array([1.5 * 2.0**127]), "e8m0", saturate=True)[0] == 2.0**127
    assert list(encode(np.array([1.0, 2.0**-127, 2.0**127, np.nan]), "e8m0")) == [127, 0, 254, 255]


def test_int8_element_against_numpy():
    """Decode = numpy int8 two's complement / 64; RNE = numpy.rint on x * 64, clipped
    symmetrically to +-127 (microxcaling's choice; the spec's code -128 decodes but is never made)."""
    codes = np.arange(256, dtype=np.uint8)
    assert np.array_equal(decode(codes, "int8-mx"), codes.view(np.int8) / 64.0)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(200_000), (np.arange(-300, 301) / 128.0), [2.0, -2.0, -1.9921875, 1.9921875]])
    k = np.clip(np.rint(x * 64.0), -127, 127)
    assert np.array_equal(quantize(x, "int8-mx"), k / 64.0)
    assert np.array_equal(encode(x, "int8-mx"), k.astype(np.int8).view(np.uint8))
    assert np.array_equal(quantize(x.astype(np.float32), "int8-mx"), k / 64.0)


@pytest.mark.parametrize("name", MX_FORMAT_NAMES)
@pytest.mark.parametrize("mode", ["rne", "rna", "rz", "sr14", "sr2", "hybrid"])
@pytest.mark.parametrize("saturate", [False, True])
def test_every_mode_against_fraction_reference(name, mode, saturate):
    """float64 inputs (grid points, midpoints, x(1 +- 2^-30), random) against the exact scalar
    reference: one correct rounding, the format's special-value rules."""
    base = _grid_probe(name).astype(np.float64)
    base = base[:: max(1, base.size // 800)]  # every grid point and midpoint: the ml_dtypes test
    x = np.concatenate([base, base * (1 + 2.0**-30), base * (1 - 2.0**-30), _random32(600, 4).astype(np.float64) * 1.37])
    x = x[~np.isnan(x)]
    ours = quantize(x, name, mode, saturate=saturate)
    ref = np.array([round_reference(float(v), name, mode, saturate=saturate) for v in x])
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    assert same.all(), (x[~same][:4], ours[~same][:4], ref[~same][:4])


@pytest.mark.parametrize("name", MX_FORMAT_NAMES)
def test_sr_against_reference_draws(name):
    """sr: the general path's draw per element, replayed through the reference."""
    x = np.concatenate([_random32(2000, 5).astype(np.float64), _grid_probe(name).astype(np.float64) * 1.1])
    x = x[np.isfinite(x)]
    ours = quantize(x, name, "sr", rng=np.random.default_rng(7))
    u = np.random.default_rng(7).random(x.size)
    ref = np.array([round_reference(float(v), name, "sr", u=float(d)) for v, d in zip(x, u)])
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    assert same.all(), (x[~same][:4], ours[~same][:4], ref[~same][:4])


def test_e8m0_ml_dtypes_subnormal_disagreement():
    """Every float32 below 2^-125 (all 2^24 patterns): we equal ml_dtypes except exactly on the
    open interval (2^-127, 1.5 x 2^-127), where ml_dtypes rounds to 2^-126 and the exact
    reference (and RNE) to 2^-127."""
    x = np.arange(1 << 24, dtype=np.uint32).view(np.float32)
    ours, ml = encode(x, "e8m0"), x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    bad = ours != ml
    assert np.array_equal(bad, (x > 2.0**-127) & (x < 1.5 * 2.0**-127))
    assert set(ours[bad].tolist()) == {0} and set(ml[bad].tolist()) == {1}
    for v in x[bad][:: 1 << 16]:
        assert round_reference(float(v), "e8m0") == 2.0**-127
