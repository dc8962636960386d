"""Winograd convolution algorithms (accelsim.perf.winograd) and the per-layer algorithm choice.

The transform matrices are checked against direct correlation in exact Fraction arithmetic;
the multiply count against the direct count; the choice on real layers: one where Winograd wins
(V100 FP32, as cuDNN benchmark mode picks it) and ones where it does not apply or loses."""

import dataclasses
import json
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest

from accelsim.arch.config import load_system
from accelsim.perf.gemm import FITTED
from accelsim.perf.layer_model import Mapping, evaluate_layer
from accelsim.perf.winograd import (
    MATRICES,
    TILES,
    WINOGRAD_PRECISIONS,
    applies,
    plan,
    transform_ops,
    winograd_time,
)
from accelsim.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
WL = load_workload(ROOT / "workloads" / "resnet50.toml")
LAYERS = {ly.name: ly for ly in WL.layers}


def _mat(a, b):
    return [[sum(Fr(x) * Fr(y) for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def _t(a):
    return [list(r) for r in zip(*a)]


@pytest.mark.parametrize("m", TILES)
def test_transforms_compute_the_direct_2d_correlation_exactly(m):
    rng = np.random.default_rng(m)
    a = m + 2
    d = rng.integers(-9, 10, (a, a)).tolist()
    g = rng.integers(-9, 10, (3, 3)).tolist()
    M = MATRICES[m]
    u = _mat(_mat(M["G"], g), _t(M["G"]))  # G g G^T
    v = _mat(_mat(M["BT"], d), _t(M["BT"]))  # B^T d B
    y = _mat(_mat(M["AT"], [[x * z for x, z in zip(r1, r2)] for r1, r2 in zip(u, v)]),
             _t(M["AT"]))
    direct = [[sum(d[i + p][j + q] * g[p][q] for p in range(3) for q in range(3))
               for j in range(m)] for i in range(m)]
    assert y == [[Fr(x) for x in row] for row in direct]


def test_transform_op_counts_match_lavin_and_gray_for_f2():
    # F(2x2, 3x3): data transform 32 additions, output transform 24 (Lavin & Gray 2016, 4.1)
    assert transform_ops(MATRICES[2]["BT"]) == 32
    assert transform_ops(MATRICES[2]["AT"]) == 24


@pytest.mark.parametrize("m, gain", [(2, Fr(9, 4)), (4, Fr(4))])
def test_multiplies_against_the_exact_direct_count(m, gain):
    layer = LAYERS["layer3.1.conv2"]  # 256 -> 256, 14 x 14 outputs, 3x3 stride 1
    batch = 8
    pl = plan(layer, batch, "fwd", m)
    wino = pl.count * pl.gemm_m * pl.gemm_n * pl.gemm_k
    tiles = batch * (-(-14 // m)) ** 2
    assert wino == (m + 2) ** 2 * tiles * 256 * 256
    # padded to whole tiles the direct convolution does 9 m^2 multiplies per tile and pair
    direct_padded = tiles * m * m * 9 * 256 * 256
    assert Fr(direct_padded, wino) == gain
    # the layer's own (unpadded) forward GEMM: M N K = batch 14 14 x 256 x 256 9
    g = layer.gemms(batch)["fwd"]
    assert g.M * g.N * g.K * g.count == batch * 14 * 14 * 256 * 256 * 9


def test_only_ungrouped_3x3_stride_1_convolutions_qualify():
    assert applies(LAYERS["layer3.1.conv2"], "fp16")
    assert not applies(LAYERS["layer3.0.conv2"], "fp16")  # stride 2
    assert not applies(LAYERS["layer3.1.conv1"], "fp16")  # 1x1
    with pytest.raises(ValueError, match="Winograd needs"):
        plan(LAYERS["layer3.0.conv2"], 8, "fwd", 2)
    with pytest.raises(ValueError, match="tile"):
        plan(LAYERS["layer3.1.conv2"], 8, "fwd", 3)


def _phases(system, name, precision, batch=112):
    m = [Mapping(1, 1, system.chip.cores, 1, "os")]
    r = evaluate_layer(system, LAYERS[name], batch, precision, m)
    return dict(zip(r["phase"], zip(r["algorithm"], r["time_s"])))


def test_fp32_on_v100_picks_winograd_and_it_is_faster():
    v100 = load_system(ROOT / "arch_configs" / "v100-sxm2.toml")
    assert v100.chip.winograd
    on = _phases(v100, "layer3.1.conv2", "fp32")
    off = _phases(v100.with_winograd(False), "layer3.1.conv2", "fp32")
    for phase in ("fwd", "bwd_data", "wgrad"):
        assert on[phase][0].startswith("winograd")
        assert off[phase][0] == "implicit_gemm"
        assert on[phase][1] < off[phase][1]
    # fused kernels exist for fwd/bwd_data only (cuDNN has no fused weight-gradient Winograd)
    assert on["wgrad"][0].endswith("nonfused")


def test_winograd_not_taken_where_it_does_not_apply_or_loses():
    a100 = load_system(ROOT / "arch_configs" / "a100-sxm.toml")
    for name in ("layer3.0.conv2", "layer3.1.conv1"):  # stride 2; 1x1
        on = _phases(a100, name, "fp16", 256)
        off = _phases(a100.with_winograd(False), name, "fp16", 256)
        assert {a for a, _ in on.values()} == {"implicit_gemm"}
        assert on == off
    # applies, but on tensor cores the transformed tensors' memory traffic makes it slower
    on = _phases(a100, "layer1.0.conv2", "fp16", 256)
    off = _phases(a100.with_winograd(False), "layer1.0.conv2", "fp16", 256)
    assert on["fwd"][0] == "implicit_gemm" and on["fwd"][1] == off["fwd"][1]


def test_winograd_is_off_by_default_and_for_the_hfp8_study():
    hfp8 = load_system(ROOT / "arch_configs" / "hfp8-64chip.toml")
    assert not hfp8.chip.winograd
    assert {a for a, _ in _phases(hfp8, "layer3.1.conv2", "fp16", 64).values()} == {
        "implicit_gemm"}
    # the per-core model has no Winograd: asking for it is an error, never silently ignored
    with pytest.raises(ValueError, match="hfp8-64chip.*chip.winograd needs a memory hierarchy"):
        _phases(hfp8.with_winograd(True), "layer3.1.conv2", "fp16", 64)


def test_winograd_on_without_a_hierarchy_is_rejected_in_config_and_cli(capsys):
    from accelsim.arch import ConfigError, read_toml, system_from_dict
    from accelsim.cli import main

    data = read_toml(ROOT / "arch_configs" / "v100-sxm2.toml")
    del data["chip"]["level"]
    with pytest.raises(ConfigError, match=r"^nolevels.toml: chip.winograd: needs a memory "
                                          r"hierarchy \(\[\[chip.level\]\]\)") as exc:
        system_from_dict(data, "nolevels.toml")
    assert exc.value.key == "chip.winograd" and "\n" not in str(exc.value)
    data["chip"]["winograd"] = False
    assert not system_from_dict(data, "ok.toml").chip.has_hierarchy  # off is fine
    hfp8 = str(ROOT / "arch_configs" / "hfp8-64chip.toml")
    argv = ["predict", "--system", hfp8, "--workload", "resnet50", "--batch", "8",
            "--winograd", "on", "--json"]
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert cap.out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "--winograd on" in err and hfp8 in err and "[[chip.level]]" in err
    # off stays accepted (it is what the chip does anyway) and the JSON says so
    assert main(argv[:-2] + ["off", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["winograd"] == "off"


def _with_rate(system, precision, rate):
    core = dataclasses.replace(system.chip.core,
                               mac_rates=system.chip.core.mac_rates + ((precision, rate),))
    return dataclasses.replace(system, chip=dataclasses.replace(system.chip, core=core))


def test_winograd_only_in_the_precisions_cudnn_runs_it():
    assert WINOGRAD_PRECISIONS == ("fp32", "tf32", "fp16")
    h100 = load_system(ROOT / "arch_configs" / "h100-sxm.toml")
    h100 = _with_rate(h100, "hif8", h100.chip.core.macs_per_cycle_per_pe("fp8"))
    layer = LAYERS["layer1.0.conv2"]
    # in FP32 (the SIMT cores) the model picks Winograd for this layer's weight gradient, so
    # its absence in the 8-bit precisions below is the precision rule, not the timing (on the
    # tensor cores, FP16 included, a split-K implicit GEMM is faster)
    fp32 = _phases(h100, "layer1.0.conv2", "fp32", 256)
    assert fp32["wgrad"][0].startswith("winograd")
    for prec in ("fp8", "hfp8", "hif8", "int8", "bf16"):
        assert not applies(layer, prec)
        r = _phases(h100, "layer1.0.conv2", prec, 256)
        assert {a for a, _ in r.values()} == {"implicit_gemm"}, prec
        assert r == _phases(h100.with_winograd(False), "layer1.0.conv2", prec, 256)
        with pytest.raises(ValueError, match=f"Winograd does not run in '{prec}'"):
            winograd_time(h100.chip, layer, 256, "wgrad", prec, "os", 2, FITTED)


def test_fp8_resnet50_on_h100_stays_on_implicit_gemm():
    from accelsim.perf.layer_model import layer_table

    h100 = load_system(ROOT / "arch_configs" / "h100-sxm.toml")
    for scheme in ("fp8", "hfp8"):
        t = layer_table(h100, WL, 256, scheme)
        gemm = t[t.algorithm != ""]
        # under these schemes only the first and last layers run in FP16 (7x7 conv, fc): no
        # layer is both 3x3 stride 1 and in a Winograd precision
        assert set(gemm.algorithm) == {"implicit_gemm"}, scheme
        assert set(gemm.precision) <= {"fp8", "hfp8", "fp16"}


def test_winograd_setting_in_config_and_on_the_command_line(capsys):
    from accelsim.arch import ConfigError, read_toml, system_from_dict
    from accelsim.cli import main

    data = read_toml(ROOT / "arch_configs" / "v100-sxm2.toml")
    data["chip"]["winograd"] = "yes"
    with pytest.raises(ConfigError, match="bad.toml: chip.winograd"):
        system_from_dict(data, "bad.toml")
    del data["chip"]["winograd"]
    assert not system_from_dict(data, "ok.toml").chip.winograd  # opt-in
    out = {}
    for mode in ("on", "off"):
        argv = ["predict", "--system", str(ROOT / "arch_configs" / "v100-sxm2.toml"),
                "--workload", "resnet50", "--batch", "32", "--scheme", "fp32",
                "--winograd", mode, "--json"]
        assert main(argv) == 0
        out[mode] = json.loads(capsys.readouterr().out)
        assert out[mode]["winograd"] == mode
    # Winograd shortens the convolution phases; element-wise work is untouched
    assert out["on"]["fwd_s"] < out["off"]["fwd_s"]
    assert out["on"]["wgrad_s"] < out["off"]["wgrad_s"]
    assert out["on"]["elementwise_s"] == pytest.approx(out["off"]["elementwise_s"])
