"""PAPER_SETUP is the output of scripts/calibrate.py, not numbers typed into the model: the two
weight-update knobs are re-fitted here from the four published communication cuts (fast stage of
the script) and the minibatch stage checked against its neighbours."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from accelsim.arch import load_system
from accelsim.dse import hfp8_published as published
from accelsim.dse import hfp8_study as study
from accelsim.dse import step
from accelsim.workload import load_workload

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def calibrate():
    spec = importlib.util.spec_from_file_location("calibrate", REPO / "scripts" / "calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_paper_setup_update_knobs_are_the_fit(calibrate):
    cal = calibrate.Calibrator(load_system(REPO / study.DEFAULT_SYSTEM),
                               load_workload(REPO / study.DEFAULT_WORKLOAD))
    t, eff = cal.fit_update_knobs()
    assert (t, eff) == (study.PAPER_SETUP.per_tensor_overhead_s, study.PAPER_SETUP.memory_efficiency)
    # physically plausible: microseconds per tensor, a fraction of peak memory bandwidth
    assert 1e-7 < t < 1e-5 and 0.2 < eff <= 1.0


def test_paper_setup_minibatch_is_the_fit_among_its_neighbours(calibrate):
    """The minibatch stage over the fitted value and its neighbours (one image per chip either
    side) picks PAPER_SETUP.minibatch, with every published number inside its tolerance."""
    system = load_system(REPO / study.DEFAULT_SYSTEM)
    cal = calibrate.Calibrator(system, load_workload(REPO / study.DEFAULT_WORKLOAD))
    per_chip = study.PAPER_SETUP.minibatch // system.chips
    cost, mb, metrics = cal.fit_minibatch(study.PAPER_SETUP.per_tensor_overhead_s,
                                          study.PAPER_SETUP.memory_efficiency,
                                          [per_chip - 1, per_chip, per_chip + 1], log=lambda s: None)
    assert mb == study.PAPER_SETUP.minibatch
    for q in published.PUBLISHED:
        assert abs(metrics[q.key] - q.value) <= q.tolerance, q.key
