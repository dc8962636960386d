"""Out-of-sample GPU presets (H100 PCIe, A100 PCIe 40GB, A40, H200 SXM): the same silicon as an
in-sample preset has the same per-SM numbers, the hierarchy loads as described, and no out-of-sample
measurement can reach the fit (scripts/fit_compute.py reads GEMM_CASES, GEMM_SWEEPS and
RESNET50_CASES only). Derived peaks vs the datasheets: tests/test_arch_presets.py
(DATASHEET_PEAKS covers these presets)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accelsim.arch import load_system
from accelsim.arch.schemes import get_scheme
from accelsim.perf import published
from accelsim.perf.published import DATASHEET_PEAKS, OOS_GEMM_CASES, OOS_GEMM_SWEEPS

REPO = Path(__file__).resolve().parents[1]
OOS_PRESETS = ("h100-pcie", "a100-pcie-40gb", "a40", "h200-sxm")


def _load(name):
    return load_system(REPO / "arch_configs" / f"{name}.toml")


@pytest.mark.parametrize("gpu", OOS_PRESETS)
def test_oos_preset_is_one_gpu_with_smem_and_shared_l2(gpu):
    s = _load(gpu)
    assert s.chips == 1 and s.topology == "single"
    (smem, l2) = s.chip.levels
    assert smem.shared_by == 1 and l2.shared_by == s.chip.cores
    assert l2.capacity_bytes > smem.capacity_bytes
    assert gpu in DATASHEET_PEAKS and gpu in published.DATASHEETS


def test_a100_pcie_is_the_sxm_chip_with_less_memory():
    pcie, sxm = _load("a100-pcie-40gb").chip, _load("a100-sxm").chip
    assert pcie.core == sxm.core and pcie.levels == sxm.levels and pcie.cores == sxm.cores
    assert pcie.memory_bandwidth_Bps == pytest.approx(1555e9)
    assert sxm.memory_bandwidth_Bps == pytest.approx(2039e9)


def test_h200_is_the_h100_sxm_compute_with_hbm3e():
    h200, h100 = _load("h200-sxm").chip, _load("h100-sxm").chip
    assert h200.core == h100.core and h200.levels == h100.levels and h200.cores == h100.cores
    assert h200.memory_bandwidth_Bps == pytest.approx(4.8e12)
    assert h100.memory_bandwidth_Bps == pytest.approx(3.35e12)


def test_h100_pcie_has_the_sxm_sm_at_its_own_count_and_clock():
    pcie, sxm = _load("h100-pcie").chip, _load("h100-sxm").chip
    same = ("rows", "cols", "scratchpad_bytes", "sfu_ops_per_cycle", "simt_precisions",
            "mac_rates")
    for f in same:
        assert getattr(pcie.core, f) == getattr(sxm.core, f), f
    assert (pcie.cores, sxm.cores) == (114, 132)
    # the clock is the one implied by each datasheet's dense BF16 peak: 756.5 and 989.4 TFLOPS
    for chip, dense in ((pcie, 1513 / 2), (sxm, 1979 / 2)):
        implied = dense * 1e12 / (chip.cores * chip.core.rows * chip.core.cols * 2)
        assert chip.core.frequency_Hz == pytest.approx(implied, rel=5e-4)


def test_a40_clock_is_implied_by_both_its_tensor_and_fp32_peaks():
    c = _load("a40").chip
    for prec, dense in (("fp16", 149.7e12), ("fp32", 37.4e12)):
        assert c.peak_flops(prec) == pytest.approx(dense, rel=1e-3)
    assert c.core.frequency_Hz == pytest.approx(1.74e9)


def test_oos_points_are_on_oos_presets_and_cite_their_run():
    systems = {c.system for c in (*OOS_GEMM_SWEEPS, *OOS_GEMM_CASES)}
    assert set(OOS_PRESETS) <= systems
    for c in (*OOS_GEMM_SWEEPS, *OOS_GEMM_CASES):
        assert (c.system in OOS_PRESETS) != c.chip_in_fit, c.case
        assert ("torch-performance-test-data issue #" in c.source
                or "Maximum Achievable Matmul FLOPS" in c.source), c.case
        assert c.value > 0 and f"{c.m}" in c.case.replace("^3", "").split()[-1]
        # no measurement above the preset's datasheet peak (a unit or precision mix-up would be)
        sysm = _load(c.system)
        assert c.value * 1e12 < sysm.chip.peak_flops(get_scheme(c.scheme).compute_precision)


def test_fit_never_reads_the_out_of_sample_points():
    fit_src = (REPO / "scripts" / "fit_compute.py").read_text(encoding="utf-8")
    names = {n.id for n in ast.walk(ast.parse(fit_src)) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(ast.parse(fit_src)) if isinstance(n, ast.ImportFrom)
              for a in n.names}
    assert "OOS_GEMM_SWEEPS" not in names
    fitted = {c.system for c in (*published.GEMM_CASES, *published.GEMM_SWEEPS,
                                 *published.RESNET50_CASES)}
    assert not fitted & set(OOS_PRESETS)
    assert not any(isinstance(c, published.OutOfSample) for c in
                   (*published.GEMM_CASES, *published.GEMM_SWEEPS, *published.RESNET50_CASES))
