"""`accelsim predict --workload model.onnx` and `model_flops_per_iteration` in `predict --json`.

The reference is a hand count from the shapes written below, never the code: model FLOPs of
one iteration = 3 (forward + backward) x 2 (a multiply-add) x the forward multiply-adds of
every GEMM / conv, for the whole global batch (--batch per chip x the system's chips), no
recomputation. Graphs are built here with onnx.helper (nothing downloaded)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import onnx  # the optional extra; the test extra installs it
from onnx import TensorProto, helper, numpy_helper

from accelsim.cli import main
from accelsim.workload.onnx_import import load_onnx

REPO = Path(__file__).resolve().parents[1]
A100 = str(REPO / "arch_configs" / "a100-sxm.toml")      # 1 chip
DGX_H100 = str(REPO / "arch_configs" / "dgx-h100.toml")  # 8 chips


def _w(name, *shape):
    return numpy_helper.from_array(np.full(shape, 0.01, dtype=np.float32), name)


def _vi(name, *shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _save(tmp_path, name, nodes, inputs, outputs, inits) -> str:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return str(path)


def _predict(capsys, system, workload, batch, *extra) -> dict:
    assert main(["predict", "--system", system, "--workload", workload, "--batch", str(batch),
                 "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys, system, workload, batch) -> str:
    assert main(["predict", "--system", system, "--workload", workload, "--batch",
                 str(batch)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def mlp(tmp_path) -> str:
    """64 -> 48 (Gemm, transB) -> ReLU -> 32 (MatMul + bias Add) -> ReLU -> 10 (Gemm)."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], name="fc1", transB=1),
             helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
             helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="fc2"),
             helper.make_node("Add", ["h2", "b2"], ["h3"], name="fc2_bias"),
             helper.make_node("Relu", ["h3"], ["a2"], name="relu2"),
             helper.make_node("Gemm", ["a2", "w3", "b3"], ["y"], name="fc3")]
    inits = [_w("w1", 48, 64), _w("b1", 48), _w("w2", 48, 32), _w("b2", 32), _w("w3", 32, 10),
             _w("b3", 10)]
    return _save(tmp_path, "mlp", nodes, [_vi("x", "N", 64)], [_vi("y", "N", 10)], inits)


MLP_MACS = 64 * 48 + 48 * 32 + 32 * 10  # per sample


def convnet(tmp_path) -> str:
    """3x16x16 -> conv 3x3 pad 1 (8) -> ReLU -> maxpool 2/2 -> conv 3x3 pad 0 (16) -> ReLU ->
    flatten -> Gemm 576 -> 10."""
    nodes = [helper.make_node("Conv", ["x", "c1", "c1b"], ["a"], name="conv1",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="relu1"),
             helper.make_node("MaxPool", ["b"], ["c"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["c", "c2"], ["d"], name="conv2", kernel_shape=[3, 3]),
             helper.make_node("Relu", ["d"], ["e"], name="relu2"),
             helper.make_node("Flatten", ["e"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="fc", transB=1)]
    inits = [_w("c1", 8, 3, 3, 3), _w("c1b", 8), _w("c2", 16, 8, 3, 3), _w("fc", 10, 576),
             _w("fcb", 10)]
    return _save(tmp_path, "cnn", nodes, [_vi("x", "N", 3, 16, 16)], [_vi("y", "N", 10)], inits)


# conv1: 16x16 outputs x 8 filters x (3 channels x 3 x 3) taps; pool -> 8x8;
# conv2 (no padding): 6x6 outputs x 16 filters x (8 x 3 x 3); fc: 16 x 6 x 6 = 576 -> 10
CNN_MACS = 16 * 16 * 8 * 27 + 6 * 6 * 16 * 72 + 576 * 10


def attention(tmp_path) -> str:
    """One self-attention block as PyTorch exports it: LayerNorm, Q/K/V projections, heads
    split by Reshape/Transpose, Q.K^T, the 1/sqrt(d) scale (Div), Softmax, P.V, heads merged,
    output projection, residual Add. T = 8 tokens, D = 32, H = 4 heads of d = 8."""
    T, D, H, d = 8, 32, 4, 8
    shape_in = numpy_helper.from_array(np.array([0, T, H, d], dtype=np.int64), "split")
    shape_out = numpy_helper.from_array(np.array([0, T, D], dtype=np.int64), "merge")
    # the scale as a Constant node, as torch.onnx writes it
    scale = numpy_helper.from_array(np.array(np.sqrt(d), dtype=np.float32), "sqrt_d_value")
    nodes = [helper.make_node("Constant", [], ["sqrt_d"], name="sqrt_d", value=scale),
             helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], name="ln", axis=-1)]
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["n", f"w{p}"], [f"{p}0"], name=f"proj_{p}"),
                  helper.make_node("Reshape", [f"{p}0", "split"], [f"{p}1"], name=f"split_{p}"),
                  helper.make_node("Transpose", [f"{p}1"], [f"{p}2"], name=f"heads_{p}",
                                   perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q2", "k2"], ["s0"], name="scores"),
              helper.make_node("Div", ["s0", "sqrt_d"], ["s1"], name="scale"),
              helper.make_node("Softmax", ["s1"], ["p"], name="softmax", axis=-1),
              helper.make_node("MatMul", ["p", "v2"], ["o0"], name="pv"),
              helper.make_node("Transpose", ["o0"], ["o1"], name="merge_heads",
                               perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["o1", "merge"], ["o2"], name="merge"),
              helper.make_node("MatMul", ["o2", "wo"], ["o3"], name="proj_o"),
              helper.make_node("Add", ["o3", "x"], ["y"], name="residual")]
    inits = [_w("g", D), _w("b", D), _w("wq", D, D), _w("wk", D, D), _w("wv", D, D),
             _w("wo", D, D), shape_in, shape_out]
    return _save(tmp_path, "attn", nodes, [_vi("x", "N", T, D)], [_vi("y", "N", T, D)], inits)


# per sample: 4 projections of T x D x D, and per head Q.K^T (T x T x d) and P.V (T x d x T)
ATTN_MACS = 4 * 8 * 32 * 32 + 4 * (8 * 8 * 8 + 8 * 8 * 8)


@pytest.mark.parametrize("build, macs", [(mlp, MLP_MACS), (convnet, CNN_MACS),
                                         (attention, ATTN_MACS)], ids=["mlp", "cnn", "attn"])
def test_onnx_model_flops_exact(tmp_path, capsys, build, macs):
    path = build(tmp_path)
    out = _predict(capsys, A100, path, 4)
    assert out["workload"] == Path(path).stem and out["batch"] == 4
    assert out["model_flops_per_iteration"] == 6 * 4 * macs
    assert out["step_time_s"] > 0 and out["samples_per_s"] == pytest.approx(4 / out["step_time_s"])


def test_attention_pattern_maps_to_linear_and_matmul_layers(tmp_path):
    wl = load_onnx(attention(tmp_path), 2)
    assert [(x.name, x.kind) for x in wl.layers] == [
        ("ln", "layernorm"), ("proj_q", "linear"), ("proj_k", "linear"), ("proj_v", "linear"),
        ("scores", "matmul"), ("softmax", "softmax"), ("pv", "matmul"), ("proj_o", "linear"),
        ("residual", "add")]
    scores, pv = wl.layer("scores"), wl.layer("pv")
    assert (scores.m, scores.n, scores.k, scores.count) == (8, 8, 8, 4)   # T x T over d, H heads
    assert (pv.m, pv.n, pv.k, pv.count) == (8, 8, 8, 4)                   # T x d over T
    assert wl.layer("proj_q").tokens == 8 and not wl.layer("proj_q").bias


def test_model_flops_key_is_documented():
    text = (REPO / "docs" / "workloads.md").read_text()
    assert "`model_flops_per_iteration`" in text and "3 x 2 x the forward multiply-adds" in text


def test_batch_sets_the_symbolic_dimension_and_the_global_batch(tmp_path, capsys):
    path = mlp(tmp_path)
    assert _predict(capsys, A100, path, 3)["model_flops_per_iteration"] == 6 * 3 * MLP_MACS
    # 8 chips data parallel at --batch 5 each: a global batch of 40
    out = _predict(capsys, DGX_H100, path, 5, "--scheme", "bf16")
    assert out["chips"] == 8
    assert out["model_flops_per_iteration"] == 6 * 40 * MLP_MACS


def test_a_graph_with_a_fixed_batch_takes_only_that_batch(tmp_path, capsys):
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)]
    path = _save(tmp_path, "fixed", nodes, [_vi("x", 4, 16)], [_vi("y", 4, 8)], [_w("w", 8, 16)])
    assert _predict(capsys, A100, path, 4)["model_flops_per_iteration"] == 6 * 4 * 16 * 8
    err = _error(capsys, A100, path, 2)
    assert "fixed.onnx" in err and "input(x)" in err and "batch 2" in err


def test_unsupported_op_is_one_line_naming_op_and_node(tmp_path, capsys):
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
             helper.make_node("Sigmoid", ["h"], ["y"], name="gate")]
    path = _save(tmp_path, "sig", nodes, [_vi("x", "N", 16)], [_vi("y", "N", 8)],
                 [_w("w", 8, 16)])
    err = _error(capsys, A100, path, 2)
    assert "sig.onnx" in err and "node[1](gate)" in err and "'Sigmoid'" in err


def test_a_scale_that_is_not_a_gemm_epilogue_is_refused(tmp_path, capsys):
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Mul", ["h", "two"], ["y"], name="double")]
    path = _save(tmp_path, "mul", nodes, [_vi("x", "N", 16)], [_vi("y", "N", 16)], [two])
    err = _error(capsys, A100, path, 2)
    assert "node[1](double)" in err and "'Mul'" in err and "constant scalar" in err


def test_missing_onnx_package_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    path = mlp(tmp_path)
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    err = _error(capsys, A100, path, 2)
    assert "pip install 'accelsim[onnx]'" in err


TOML = """
[workload]
name = "small"

[[layer]]
name = "conv"
kind = "conv"
in_channels = 3
out_channels = 4
in_hw = [10, 10]
kernel = [3, 3]
stride = [2, 2]
padding = [1, 1]

[[layer]]
name = "relu"
kind = "relu"
shape = [4, 5, 5]

[[layer]]
name = "fc"
kind = "linear"
in_features = 100
out_features = 7

[[layer]]
name = "att"
kind = "matmul"
m = 6
n = 5
k = 3
count = 2
"""


def test_toml_and_scalesim_workloads_report_model_flops(tmp_path, capsys):
    path = tmp_path / "small.toml"
    path.write_text(TOML)
    # conv: (10 + 2 - 3) // 2 + 1 = 5 -> 5 x 5 outputs x 4 filters x 27 taps; fc 100 x 7;
    # matmul 2 x (6 x 5 x 3)
    macs = 5 * 5 * 4 * 27 + 100 * 7 + 2 * 6 * 5 * 3
    assert _predict(capsys, A100, str(path), 3)["model_flops_per_iteration"] == 6 * 3 * macs
    csv = tmp_path / "topo.csv"
    csv.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                   "Channels, Num Filter, Strides,\n"
                   "c1, 9, 9, 3, 3, 2, 4, 2,\n"
                   "c2, 4, 4, 2, 2, 4, 6, 1,\n")
    # SCALE-Sim's output size, no padding: ceil((9 - 3 + 2) / 2) = 4, ceil((4 - 2 + 1) / 1) = 3
    macs = 4 * 4 * 4 * (3 * 3 * 2) + 3 * 3 * 6 * (2 * 2 * 4)
    assert _predict(capsys, A100, str(csv), 2)["model_flops_per_iteration"] == 6 * 2 * macs


def test_transformer_workload_reports_model_flops(tmp_path, capsys):
    path = tmp_path / "gpt.toml"
    L, h, a, s, V = 2, 64, 4, 32, 100
    assert main(["workload", "gpt", "--layers", str(L), "--hidden", str(h), "--heads", str(a),
                 "--seq", str(s), "--vocab", str(V), "--no-causal", "--out", str(path)]) == 0
    capsys.readouterr()
    out = _predict(capsys, DGX_H100, str(path), 2, "--scheme", "bf16")
    B = 2 * 8  # micro-batch 2 per replica, dp = 8 chips
    tokens = B * s
    # per layer: QKV 3h^2 + projection h^2 + MLP 2 x h x 4h per token; Q.K^T and P.V s x s x h
    # per sequence (full, non-causal); the tied LM head h x V per token
    macs = L * (tokens * (4 * h * h + 8 * h * h) + B * 2 * s * s * h) + tokens * h * V
    assert out["model_flops_per_iteration"] == pytest.approx(6 * macs, rel=1e-12)
