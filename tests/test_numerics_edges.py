"""Robust at the edges (issue 13): saturate after sr14/sr2/hybrid source rounding, one rounding
for int64/uint64 above 2^53 and long doubles, strict bool/rng options, masked arrays, decode
memory. Oracles: exact integer / Fraction arithmetic and the scalar reference."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from accelsim.numerics import FORMAT_NAMES, decode, encode, get_format, quantize
from accelsim.numerics.reference import round_reference

SOURCE_MODES = ("sr14", "sr2", "hybrid")


@pytest.mark.parametrize("mode", SOURCE_MODES)
@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_saturate_after_source_rounding(name, mode):
    f = get_format(name)
    x = np.array([1e308, -1e308, 3.5e38, f.max * 4])
    sat = quantize(x, name, mode, saturate=True)
    assert np.array_equal(sat, np.array([f.max, -f.max, f.max, f.max])), (name, mode, sat)
    assert np.array_equal(sat, quantize(x, name, "rne", saturate=True))  # like rne
    nosat = quantize(x, name, mode)
    over = np.inf if f.has_inf else np.nan
    assert np.array_equal(nosat, np.array([over, -over, over, over]), equal_nan=True)
    for v, s in zip(x, sat):
        assert round_reference(float(v), name, mode, saturate=True) == s
    # infinite inputs keep the format's inf rule (inf stays inf where the format has one)
    inf = quantize(np.array([np.inf]), name, mode, saturate=True)[0]
    assert inf == (np.inf if f.has_inf else f.max)


def test_issue_repro_e5m2_sr14():
    assert quantize(np.array([1e308]), "e5m2", "sr14", saturate=True)[0] == 57344.0


def _fraction_round_fp32(v: int) -> float:
    """Exact RNE of an integer to fp32 with integer arithmetic (no float conversion)."""
    m, neg = abs(v), v < 0
    if m < 2**24:
        return float(-m if neg else m)
    shift = m.bit_length() - 24
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q % 2):
        q += 1
    out = q << shift
    return float(-out if neg else out)


def test_int64_above_2_53_rounds_once():
    assert quantize(2**54 + 2**30 + 1, "fp32") == 2.0**54 + 2.0**31  # the issue's repro (0-d)
    rng = np.random.default_rng(1)
    big = rng.integers(2**53, 2**63 - 1, 2000, dtype=np.int64, endpoint=True)
    big = np.concatenate([big, -big, [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 2**53 + 1, -(2**53) - 1]])
    # ties of the fp32 grid plus one: float64(x) would land on the tie and round to even
    ties = (np.arange(1, 200, dtype=np.int64) * 2 + 1) << 39  # odd multiples of half an ulp at 2^62
    big = np.concatenate([big, ties + 1, ties - 1, ties])
    ours = quantize(big, "fp32")
    ref = np.array([_fraction_round_fp32(int(v)) for v in big])
    assert np.array_equal(ours, ref)
    u = rng.integers(2**53, np.iinfo(np.uint64).max, 2000, dtype=np.uint64, endpoint=True)
    assert np.array_equal(quantize(u, "fp32"), [_fraction_round_fp32(int(v)) for v in u])


@pytest.mark.parametrize("name", FORMAT_NAMES)
@pytest.mark.parametrize("mode", ["rne", "rna", "rz", "sr14", "sr2", "hybrid"])
def test_int64_every_format_and_mode_against_fraction_reference(name, mode):
    """The reference rounds the exact integer (a Fraction) once; it never passes float64."""
    rng = np.random.default_rng(2)
    v = rng.integers(2**53, 2**62, 60, dtype=np.int64) | 1
    v = np.concatenate([v, -v])
    ours = quantize(v, name, mode, saturate=True)
    for xi, q in zip(v.tolist(), ours):
        assert q == _round_int_reference(xi, name, mode), (xi, name, mode)


def _round_int_reference(v: int, name: str, mode: str) -> float:
    return round_reference(v, name, mode, saturate=True)  # the exact integer, as a Fraction


def test_sr_refuses_inexact_wide_inputs():
    with pytest.raises(ValueError, match=r"rounding 'sr' needs inputs exact in float64; int64 value 18014398509481985 is not"):
        quantize(np.array([2**54 + 1], dtype=np.int64), "bf16", "sr", rng=np.random.default_rng(0))
    # exact wide integers are fine
    q = quantize(np.array([2**54], dtype=np.int64), "bf16", "sr", rng=np.random.default_rng(0))
    assert q[0] == 2.0**54


def test_longdouble_rounds_once():
    if np.finfo(np.longdouble).nmant <= 52:
        pytest.skip("long double is float64 on this platform")
    one = np.longdouble(1)
    # 1 + 2^-24 + 2^-60: float64 drops 2^-60 and lands on the fp32 tie (RNE -> 1); exact -> up
    x = np.array([one + np.longdouble(2.0**-24) + np.longdouble(2.0**-60)])
    assert quantize(x, "fp32")[0] == 1.0 + 2.0**-23
    assert quantize(-x, "fp32", "rz")[0] == -1.0
    big = np.array([np.longdouble(2.0) ** 2000, -np.longdouble(2.0) ** 2000])
    assert list(quantize(big, "bf16")) == [np.inf, -np.inf]
    assert list(quantize(big, "bf16", saturate=True)) == [get_format("bf16").max, -get_format("bf16").max]
    tiny = np.array([np.longdouble(2.0) ** -2000])
    assert quantize(tiny, "fp16")[0] == 0.0 and quantize(tiny, "fp16", "rz")[0] == 0.0
    with pytest.raises(ValueError, match="rounding 'sr' needs inputs exact"):
        quantize(x, "fp16", "sr", rng=np.random.default_rng(0))


@pytest.mark.parametrize("option", ["saturate", "nan_to_zero"])
@pytest.mark.parametrize("bad", ["no", "false", 1, 0, None, 1.0])
def test_bool_options_must_be_bools(option, bad):
    for fn in (quantize, encode):
        with pytest.raises(TypeError, match=f"{option} must be True or False, got"):
            fn(np.array([1e308]), "e5m2", **{option: bad})
    assert quantize(np.array([1e308]), "e5m2", saturate=np.bool_(True))[0] == 57344.0


@pytest.mark.parametrize("bad", ["garbage", 42, np.random.RandomState(0), np.random.default_rng(0).bit_generator])
def test_rng_must_be_a_generator(bad):
    for mode in ("rne", "sr"):
        with pytest.raises(TypeError, match="rng must be a numpy.random.Generator or None"):
            quantize(np.array([1.0]), "e4m3fn", mode, rng=bad)


@pytest.mark.parametrize("name", ["bf16", "e4m3fn", "fp32", "hif8"])
def test_masked_arrays_keep_their_mask(name):
    x = np.ma.masked_array([1.1, 2.2, np.nan, 4.4], mask=[False, True, False, True])
    for fn in (quantize, encode):
        r = fn(x, name)
        assert isinstance(r, np.ma.MaskedArray)
        assert list(np.ma.getmaskarray(r)) == [False, True, False, True]
        assert np.array_equal(np.ma.getdata(r), fn(np.ma.getdata(x), name), equal_nan=True)
    c = encode(x, name)
    d = decode(c, name)
    assert isinstance(d, np.ma.MaskedArray) and list(d.mask) == [False, True, False, True]
    # the mask is a copy: changing the result's mask leaves the input's alone
    r = quantize(x, name)
    r[0] = np.ma.masked
    assert not x.mask[0]


@pytest.mark.parametrize("name,dtype", [("e4m3fn", np.uint8), ("bf16", np.uint16), ("fp16", np.uint16),
                                        ("fp32", np.uint32)])
def test_decode_peak_memory_is_output_plus_a_chunk(name, dtype):
    from accelsim.numerics.codec import _CHUNK

    n = 1 << 20
    codes = np.random.default_rng(0).integers(0, 1 << 8, n).astype(dtype)
    decode(codes[:10], name)  # build the table outside the measurement
    tracemalloc.start()
    out = decode(codes, name)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.nbytes == 8 * n
    assert peak <= out.nbytes + 8 * _CHUNK + 4096, (peak, out.nbytes)
    strided = decode(codes[::2], name)  # non-contiguous codes are read chunk by chunk too
    assert np.array_equal(strided, out[::2], equal_nan=True)
