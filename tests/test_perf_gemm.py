"""The hierarchy GEMM model: SCALE-Sim's fold cycles, compulsory traffic when operands fit,
multicast under a shared level, waves, launch cost, precision rates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from accelsim.arch import load_system
from accelsim.perf.gemm import Efficiency, GemmTime, chip_gemm_time, gemm_time
from accelsim.perf.systolic import gemm_cycles

REPO = Path(__file__).resolve().parents[1]
IDEAL = Efficiency(1.0, 1.0)


@pytest.fixture(scope="module")
def gpus():
    return {n: load_system(REPO / "arch_configs" / f"{n}.toml")
            for n in ("v100-sxm2", "a100-sxm", "h100-sxm")}


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("m,n,k", [(32, 32, 64), (64, 96, 300), (17, 33, 5)])
def test_one_tile_compute_is_exactly_the_systolic_reference(gpus, dataflow, m, n, k):
    chip = gpus["a100-sxm"].chip
    r = chip_gemm_time(chip, m, n, k, 1, "fp16", dataflow, efficiency=IDEAL)
    core = chip.core
    # tiles are array multiples >= 32 here, so an m x n <= 32 x ... GEMM is one tile per core
    tm, tn = int(r["tile_m"][0]), int(r["tile_n"][0])
    tiles = -(-m // tm) * -(-n // tn)
    assert int(r["waves"][0]) == -(-tiles // chip.cores)
    ref = gemm_cycles(tm, tn, k, core.rows, core.cols, dataflow)
    assert r["compute_s"][0] * core.frequency_Hz == pytest.approx(ref, rel=1e-12)


def test_fp8_rate_halves_the_reduction_steps(gpus):
    chip = gpus["h100-sxm"].chip
    f8 = chip_gemm_time(chip, 64, 64, 1024, 1, "fp8", "os", efficiency=IDEAL)
    ref = gemm_cycles(64, 64, 1024, chip.core.rows, chip.core.cols, "os", macs_per_pe=2)
    assert f8["compute_s"][0] * chip.core.frequency_Hz == pytest.approx(ref, rel=1e-12)
    # a rate below 1 (tf32 = 0.5) takes 1/rate cycles per MAC
    t32 = chip_gemm_time(chip, 64, 64, 1024, 1, "tf32", "os", efficiency=IDEAL)
    b16 = chip_gemm_time(chip, 64, 64, 1024, 1, "bf16", "os", efficiency=IDEAL)
    assert t32["compute_s"][0] == pytest.approx(2 * b16["compute_s"][0], rel=1e-12)


def test_dram_traffic_is_compulsory_when_operands_fit_the_shared_level(gpus):
    g = gemm_time(gpus["a100-sxm"], 2048, 2048, 2048, "bf16")  # 16 MiB of operands, 40 MB L2
    assert g.memory_bytes == pytest.approx(g.compulsory_bytes)


def test_shared_level_multicast_cuts_dram_traffic_and_unlocks_compute(gpus):
    h100 = gpus["h100-sxm"]
    flat = dataclasses.replace(h100, chip=dataclasses.replace(h100.chip, levels=()))
    with_l2 = gemm_time(h100, 8192, 8192, 8192, "bf16")
    without = gemm_time(flat, 8192, 8192, 8192, "bf16")
    assert with_l2.memory_bytes < without.memory_bytes / 4
    # the symptom: no shared level -> memory-bound; with it, well over half of peak
    assert without.bound == "memory"
    assert with_l2.flops_per_s > 0.6 * h100.chip.peak_flops("bf16")


def test_small_gemms_are_slower_per_flop_for_the_right_reasons(gpus):
    for name, s in gpus.items():
        prec = "fp32" if name == "v100-sxm2" else "bf16"
        tf = [gemm_time(s, n, n, n, prec).tflops for n in (256, 512, 1024, 2048, 4096, 8192)]
        assert all(a < b for a, b in zip(tf, tf[1:])), (name, tf)
    tiny = gemm_time(gpus["a100-sxm"], 256, 256, 256, "bf16")
    assert tiny.bound == "latency" and tiny.waves == 1
    assert tiny.launch_s == gpus["a100-sxm"].chip.kernel_launch_s
    # the fixed time comes on top of the work (module docstring: time = max(compute, every
    # level, memory) + kernel_launch_s), for a latency-bound GEMM and a compute-bound one
    for g in (tiny, gemm_time(gpus["a100-sxm"], 4096, 4096, 4096, "bf16")):
        assert g.split_k == 1
        work = max(g.compute_s, g.memory_s, *(t for _, t in g.level_s))
        assert g.time_s == pytest.approx(work + g.launch_s, rel=1e-12)


def test_wave_quantization_makes_time_a_step_function_of_m(gpus):
    s = gpus["a100-sxm"]
    ms = np.arange(8192, 8192 + 2048, 64)
    t = [gemm_time(s, int(m), 4096, 4096, "bf16").time_s for m in ms]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(t, t[1:]))  # more work is never faster
    assert len(set(np.round(t, 12))) < len(t)  # plateaus: same number of waves


def test_gemm_time_public_api(gpus):
    g = gemm_time(gpus["v100-sxm2"], 1024, 512, 256, "fp16", count=3)
    assert isinstance(g, GemmTime) and g.flops == 2 * 1024 * 512 * 256 * 3
    assert g.tflops == pytest.approx(g.flops / g.time_s / 1e12)
    assert g.bound in ("compute", "memory", "latency", "smem", "L2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.time_s = 0  # type: ignore[misc]
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="m must be a positive integer"):
            gemm_time(gpus["v100-sxm2"], bad, 8, 8, "fp16")
    with pytest.raises(ValueError, match="bf16"):
        gemm_time(gpus["v100-sxm2"], 64, 64, 64, "bf16")


def test_any_number_of_levels(gpus):
    from accelsim.arch import MemoryLevel

    a100 = gpus["a100-sxm"]
    smem, l2 = a100.chip.levels
    half = MemoryLevel("L2-partition", 20 * 2**20, l2.bandwidth_Bps / 2, 54)
    three = dataclasses.replace(a100, chip=dataclasses.replace(a100.chip,
                                                               levels=(smem, half, l2)))
    g3 = gemm_time(three, 8192, 8192, 8192, "bf16")
    g2 = gemm_time(a100, 8192, 8192, 8192, "bf16")
    assert [name for name, _ in g3.level_s] == ["smem", "L2-partition", "L2"]
    assert g3.memory_bytes == pytest.approx(g2.memory_bytes)  # same outermost level
    assert g3.time_s >= g2.time_s * (1 - 1e-12)  # an extra level can only add a bound
    with pytest.raises(ValueError, match="does not divide"):
        dataclasses.replace(a100.chip, levels=(MemoryLevel("x", 1024, 1e9, 7),))


@pytest.mark.parametrize("e", [24, 32])
def test_huge_gemms_do_not_wrap(e):
    """M = N = K = 2^24 gave "-8191.67x compulsory" traffic and 870 TFLOP/s, 2^32 10^22 TFLOP/s
    (int64 byte and cycle products wrapped): the kernel formula stays physical at any size;
    gemm_time refuses such a GEMM on one chip: its operands do not fit its memory."""
    from accelsim.errors import Infeasible
    from accelsim.perf.gemm import gemm_kernel_time

    system = load_system(REPO / "arch_configs" / "h100-sxm.toml")
    need = 3 * 2 * 4**e  # (MK + KN + MN) x 2 bytes
    with pytest.raises(Infeasible, match=f"needs {need:,} bytes .* more than the "
                                         f"{80 * 2**30:,} bytes \\(80 GiB\\) of one chip"):
        gemm_time(system, 2**e, 2**e, 2**e, "bf16")
    g = gemm_kernel_time(system, 2**e, 2**e, 2**e, "bf16")
    peak = system.chip.peak_flops("bf16")
    assert g.compulsory_bytes == 3 * 2 * 4**e  # (MK + KN + MN) x 2 bytes, exactly
    assert g.memory_bytes >= g.compulsory_bytes
    assert 0 < g.flops / g.time_s <= peak
    assert g.time_s >= g.flops / peak and g.bound != "latency"
    # the same tile and waves as at 2^20, scaled: time grows with the FLOPs (x 2^(3 (e - 20)))
    small = gemm_kernel_time(system, 2**20, 2**20, 2**20, "bf16")
    assert g.time_s / small.time_s == pytest.approx(2 ** (3 * (e - 20)), rel=0.01)
