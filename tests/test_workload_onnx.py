"""ONNX import (accelsim.workload.onnx_import): graphs built here with onnx.helper (nothing
downloaded) give the layers and forward FLOPs written out by hand; unsupported ops and
shapes are ConfigErrors naming the node."""

from __future__ import annotations

import numpy as np
import pytest

import onnx  # the optional extra; the test extra installs it
from onnx import TensorProto, helper, numpy_helper

from accelsim.arch.config import ConfigError
from accelsim.workload.onnx_import import load_onnx, workload_from_onnx


def _init(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _vi(name, *shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def mlp():
    """784 -> 128 (MatMul + bias Add, as PyTorch exports 3-D linears) -> ReLU -> 10 (Gemm)."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("Gemm", ["h2", "w2", "b2"], ["y0"], name="fc2", transB=1),
             helper.make_node("Softmax", ["y0"], ["y"], name="softmax")]
    return _model(nodes, [_vi("x", "N", 784)], [_vi("y", "N", 10)],
                  [_init("w1", 784, 128), _init("b1", 128), _init("w2", 10, 128),
                   _init("b2", 10)])


def convnet():
    nodes = [helper.make_node("Conv", ["x", "c1w", "c1b"], ["a"], name="conv1",
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="relu1"),
             helper.make_node("MaxPool", ["b"], ["c"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["c", "c2w"], ["d"], name="conv2", pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("BatchNormalization", ["d", "s", "bb", "m", "v"], ["e"],
                              name="bn"),
             helper.make_node("Relu", ["e"], ["f"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["f"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["h"], name="flatten"),
             helper.make_node("Gemm", ["h", "fcw", "fcb"], ["y"], name="fc", transB=1)]
    inits = [_init("c1w", 16, 3, 3, 3), _init("c1b", 16), _init("c2w", 32, 16, 3, 3),
             _init("s", 32), _init("bb", 32), _init("m", 32), _init("v", 32),
             _init("fcw", 10, 32), _init("fcb", 10)]
    return _model(nodes, [_vi("x", "N", 3, 32, 32)], [_vi("y", "N", 10)], inits)


def test_mlp_layers_and_flops_exact(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    wl = load_onnx(path, batch=32)
    assert wl.name == "mlp"
    assert [(x.name, x.kind) for x in wl.layers] == [
        ("fc1", "linear"), ("relu", "relu"), ("fc2", "linear"), ("softmax", "softmax")]
    assert wl.layers[0].bias and wl.layers[2].bias       # the Add folded into fc1
    assert wl.n_params == 784 * 128 + 128 + 128 * 10 + 10
    assert wl.flops(32)["fwd"] == 2 * 32 * (784 * 128 + 128 * 10)
    assert not wl.layers[0].input_grad                   # the network input


def test_convnet_layers_and_flops_exact():
    wl = workload_from_onnx(convnet(), 8, name="cnn")
    kinds = [x.kind for x in wl.layers]
    assert kinds == ["conv", "relu", "maxpool", "conv", "batchnorm", "relu", "avgpool",
                     "linear"]
    c1, c2 = wl.layers[0], wl.layers[3]
    assert (c1.out_h, c1.out_w, c1.bias) == (32, 32, True)
    assert (c2.in_h, c2.out_h, c2.bias) == (16, 8, False)     # (16 + 2 - 3) // 2 + 1
    assert wl.layers[6].out_h == 1
    # conv1: 32x32 outputs x 16 channels x 27 taps; conv2: 8x8 x 32 x 144; fc: 32 x 10
    assert wl.flops(8)["fwd"] == 2 * 8 * (32 * 32 * 16 * 27 + 8 * 8 * 32 * 144 + 32 * 10)
    assert wl.n_params == 16 * 27 + 16 + 32 * 144 + 2 * 32 + 32 * 10 + 10


def test_attention_matmuls_and_embedding():
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
             helper.make_node("Softmax", ["s"], ["p"], name="softmax"),
             helper.make_node("MatMul", ["p", "v"], ["o"], name="pv")]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 8])
    model = _model(nodes, [ids, _vi("q", "N", 4, 8, 16), _vi("kt", "N", 4, 16, 8),
                           _vi("v", "N", 4, 8, 16)],
                   [_vi("o", "N", 4, 8, 16), _vi("e", "N", 8, 64)], [_init("table", 100, 64)])
    wl = workload_from_onnx(model, 2, name="attn")
    emb, qk, _, pv = wl.layers
    assert (emb.kind, emb.vocab, emb.dim, emb.tokens) == ("embedding", 100, 64, 8)
    assert (qk.m, qk.n, qk.k, qk.count) == (8, 8, 16, 4)
    assert (pv.m, pv.n, pv.k, pv.count) == (8, 16, 8, 4)
    assert wl.flops(2)["fwd"] == 2 * 2 * 4 * (8 * 8 * 16 + 8 * 16 * 8)


def test_unsupported_op_names_the_node():
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="gate")]
    model = _model(nodes, [_vi("x", "N", 4)], [_vi("y", "N", 4)], [])
    with pytest.raises(ConfigError, match=r"node\[0\]\(gate\): unsupported ONNX op 'Sigmoid'"):
        workload_from_onnx(model, 1, name="m")


def test_fixed_batch_asymmetric_pads_and_bad_files(tmp_path):
    fixed = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", 4, 8)],
                   [_vi("y", 4, 8)], [])
    with pytest.raises(ConfigError, match=r"input\(x\).*batch 2 differs"):
        workload_from_onnx(fixed, 2, name="m")
    assert workload_from_onnx(fixed, 4, name="m").layers[0].shape == (8,)
    conv = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[0, 1, 1, 1])],
                  [_vi("x", "N", 1, 8, 8)], [_vi("y", "N", 1, 8, 9)], [_init("w", 1, 1, 2, 2)])
    with pytest.raises(ConfigError, match=r"node\[0\]\(c\)\.pads: only 2-D symmetric"):
        workload_from_onnx(conv, 1, name="m")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not an onnx file\xff")
    with pytest.raises(ConfigError, match="bad.onnx: <onnx>: cannot read"):
        load_onnx(bad, 1)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        load_onnx(bad, 0)


def test_the_callers_model_is_not_modified():
    m = mlp()
    workload_from_onnx(m, 16, name="m")
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def _no_data(name, *dims):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT)
    t.dims.extend(dims)
    return t


def _node_graph(nodes, inputs, outputs, inits=()):
    return _model(nodes, inputs, outputs, list(inits))


@pytest.mark.parametrize("model, match", [
    # a node missing an input its op requires (was an IndexError: exit 70)
    (_node_graph([helper.make_node("Gemm", ["x"], ["y"])], [_vi("x", "N", 4)], [_vi("y", "N", 4)]),
     r"onnx.checker\): Node with schema\(::Gemm:13\) has input size 1"),
    # an input no earlier node produces, and two producers of one tensor
    (_node_graph([helper.make_node("Relu", ["zz"], ["y"])], [_vi("x", "N", 4)],
                 [_vi("y", "N", 4)]), "topologically sorted, however input 'zz'"),
    (_node_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
                 [_vi("x", "N", 4)], [_vi("y", "N", 4)]), "single static assignment"),
    # an initializer declaring dims but holding no data
    (_node_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", "N", 4)],
                 [_vi("y", "N", 8)], [_no_data("w", 4, 8)]),
     "tensor name: w"),
])
def test_structurally_invalid_graphs_are_refused_as_onnx_checker_would(model, match):
    with pytest.raises(ConfigError, match=match) as err:
        workload_from_onnx(model, 2, name="m")
    assert err.value.key == "<graph>" and "not a valid ONNX model" in str(err.value)


def test_what_the_importer_reads_is_checked_before_it_is_read():
    """A valid graph the importer cannot read is a ConfigError naming the node: a 1-D
    GlobalAveragePool (was an IndexError), a matrix bias on a Gemm (was counted as a vector)."""
    gap = _model([helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")],
                 [_vi("x", "N", 4, 8)], [_vi("y", "N", 4, 1)], [])
    with pytest.raises(ConfigError, match=r"node\[0\]\(gap\): only 2-D GlobalAveragePool"):
        workload_from_onnx(gap, 2, name="m")
    gemm = _model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)],
                  [_vi("x", "N", 4)], [_vi("y", "N", 3)], [_init("w", 3, 4), _init("b", 3, 3)])
    with pytest.raises(ConfigError, match=r"node\[0\]\(fc\)\.C: a Gemm's C must be a bias of "
                                          r"out_features = 3 values \(got \[3, 3\]\)"):
        workload_from_onnx(gemm, 3, name="m")


def test_external_weights_are_checked_beside_the_file_and_not_loaded(tmp_path, monkeypatch):
    """Weights saved as external data: only their shapes are read; a missing data file is a
    ConfigError from the checker, looked for beside the model (not in the working folder)."""
    path = tmp_path / "m.onnx"
    onnx.save(mlp(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="w.bin", size_threshold=0)
    monkeypatch.chdir("/")
    assert load_onnx(path, 32).flops(32) == workload_from_onnx(mlp(), 32, name="m").flops(32)
    (tmp_path / "w.bin").unlink()
    with pytest.raises(ConfigError, match="m.onnx: <graph>: not a valid ONNX model.*w.bin"):
        load_onnx(path, 32)
