"""One training step of the MLP against an independent float64 numpy implementation.

* Exact engine, every operand in OCP E4M3 (quantized here by ml_dtypes, not by accelsim):
  products of two 4-bit significands summed over K <= 64 span < 43 bits, so float64 numpy sums
  them exactly in any order and one float32 cast equals the engine's correctly rounded output.
  The whole step (forward, loss-scaled backward, momentum SGD with FP32 master weights) must
  match bit for bit.
* fp32 recipe (sequential FP32 FMA engine): within the FP32 rounding bound of the GEMM chain.

arith's ``exact`` engine cannot take FP32 (or BF16) operands: an exact sum of FP32 products over
the format's whole range needs 554 bits, more than its two float64 limbs; hence E4M3 above.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from accelsim.train import Precision, Recipe, Trainer, get_recipe, load_dataset
from accelsim.train.layers import parameters
from accelsim.train.models import mlp

LR, MOM, SCALE, B = 0.05, 0.9, 64.0, 32

E4M3_EXACT = Recipe(name="e4m3-exact", source="test oracle",
                    body=Precision("e4m3fn", "e4m3fn", "e4m3fn", "exact"),
                    loss_scaling="static", init_loss_scale=SCALE)


def _q(a):
    return np.asarray(a, dtype=np.float64).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _ident(a):
    return np.asarray(a, dtype=np.float64)


def reference_step(params, x, y, q, out):
    """Plain numpy MLP step; q: operand quantizer, out: GEMM output rounding."""
    W1, b1, W2, b2, W3, b3 = params
    x = x.reshape(len(x), -1)
    z1 = out(q(x) @ q(W1)) + b1
    a1 = np.maximum(z1, 0)
    z2 = out(q(a1) @ q(W2)) + b2
    a2 = np.maximum(z2, 0)
    z3 = out(q(a2) @ q(W3)) + b3
    zs = z3 - z3.max(axis=1, keepdims=True)
    logp = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    d3 = np.exp(logp)
    d3[np.arange(len(y)), y] -= 1.0
    d3 = d3 * (SCALE / len(y))
    g = {}
    g["W3"], g["b3"] = out(q(a2).T @ q(d3)), d3.sum(axis=0)
    d2 = np.where(z2 > 0, out(q(d3) @ q(W3).T), 0.0)
    g["W2"], g["b2"] = out(q(a1).T @ q(d2)), d2.sum(axis=0)
    d1 = np.where(z1 > 0, out(q(d2) @ q(W2).T), 0.0)
    g["W1"], g["b1"] = out(q(x).T @ q(d1)), d1.sum(axis=0)
    grads = [g[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")]
    new = []
    for w, gr in zip(params, grads):
        v = _f32(MOM * 0.0 + _f32(gr * (1.0 / SCALE)))
        new.append(_f32(w + -LR * v))
    return loss, grads, new


def _setup(recipe):
    rng = np.random.default_rng(3)
    data = load_dataset("digits", rng)
    model = mlp(8, 8, 10, np.random.default_rng(4))
    tr = Trainer(model, recipe, LR, np.random.default_rng(5))
    idx = np.arange(B) * 7
    xb, yb = data.x_train[idx], data.y_train[idx]
    before = [layer.params[k].copy() for layer, k in parameters(model)]
    return tr, model, xb, yb, before


def test_exact_engine_step_is_bit_identical_to_numpy():
    tr, model, xb, yb, before = _setup(E4M3_EXACT)
    loss = tr.step(xb, yb)
    ref_loss, ref_grads, ref_new = reference_step(before, xb, yb, _q, _f32)
    assert loss == ref_loss
    for (layer, k), g, w in zip(parameters(model), ref_grads, ref_new):
        np.testing.assert_array_equal(layer.grads[k], g, err_msg=k)
        np.testing.assert_array_equal(layer.params[k], w, err_msg=k)
    # the step did something: most weights moved
    moved = sum(int(np.count_nonzero(layer.params[k] != b)) for (layer, k), b in zip(parameters(model), before))
    assert moved > 1000


def test_fp32_recipe_step_within_fp32_rounding_bound():
    recipe = get_recipe("fp32", loss_scaling="static", init_loss_scale=SCALE)
    tr, model, xb, yb, before = _setup(recipe)
    loss = tr.step(xb, yb)
    ref_loss, ref_grads, _ = reference_step(before, xb, yb, _ident, _ident)
    # Each GEMM (operands rounded to FP32, K <= 64 sequential FP32 FMAs) is off by at most
    # (K + 2) u |A||B| with u = 2^-24 (Higham, Accuracy and Stability, sec. 3.1); the weight
    # gradient of layer 1 sits behind 6 such GEMMs: 6 * 66 * 2^-24 = 2.4e-5 relative.
    bound = 6 * 66 * 2.0**-24
    assert abs(loss - ref_loss) <= bound * abs(ref_loss)
    diffs = []
    for (layer, k), g in zip(parameters(model), ref_grads):
        err = np.linalg.norm(layer.grads[k] - g) / np.linalg.norm(g)
        assert err <= bound, (k, err)
        diffs.append(err)
    assert max(diffs) > 0  # the FP32 datapath really rounds: not a float64 pass-through


def test_reference_datapath_is_the_float64_model():
    tr, model, xb, yb, before = _setup(get_recipe("fp32", loss_scaling="static", init_loss_scale=SCALE))
    tr.dp.reference = True
    tr.step(xb, yb)
    _, ref_grads, _ = reference_step(before, xb, yb, _ident, _ident)
    for (layer, k), g in zip(parameters(model), ref_grads):
        np.testing.assert_allclose(layer.grads[k], g, rtol=1e-12, atol=1e-15, err_msg=k)
