"""One training step against an independent float64 numpy implementation of the same network.

* ``exact`` engine, ``fp32`` recipe (FP32 operands, every GEMM's exact sum rounded once to FP32):
  - every GEMM of a step of the ``mlp``, ``cnn`` and ``transformer`` models equals the oracle
    below, bit for bit;
  - the whole ``mlp`` step (forward, loss-scaled backward, momentum SGD with FP32 master
    weights) equals a plain numpy step that uses the same oracle for its GEMMs, bit for bit.
* ``exact`` engine, every operand in OCP E4M3 (quantized by ml_dtypes): the whole step, bit for
  bit (K <= 64 products of 4-bit significands span < 43 bits: float64 sums them exactly).
* ``fp32`` recipe on its own engine (sequential FP32 FMA): within the FP32 rounding bound.

The FP32 GEMM oracle (``f32_gemm``) uses no accelsim code: operands rounded to FP32 by numpy's
cast, Y = A @ B by float64 BLAS, whose error is at most gamma_K sum_k |a_k b_k| in any summation
order, with or without FMA (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
sec. 3.1; the products of FP32 values are exact in float64 and far from underflow), gamma_K =
K u / (1 - K u), u = 2^-53. If both ends of [Y - bound, Y + bound] round to the same FP32 value,
the exact sum does too (rounding is monotonic); otherwise (the interval holds an FP32 rounding
boundary) the output is recomputed in exact ``fractions.Fraction`` arithmetic and rounded to
FP32 from the IEEE definition. The fallbacks are counted: on these seeds all of them (118 of
17,344 mlp outputs, 264 of 151,704 cnn, 10 of 22,976 transformer) are sums that land exactly on
an FP32 midpoint (digits pixels are small integers: 3 x an FP32 value has 25 bits), where the
ties-to-even decision is the whole point; none is a mere closeness within the bound.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from accelsim.train import Precision, Recipe, Trainer, get_recipe, load_dataset
from accelsim.train.layers import parameters
from accelsim.train.models import build_model, mlp

LR, MOM, SCALE, B = 0.05, 0.9, 64.0, 32

E4M3_EXACT = Recipe(name="e4m3-exact", source="test oracle",
                    body=Precision("e4m3fn", "e4m3fn", "e4m3fn", "exact"),
                    loss_scaling="static", init_loss_scale=SCALE)
# the fp32 recipe (FP32 operands everywhere) with the exact engine in place of sequential FMA
FP32_EXACT = get_recipe("fp32", loss_scaling="static", init_loss_scale=SCALE,
                        body=dataclasses.replace(get_recipe("fp32").body, engine="exact"))


def _q(a):
    return np.asarray(a, dtype=np.float64).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


# ---- the FP32 GEMM oracle: float64 BLAS + its error bound, exact Fractions inside the bound ----

_P, _EMIN, _FMAX = 24, -126, float(np.finfo(np.float32).max)  # IEEE 754 binary32


def round_fp32(X: Fraction) -> float:
    """Correct RNE rounding of a rational to binary32, from the IEEE definition."""
    if X == 0:
        return 0.0
    a = abs(X)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, _EMIN) - _P + 1)
    n, rem = divmod(a, q)
    n = int(n) + (rem > q / 2 or (rem == q / 2 and int(n) % 2 == 1))
    v = n * q
    return math.copysign(math.inf if v > Fraction(_FMAX) else float(v), X)


def f32_gemm(a, b, stats: dict) -> np.ndarray:
    """FP32 rounding of the exact product of the FP32-rounded operands (2-D, or batched 3-D);
    ``stats`` counts outputs and the ones settled by exact arithmetic (module docstring)."""
    A, B_ = _f32(a), _f32(b)
    K = A.shape[-1]
    Y = A @ B_
    out = _f32(Y)
    if K == 0:
        return out
    u = 2.0**-53
    g = K * u / (1 - K * u)
    # |Y - X| <= g * sum|a b|; the computed |A| @ |B| is >= (1 - g) times that sum
    bound = (np.abs(A) @ np.abs(B_)) * (g / (1 - g) * (1 + 2.0**-40))
    lo = np.nextafter(Y - bound, -np.inf)
    hi = np.nextafter(Y + bound, np.inf)
    near = _f32(lo) != _f32(hi)
    for idx in map(tuple, np.argwhere(near)):
        row, col = A[idx[:-1]], B_[idx[:-2] + (slice(None), idx[-1])]
        out[idx] = round_fp32(sum((Fraction(x) * Fraction(y) for x, y in zip(row, col)), Fraction(0)))
    # Y exactly on a midpoint of FP32 neighbours (e.g. one product 3 x an FP32 value: 25 bits)
    at_mid = near & (Y == (_f32(lo) + _f32(hi)) / 2)
    for key, n in (("outputs", out.size), ("at_midpoint", int(at_mid.sum())),
                   ("straddling", int((near & ~at_mid).sum()))):
        stats[key] = stats.get(key, 0) + n
    return out


def reference_step(params, x, y, mm):
    """Plain numpy MLP step; ``mm(a, b)``: the GEMM (operand quantization and output rounding)."""
    W1, b1, W2, b2, W3, b3 = params
    x = x.reshape(len(x), -1)
    z1 = mm(x, W1) + b1
    a1 = np.maximum(z1, 0)
    z2 = mm(a1, W2) + b2
    a2 = np.maximum(z2, 0)
    z3 = mm(a2, W3) + b3
    zs = z3 - z3.max(axis=1, keepdims=True)
    logp = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    d3 = np.exp(logp)
    d3[np.arange(len(y)), y] -= 1.0
    d3 = d3 * (SCALE / len(y))
    g = {}
    g["W3"], g["b3"] = mm(a2.T, d3), d3.sum(axis=0)
    d2 = np.where(z2 > 0, mm(d3, W3.T), 0.0)
    g["W2"], g["b2"] = mm(a1.T, d2), d2.sum(axis=0)
    d1 = np.where(z1 > 0, mm(d2, W2.T), 0.0)
    g["W1"], g["b1"] = mm(x.T, d1), d1.sum(axis=0)
    grads = [g[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")]
    new = []
    for w, gr in zip(params, grads):
        v = _f32(MOM * 0.0 + _f32(gr * (1.0 / SCALE)))
        new.append(_f32(w + -LR * v))
    return loss, grads, new


def _setup(recipe, model_name="mlp", batch=B, **kw):
    data = load_dataset("seq" if model_name == "transformer" else "digits", np.random.default_rng(3))
    if model_name == "mlp":
        model = mlp(8, 8, 10, np.random.default_rng(4))
    else:
        model = build_model(model_name, data, np.random.default_rng(4))
    tr = Trainer(model, recipe, LR, np.random.default_rng(5), **kw)
    idx = np.arange(batch) * 7
    xb, yb = data.x_train[idx], data.y_train[idx]
    before = [layer.params[k].copy() for layer, k in parameters(model)]
    return tr, model, xb, yb, before


def _record_gemms(dp):
    """Every GEMM the datapath runs: (kind, a, b, output)."""
    calls = []
    run = dp.gemm

    def gemm(kind, a, a_role, b, b_role, tag, site=None):
        out = run(kind, a, a_role, b, b_role, tag, site)
        calls.append((kind, np.array(a, dtype=np.float64), np.array(b, dtype=np.float64), out))
        return out

    dp.gemm = gemm
    return calls


def _assert_moved(model, before):
    moved = sum(int(np.count_nonzero(layer.params[k] != b)) for (layer, k), b in zip(parameters(model), before))
    assert moved > 1000


def test_exact_engine_step_is_bit_identical_to_numpy():
    tr, model, xb, yb, before = _setup(E4M3_EXACT)
    loss = tr.step(xb, yb)
    ref_loss, ref_grads, ref_new = reference_step(before, xb, yb, lambda a, b: _f32(_q(a) @ _q(b)))
    assert loss == ref_loss
    for (layer, k), g, w in zip(parameters(model), ref_grads, ref_new):
        np.testing.assert_array_equal(layer.grads[k], g, err_msg=k)
        np.testing.assert_array_equal(layer.params[k], w, err_msg=k)
    _assert_moved(model, before)


def test_fp32_recipe_exact_engine_step_is_bit_identical_to_numpy():
    """The whole mlp step of the fp32 recipe on the exact engine = numpy with the FP32 oracle."""
    tr, model, xb, yb, before = _setup(FP32_EXACT)
    loss = tr.step(xb, yb)
    stats: dict = {}
    ref_loss, ref_grads, ref_new = reference_step(before, xb, yb, lambda a, b: f32_gemm(a, b, stats))
    assert loss == ref_loss
    for (layer, k), g, w in zip(parameters(model), ref_grads, ref_new):
        np.testing.assert_array_equal(layer.grads[k], g, err_msg=k)
        np.testing.assert_array_equal(layer.params[k], w, err_msg=k)
    _assert_moved(model, before)
    # 8 GEMMs: fwd 32x64, 32x64, 32x10; wgrad 64x64, 64x64, 64x10; bwd-data 32x64, 32x64
    assert stats["outputs"] == 4 * 2048 + 2 * 4096 + 320 + 640
    # an FP32 datapath, not float64: the float64 step differs
    _, g64, _ = reference_step(before, xb, yb, lambda a, b: a @ b)
    assert any((layer.grads[k] != g).any() for (layer, k), g in zip(parameters(model), g64))


@pytest.mark.parametrize("model_name,batch", [("mlp", B), ("cnn", 8), ("transformer", 8)])
def test_fp32_recipe_exact_engine_every_gemm_is_the_fp32_rounded_exact_product(model_name, batch):
    """Every fwd, bwd-data and wgrad GEMM of one training step (im2col convolutions, batched
    attention products included) equals the FP32 oracle bit for bit, on the recipe's engine."""
    tr, model, xb, yb, before = _setup(FP32_EXACT, model_name, batch, check=True)
    calls = _record_gemms(tr.dp)
    tr.step(xb, yb)
    stats: dict = {}
    kinds = set()
    for kind, a, b, out in calls:
        np.testing.assert_array_equal(out, f32_gemm(a, b, stats), err_msg=f"{model_name} {kind} {a.shape}x{b.shape}")
        kinds.add(kind)
    assert kinds == {"fwd", "bwd", "wgrad"}
    assert all(r.engine.block_width is None and r.a_format == r.b_format == "fp32" for r in tr.dp.records)
    assert len(tr.dp.records) == len(calls)
    # measured: outputs / at an FP32 midpoint / other intervals holding a rounding boundary:
    # mlp 17,344 / 118 / 0, cnn 151,704 / 264 / 0, transformer 22,976 / 10 / 0 -- all settled
    # by Fractions; float64 BLAS + one FP32 cast would have been right on every one of them
    assert stats["outputs"] > 10000, stats
    _assert_moved(model, before)


def test_fp32_recipe_step_within_fp32_rounding_bound():
    recipe = get_recipe("fp32", loss_scaling="static", init_loss_scale=SCALE)
    tr, model, xb, yb, before = _setup(recipe)
    loss = tr.step(xb, yb)
    ref_loss, ref_grads, _ = reference_step(before, xb, yb, lambda a, b: a @ b)
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
    _, ref_grads, _ = reference_step(before, xb, yb, lambda a, b: a @ b)
    for (layer, k), g in zip(parameters(model), ref_grads):
        np.testing.assert_allclose(layer.grads[k], g, rtol=1e-12, atol=1e-15, err_msg=k)


@pytest.mark.parametrize("name,shape", [("mlp", (3, 4, 4)), ("cnn", (2, 4, 4)), ("transformer", (2, 4, 3))])
def test_fp32_recipe_exact_engine_gradients_agree_with_finite_differences(name, shape):
    """Every parameter gradient of the fp32 recipe on the exact engine against central finite
    differences of the float64 model (h = 1e-6: error ~1e-10, tests/test_train_gradients.py).

    Each GEMM output is within 3 u sum|a b| of float64's (two operand roundings and one output
    rounding, u = 2^-24), so to first order a gradient behind the step's G GEMMs is within
    3 G u of the float64 one, norm-wise per tensor, if BatchNorm and softmax do not amplify
    (assumed, not proven). Measured worst: mlp 1.0e-7, cnn 6.8e-7, transformer 6.1e-7 against
    3 G u = 1.4e-6 (G = 8), 2.5e-6 (14), 5.2e-6 (29)."""
    from accelsim.train import Datapath
    from accelsim.train.models import cnn, transformer

    rng = np.random.default_rng(0)
    Bn, L, F = shape
    model = {"mlp": lambda: mlp(L, F, 3, rng), "cnn": lambda: cnn(L, F, 3, rng, width=2),
             "transformer": lambda: transformer(L, F, 3, rng)}[name]()
    x = np.random.default_rng(2).standard_normal(shape)
    ref = Datapath(FP32_EXACT, np.random.default_rng(0), reference=True)
    dp = Datapath(FP32_EXACT, np.random.default_rng(0))
    calls = _record_gemms(dp)
    y = model.forward(x, dp, True)
    R = np.random.default_rng(1).standard_normal(y.shape)
    model.backward(R, dp)
    bound = 3 * len(calls) * 2.0**-24
    probe = np.random.default_rng(7)
    for layer, k in parameters(model):
        arr, g = layer.params[k], layer.grads[k]
        idx = [np.unravel_index(i, arr.shape) for i in probe.choice(arr.size, min(12, arr.size), replace=False)]
        fd = []
        for i in idx:
            old = arr[i]
            arr[i] = old + 1e-6
            lp = float((model.forward(x, ref, True) * R).sum())
            arr[i] = old - 1e-6
            lm = float((model.forward(x, ref, True) * R).sum())
            arr[i] = old
            fd.append((lp - lm) / 2e-6)
        fd, got = np.array(fd), np.array([g[i] for i in idx])
        err = np.linalg.norm(got - fd) / np.linalg.norm(fd)
        assert err <= bound + 1e-8, (name, k, err, bound)
