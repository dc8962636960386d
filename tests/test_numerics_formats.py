"""Format presets and decode tables against ml_dtypes, en-dtypes and the HiF8 paper's definition."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from accelsim.numerics import FORMAT_NAMES, FloatFormat, decode, get_format

ML = {
    "fp16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "hfp8-143": ml_dtypes.float8_e4m3b11fnuz,
    "hfp8-152": ml_dtypes.float8_e5m2,
}


def _same(a, b):
    return np.array_equal(a, b, equal_nan=True) and np.array_equal(
        np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)])
    )


def test_all_presets_listed():
    assert FORMAT_NAMES == (
        "fp32", "fp16", "bf16", "e4m3fn", "e5m2", "hfp8-143", "hfp8-152", "dlfloat16", "hif8"
    )
    for name in FORMAT_NAMES:
        assert get_format(name).name == name
        assert get_format(get_format(name)) is get_format(name)


@pytest.mark.parametrize("name", list(ML))
def test_every_code_decodes_like_ml_dtypes(name):
    f = get_format(name)
    codes = np.arange(1 << f.bits, dtype=np.uint16 if f.bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        ref = codes.view(ML[name]).astype(np.float64)
    assert _same(decode(codes, name), ref)


@pytest.mark.parametrize("name", list(ML) + ["fp32"])
def test_properties_match_finfo(name):
    f = get_format(name)
    fi = np.finfo(np.float32) if name == "fp32" else ml_dtypes.finfo(ML[name])
    assert f.max == float(fi.max)
    assert f.min_normal == float(fi.smallest_normal)
    assert f.min_subnormal == float(fi.smallest_subnormal)
    assert f.eps == float(fi.eps)


def test_hfp8_143_is_e4m3b11fnuz_with_bias_parameter():
    f = get_format("hfp8-143")
    assert (f.ebits, f.mbits, f.bias, f.max) == (4, 3, 11, 30.0)
    assert not f.has_inf and not f.has_negative_zero
    # the bias is a parameter: the same layout with bias 8 is ml_dtypes' float8_e4m3fnuz
    g = FloatFormat("e4m3-b8-fnuz", 8, 4, 3, 8, True, "fnuz")
    codes = np.arange(256, dtype=np.uint8)
    assert _same(decode(codes, g), codes.view(ml_dtypes.float8_e4m3fnuz).astype(np.float64))


def test_dlfloat16_layout():
    f = get_format("dlfloat16")
    t = decode(np.arange(1 << 16), f)
    assert f.max == 2.0**32 * (1 + 510 / 512) == np.nanmax(t)
    assert decode(0x0001, f) == 2.0**-31 * (1 + 2**-9)  # exponent field 0 is a normal binade
    assert decode(0x0000, f) == 0.0 and np.signbit(decode(0x8000, f))
    assert np.isnan(decode(0x7FFF, f)) and np.isnan(decode(0xFFFF, f))
    assert np.isnan(t).sum() == 2 and np.isfinite(t).sum() == 65534
    assert f.default_rounding == "rna" and not f.has_subnormals


# ---- HiF8: an independent decoder written from the paper's field definitions (Luo et al.,
# arXiv 2409.16626, Sec. 2 / Table 1), parsing bit strings with exact Fractions.
def _hif8_paper_value(code: int):
    bits = f"{code:08b}"
    sign, body = (-1 if bits[0] == "1" else 1), bits[1:]
    if code == 0x80:
        return "nan"
    if code in (0x6F, 0xEF):
        return "inf" if sign > 0 else "-inf"
    for prefix, d in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0), ("0000", None)):
        if body.startswith(prefix):
            rest = body[len(prefix):]
            break
    if d is None:  # denormal: 2^(M-23), M = 1..7; M = 0 is zero
        m = int(rest, 2)
        return Fraction(0) if m == 0 else sign * Fraction(2) ** (m - 23)
    if d == 0:
        e = 0
    else:
        exp, rest = rest[:d], rest[d:]
        mag = int("1" + exp[1:], 2)  # hidden leading magnitude bit
        e = -mag if exp[0] == "1" else mag
    mant = Fraction(int(rest, 2), 2 ** len(rest)) if rest else Fraction(0)
    return sign * (1 + mant) * Fraction(2) ** e


def test_hif8_all_256_codes_match_paper_definition_and_en_dtypes():
    en = pytest.importorskip("en_dtypes")
    ours = decode(np.arange(256), "hif8")
    ref_en = np.arange(256, dtype=np.uint8).view(en.hifloat8).astype(np.float64)
    assert np.array_equal(ours, ref_en, equal_nan=True)
    for c in range(256):
        p = _hif8_paper_value(c)
        if p == "nan":
            assert np.isnan(ours[c])
        elif isinstance(p, str):
            assert ours[c] == (np.inf if p == "inf" else -np.inf)
        else:
            assert Fraction(float(ours[c])) == p, hex(c)


def test_hif8_published_summary_numbers():
    f = get_format("hif8")
    t = decode(np.arange(256), f)
    fin = t[np.isfinite(t)]
    assert fin.size == 253  # all codes but NaN and +-inf; a single zero
    assert f.max == fin.max() == 2.0**15 and f.min_normal == 2.0**-15
    assert f.min_subnormal == np.abs(fin[fin != 0]).min() == 2.0**-22
    # paper abstract: 7 exponents with 3-bit, 8 with 2-bit, 16 with 1-bit mantissa; 38 binades
    pos = fin[fin > 0]
    e, counts = np.unique(np.floor(np.log2(pos)).astype(int), return_counts=True)
    per_binade = dict(zip(e.tolist(), counts.tolist()))
    assert sum(1 for k, v in per_binade.items() if v == 8) == 7
    assert sum(1 for k, v in per_binade.items() if v == 4) == 8
    # 16 exponents with 1-bit mantissa (|E| = 8..15); 1.5 x 2^15 is the infinity code 0x6F
    assert [per_binade[k] for k in range(-15, -7)] + [per_binade[k] for k in range(8, 15)] == [2] * 15
    assert per_binade[15] == 1
    assert [per_binade[k] for k in range(-22, -15)] == [1] * 7  # denormals 2^-22..2^-16
    assert f.binades == 38 == len(per_binade)  # 2^-22 .. 2^15 inclusive
    assert get_format("fp16").binades == 40  # the paper's comparison figure


@pytest.mark.parametrize(
    "fmt,ref",
    [
        (FloatFormat("e3m4", 8, 3, 4, 3, True, "ieee"), ml_dtypes.float8_e3m4),
        (FloatFormat("e4m3", 8, 4, 3, 7, True, "ieee"), ml_dtypes.float8_e4m3),
        (FloatFormat("e4m3fnuz", 8, 4, 3, 8, True, "fnuz"), ml_dtypes.float8_e4m3fnuz),
        (FloatFormat("e5m2fnuz", 8, 5, 2, 16, True, "fnuz"), ml_dtypes.float8_e5m2fnuz),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_a_new_format_is_one_dataclass_row(fmt, ref):
    """Formats outside the preset table work from their description alone (design claim)."""
    from accelsim.numerics import encode

    codes = np.arange(256, dtype=np.uint8)
    assert _same(decode(codes, fmt), codes.view(ref).astype(np.float64))
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        (rng.standard_normal(200_000) * 8).astype(np.float32)])
    with np.errstate(all="ignore"):
        ref_codes = x.astype(ref).view(np.uint8)
    assert np.array_equal(encode(x, fmt), ref_codes)
