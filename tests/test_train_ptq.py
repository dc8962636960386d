"""HiFloat8 Algorithm 1 PTQ on synthetic Linear layers: calibration never loses to direct cast,
scales are powers of two in the paper's range, operands are representable, and the search picks
the grid minimum found by a slow per-pair reference."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.numerics import decode, encode, quantize
from accelsim.train.ptq import (
    EXPONENT_RANGE,
    calibrate_linear,
    calibrate_sequential,
    direct_cast_linear,
    quantize_operands,
)


def _layer(rng, act_scale, w_scale, batch=32, fan_in=48, fan_out=24):
    x = rng.standard_normal((batch, fan_in)) * act_scale
    w = rng.standard_normal((fan_in, fan_out)) * w_scale
    return x, w


@pytest.mark.parametrize("fmt", ["hif8", "e4m3fn", "e5m2"])
@pytest.mark.parametrize("act_scale,w_scale", [(1.0, 0.05), (1e-3, 2e-4), (300.0, 1.0), (2e-5, 3e-6)])
def test_calibration_never_worse_than_direct_cast(fmt, act_scale, w_scale):
    x, w = _layer(np.random.default_rng(11), act_scale, w_scale)
    r = calibrate_linear(x, w, fmt=fmt)
    assert r.mse <= r.direct_mse
    assert r.direct_mse == pytest.approx(float(np.mean((direct_cast_linear(x, w, fmt=fmt) - x @ w) ** 2)))
    # chosen scales: integer powers of two inside Algorithm 1's search range
    assert r.ea in EXPONENT_RANGE and r.ew in EXPONENT_RANGE
    assert r.act_scale == 2.0**r.ea and r.weight_scale == 2.0**r.ew
    assert EXPONENT_RANGE == tuple(range(-4, 6))
    # the operands that enter the GEMM are representable in the format
    aq, wq = quantize_operands(x, w, r.ea, r.ew, fmt)
    for t in (aq, wq):
        np.testing.assert_array_equal(decode(encode(t, fmt, None), fmt), t)


def test_calibration_helps_where_direct_cast_underflows():
    # e4m3fn's smallest subnormal is 2^-9: weights around 2^-12 mostly flush to zero when cast
    x, w = _layer(np.random.default_rng(3), 1.0, 2.0**-12)
    r = calibrate_linear(x, w, fmt="e4m3fn")
    assert r.ew == 5  # largest weight shift in range
    assert r.mse < 0.01 * r.direct_mse


def test_search_matches_slow_reference():
    x, w = _layer(np.random.default_rng(5), 0.02, 0.3, batch=8, fan_in=16, fan_out=8)
    ref = x @ w
    r = calibrate_linear(x, w, ref, fmt="hif8")
    slow = {}
    for ea in EXPONENT_RANGE:
        for ew in EXPONENT_RANGE:
            aq = quantize(x * 2.0**ea, "hif8", "rna", saturate=True)
            wq = quantize(w * 2.0**ew, "hif8", "rna", saturate=True)
            slow[ea, ew] = float(np.mean((aq @ wq / 2.0 ** (ea + ew) - ref) ** 2))
    # same GEMM calls, so equal up to BLAS reassociation at most
    assert r.mse == pytest.approx(min(slow.values()), rel=1e-12)
    assert slow[r.ea, r.ew] == pytest.approx(r.mse, rel=1e-12)
    assert r.mse_grid[EXPONENT_RANGE.index(r.ea), EXPONENT_RANGE.index(r.ew)] == r.mse


def test_ties_prefer_no_scaling():
    # values exactly representable in e4m3fn at every shift in range: every pair is exact
    x = np.array([[1.0, 2.0], [0.5, -1.5]])
    w = np.array([[1.0], [-0.75]])
    r = calibrate_linear(x, w, fmt="e4m3fn")
    assert (r.ea, r.ew, r.mse) == (0, 0, 0.0)


def test_custom_matmul_is_used():
    calls = []

    def mm(a, b):
        calls.append(a.shape)
        return a @ b

    x, w = _layer(np.random.default_rng(0), 1.0, 0.1, batch=4, fan_in=8, fan_out=4)
    calibrate_linear(x, w, fmt="hif8", ea_range=(0, 1), ew_range=(-1, 0), matmul=mm)
    assert len(calls) == 4


def test_sequential_chain_uses_quantized_inputs():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((16, 12))
    ws = [rng.standard_normal((12, 10)) * 0.3, rng.standard_normal((10, 4)) * 1e-3]
    relu = lambda v: np.maximum(v, 0.0)  # noqa: E731
    res = calibrate_sequential(x, ws, [relu, None], fmt="hif8")
    assert len(res) == 2 and all(r.mse <= r.direct_mse for r in res)
    second = calibrate_linear(relu(res[0].y), ws[1], relu(x @ ws[0]) @ ws[1], fmt="hif8")
    assert (second.ea, second.ew, second.mse) == (res[1].ea, res[1].ew, res[1].mse)


@pytest.mark.parametrize(
    "call",
    [
        lambda: calibrate_linear(np.ones((2, 3)), np.ones((4, 2))),
        lambda: calibrate_linear(np.ones(3), np.ones((3, 2))),
        lambda: calibrate_linear(np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 3))),
        lambda: calibrate_linear(np.ones((2, 3)), np.ones((3, 2)), ea_range=(1, 2)),
        lambda: calibrate_linear(np.ones((2, 3)), np.ones((3, 2)), fmt="fp7"),
        lambda: calibrate_sequential(np.ones((2, 3)), [np.ones((3, 2))], [None, None]),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()
