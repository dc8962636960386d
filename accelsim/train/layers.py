"""Layers with explicit forward and backward. Every matrix product goes through the
:class:`~accelsim.train.datapath.Datapath` (fwd, bwd-data and wgrad GEMMs); everything else
(bias, BatchNorm, ReLU, pooling, softmax) runs in float64, as the papers' emulators keep
non-GEMM operations in high precision (HFP8 app. B).

Each layer caches what its backward needs during ``forward(x, dp, train)``; ``backward(dy, dp)``
fills ``grads`` (same keys as ``params``) and returns dL/dx.
"""

from __future__ import annotations

import math

import numpy as np

from .datapath import Datapath

TAGS = ("body", "first", "last", "shortcut")


class Layer:
    """Base class: no parameters."""

    tag = "body"

    def __init__(self):
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}

    def forward(self, x, dp: Datapath, train: bool):  # pragma: no cover - interface
        raise NotImplementedError

    def backward(self, dy, dp: Datapath):  # pragma: no cover - interface
        raise NotImplementedError

    def children(self) -> list[Layer]:
        return []


def _check_tag(tag):
    if tag not in TAGS:
        raise ValueError(f"layer tag {tag!r} is not one of {', '.join(TAGS)}")
    return tag


def _he(rng: np.random.Generator, fan_in: int, shape) -> np.ndarray:
    return rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)


class Linear(Layer):
    """y = x W + b; x is (..., in) and W (in, out)."""

    def __init__(self, n_in: int, n_out: int, rng: np.random.Generator, tag: str = "body",
                 bias: bool = True):
        super().__init__()
        self.tag = _check_tag(tag)
        self.params["W"] = _he(rng, n_in, (n_in, n_out))
        if bias:
            self.params["b"] = np.zeros(n_out)

    def forward(self, x, dp, train):
        self._shape = x.shape
        x2 = x.reshape(-1, x.shape[-1])
        self._x = x2
        y = dp.gemm("fwd", x2, "act", self.params["W"], "weight", self.tag, id(self))
        if "b" in self.params:
            y = y + self.params["b"]
        return y.reshape(*x.shape[:-1], -1)

    def backward(self, dy, dp):
        dy2 = dy.reshape(-1, dy.shape[-1])
        self.grads["W"] = dp.gemm("wgrad", self._x.T, "act", dy2, "grad", self.tag, id(self))
        if "b" in self.params:
            self.grads["b"] = dy2.sum(axis=0)
        if self.tag == "first":  # no layer below needs dL/dx (the input): skip the GEMM
            return None
        dx = dp.gemm("bwd", dy2, "grad", self.params["W"].T, "weight", self.tag, id(self))
        return dp.input_grad(id(self), self.tag, self._x, dx).reshape(self._shape)


def im2col(x: np.ndarray, k: int, pad: int) -> np.ndarray:
    """(B, C, H, W) -> (B*Ho*Wo, C*k*k) patches, stride 1, zero padding ``pad``."""
    B, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # B,C,Ho,Wo,k,k
    Ho, Wo = win.shape[2], win.shape[3]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(B * Ho * Wo, C * k * k)


def col2im(cols: np.ndarray, shape, k: int, pad: int) -> np.ndarray:
    """Adjoint of :func:`im2col`: scatter-add patch gradients back to (B, C, H, W)."""
    B, C, H, W = shape
    Ho, Wo = H + 2 * pad - k + 1, W + 2 * pad - k + 1
    c = cols.reshape(B, Ho, Wo, C, k, k)
    xp = np.zeros((B, C, H + 2 * pad, W + 2 * pad))
    for i in range(k):
        for j in range(k):
            xp[:, :, i:i + Ho, j:j + Wo] += c[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return xp[:, :, pad:pad + H, pad:pad + W]


class Conv2d(Layer):
    """Stride-1 convolution as an im2col GEMM: (B*Ho*Wo, C*k*k) x (C*k*k, F)."""

    def __init__(self, c_in: int, c_out: int, k: int, rng: np.random.Generator, tag: str = "body",
                 pad: int | None = None, bias: bool = False):
        super().__init__()
        self.tag = _check_tag(tag)
        self.k = k
        self.pad = (k - 1) // 2 if pad is None else pad
        self.params["W"] = _he(rng, c_in * k * k, (c_in * k * k, c_out))
        if bias:
            self.params["b"] = np.zeros(c_out)

    def forward(self, x, dp, train):
        self._shape = x.shape
        self._input = x
        B, _, H, W = x.shape
        cols = im2col(x, self.k, self.pad)
        self._cols = cols
        y = dp.gemm("fwd", cols, "act", self.params["W"], "weight", self.tag, id(self))
        if "b" in self.params:
            y = y + self.params["b"]
        Ho, Wo = H + 2 * self.pad - self.k + 1, W + 2 * self.pad - self.k + 1
        self._out = (B, Ho, Wo)
        return y.reshape(B, Ho, Wo, -1).transpose(0, 3, 1, 2)

    def backward(self, dy, dp):
        dy2 = dy.transpose(0, 2, 3, 1).reshape(-1, dy.shape[1])
        self.grads["W"] = dp.gemm("wgrad", self._cols.T, "act", dy2, "grad", self.tag, id(self))
        if "b" in self.params:
            self.grads["b"] = dy2.sum(axis=0)
        if self.tag == "first":
            return None
        dcols = dp.gemm("bwd", dy2, "grad", self.params["W"].T, "weight", self.tag, id(self))
        dx = col2im(dcols, self._shape, self.k, self.pad)
        return dp.input_grad(id(self), self.tag, self._input, dx)


class BatchNorm(Layer):
    """Batch normalization over all axes but axis 1 (channels / features)."""

    def __init__(self, n: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.params["gamma"] = np.ones(n)
        self.params["beta"] = np.zeros(n)
        self.eps, self.momentum = eps, momentum
        self.running_mean = np.zeros(n)
        self.running_var = np.ones(n)

    def _axes(self, x):
        return (0,) + tuple(range(2, x.ndim))

    def _bshape(self, x):
        return (1, -1) + (1,) * (x.ndim - 2)

    def forward(self, x, dp, train):
        ax, bs = self._axes(x), self._bshape(x)
        if train:
            mean, var = x.mean(axis=ax), x.var(axis=ax)
            n = x.size // x.shape[1]
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * n / max(n - 1, 1)
        else:
            mean, var = self.running_mean, self.running_var
        inv = 1.0 / np.sqrt(var + self.eps)
        xhat = (x - mean.reshape(bs)) * inv.reshape(bs)
        self._xhat, self._inv = xhat, inv
        return xhat * self.params["gamma"].reshape(bs) + self.params["beta"].reshape(bs)

    def backward(self, dy, dp):
        ax, bs = self._axes(dy), self._bshape(dy)
        xhat, inv = self._xhat, self._inv
        self.grads["gamma"] = (dy * xhat).sum(axis=ax)
        self.grads["beta"] = dy.sum(axis=ax)
        dxhat = dy * self.params["gamma"].reshape(bs)
        m1 = dxhat.mean(axis=ax, keepdims=True)
        m2 = (dxhat * xhat).mean(axis=ax, keepdims=True)
        return (dxhat - m1 - xhat * m2) * inv.reshape(bs)


class ReLU(Layer):
    def forward(self, x, dp, train):
        self._mask = x > 0
        return np.where(self._mask, x, 0.0)

    def backward(self, dy, dp):
        return np.where(self._mask, dy, 0.0)


class _Pool2d(Layer):
    """Non-overlapping k x k pooling windows (H and W divisible by k)."""

    def __init__(self, k: int = 2):
        super().__init__()
        self.k = k

    def _check(self, x) -> None:
        H, W = x.shape[2:]
        if H % self.k or W % self.k:
            raise ValueError(f"{type(self).__name__}({self.k}) needs H and W divisible by "
                             f"{self.k}, got {H}x{W}")


class MaxPool2d(_Pool2d):
    """Non-overlapping k x k max pooling; ties send the gradient to the first maximum in
    row-major order."""

    def forward(self, x, dp, train):
        self._check(x)
        B, C, H, W = x.shape
        k = self.k
        w = x.reshape(B, C, H // k, k, W // k, k).transpose(0, 1, 2, 4, 3, 5).reshape(B, C, H // k, W // k, k * k)
        self._arg = w.argmax(axis=-1)
        self._shape = x.shape
        return np.take_along_axis(w, self._arg[..., None], axis=-1)[..., 0]

    def backward(self, dy, dp):
        B, C, H, W = self._shape
        k = self.k
        g = np.zeros((B, C, H // k, W // k, k * k))
        np.put_along_axis(g, self._arg[..., None], dy[..., None], axis=-1)
        return g.reshape(B, C, H // k, W // k, k, k).transpose(0, 1, 2, 4, 3, 5).reshape(B, C, H, W)


class AvgPool2d(_Pool2d):
    """Non-overlapping k x k average pooling."""

    def forward(self, x, dp, train):
        self._check(x)
        B, C, H, W = x.shape
        k = self.k
        self._shape = x.shape
        return x.reshape(B, C, H // k, k, W // k, k).mean(axis=(3, 5))

    def backward(self, dy, dp):
        k = self.k
        return np.repeat(np.repeat(dy, k, axis=2), k, axis=3) / (k * k)


class Flatten(Layer):
    def forward(self, x, dp, train):
        self._shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dy, dp):
        return dy.reshape(self._shape)


class MeanPool(Layer):
    """Mean over the sequence axis: (B, L, d) -> (B, d)."""

    def forward(self, x, dp, train):
        self._L = x.shape[1]
        return x.mean(axis=1)

    def backward(self, dy, dp):
        return np.repeat(dy[:, None, :], self._L, axis=1) / self._L


class Sequential(Layer):
    def __init__(self, layers: list[Layer]):
        super().__init__()
        self.layers = list(layers)

    def children(self):
        return self.layers

    def forward(self, x, dp, train):
        for layer in self.layers:
            x = layer.forward(x, dp, train)
        return x

    def backward(self, dy, dp):
        for layer in reversed(self.layers):
            if dy is None:  # the first GEMM layer needs no input gradient: nothing below does
                break
            dy = layer.backward(dy, dp)
        return dy


class Residual(Layer):
    """out = main(x) + shortcut(x) (identity when ``shortcut`` is None)."""

    def __init__(self, main: Layer, shortcut: Layer | None = None):
        super().__init__()
        self.main, self.shortcut = main, shortcut

    def children(self):
        return [self.main] + ([self.shortcut] if self.shortcut is not None else [])

    def forward(self, x, dp, train):
        y = self.main.forward(x, dp, train)
        return y + (x if self.shortcut is None else self.shortcut.forward(x, dp, train))

    def backward(self, dy, dp):
        dx = self.main.backward(dy, dp)
        ds = dy if self.shortcut is None else self.shortcut.backward(dy, dp)
        return dx + ds


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


class SelfAttention(Layer):
    """Single-head self-attention over (B, L, d): Q, K, V and output projections (Linear
    layers, so their GEMMs are the recipe's) and the two per-sample activation x activation
    GEMMs S = Q K^T / sqrt(d) and O = P V."""

    def __init__(self, d: int, rng: np.random.Generator):
        super().__init__()
        self.d = d
        self.q, self.k, self.v, self.o = (Linear(d, d, rng, bias=False) for _ in range(4))

    def children(self):
        return [self.q, self.k, self.v, self.o]

    def _bmm(self, dp, kind, a, a_role, b, b_role, name):
        return dp.gemm(kind, a, a_role, b, b_role, "body", (id(self), name))

    def forward(self, x, dp, train):
        Q, K, V = (m.forward(x, dp, train) for m in (self.q, self.k, self.v))
        s = 1.0 / math.sqrt(self.d)
        S = self._bmm(dp, "fwd", Q, "act", K.transpose(0, 2, 1), "act", "S") * s
        P = softmax(S)
        O = self._bmm(dp, "fwd", P, "act", V, "act", "O")
        self._cache = (Q, K, V, P, s)
        return self.o.forward(O, dp, train)

    def backward(self, dy, dp):
        Q, K, V, P, s = self._cache
        dO = self.o.backward(dy, dp)
        dP = self._bmm(dp, "bwd", dO, "grad", V.transpose(0, 2, 1), "act", "dP")
        dV = self._bmm(dp, "wgrad", P.transpose(0, 2, 1), "act", dO, "grad", "dV")
        dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * s
        dQ = self._bmm(dp, "bwd", dS, "grad", K, "act", "dQ")
        dK = self._bmm(dp, "wgrad", dS.transpose(0, 2, 1), "grad", Q, "act", "dK")
        return self.q.backward(dQ, dp) + self.k.backward(dK, dp) + self.v.backward(dV, dp)


class TransformerBlock(Layer):
    """x + Attn(x), then + MLP (d -> hidden -> d, ReLU); no normalization (one block)."""

    def __init__(self, d: int, hidden: int, rng: np.random.Generator):
        super().__init__()
        self.attn = Residual(SelfAttention(d, rng))
        self.mlp = Residual(Sequential([Linear(d, hidden, rng), ReLU(), Linear(hidden, d, rng)]))

    def children(self):
        return [self.attn, self.mlp]

    def forward(self, x, dp, train):
        return self.mlp.forward(self.attn.forward(x, dp, train), dp, train)

    def backward(self, dy, dp):
        return self.attn.backward(self.mlp.backward(dy, dp), dp)


class PositionalEmbedding(Layer):
    """Adds a learned (L, d) position table."""

    def __init__(self, L: int, d: int, rng: np.random.Generator):
        super().__init__()
        self.params["P"] = rng.standard_normal((L, d)) * 0.1

    def forward(self, x, dp, train):
        return x + self.params["P"]

    def backward(self, dy, dp):
        self.grads["P"] = dy.sum(axis=0)
        return dy


class SoftmaxCrossEntropy:
    """Mean cross-entropy of logits (B, C) against integer labels; ``backward`` returns the
    loss gradient times ``scale`` (loss scaling enters here, once)."""

    def forward(self, z: np.ndarray, y: np.ndarray) -> float:
        zs = z - z.max(axis=1, keepdims=True)
        logp = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
        self._p, self._y = np.exp(logp), y
        return float(-logp[np.arange(len(y)), y].mean())

    def backward(self, scale: float = 1.0) -> np.ndarray:
        g = self._p.copy()
        g[np.arange(len(self._y)), self._y] -= 1.0
        return g * (scale / len(self._y))


def parameters(layer: Layer) -> list[tuple[Layer, str]]:
    """Every (layer, parameter name) of a layer tree, in a fixed order."""
    out = [(layer, k) for k in layer.params]
    for c in layer.children():
        out.extend(parameters(c))
    return out
