"""Every layer's backward against central finite differences (float64 reference datapath).

The oracle is the definition of the derivative: dL/dtheta ~ (L(theta + h) - L(theta - h)) / 2h,
with L = sum(forward(x) * R) for a fixed random R. Central differences with h = 1e-6 on O(1)
float64 values have error ~h^2 |L'''| + eps |L| / h ~ 1e-10, so rtol 1e-5 is loose by 10^4
but tight enough to catch any wrong term (those are O(1) relative)."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.train import Datapath, get_recipe
from accelsim.train.layers import (AvgPool2d, BatchNorm, Conv2d, Linear, MaxPool2d, PositionalEmbedding,
                                   ReLU, Residual, SelfAttention, Sequential, SoftmaxCrossEntropy,
                                   TransformerBlock, parameters)
from accelsim.train.models import cnn, mlp, transformer

H = 1e-6


def _dp():
    return Datapath(get_recipe("fp32"), np.random.default_rng(0), reference=True)


def _loss(layer, x, R, dp):
    return float((layer.forward(x, dp, True) * R).sum())


def _check(layer, x, *, check_input=True, n_probe=12):
    rng = np.random.default_rng(1)
    dp = _dp()
    y = layer.forward(x, dp, True)
    R = rng.standard_normal(y.shape)
    dx = layer.backward(R, dp)
    grads = {(id(l), k): l.grads[k].copy() for l, k in parameters(layer)}
    targets = [(l.params, k, grads[(id(l), k)]) for l, k in parameters(layer)]
    if check_input:
        holder = {"x": x}
        targets.append((holder, "x", dx))
    assert targets, "nothing to check"
    for store, key, g in targets:
        arr = store[key]
        flat = rng.choice(arr.size, size=min(n_probe, arr.size), replace=False)
        for i in flat:
            idx = np.unravel_index(i, arr.shape)
            old = arr[idx]
            arr[idx] = old + H
            lp = _loss(layer, store["x"] if key == "x" else x, R, dp)
            arr[idx] = old - H
            lm = _loss(layer, store["x"] if key == "x" else x, R, dp)
            arr[idx] = old
            fd = (lp - lm) / (2 * H)
            np.testing.assert_allclose(g[idx], fd, rtol=1e-5, atol=1e-7, err_msg=f"{key}{idx}")


def _x(*shape, seed=2):
    return np.random.default_rng(seed).standard_normal(shape)


def test_linear():
    _check(Linear(5, 4, np.random.default_rng(0)), _x(3, 5))


def test_linear_first_layer_skips_input_gradient():
    lin = Linear(5, 4, np.random.default_rng(0), tag="first")
    dp = _dp()
    lin.forward(_x(3, 5), dp, True)
    assert lin.backward(np.ones((3, 4)), dp) is None
    _check(lin, _x(3, 5), check_input=False)


@pytest.mark.parametrize("k", [1, 3])
def test_conv2d(k):
    _check(Conv2d(2, 3, k, np.random.default_rng(0), bias=True), _x(2, 2, 5, 4))


@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 4, 4)])
def test_batchnorm(shape):
    bn = BatchNorm(shape[1])
    bn.params["gamma"] = 1.0 + 0.3 * _x(shape[1], seed=5)
    bn.params["beta"] = _x(shape[1], seed=6)
    _check(bn, _x(*shape))


def test_relu_and_pools():
    _check(ReLU(), _x(4, 6))
    _check(MaxPool2d(2), _x(2, 3, 4, 4))
    _check(AvgPool2d(2), _x(2, 3, 4, 6))


def test_residual_with_shortcut():
    rng = np.random.default_rng(0)
    block = Residual(Sequential([Conv2d(2, 4, 3, rng), BatchNorm(4), ReLU(), Conv2d(4, 4, 3, rng)]),
                     Conv2d(2, 4, 1, rng, tag="shortcut"))
    _check(block, _x(2, 2, 4, 4))
    _check(Residual(Sequential([Linear(4, 4, rng), ReLU()])), _x(3, 4))


def test_attention_and_transformer_block():
    rng = np.random.default_rng(0)
    _check(SelfAttention(4, rng), _x(2, 3, 4))
    _check(TransformerBlock(4, 6, rng), _x(2, 3, 4))
    _check(PositionalEmbedding(3, 4, rng), _x(2, 3, 4))


def test_softmax_cross_entropy():
    z = _x(5, 4)
    y = np.array([0, 3, 1, 1, 2])
    ce = SoftmaxCrossEntropy()
    ce.forward(z, y)
    g = ce.backward(scale=8.0)
    for i in range(5):
        for j in range(4):
            zp, zm = z.copy(), z.copy()
            zp[i, j] += H
            zm[i, j] -= H
            fd = (ce.forward(zp, y) - ce.forward(zm, y)) / (2 * H)
            np.testing.assert_allclose(g[i, j], 8.0 * fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("build,shape", [(mlp, (3, 4, 4)), (cnn, (2, 4, 4)), (transformer, (2, 4, 3))])
def test_whole_models(build, shape):
    rng = np.random.default_rng(0)
    B, L, F = shape
    model = build(L, F, 3, rng) if build is not cnn else build(L, F, 3, rng, width=2)
    _check(model, _x(B, L, F), check_input=False, n_probe=4)


def test_gpt_char_layers():
    """LayerNorm, causal multi-head attention (future positions get no weight), and the whole
    gpt-char (token ids in: the embedding tables are checked through the parameters)."""
    from accelsim.train.gpt import CausalSelfAttention, LayerNorm, gpt_char

    rng = np.random.default_rng(0)
    ln = LayerNorm(5)
    ln.params["gamma"] = 1.0 + 0.3 * _x(5, seed=5)
    ln.params["beta"] = _x(5, seed=6)
    _check(ln, _x(2, 3, 5))
    att = CausalSelfAttention(4, 2, rng)
    _check(att, _x(2, 3, 4))
    x = _x(1, 3, 4)
    dp = _dp()
    y0 = att.forward(x, dp, True)[0, 0]
    x[0, 2] += 1.0  # a later position cannot change an earlier output
    assert np.array_equal(att.forward(x, dp, True)[0, 0], y0)
    model = gpt_char(7, 5, rng, d=4, layers=2, heads=2)
    ids = np.random.default_rng(3).integers(0, 7, (2, 5))
    _check(model, ids, check_input=False, n_probe=4)
