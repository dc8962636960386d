"""GEMMs whose M, N or K are not multiples of a tile (perf/gemm.py ``gemm_time``).

Mutation testing found the tile count unguarded: with ``M // tm`` in place of a ceiling
division the partial tile is free and no test noticed, because every tested M was a multiple
of the tile. The properties here come from the physics, not from the formula:

* a bigger GEMM never takes less time: growing any dimension by one adds work and removes
  none (a partial tile still has to be computed);
* no GEMM runs faster than the chip's peak MAC rate times the fitted array efficiency
  (datasheet peak from the preset; the partial tile must be paid for somewhere);
* issue 22's held-out check: H100 2049 x 2048 x 2048 (and 2048 x 2049 x 2048, one past the
  tile boundary) is not faster per FLOP than 2048^3.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arch.config import load_system
from accelsim.perf.gemm import FITTED, gemm_time

REPO = Path(__file__).resolve().parents[1]
CHIPS = {("h100-sxm", "bf16"), ("h100-sxm", "fp8"), ("a100-sxm", "bf16"), ("v100-sxm2", "fp16"),
         ("v100-sxm2", "fp32")}
SYSTEMS = {name: load_system(REPO / "arch_configs" / f"{name}.toml") for name, _ in CHIPS}


def _ceiling_flops(system, precision) -> float:
    return system.chip.peak_flops(precision) * FITTED.array_efficiency


@pytest.mark.parametrize("axis", [0, 1])
def test_h100_one_past_the_tile_boundary_is_not_faster_per_flop(axis):
    """M and N are tiled (K is not: every core runs the full K, so one more K step only
    amortizes the fixed launch time a little further)."""
    s = SYSTEMS["h100-sxm"]
    base = gemm_time(s, 2048, 2048, 2048, "bf16")
    shape = [2048, 2048, 2048]
    shape[axis] += 1
    past = gemm_time(s, *shape, "bf16")
    assert past.time_s >= base.time_s
    assert past.flops_per_s <= base.flops_per_s, (shape, past.tflops, base.tflops)


@pytest.mark.parametrize("chip", sorted(CHIPS), ids=lambda c: "-".join(c))
def test_ragged_thin_gemms_stay_under_the_peak(chip):
    """Deterministic twin of the hypothesis test below: one short of and one past two and three
    tile rows (tiles 32..512) on wide, long GEMMs, in both orientations (ragged M and ragged N)."""
    name, prec = chip
    s = SYSTEMS[name]
    ceiling = _ceiling_flops(s, prec) * (1 + 1e-9)
    for T in (32, 64, 128, 256, 512):
        for m in (T + 1, 2 * T - 1, 2 * T + 1, 3 * T - 1):
            for shape in ((m, 16384, 4096), (16384, m, 4096)):
                g = gemm_time(s, *shape, prec)
                assert g.flops_per_s <= ceiling, (name, prec, shape, g.tflops)


def _dim():
    # near a multiple of a power-of-two tile: q T + d, d in -1..1, plus plain random sizes
    near = st.builds(lambda t, q, d: max(1, t * q + d), st.sampled_from([32, 64, 128, 256, 512]),
                     st.integers(1, 24), st.integers(-1, 1))
    return st.one_of(near, st.integers(1, 6000))


@given(chip=st.sampled_from(sorted(CHIPS)), m=_dim(), n=_dim(), k=_dim(),
       axis=st.integers(0, 2))
@settings(max_examples=60, deadline=None)
def test_time_never_falls_when_a_dimension_grows_by_one(chip, m, n, k, axis):
    """... on a chip without the unaligned-stride penalty: with it, growing N or K onto a
    16-byte multiple is faster, as measured (accelsim/data/h100_device: an LM head at
    vocabulary 50304 runs 5.8x faster than at 50257; tests/test_device_validation.py)."""
    name, prec = chip
    s = SYSTEMS[name]
    s = dataclasses.replace(s, chip=dataclasses.replace(s.chip, unaligned_gemm_rate=1.0))
    shape = [m, n, k]
    g0 = gemm_time(s, *shape, prec)
    shape[axis] += 1
    g1 = gemm_time(s, *shape, prec)
    assert g1.time_s >= g0.time_s, (name, prec, (m, n, k), axis, g0.time_s, g1.time_s)


@given(chip=st.sampled_from(sorted(CHIPS)),
       m=st.builds(lambda t, q, d: t * q + d, st.sampled_from([32, 64, 128, 256, 512]),
                   st.integers(1, 8), st.integers(-1, 1)).filter(lambda x: x > 0),
       n=st.sampled_from([4096, 8192, 16384]), k=st.sampled_from([1024, 4096, 8192]),
       transpose=st.booleans())
@settings(max_examples=60, deadline=None)
def test_no_gemm_beats_the_peak_times_the_array_efficiency(chip, m, n, k, transpose):
    """Thin-by-wide GEMMs with a ragged side (one short of / past a tile multiple): the
    partial tile is paid for, so the rate stays under the datasheet peak x array efficiency."""
    name, prec = chip
    s = SYSTEMS[name]
    g = gemm_time(s, n, m, k, prec) if transpose else gemm_time(s, m, n, k, prec)
    assert g.flops_per_s <= _ceiling_flops(s, prec) * (1 + 1e-9), (name, prec, m, n, k,
                                                                    g.tflops)


@pytest.mark.parametrize("chip", sorted(CHIPS), ids=lambda c: "-".join(c))
def test_one_tile_per_core_is_one_wave(chip):
    """Wave quantization from the definition: ``cores`` independent GEMMs of one array-sized
    tile each run side by side in the compute time of one (every core busy once); one more
    GEMM needs a second wave."""
    name, prec = chip
    s = SYSTEMS[name]
    s = dataclasses.replace(s, chip=dataclasses.replace(s.chip, split_k=False))  # waves alone
    cores = s.chip.cores
    g = max(s.chip.core.rows, s.chip.core.cols)  # one tile: M = N = the tile granule
    one, full, over = (gemm_time(s, g, g, 4096, prec, count=c, dataflow="os")
                       for c in (1, cores, cores + 1))
    assert (one.tile_m, one.tile_n) == (full.tile_m, full.tile_n) == (g, g)
    assert (one.waves, full.waves, over.waves) == (1, 1, 2)
    assert full.compute_s == pytest.approx(one.compute_s, rel=1e-12)
    assert over.compute_s == pytest.approx(2 * one.compute_s, rel=1e-12)
