"""`accelsim gemm` / `accelsim predict`: the JSON keys external scripts rely on, kernel fusion,
the precision policy, and workloads without parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.arch import load_system
from accelsim.cli import main
from accelsim.perf.precision import layer_precisions
from accelsim.engine.layers import phase_sums
from accelsim.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
A100 = str(REPO / "arch_configs" / "a100-sxm.toml")
V100 = str(REPO / "arch_configs" / "v100-sxm2.toml")
ONE_GEMM = """
[workload]
name = "one-gemm"

[[layer]]
name = "mm"
kind = "matmul"
m = 4096
n = 4096
k = 4096
"""


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_gemm_command_json(capsys):
    d = _json(capsys, ["gemm", "--system", A100, "--m", "4096", "--n", "4096", "--k", "4096",
                       "--scheme", "bf16", "--json"])
    assert {"time_s", "tflops", "bound"} <= set(d)
    assert d["bound"] in ("compute", "memory", "latency", "smem", "L2")
    assert d["tflops"] == pytest.approx(2 * 4096**3 / d["time_s"] / 1e12)
    assert d["tflops"] < d["peak_tflops"]


def test_predict_command_json_and_both_fusion_modes(capsys):
    out = {}
    for mode in ("on", "off"):
        out[mode] = _json(capsys, ["predict", "--system", A100, "--workload", "resnet50",
                                   "--batch", "64", "--scheme", "fp16", "--fusion", mode,
                                   "--json"])
        assert {"samples_per_s", "step_time_s", "tflops", "memory_GiB"} <= set(out[mode])
        assert out[mode]["fusion"] == mode
        assert out[mode]["samples_per_s"] == pytest.approx(64 / out[mode]["step_time_s"])
    # fusion removes element-wise traffic and kernels, never GEMM work
    assert out["on"]["elementwise_s"] < out["off"]["elementwise_s"]
    assert out["on"]["launch_s"] < out["off"]["launch_s"]
    assert out["on"]["wgrad_s"] == pytest.approx(out["off"]["wgrad_s"])
    assert out["on"]["step_time_s"] < out["off"]["step_time_s"]
    # default on a chip with a memory hierarchy: what frameworks do (fused)
    d = _json(capsys, ["predict", "--system", A100, "--workload", "resnet50", "--batch", "64",
                       "--json"])
    assert d["fusion"] == "on" and d["step_time_s"] == pytest.approx(out["on"]["step_time_s"])


def test_scheme_without_a_rate_is_a_one_line_error(capsys):
    assert main(["predict", "--system", V100, "--workload", "resnet50", "--batch", "8",
                 "--scheme", "bf16"]) == 2
    err = capsys.readouterr().err
    assert V100 in err and "bf16" in err and "Traceback" not in err


def test_matmul_only_workload_predicts_and_first_last_policy_switches(tmp_path, capsys):
    wl_path = tmp_path / "one.toml"
    wl_path.write_text(ONE_GEMM)
    base = ["predict", "--system", str(REPO / "arch_configs" / "h100-sxm.toml"), "--workload",
            str(wl_path), "--batch", "1", "--scheme", "fp8", "--json"]
    high = _json(capsys, base)  # fp8 keeps the first/last GEMM in FP16 by default
    low = _json(capsys, base + ["--first-last-high", "off"])
    assert low["step_time_s"] < high["step_time_s"]
    wl = load_workload(wl_path)
    assert wl.n_params == 0
    from accelsim.arch.schemes import with_policy
    assert layer_precisions(wl, "fp8") == {"mm": "fp16"}
    assert layer_precisions(wl, with_policy("fp8", first_last_high=False)) == {"mm": "fp8"}
    assert layer_precisions(wl, with_policy("fp16", overrides={"mm": "fp8"})) == {"mm": "fp8"}


def test_override_of_an_unknown_layer_names_file_and_layer(tmp_path, capsys):
    wl_path = tmp_path / "one.toml"
    wl_path.write_text(ONE_GEMM)
    assert main(["predict", "--system", A100, "--workload", str(wl_path), "--batch", "1",
                 "--precision-override", "fc9=fp16"]) == 2
    err = capsys.readouterr().err
    assert str(wl_path) in err and "'fc9'" in err


def test_fusion_keeps_gemm_time_and_cuts_elementwise_traffic():
    wl = load_workload(REPO / "workloads" / "resnet50.toml")
    s = load_system(A100)
    on = phase_sums(s.with_fusion(True), wl, 32, "fp16")
    off = phase_sums(s.with_fusion(False), wl, 32, "fp16")
    assert on.wgrad_s == pytest.approx(off.wgrad_s)
    assert on.elementwise_s < 0.6 * off.elementwise_s
    assert on.flops == off.flops and on.memory_bytes == off.memory_bytes


def test_fusion_is_a_no_op_without_the_switch_on_the_hfp8_system():
    from accelsim.perf.layer_model import layer_table

    s = load_system(REPO / "arch_configs" / "rapid-1chip.toml")
    wl = load_workload(REPO / "workloads" / "tiny-cnn.toml")
    assert not s.chip.fusion
    a = layer_table(s, wl, 4, "fp16")
    assert (a["latency_s"] == 0).all() and (a["cache_s"] == 0).all()


@pytest.mark.parametrize("config", ["rapid-1chip", "dgx-a100"])
def test_training_step_of_a_workload_without_weights(tmp_path, config):
    from accelsim.dse.training import training_step
    from accelsim.engine.schedule import TrainingParams

    wl_path = tmp_path / "one.toml"
    wl_path.write_text(ONE_GEMM)
    s = load_system(REPO / "arch_configs" / f"{config}.toml")
    st = training_step(s, load_workload(wl_path), "fp8", TrainingParams(minibatch=s.chips))
    assert st.comm_s == 0.0 and st.step_s > 0


def test_memory_grows_linearly_with_batch_above_the_model_state():
    wl = load_workload(REPO / "workloads" / "resnet50.toml")
    s = load_system(A100)
    m = [phase_sums(s, wl, b, "fp16").memory_bytes for b in (8, 16, 32)]
    assert m[2] - m[1] == pytest.approx(2 * (m[1] - m[0]))
    state = m[0] - (m[1] - m[0])  # the batch-independent part: weights, gradients, optimizer
    # fp16: compute weight + gradient + master weight + momentum, 2 bytes each
    assert state == pytest.approx(wl.n_params * 8)


def test_nchw_layout_costs_transposes_on_the_array_only():
    wl = load_workload(REPO / "workloads" / "resnet50.toml")
    a100 = load_system(A100)
    nhwc = phase_sums(a100, wl, 16, "tf32")
    nchw = phase_sums(a100.with_layout("nchw"), wl, 16, "tf32")
    assert nchw.compute_s > nhwc.compute_s and nchw.flops == nhwc.flops
    assert nchw.elementwise_s == pytest.approx(nhwc.elementwise_s)
    v100 = load_system(V100)  # FP32 runs on the CUDA cores: NCHW is native, no transposes
    assert phase_sums(v100.with_layout("nchw"), wl, 16, "fp32").compute_s == pytest.approx(
        phase_sums(v100, wl, 16, "fp32").compute_s)


def test_policy_file_is_strict_and_applies(tmp_path, capsys):
    from accelsim.arch import ConfigError
    from accelsim.arch.config import load_policy

    wl_path = tmp_path / "one.toml"
    wl_path.write_text(ONE_GEMM)
    good = tmp_path / "policy.toml"
    good.write_text('[policy]\nfirst_last_high = false\n[policy.layers]\nmm = "bf16"\n')
    sc = load_policy(good, "fp8")
    assert not sc.first_last_fp16 and dict(sc.layer_overrides) == {"mm": "bf16"}
    assert layer_precisions(load_workload(wl_path), sc) == {"mm": "bf16"}
    for text, key in (('[policy]\nfirst_last_high = "no"\n', "policy.first_last_high"),
                      ('[policy.layers]\nmm = "fp7"\n', "policy.layers.mm"),
                      ('[policy]\nhigh = "fp16"\n', "policy.high")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=f"bad.toml: {key}"):
            load_policy(bad, "fp8")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[policy.layers]\nfc1000 = "fp16"\n')
    assert main(["predict", "--system", A100, "--workload", str(wl_path), "--batch", "1",
                 "--policy", str(unknown)]) == 2
    err = capsys.readouterr().err
    assert str(unknown) in err and "'fc1000'" in err and str(wl_path) in err


@pytest.mark.parametrize("scheme, noted", [("fp32", False), ("fp16", False), ("fp8", True)])
def test_slow_datapath_note_only_for_a_narrower_scheme(capsys, scheme, noted):
    # V100 has no FP8 rate above FP16: fp8 earns the note; fp32 (wider than the fp16 default
    # high precision) must not be told about "smaller tensors"
    assert main(["predict", "--system", V100, "--workload", "resnet50", "--batch", "8",
                 "--scheme", scheme, "--json"]) == 0
    err = capsys.readouterr().err
    assert ("no faster than" in err) is noted
