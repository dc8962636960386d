"""Optimizers whose every stored tensor lives in a chosen format (``UpdatePrecision``).

* SGD with momentum (HFP8's CNN recipe). ``rule="master"``: the weight is kept in
  ``update.weight`` (an FP32 master copy); ``rule="roundoff"`` (HFP8 sec. 4.3, app. B): the
  weight is stored in the narrow format of its layer's GEMMs and a round-off residual in
  ``update.residual`` carries the part of the update the narrow weight cannot hold.
* AdamW (FP8-LM sec. 2.3's precision decoupling): first and second moment and master weight each
  in its own format; 8-bit and 16-bit stored tensors carry a per-tensor power-of-two scale
  (FP8-LM: "FP16 master weights with scaling", FP8 first moment with a scaling factor).

Each quantization of a stored tensor is one call of :func:`accelsim.numerics.quantize`.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.numerics import get_format

from .datapath import round_to
from .layers import Layer, parameters
from .recipes import Recipe
from .scaling import pow2_scale


def store(x: np.ndarray, fmt: str, rounding: str, rng=None, *, scaled: bool = False) -> np.ndarray:
    """``x`` as held in ``fmt`` (values, float64). ``scaled``: with a per-tensor power-of-two
    scale that puts amax at the format's largest value, descaled afterwards (exact)."""
    r = None if rounding in ("rne", "rna", "rz") else rng  # only stochastic modes draw
    if fmt == "fp32" and not scaled:
        if rounding == "rne":
            return x.astype(np.float32).astype(np.float64)
        return round_to(x, fmt, rounding, rng=r)
    if not scaled:
        return round_to(x, fmt, rounding, saturate=True, rng=r)
    a = float(np.max(np.abs(x))) if x.size else 0.0
    s = pow2_scale(a, get_format(fmt).max) if math.isfinite(a) else 1.0
    return round_to(x * s, fmt, rounding, saturate=True, rng=r) / s


class Optimizer:
    def __init__(self, model: Layer, recipe: Recipe, lr: float, rng: np.random.Generator,
                 momentum: float = 0.9, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"learning rate must be positive, got {lr!r}")
        self.model, self.recipe, self.lr, self.rng = model, recipe, float(lr), rng
        self.momentum, self.betas, self.eps, self.wd = momentum, betas, eps, weight_decay
        self.params = parameters(model)
        self.state: list[dict] = [{} for _ in self.params]
        self.t = 0
        up = recipe.update
        for (layer, name), st in zip(self.params, self.state):
            st["fmt"] = self._weight_format(layer, name)
            if up.rule == "roundoff" and name == "W":
                st["residual"] = np.zeros_like(layer.params[name])
            layer.params[name] = self._store(layer.params[name], st["fmt"])

    def _weight_format(self, layer, name) -> str:
        up = self.recipe.update
        if name != "W":
            return "fp32"  # biases and BatchNorm parameters stay FP32
        if up.rule == "roundoff":
            return self.recipe.precision(layer.tag).weight
        return up.weight

    def _scaled(self, fmt: str) -> bool:
        return self.recipe.optimizer == "adamw" and get_format(fmt).bits < 32

    def _store(self, x, fmt):
        return store(x, fmt, self.recipe.update.rounding, self.rng, scaled=self._scaled(fmt))

    def step(self, inv_scale: float) -> None:
        """Apply one update from the layers' ``grads`` divided by the loss scale."""
        self.t += 1
        up = self.recipe.update
        for (layer, name), st in zip(self.params, self.state):
            grad = layer.grads[name]
            g = self._store(grad * inv_scale if inv_scale != 1.0 else grad, up.grad)
            w = layer.params[name]
            if self.recipe.optimizer == "sgd":
                v = st.get("v")
                if v is None:  # first step: zero momentum (allocated once, not every step)
                    v = np.zeros_like(w)
                v = self._store(self.momentum * v + g, up.momentum)
                st["v"] = v
                delta = -self.lr * v
            else:
                b1, b2 = self.betas
                m, v2 = st.get("m"), st.get("v2")
                if m is None:
                    m, v2 = np.zeros_like(w), np.zeros_like(w)
                m = self._store(b1 * m + (1 - b1) * g, up.momentum)
                v2 = self._store(b2 * v2 + (1 - b2) * g * g, up.second_moment)
                st["m"], st["v2"] = m, v2
                mh = m / (1 - b1**self.t)
                vh = v2 / (1 - b2**self.t)
                delta = -self.lr * (mh / (np.sqrt(vh) + self.eps) + self.wd * w)
            if "residual" in st:
                full = w + st["residual"] + delta
                w_new = self._store(full, st["fmt"])
                st["residual"] = self._store(full - w_new, up.residual)
            else:
                w_new = self._store(w + delta, st["fmt"])
            layer.params[name] = w_new
