"""The numerics boundary for library users (issue 21, item 13): formats given as ml_dtypes /
numpy dtypes, float32 in -> float32 out where the format fits, scalar in -> scalar out."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from accelsim.numerics import FORMATS, decode, encode, get_format, quantize
from accelsim.numerics.codec import fits
from accelsim.numerics.formats import DTYPE_FORMATS

ML = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16,
      ml_dtypes.float8_e4m3b11fnuz, np.float16, np.float32]


@pytest.mark.parametrize("dt", ML, ids=lambda d: np.dtype(d).name)
def test_a_dtype_is_the_format_with_its_values(dt):
    """quantize(x, dtype) rounds as ml_dtypes' own cast (round to nearest even) does."""
    f = get_format(dt)
    assert get_format(np.dtype(dt)) is f and f.name == DTYPE_FORMATS[np.dtype(dt).name]
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(20000) * np.exp2(rng.uniform(-20, 20, 20000))).astype(np.float32)
        x = x[np.abs(x) <= f.max]  # overflow policies differ by design (ml_dtypes: no saturation)
        want = x.astype(dt).astype(np.float64)
    assert np.array_equal(quantize(x, dt).astype(np.float64), want)
    if f.bits <= 16:
        assert np.array_equal(encode(x, dt), x.astype(dt).view(f.code_dtype))


def test_en_dtypes_hifloat8_is_hif8():
    en = pytest.importorskip("en_dtypes")
    assert get_format(en.hifloat8).name == "hif8"


def test_a_dtype_without_a_format_is_a_clear_error():
    with pytest.raises(ValueError, match="dtype 'float64' has no accelsim format.*float8_e4m3fn"):
        quantize(1.0, np.float64)
    with pytest.raises(ValueError, match="float8_e4m3fnuz"):
        get_format(ml_dtypes.float8_e4m3fnuz)
    with pytest.raises(TypeError, match="format must be a name"):
        get_format(3)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_float32_in_gives_float32_out_where_the_format_fits(name):
    """The rule: the input's float32/float16 dtype is kept when every value of the format is a
    value of it (fits), else float64; the values are the same either way."""
    f = get_format(name)
    x64 = np.array([0.1, -3.7, 1e-3, 200.0, np.inf, np.nan])
    for dt in (np.float32, np.float16):
        with np.errstate(over="ignore"):
            x = x64.astype(dt)
        q = quantize(x, name)
        assert q.dtype == (np.dtype(dt) if fits(f, np.dtype(dt)) else np.float64)
        assert np.array_equal(q.astype(np.float64), quantize(x.astype(np.float64), name),
                              equal_nan=True)
    assert quantize(x64, name).dtype == np.float64
    assert fits(f, np.dtype(np.float32))  # float32 holds every format accelsim has


def test_fits_is_exact_for_float16():
    assert fits(get_format("e4m3fn"), np.dtype(np.float16))
    assert not fits(get_format("bf16"), np.dtype(np.float16))  # range beyond float16
    assert not fits(get_format("fp32"), np.dtype(np.float16))


def test_scalar_in_gives_scalar_out():
    q = quantize(1.0625, "hif8")
    assert np.ndim(q) == 0 and not isinstance(q, np.ndarray) and q == 1.125
    assert isinstance(quantize(np.float32(3.3), "e4m3fn"), np.float32)
    c = encode(1.0, "e4m3fn")
    assert isinstance(c, np.uint8) and c == 0x38
    assert decode(np.uint8(0x38), "e4m3fn") == 1.0 and not isinstance(decode(0x38, "e4m3fn"),
                                                                       np.ndarray)
    zero_d = quantize(np.array(1.0625), "hif8")  # a 0-d array stays an array
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == ()
