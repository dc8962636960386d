"""The one kernel-time formula (accelsim.perf.kernel) and its two users: element-wise layers
(accelsim.perf.layer_model) and the Winograd kernels (accelsim.perf.winograd). Expected values
are written out by hand from the formula, max(terms) + launch, not re-derived by the code."""

from pathlib import Path

import numpy as np
import pytest

from accelsim.arch.config import load_system
from accelsim.perf.gemm import FITTED, OPERAND_BYTES, chip_gemm_time, gemm_time
from accelsim.perf.kernel import kernel_time
from accelsim.perf.layer_model import Mapping, evaluate_layer
from accelsim.perf.winograd import TILES, fused_time, nonfused_time, plan
from accelsim.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {ly.name: ly for ly in load_workload(ROOT / "workloads" / "resnet50.toml").layers}
H100 = load_system(ROOT / "arch_configs" / "h100-sxm.toml")
V100 = load_system(ROOT / "arch_configs" / "v100-sxm2.toml")


def test_kernel_time_is_the_largest_stream_plus_the_launch():
    t, b = kernel_time({"sfu": [3.0, 1.0, 2.0, 0.5], "memory": [1.0, 4.0, 2.0, 0.25]}, 1.0)
    assert t.tolist() == [4.0, 5.0, 3.0, 1.5]
    # the first-named term wins a tie; the launch names the bound when it exceeds every term
    assert b.tolist() == ["sfu", "memory", "sfu", "latency"]
    t, b = kernel_time({"compute": 2.0, "memory": 1.0, "cache": 3.0}, 0.0)
    assert float(t) == 3.0 and b.tolist() == "cache"
    with pytest.raises(ValueError, match="at least one term"):
        kernel_time({}, 1.0)


def test_elementwise_rows_follow_the_kernel_formula():
    layer = LAYERS["layer1.0.bn1"]
    m = [Mapping(1, 1, H100.chip.cores, 1, "os")]
    r = evaluate_layer(H100, layer, 256, "fp16", m, efficiency=FITTED)
    for i in range(len(r["phase"])):
        sfu, mem, lat = r["sfu_s"][i], r["memory_s"][i], r["latency_s"][i]
        assert lat == H100.chip.kernel_launch_s
        assert r["time_s"][i] == max(sfu, mem) + lat
        assert r["bound"][i] == ("latency" if lat > max(sfu, mem)
                                 else "sfu" if sfu >= mem else "memory")


def _gemm(chip, pl, precision):
    return chip_gemm_time(chip, pl.gemm_m, pl.gemm_n, pl.gemm_k, pl.count, precision, "os",
                          out_bytes=OPERAND_BYTES[precision], efficiency=FITTED)


@pytest.mark.parametrize("name, batch", [("layer1.0.conv2", 256), ("layer4.1.conv2", 4)])
@pytest.mark.parametrize("m", TILES)
def test_nonfused_is_transforms_then_gemm_and_its_bound_is_the_slower_ones(name, batch, m):
    chip, b = H100.chip, 2
    pl = plan(LAYERS[name], batch, "wgrad", m)
    g = _gemm(chip, pl, "fp16")
    t, terms = nonfused_time(chip, pl, g, b, 4, FITTED)
    # by hand: the three transform kernels' summed work as one stream, three launches
    trans_bytes = (sum(pl.in_elems) + sum(pl.in_transformed) + pl.out_transformed) * b \
        + pl.out_elems * 4
    sfu = pl.transform_ops / chip.sfu_ops_per_s
    mem = trans_bytes / (chip.memory_bandwidth_Bps * FITTED.memory_efficiency)
    trans = max(sfu, mem) + 3 * chip.kernel_launch_s
    gemm = gemm_time(H100, pl.gemm_m, pl.gemm_n, pl.gemm_k, "fp16", count=pl.count,
                     dataflow="os")
    assert gemm.time_s == pytest.approx(float(g["time_s"][0]), rel=1e-12)
    assert t == pytest.approx(trans + gemm.time_s, rel=1e-12)
    assert terms["sfu_s"] == pytest.approx(sfu, rel=1e-12)
    assert terms["latency_s"] == 4 * chip.kernel_launch_s
    if trans > gemm.time_s:
        want = "latency" if 3 * chip.kernel_launch_s > max(sfu, mem) else (
            "sfu" if sfu >= mem else "memory")
    else:
        want = "cache" if gemm.bound in {lv.name for lv in chip.levels} else gemm.bound
    assert terms["bound"] == want


def test_nonfused_bound_names_the_slower_component_in_both_regimes():
    # V100 FP32 (CUDA-core rate): the batched GEMM dominates; H100 FP16 at batch 1: the
    # transform kernels dominate (their three launches); the label follows whichever is slower
    seen = set()
    for system, prec, name, batch in ((V100, "fp32", "layer3.1.conv2", 112),
                                      (H100, "fp16", "layer4.1.conv2", 1)):
        b = OPERAND_BYTES[prec]
        pl = plan(LAYERS[name], batch, "fwd", 4)
        g = _gemm(system.chip, pl, prec)
        t, terms = nonfused_time(system.chip, pl, g, b, b, FITTED)
        gemm_s = float(g["time_s"][0])
        if gemm_s >= t - gemm_s:
            seen.add("gemm")
            assert terms["bound"] == "compute"
        else:
            seen.add("transforms")
            assert terms["bound"] == "latency"
    assert seen == {"gemm", "transforms"}


def test_fused_is_one_kernel_over_compute_memory_and_levels():
    chip = V100.chip  # FP32 runs on the CUDA cores (simt): the fused algorithm applies
    pl = plan(LAYERS["layer3.1.conv2"], 112, "fwd", 2)
    g = _gemm(chip, pl, "fp32")
    t, terms = fused_time(chip, pl, g, 4, 4, FITTED)
    comp = float(g["compute_s"][0]) + pl.transform_ops / chip.sfu_ops_per_s
    mem = (sum(pl.in_elems) + pl.out_elems) * 4 / (chip.memory_bandwidth_Bps
                                                   * FITTED.memory_efficiency)
    lev = max(float(g[f"level_{lv.name}_s"][0]) for lv in chip.levels)
    assert t == pytest.approx(max(comp, mem, lev) + chip.kernel_launch_s, rel=1e-12)
    want = max((comp, "compute"), (mem, "memory"), (lev, "cache"))[1]
    assert terms["bound"] == want and np.isclose(terms["compute_s"], comp)
