"""Workloads: published parameter counts, analytic FLOPs, GEMM lowering checked numerically."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from accelsim.arch import ConfigError
from accelsim.cli import main
from accelsim.workload import Gemm, Layer, load_workload, workload_from_dict

REPO = Path(__file__).resolve().parents[1]
WL = REPO / "workloads"


@pytest.fixture(scope="module")
def resnet50():
    return load_workload(WL / "resnet50.toml")


@pytest.fixture(scope="module")
def bert():
    return load_workload(WL / "bert-base.toml")


def test_resnet50_parameter_count_is_torchvision(resnet50):
    # torchvision.models.resnet50: 25,557,032 parameters (torchvision model docs).
    assert resnet50.n_params == 25_557_032 == resnet50.published_params


def _resnet50_forward_macs_analytic() -> int:
    """Independent closed-form count: stem + bottlenecks + fc (torchvision v1.5 strides)."""
    macs = 112 * 112 * 64 * 3 * 7 * 7  # conv1 7x7/2 -> 112x112
    cin, hw = 64, 56  # after the 3x3/2 max pool
    for planes, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for b in range(blocks):
            s = stride if b == 0 else 1
            o = hw // s
            macs += hw * hw * cin * planes  # 1x1 reduce at input resolution
            macs += o * o * planes * planes * 9  # 3x3 (strided)
            macs += o * o * planes * 4 * planes  # 1x1 expand
            if b == 0:
                macs += o * o * cin * 4 * planes  # projection shortcut
            cin, hw = 4 * planes, o
    return macs + 2048 * 1000


def test_resnet50_forward_macs(resnet50):
    macs = resnet50.macs(1, "fwd")
    assert macs == _resnet50_forward_macs_analytic()
    # torchvision docs: 4.09 GFLOPS (multiply-adds) per 224x224 image.
    assert macs == pytest.approx(4.09e9, rel=0.005)
    # training: bwd_data skips conv1 (no input gradient), wgrad equals fwd
    fl = resnet50.flops(1)
    assert fl["wgrad"] == fl["fwd"]
    conv1 = resnet50.layer("conv1")
    assert fl["bwd_data"] == fl["fwd"] - conv1.gemms(1)["fwd"].flops
    assert "bwd_data" not in conv1.gemms(1)


def test_resnet50_shapes(resnet50):
    conv1 = resnet50.layer("conv1")
    assert (conv1.out_h, conv1.out_w) == (112, 112)
    assert conv1.gemms(32)["fwd"] == Gemm(32 * 112 * 112, 64, 3 * 49)
    c = resnet50.layer("layer2.0.conv2")  # the stride-2 3x3 of the first stage-2 block
    assert (c.in_h, c.out_h, c.stride_h) == (56, 28, 2)
    assert resnet50.layer("layer4.2.conv3").output_elements == 2048 * 7 * 7
    assert resnet50.layer("maxpool").output_elements == 64 * 56 * 56
    assert resnet50.first_gemm_layer == "conv1" and resnet50.last_gemm_layer == "fc"
    kinds = {layer.kind for layer in resnet50.layers}
    assert {"conv", "batchnorm", "relu", "add", "maxpool", "avgpool", "linear", "softmax"} <= kinds
    assert sum(layer.kind == "conv" for layer in resnet50.layers) == 53
    assert sum(layer.kind == "add" for layer in resnet50.layers) == 16


def test_bert_base_parameter_count(bert):
    # HuggingFace bert-base-uncased BertModel (with pooler): 109,482,240 parameters.
    assert bert.n_params == 109_482_240 == bert.published_params


def test_bert_base_forward_macs_analytic(bert):
    s, h, f, layers = 128, 768, 3072, 12
    per_layer = s * (4 * h * h + 2 * h * f) + 2 * s * s * h  # projections + QK^T + PV
    assert bert.macs(1, "fwd") == layers * per_layer + h * h  # + pooler (one token)
    assert bert.macs(4, "fwd") == 4 * bert.macs(1, "fwd")


def test_tiny_cnn_by_hand():
    w = load_workload(WL / "tiny-cnn.toml")
    # conv1 3*8*9, bn1 2*8, conv2 8*16*9 + 16, fc 16*10 + 10
    assert w.n_params == 216 + 16 + 1168 + 170 == w.published_params
    assert w.macs(1, "fwd") == 64 * 8 * 27 + 16 * 16 * 72 + 160


def test_generated_tomls_are_up_to_date(tmp_path):
    spec = importlib.util.spec_from_file_location("wg", REPO / "scripts" / "workload_generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0


# ---- GEMM lowering checked against the definition of convolution ---------------------------


def _conv_direct(x, w, stride, pad, groups):
    """Direct-definition 2-D convolution (cross-correlation), slow loops; x: C,H,W."""
    c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((cout, ho, wo))
    og = cout // groups
    for o in range(cout):
        g = o // og
        for i in range(ho):
            for j in range(wo):
                patch = xp[g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[o, i, j] = np.sum(patch * w[o])
    return y


def _im2col(x, kh, kw, stride, pad, g, groups):
    c, h, wd = x.shape
    cg = c // groups
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))[g * cg:(g + 1) * cg]
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    cols = np.empty((ho * wo, cg * kh * kw))
    for i in range(ho):
        for j in range(wo):
            cols[i * wo + j] = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw].ravel()
    return cols


def test_conv_gemm_lowering_matches_definition():
    rng = np.random.default_rng(0)
    cin, cout, hw, k, stride, pad, groups = 4, 6, 7, 3, 2, 1, 2
    layer = Layer(name="c", kind="conv", in_channels=cin, out_channels=cout, in_h=hw, in_w=hw,
                  kernel_h=k, kernel_w=k, stride_h=stride, stride_w=stride, pad_h=pad,
                  pad_w=pad, groups=groups)
    gm = layer.gemms(1)
    x = rng.standard_normal((cin, hw, hw))
    w = rng.standard_normal((cout, cin // groups, k, k))
    dy = rng.standard_normal((cout, layer.out_h, layer.out_w))
    y = _conv_direct(x, w, stride, pad, groups)
    og = cout // groups
    assert gm["fwd"].count == gm["wgrad"].count == groups
    for g in range(groups):
        cols = _im2col(x, k, k, stride, pad, g, groups)
        wm = w[g * og:(g + 1) * og].reshape(og, -1).T  # K x N
        assert cols.shape == (gm["fwd"].M, gm["fwd"].K) and wm.shape == (gm["fwd"].K, gm["fwd"].N)
        np.testing.assert_allclose((cols @ wm).T.reshape(og, layer.out_h, layer.out_w),
                                   y[g * og:(g + 1) * og])
        # wgrad: dW = cols^T @ dY has the wgrad GEMM's shape; check against the derivative of
        # the (linear) loss sum(dy * conv(x, w)) with respect to each weight.
        dym = dy[g * og:(g + 1) * og].reshape(og, -1).T  # M x N
        dw = cols.T @ dym
        assert (cols.T.shape, dym.shape) == ((gm["wgrad"].M, gm["wgrad"].K),
                                             (gm["wgrad"].K, gm["wgrad"].N))
        for idx in [(0, 0, 0, 0), (og - 1, 1, 2, 1)]:
            e = np.zeros_like(w)
            e[(g * og + idx[0],) + idx[1:]] = 1.0
            expect = np.sum(dy * _conv_direct(x, e, stride, pad, groups))
            assert dw[np.ravel_multi_index(idx[1:], (cin // groups, k, k)), idx[0]] == pytest.approx(expect)
        # bwd_data: dXcol = dY @ W^T is (M x K_window) = the bwd_data GEMM (M, N, K)
        dxcol = dym @ wm.T
        assert (dym.shape, wm.T.shape) == ((gm["bwd_data"].M, gm["bwd_data"].K),
                                           (gm["bwd_data"].K, gm["bwd_data"].N))
        assert dxcol.shape == (gm["bwd_data"].M, gm["bwd_data"].N)
    # every phase does the same number of MACs as the forward pass
    assert gm["fwd"].macs == gm["bwd_data"].macs == gm["wgrad"].macs
    assert gm["fwd"].macs == cout * layer.out_h * layer.out_w * (cin // groups) * k * k


def test_matmul_and_linear_phases():
    mm = Layer(name="qk", kind="matmul", m=5, n=7, k=3, count=2)
    g = mm.gemms(4)
    assert g["fwd"] == Gemm(5, 7, 3, 8) and g["bwd_data"] == Gemm(5, 3, 7, 8)
    assert g["wgrad"] == Gemm(3, 7, 5, 8) and mm.n_params == 0
    lin = Layer(name="fc", kind="linear", in_features=10, out_features=4, tokens=3, bias=True)
    g = lin.gemms(2)
    assert g["fwd"] == Gemm(6, 4, 10) and g["bwd_data"] == Gemm(6, 10, 4)
    assert g["wgrad"] == Gemm(10, 4, 6) and lin.n_params == 44


def test_elementwise_work_scales_with_batch(resnet50):
    bn = resnet50.layer("bn1")
    e1, e8 = bn.elementwise(1), bn.elementwise(8)
    assert set(e1) == {"fwd", "bwd"}
    assert e8["fwd"].ops == 8 * e1["fwd"].ops and e1["fwd"].elements_written == 64 * 112 * 112
    assert e1["fwd"].bytes_moved(2) == 2 * (e1["fwd"].elements_read + e1["fwd"].elements_written)
    pool = resnet50.layer("maxpool")
    assert pool.elementwise(1)["fwd"].ops == 9 * 64 * 56 * 56
    assert resnet50.layer("conv1").elementwise(1) == {}
    with pytest.raises(ValueError, match="batch"):
        bn.elementwise(0)


def test_scalesim_output_rounding_differs_from_torch():
    # SCALE-Sim rounds strided outputs up: 56 -> 29 for a 1x1/2 conv; PyTorch gives 28.
    common = dict(name="s", kind="conv", in_channels=4, out_channels=4, in_h=56, in_w=56,
                  kernel_h=1, kernel_w=1, stride_h=2, stride_w=2)
    assert Layer(**common).out_h == 28
    assert Layer(**common, shape_mode="scalesim").out_h == 29 == math.ceil((56 - 1 + 2) / 2)


# ---- strict workload loading ---------------------------------------------------------------

_GOOD = {"workload": {"name": "t"},
         "layer": [{"name": "a", "kind": "linear", "in_features": 4, "out_features": 2}]}


@pytest.mark.parametrize("patch, key", [
    ({"kind": "lstm"}, "layer[0](a).kind"),
    ({"in_featurs": 4}, "layer[0](a).in_featurs"),
    ({"out_features": 0}, "layer[0](a).out_features"),
    ({"bias": 1}, "layer[0](a).bias"),
    ({"kind": "conv", "in_channels": 3, "out_channels": 4, "in_hw": [8], "kernel": [3, 3],
      "stride": [1, 1], "in_features": None}, "layer[0](a).in_hw"),
    ({"kind": "conv", "in_channels": 3, "out_channels": 4, "in_hw": [2, 2], "kernel": [3, 3],
      "stride": [1, 1], "in_features": None}, "layer[0](a).kernel"),
    ({"kind": "conv", "in_channels": 3, "out_channels": 4, "in_hw": [8, 8], "kernel": [3, 3],
      "stride": [1, 1], "groups": 2, "in_features": None}, "layer[0](a).in_channels"),
])
def test_bad_workload_layers(patch, key):
    layer = dict(_GOOD["layer"][0])
    layer.pop("out_features") if patch.get("kind") == "conv" else None
    for k, v in patch.items():
        if v is None:
            layer.pop(k, None)
        else:
            layer[k] = v
    with pytest.raises(ConfigError) as exc:
        workload_from_dict({"workload": {"name": "t"}, "layer": [layer]}, source="w.toml")
    assert exc.value.key == key, str(exc.value)
    assert str(exc.value).startswith("w.toml: ")


def test_bad_workload_structure(tmp_path):
    with pytest.raises(ConfigError, match="layer"):
        workload_from_dict({"workload": {"name": "t"}, "layer": []}, source="w")
    with pytest.raises(ConfigError, match=r"workload\.nam"):
        workload_from_dict({"workload": {"name": "t", "nam": 1}, "layer": _GOOD["layer"]})
    with pytest.raises(ConfigError, match="duplicate layer name"):
        workload_from_dict({"workload": {"name": "t"}, "layer": _GOOD["layer"] * 2})
    p = tmp_path / "dup.toml"
    p.write_text('[workload]\nname = "t"\nname = "u"\n')
    with pytest.raises(ConfigError, match=r"dup\.toml: workload\.name: TOML error"):
        load_workload(p)


def test_layers_cli_writes_tidy_csv(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["layers", str(WL / "tiny-cnn.toml"), "--batch", "2", "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1,570 parameters" in text and "conv2" in text
    import pandas as pd

    df = pd.read_csv(out)
    assert {"layer", "kind", "phase", "M", "N", "K", "flops"} <= set(df.columns)
    fwd = df[(df.layer == "conv2") & (df.phase == "fwd")].iloc[0]
    assert (fwd.M, fwd.N, fwd.K) == (2 * 16, 16, 72) and fwd.flops == 2 * 32 * 16 * 72
    assert main(["layers", str(WL / "tiny-cnn.toml"), "--batch", "0"]) == 2
    assert main(["layers", str(tmp_path / "missing.toml")]) == 2
