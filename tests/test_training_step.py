"""Training-step arithmetic (pure, no configs): the step is compute + exposed communication,
throughput never beats the peak-FLOPS ceiling, free communication makes equal-precision schemes
agree, more bandwidth (smaller collectives) never lowers throughput."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelsim.engine.schedule import CommPhases, ComputeProfile, TrainingParams, combine

times = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
pos = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)


def profile(scheme="fp8", fwd=1e-3, bwd=1e-3, wg=1e-3, mb=512, flops_per_image=24.6e9,
            peak=8e15):
    return ComputeProfile(scheme, mb, fwd, bwd, wg, mb * flops_per_image, peak)


def test_step_is_compute_plus_comm_without_overlap():
    s = combine(profile(), CommPhases(2e-3, 1e-3, 5e-4, 1e-4))
    assert s.step_s == pytest.approx(3e-3 + 1e-4 + 3.5e-3)
    assert s.samples_per_s == pytest.approx(512 / s.step_s)
    assert s.comm_fraction == pytest.approx(3.5e-3 / s.step_s)
    assert s.hidden_comm_s == 0.0


def test_overlap_hides_at_most_the_reduce_scatter():
    c = CommPhases(2e-3, 1e-3, 5e-4)
    half = combine(profile(), c, overlap=0.5)  # backward = 2 ms -> 1 ms of RS hidden
    assert half.hidden_comm_s == pytest.approx(1e-3)
    full = combine(profile(bwd=5e-3), c, overlap=1.0)
    assert full.hidden_comm_s == pytest.approx(2e-3)  # never AG or WU


@given(fwd=pos, bwd=pos, wg=pos, rs=times, ag=times, wu=times, ov=st.floats(0, 1))
def test_throughput_never_exceeds_the_peak_flops_ceiling(fwd, bwd, wg, rs, ag, wu, ov):
    # Compute time is at least FLOPs / peak (the explorer's guarantee); here exactly that.
    flops = 512 * 24.6e9
    peak = flops / (fwd + bwd + wg)
    s = combine(ComputeProfile("fp8", 512, fwd, bwd, wg, flops, peak), CommPhases(rs, ag, wu),
                overlap=ov)
    assert s.samples_per_s * 24.6e9 <= peak * (1 + 1e-12)
    assert s.utilization <= 1 + 1e-12


@given(rs=times, ag=times, wu=times)
def test_free_communication_makes_equal_precision_schemes_agree(rs, ag, wu):
    a = combine(profile("fp8"), CommPhases(0.0, 0.0, 0.0))
    b = combine(profile("hfp8"), CommPhases(0.0, 0.0, 0.0))
    assert a.samples_per_s == b.samples_per_s
    # and any communication only slows a scheme down
    c = combine(profile("hfp8"), CommPhases(rs, ag, wu))
    assert c.samples_per_s <= b.samples_per_s


@given(rs=times, ag=times, wu=times, k=st.floats(1.0, 16.0))
def test_faster_links_never_lower_throughput(rs, ag, wu, k):
    slow = combine(profile(), CommPhases(rs, ag, wu))
    fast = combine(profile(), CommPhases(rs / k, ag / k, wu))
    assert fast.samples_per_s >= slow.samples_per_s


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="overlap must be in"):
        combine(profile(), CommPhases(0, 0, 0), overlap=1.5)
    with pytest.raises(ValueError, match="CommPhases.all_gather_s"):
        CommPhases(0.0, -1.0, 0.0)
    with pytest.raises(ValueError, match="ComputeProfile.fwd_s"):
        ComputeProfile("fp8", 8, math.nan, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="minibatch must be a positive integer"):
        TrainingParams(minibatch=0)
    with pytest.raises(ValueError, match="memory_efficiency"):
        TrainingParams(minibatch=8, memory_efficiency=0.0)
    with pytest.raises(ValueError, match="step time is zero"):
        combine(profile(fwd=0, bwd=0, wg=0), CommPhases(0, 0, 0))
