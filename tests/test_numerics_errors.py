"""Bad input gets a clear error that names the problem."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.numerics import decode, encode, get_format, quantize


def test_unknown_format_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown format 'fp8'.*e4m3fn.*hif8"):
        get_format("fp8")
    with pytest.raises(ValueError, match="unknown format"):
        quantize([1.0], "float8")
    with pytest.raises(TypeError, match="format must be a name"):
        get_format(8)


def test_unknown_rounding_lists_modes():
    with pytest.raises(ValueError, match=r"unknown rounding mode 'nearest'.*rne.*hybrid"):
        quantize([1.0], "fp16", "nearest")


def test_stochastic_needs_generator():
    with pytest.raises(ValueError, match="stochastic.*rng=numpy.random.default_rng"):
        encode([1.0], "e4m3fn", "sr")
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        quantize([1.0], "e4m3fn", "sr", rng=np.random.RandomState(0))


def test_decode_codes_out_of_range():
    with pytest.raises(ValueError, match=r"code 256 out of range for 8-bit format 'e4m3fn'"):
        decode([1, 256], "e4m3fn")
    with pytest.raises(ValueError, match="code -1 out of range"):
        decode([-1], "bf16")
    with pytest.raises(TypeError, match="integer code array"):
        decode([1.5], "fp16")


def test_non_numeric_arrays():
    with pytest.raises(TypeError, match="real numeric array.*<U"):
        quantize(["1.0"], "fp16")
    with pytest.raises(TypeError, match="real numeric array.*object"):
        encode(np.array([1.0, None], dtype=object), "e5m2")
    with pytest.raises(TypeError, match="real numeric array.*complex"):
        quantize(np.array([1j]), "fp16")


def test_shapes_and_integer_inputs_work():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert quantize(x, "e4m3fn").shape == (3, 4)
    y = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)[:, ::2]  # non-contiguous, LUT path
    assert np.array_equal(encode(y, "e5m2"), encode(y.astype(np.float64), "e5m2"))
    assert encode(y, "e5m2").shape == (2, 2, 4)
    assert encode(np.float32(1.0), "hif8").shape == ()
    assert decode(np.uint8(0x38), "e4m3fn") == 1.0
