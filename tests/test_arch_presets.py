"""GPU presets: derived peaks equal the datasheets', the hierarchy and the DGX fabric load as
described (every number is sourced in the files; tests/test_arch_config.py checks the comments)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.arch import load_system
from accelsim.perf.published import DATASHEET_PEAKS, datasheet_tolerance

REPO = Path(__file__).resolve().parents[1]
PEAKS = [(s, p, v) for s, d in DATASHEET_PEAKS.items() for p, v in d.items()]


def _load(name):
    return load_system(REPO / "arch_configs" / f"{name}.toml")


@pytest.mark.parametrize("system,precision,printed", PEAKS,
                         ids=[f"{s}-{p}" for s, p, _ in PEAKS])
def test_preset_peak_equals_datasheet(system, precision, printed):
    figure, divisor = printed
    derived = _load(system).chip.peak_flops(precision) / 1e12
    assert abs(derived - float(figure) / divisor) <= datasheet_tolerance(figure, divisor)


@pytest.mark.parametrize("gpu", ["v100-sxm2", "a100-sxm", "h100-sxm"])
def test_gpu_presets_have_smem_and_shared_l2(gpu):
    s = _load(gpu)
    assert s.chips == 1 and s.topology == "single"
    (smem, l2) = s.chip.levels
    assert smem.shared_by == 1 and l2.shared_by == s.chip.cores
    assert l2.capacity_bytes > smem.capacity_bytes
    assert s.chip.kernel_launch_s > 0 and not s.chip.fusion


def test_missing_precision_rate_is_an_error_naming_it():
    v100 = _load("v100-sxm2").chip.core
    assert not v100.supports("bf16")
    with pytest.raises(ValueError, match="bf16"):
        v100.macs_per_cycle_per_pe("bf16")


@pytest.mark.parametrize("box,gpu,nvlink_GBps,ib_GBps",
                         [("dgx-a100", "a100-sxm", 300, 25), ("dgx-h100", "h100-sxm", 450, 50),
                          ("dgx-h800", "h100-sxm", 200, 50)])
def test_dgx_is_eight_gpus_on_one_switch_with_ib_per_gpu(box, gpu, nvlink_GBps, ib_GBps):
    from accelsim.netsim.system import system_graph

    s = _load(box)
    assert s.chip == _load(gpu).chip  # the same GPU as the single-GPU preset
    assert (s.chips, s.boards, s.chips_per_board, s.topology) == (8, 1, 8, "switch")
    assert s.link.chip_bandwidth_Bps == pytest.approx(nvlink_GBps * 1e9)
    assert s.inter_board_link.chip_bandwidth_Bps == pytest.approx(ib_GBps * 1e9)
    g = system_graph(s)
    chips = [n for n, d in g.nodes(data=True) if d.get("kind") == "chip"]
    assert len(chips) == 8
    # every GPU has one full-bandwidth port into the switch: any pair is two hops at the
    # port's rate times the fabric's achievable fraction, each hop half the GPU-to-GPU latency
    for c in chips:
        (nbr,) = list(g.neighbors(c))
        assert g.nodes[nbr]["kind"] == "switch"
        assert g.edges[c, nbr]["bandwidth_Bps"] == pytest.approx(
            nvlink_GBps * 1e9 * s.network_efficiency)
        assert g.edges[c, nbr]["latency_s"] == pytest.approx(s.link.latency_s / 2)
