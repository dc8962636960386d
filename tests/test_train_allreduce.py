"""FP8-LM all-reduce: exactness of the emulation and the paper's Fig. 7 trend (auto-scaling has
lower underflow + overflow than pre- and post-scaling) on synthetic gradient sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelsim.numerics import get_format, quantize
from accelsim.train.allreduce import (
    METHODS,
    FP8AllReducer,
    GradientModel,
    allreduce_rates,
    fp8_allreduce,
    shared_scale,
)
from accelsim.train.scaling import pow2_scale


def test_shared_scale_is_minimum_of_worker_scales():
    g = np.array([[1.0, -2.0], [100.0, 3.0], [0.5, 0.25]])
    fmax = get_format("e5m2").max
    assert shared_scale(g, "e5m2") == min(pow2_scale(a, fmax) for a in (2.0, 100.0, 0.5))
    assert shared_scale(np.zeros((2, 3)), "e5m2") == 1.0


@pytest.mark.parametrize("method", METHODS)
def test_representable_values_reduce_exactly_when_nothing_overflows(method):
    # small integers on disjoint supports (one non-zero term per output element): every cast,
    # partial sum and descale is exact in e5m2, even post-scaling's -> the exact mean
    rng = np.random.default_rng(3)
    g = rng.integers(-3, 4, size=(4, 64)).astype(np.float64)
    g[np.arange(64) % 4 != np.arange(4)[:, None]] = 0.0
    r = fp8_allreduce(g, method, fmt="e5m2", mu=2.0**-4)
    np.testing.assert_array_equal(r.mean, g.mean(axis=0))
    assert r.underflow_rate == 0.0 and r.overflow_rate == 0.0 and r.snr_db == math.inf


def test_one_pair_matches_hand_computation():
    # N = 2, e4m3fn, post-scaling: s'_g from amax 3 -> 2^7 (384 <= 448); 3*128 + 3*128 = 768 > 448
    g = np.array([[3.0, 1.0], [3.0, 2.0**-20]])
    r = fp8_allreduce(g, "post", fmt="e4m3fn")
    assert r.shared_scale == 128.0
    assert r.overflow_rate == 0.5  # the first element saturates in the sum
    assert r.mean[0] == 448.0 / (2 * 128.0)
    assert r.underflow_rate == 1 / 4  # 2^-20 * 128 = 2^-13 < 2^-9 (smallest e4m3fn subnormal)
    assert r.mean[1] == quantize(128.0, "e4m3fn") / 256.0
    pre = fp8_allreduce(g, "pre", fmt="e4m3fn")
    assert pre.overflow_rate == 0.0 and pre.mean[0] == 3.0


@pytest.mark.parametrize("n_workers", [8, 32, 128])
def test_auto_scaling_beats_pre_and_post_on_underflow_plus_overflow(n_workers):
    # FP8-LM Fig. 7: pre-scaling underflows, post-scaling overflows, auto-scaling lowers both.
    rng = np.random.default_rng(2024 + n_workers)
    steps = math.ceil(math.log2(n_workers)) + 2 + 10
    r = allreduce_rates(rng, n_workers, fmt="e5m2", steps=steps, methods=("pre", "post", "auto"))
    assert r["pre"]["underflow"] > r["post"]["underflow"]
    assert r["post"]["overflow"] > r["pre"]["overflow"]
    assert r["auto"]["sum"] < r["pre"]["sum"]
    assert r["auto"]["sum"] < r["post"]["sum"]
    assert r["auto"]["snr_db"] > r["post"]["snr_db"]
    # mu settles near the power of two that keeps the reduced sum below fp_max
    assert 1.0 / n_workers <= r["auto"]["mu_final"] <= 1.0


def test_reducer_carries_mu_across_steps():
    # N = 4 copies of a tensor at e5m2's max after scaling: the sum saturates -> mu halves each
    # step until 4 * mu * fp_max fits (mu = 1/4), then stays
    g = np.tile(np.array([3.0, 1.0, -2.0, 0.5]), (4, 1))
    red = FP8AllReducer("auto", fmt="e5m2")
    mus = []
    for _ in range(4):
        r = red.reduce(g)
        mus.append(red.mu)
    assert mus == [0.5, 0.25, 0.25, 0.25]
    np.testing.assert_array_equal(r.mean, g[0])
    assert FP8AllReducer("post").mu == 1.0


def test_gradient_model_is_deterministic_float32_and_checked():
    m = GradientModel(size=16)
    a = m.sample(np.random.default_rng(5), 3)
    b = m.sample(np.random.default_rng(5), 3)
    assert a.dtype == np.float32 and a.shape == (3, 16)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        GradientModel(correlation=1.5)
    with pytest.raises(TypeError):
        m.sample(np.random.RandomState(0), 2)


@pytest.mark.parametrize(
    "call",
    [
        lambda: fp8_allreduce(np.ones((2, 3)), "median"),
        lambda: fp8_allreduce(np.ones(3), "pre"),
        lambda: fp8_allreduce(np.array([[1.0, np.inf]]), "pre"),
        lambda: fp8_allreduce(np.ones((2, 3)), "auto", mu=0.0),
        lambda: allreduce_rates(np.random.default_rng(0), 1),
        lambda: allreduce_rates(np.random.default_rng(0), 8, steps=3, warmup=3),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def _slow_tree(values, fmt):
    """Scalar reference of the documented reduction (recursive halving): partial i adds partial
    i + n//2, each sum rounded to fmt (saturating); an odd last partial is carried."""
    while len(values) > 1:
        half = len(values) // 2
        nxt = [float(quantize(values[i] + values[i + half], fmt, "rne", saturate=True)) for i in range(half)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


@pytest.mark.parametrize("n_workers", [2, 3, 5, 8])
@pytest.mark.parametrize("fmt", ["e5m2", "e4m3fn"])
def test_vectorized_reduction_matches_scalar_reference(n_workers, fmt):
    rng = np.random.default_rng(n_workers)
    g = (rng.standard_normal((n_workers, 40)) * np.exp2(rng.integers(-12, 4, size=40))).astype(np.float32)
    r = fp8_allreduce(g, "post", fmt=fmt)
    sg = r.shared_scale
    for j in range(g.shape[1]):
        wire = [float(quantize(float(g[i, j]) * sg, fmt, "rne", saturate=True)) for i in range(n_workers)]
        assert r.mean[j] == _slow_tree(wire, fmt) / (sg * n_workers)
