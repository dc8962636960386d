"""Loss/tensor-scale controllers follow their papers' stated rules on scripted overflow sequences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelsim.numerics import get_format
from accelsim.train.loss_scaling import (
    ALS_WINDOWS,
    AdaptiveLossScaler,
    DynamicLossScaler,
    StaticLossScaler,
    hif8_bls,
)
from accelsim.train.scaling import (
    AutoScaleMu,
    DelayedScaler,
    HIF8_PTS_TARGET,
    PerTensorScaler,
    amax,
    default_target,
    has_inf_or_nan,
    pow2_scale,
    saturation_fraction,
    scaled_quantize,
)


# ---------------------------------------------------------------- APEX / GradScaler rule
def test_dynamic_scaler_grows_after_window_and_halves_on_inf():
    s = DynamicLossScaler(2.0**16, growth_interval=3)
    trace = []
    for found_inf in [False, False, False, False, True, False, False, True, True, False, False, False]:
        applied = s.update(found_inf)
        trace.append((applied, s.scale, s.growth_tracker))
    assert trace == [
        (True, 2.0**16, 1),
        (True, 2.0**16, 2),
        (True, 2.0**17, 0),  # third clean step: x2, counter resets
        (True, 2.0**17, 1),
        (False, 2.0**16, 0),  # INF: skipped, halved, counter reset
        (True, 2.0**16, 1),
        (True, 2.0**16, 2),
        (False, 2.0**15, 0),  # an overflow just before the window closes restarts it
        (False, 2.0**14, 0),
        (True, 2.0**14, 1),
        (True, 2.0**14, 2),
        (True, 2.0**15, 0),
    ]
    assert s.state()["skipped"] == 3 and s.state()["steps"] == 12


def test_dynamic_scaler_defaults_are_gradscaler_and_bounds_clamp():
    s = DynamicLossScaler()
    assert (s.scale, s.growth_factor, s.backoff_factor, s.growth_interval) == (65536.0, 2.0, 0.5, 2000)
    b = hif8_bls()
    assert (b.scale, b.growth_interval) == (65536.0, 2000)
    c = DynamicLossScaler(4.0, growth_interval=1, min_scale=2.0, max_scale=8.0)
    seen = []
    for _ in range(3):
        c.update(False)
        seen.append(c.scale)
    assert seen == [8.0, 8.0, 8.0]
    for _ in range(5):
        c.update(True)
    assert c.scale == 2.0


def test_static_scaler_never_moves():
    s = StaticLossScaler(1024.0)
    assert [s.update(f) for f in (False, True, False)] == [True, False, True]
    assert s.scale == 1024.0 and s.state()["skipped"] == 1
    assert StaticLossScaler(8.0, skip_on_inf=False).update(True) is True


# ---------------------------------------------------------------- HiF8 ALS
def _clean(s, n):
    for _ in range(n):
        assert s.update(False) is True


def test_als_initial_state_is_the_papers():
    s = AdaptiveLossScaler()
    assert ALS_WINDOWS == (1, 20, 50, 100, 200, 500, 1000)
    assert s.scale == 2.0**32 and s.window == 20


def test_als_window_moves_up_after_three_increases():
    s = AdaptiveLossScaler()
    _clean(s, 19)
    assert s.scale == 2.0**32
    _clean(s, 1)
    assert s.scale == 2.0**33 and s.window == 20 and s.state()["increases"] == 1
    _clean(s, 40)
    assert s.scale == 2.0**35 and s.window == 50  # third increase widens the window
    assert s.state()["increases"] == 0
    _clean(s, 49)
    assert s.scale == 2.0**35
    _clean(s, 1)
    assert s.scale == 2.0**36 and s.window == 50


def test_als_window_moves_down_after_three_decreases_in_a_row():
    s = AdaptiveLossScaler(init_window=100)
    assert [s.update(True) for _ in range(2)] == [False, False]
    assert s.scale == 2.0**30 and s.window == 100
    assert s.update(True) is False
    assert s.scale == 2.0**29 and s.window == 50  # third decrease in a row narrows once
    assert s.state()["consecutive_decreases"] == 0


def test_als_increase_breaks_a_run_of_decreases():
    s = AdaptiveLossScaler(init_window=1)
    s.update(True)
    s.update(True)
    s.update(False)  # window 1: one clean step is an increase, the run of decreases restarts
    assert s.state()["consecutive_decreases"] == 0
    s.update(True)
    s.update(True)
    assert s.window == 1 and s.scale == 2.0**29
    s.update(True)
    assert s.window == 1  # stays at the bottom of the list
    # clean steps in between that do not reach the window do NOT break a run
    t = AdaptiveLossScaler(init_window=50)
    t.update(True)
    _clean(t, 10)
    t.update(True)
    _clean(t, 10)
    t.update(True)
    assert t.window == 20


def test_als_drop_to_first_is_mindformers_variant():
    s = AdaptiveLossScaler(init_window=500, drop_to_first=True)
    for _ in range(3):
        s.update(True)
    assert s.window == 1


def test_als_window_stops_at_the_top():
    s = AdaptiveLossScaler(windows=(1, 2), init_window=2)
    _clean(s, 2 * 7)
    assert s.window == 2 and s.scale == 2.0**39


@pytest.mark.parametrize(
    "kwargs",
    [{"windows": (20, 1)}, {"init_window": 30}, {"windows": ()}, {"init_scale": 0.0}, {"factor": 1.0}],
)
def test_als_rejects_bad_config(kwargs):
    with pytest.raises(ValueError):
        AdaptiveLossScaler(**kwargs)


# ---------------------------------------------------------------- power-of-two scales
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2", "hif8"])
def test_pow2_scale_is_largest_power_of_two_inside_target(fmt):
    fmax = get_format(fmt).max
    rng = np.random.default_rng(0)
    for a in np.concatenate([rng.lognormal(0, 8, 200), [fmax, fmax / 4, fmax * 2, 1.0]]):
        s = pow2_scale(float(a), fmax)
        k = math.frexp(s)[1] - 1
        assert s == math.ldexp(1.0, k)  # a power of two
        assert a * s <= fmax < a * s * 2  # exact: power-of-two products
    assert pow2_scale(fmax / 4, fmax, margin=1) == 2.0
    assert pow2_scale(0.0, fmax, fallback=8.0) == 8.0
    assert pow2_scale(float("inf"), fmax, fallback=0.25) == 0.25
    assert pow2_scale(5e-324, fmax) == 2.0**1023  # clamped to the largest float64 power of two


def test_pow2_scale_exact_at_a_rounding_edge():
    # target / amax rounds up to exactly 2^k although amax * 2^k > target
    target = 448.0
    a = np.nextafter(448.0 / 2**10, np.inf)
    s = pow2_scale(float(a), target)
    assert a * s <= target and s == 2.0**9


# ---------------------------------------------------------------- HiF8 PTS
def test_pts_updates_every_ten_iterations_with_power_of_two():
    p = PerTensorScaler("hif8")
    big = np.full(4, 1000.0)
    small = np.full(4, 0.01)
    scales = [p.scale_for(big if i < 10 else small) for i in range(25)]
    assert scales[:9] == [1.0] * 9  # initial factor 1 until the 10th iteration
    assert scales[9] == 2.0**-6  # 1000 / 64 = 15.6 <= 2^4 (HiF8 default target) < 31.25
    assert scales[10:19] == [2.0**-6] * 9
    assert scales[19] == 2.0**10  # 0.01 * 2^10 = 10.24 <= 16 < 20.48
    assert p.state()["iteration"] == 25


def test_hif8_default_target_keeps_the_bulk_in_the_3_bit_band():
    # amax at 2^4 instead of HiF8's max 2^15: a Gaussian tensor quantizes ~4x more accurately
    x = np.random.default_rng(4).standard_normal(4096) * 3e-3
    def rel_rmse(target):
        s = pow2_scale(amax(x), target)
        q = scaled_quantize(x, "hif8", s) / s
        return float(np.sqrt(np.mean((q - x) ** 2) / np.mean(x**2)))
    assert default_target("hif8") == HIF8_PTS_TARGET == 16.0
    assert default_target("e4m3fn") == 448.0
    assert rel_rmse(HIF8_PTS_TARGET) < 0.5 * rel_rmse(get_format("hif8").max)


def test_scaled_quantize_descaled_is_representable_operand():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1e-3, 256)
    p = PerTensorScaler("e4m3fn", interval=1)
    s = p.scale_for(x)
    q = scaled_quantize(x, "e4m3fn", s)
    assert np.abs(q).max() <= 448.0
    from accelsim.numerics import decode, encode

    np.testing.assert_array_equal(decode(encode(q, "e4m3fn"), "e4m3fn"), q)
    # descaling in float64 by a power of two is exact and close to x
    assert np.max(np.abs(q / s - x)) <= np.abs(x).max() * 2.0**-4


# ---------------------------------------------------------------- FP8-LM delayed scaling
def test_delayed_scaler_uses_history_of_earlier_tensors():
    d = DelayedScaler("e4m3fn", history_len=2)
    assert d.scale_for(np.array([1.0])) == 256.0  # empty history: just in time (448 // 1)
    assert d.scale_for(np.array([100.0])) == 256.0  # from history {1}; 100*256 would overflow
    assert d.scale == 4.0  # history {1, 100}
    assert d.scale_for(np.array([0.5])) == 4.0
    assert d.state()["history"] == [100.0, 0.5]
    assert d.scale_for(np.array([0.5])) == 4.0
    assert d.scale == 512.0  # 100 left the window of 2


# ---------------------------------------------------------------- FP8-LM auto-scaling mu
def test_mu_halves_above_threshold_and_doubles_after_quiet_window():
    m = AutoScaleMu(window=4)
    assert m.threshold == 1e-5  # 0.001 %
    out = [m.update(r) for r in [0.0, 2e-5, 1e-5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5]]
    assert out == [1.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.5]
    # a saturated step resets the quiet count
    assert m.state()["quiet_steps"] == 0
    assert AutoScaleMu().window == 1000


def test_saturation_fraction_and_inf_detection():
    q = np.array([448.0, -448.0, 1.0, 0.0, np.nan, 3.0, 2.0, 1.0])
    assert saturation_fraction(q, "e4m3fn") == 3 / 8
    assert has_inf_or_nan(np.ones(3), np.array([1.0, np.inf]))
    assert not has_inf_or_nan(np.ones(3))


@pytest.mark.parametrize(
    "make",
    [
        lambda: DynamicLossScaler(growth_interval=0),
        lambda: DynamicLossScaler(backoff_factor=1.5),
        lambda: DynamicLossScaler(min_scale=4.0, max_scale=2.0),
        lambda: PerTensorScaler("hif8", interval=0),
        lambda: PerTensorScaler("nope"),
        lambda: DelayedScaler("e5m2", history_len=0),
        lambda: AutoScaleMu(threshold=2.0),
        lambda: AutoScaleMu().update(1.5),
        lambda: StaticLossScaler(-1.0),
    ],
)
def test_bad_arguments_raise_value_error(make):
    with pytest.raises(ValueError):
        make()
