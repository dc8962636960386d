"""``gpt-char``: a small decoder-only transformer for character-level language modelling (the
GPT-2 block layout: pre-LayerNorm, causal multi-head self-attention and a 4x ReLU MLP, both
residual; a final LayerNorm and a linear head to the vocabulary).

Every matrix product is a datapath GEMM (q/k/v/output projections, the per-head score and
value products as batched GEMMs, the MLP, the head, tagged ``last``); token and position
embeddings are table lookups and LayerNorm, softmax and the residual adds run in float64, as
the rest of accelsim.train keeps non-GEMM operations. The model returns logits of shape
(B*T, vocab): the loss is the mean cross-entropy over every position.
"""

from __future__ import annotations

import math

import numpy as np

from .layers import Layer, Linear, ReLU, Residual, Sequential, softmax

GPT_DEFAULTS = {"d": 64, "layers": 2, "heads": 2}
# token-embedding init std: 1.0 lets SGD move the residual stream at the start (0.02, GPT-2's, left
# fp32 SGD at val loss 0.78 x the unigram entropy after 300 steps; 1.0: 0.74)
EMBED_STD = 1.0


class Embedding(Layer):
    """Token ids (B, T) -> rows of a learned (vocab, d) table (std ``EMBED_STD``), plus a learned
    (T, d) position table (std 0.02). Both are parameters held as biases are (FP32 in every
    recipe: a lookup is no GEMM)."""

    def __init__(self, vocab: int, context: int, d: int, rng: np.random.Generator):
        super().__init__()
        self.params["E"] = rng.standard_normal((vocab, d)) * EMBED_STD
        self.params["P"] = rng.standard_normal((context, d)) * 0.02

    def forward(self, x, dp, train):
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] > self.params["P"].shape[0]:
            raise ValueError(f"gpt-char takes (batch, <= {self.params['P'].shape[0]}) token ids, got {x.shape}")
        self._ids = x
        return self.params["E"][x] + self.params["P"][: x.shape[1]]

    def backward(self, dy, dp):
        gE = np.zeros_like(self.params["E"])
        np.add.at(gE, self._ids.reshape(-1), dy.reshape(-1, dy.shape[-1]))
        self.grads["E"] = gE
        gP = np.zeros_like(self.params["P"])
        gP[: dy.shape[1]] = dy.sum(axis=0)
        self.grads["P"] = gP
        return None  # nothing below the embedding


class LayerNorm(Layer):
    """Normalization over the last axis with a learned gain and bias (float64)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.params["gamma"] = np.ones(d)
        self.params["beta"] = np.zeros(d)
        self.eps = eps

    def forward(self, x, dp, train):
        mu = x.mean(axis=-1, keepdims=True)
        xc = x - mu
        inv = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + self.eps)
        self._xhat, self._inv = xc * inv, inv
        return self._xhat * self.params["gamma"] + self.params["beta"]

    def backward(self, dy, dp):
        xhat = self._xhat
        axes = tuple(range(dy.ndim - 1))
        self.grads["gamma"] = (dy * xhat).sum(axis=axes)
        self.grads["beta"] = dy.sum(axis=axes)
        g = dy * self.params["gamma"]
        return (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True)) * self._inv


class CausalSelfAttention(Layer):
    """Multi-head causal self-attention over (B, T, d): Q, K, V and output projections (Linear
    layers) and per (sample, head) the GEMMs S = Q K^T / sqrt(dh) and O = P V with position t
    attending to positions <= t."""

    def __init__(self, d: int, heads: int, rng: np.random.Generator):
        super().__init__()
        if d % heads:
            raise ValueError(f"gpt-char: width {d} is not a multiple of heads {heads}")
        self.d, self.h = d, heads
        self.q, self.k, self.v = (Linear(d, d, rng, bias=False) for _ in range(3))
        self.o = Linear(d, d, rng, bias=False)
        self.o.params["W"] *= 1.0 / math.sqrt(2.0)  # residual branch: smaller start (GPT-2 style)

    def children(self):
        return [self.q, self.k, self.v, self.o]

    def _split(self, x):  # (B, T, d) -> (B*h, T, dh)
        B, T, _ = x.shape
        return x.reshape(B, T, self.h, -1).transpose(0, 2, 1, 3).reshape(B * self.h, T, -1)

    def _merge(self, x, B):  # (B*h, T, dh) -> (B, T, d)
        _, T, dh = x.shape
        return x.reshape(B, self.h, T, dh).transpose(0, 2, 1, 3).reshape(B, T, self.h * dh)

    def _bmm(self, dp, kind, a, a_role, b, b_role, name):
        return dp.gemm(kind, a, a_role, b, b_role, "body", (id(self), name))

    def forward(self, x, dp, train):
        B, T, _ = x.shape
        Q, K, V = (self._split(m.forward(x, dp, train)) for m in (self.q, self.k, self.v))
        s = 1.0 / math.sqrt(Q.shape[-1])
        S = self._bmm(dp, "fwd", Q, "act", K.transpose(0, 2, 1), "act", "S") * s
        S = np.where(np.tri(T, dtype=bool), S, -np.inf)
        P = softmax(S)
        O = self._bmm(dp, "fwd", P, "act", V, "act", "O")
        self._cache = (Q, K, V, P, s, B)
        return self.o.forward(self._merge(O, B), dp, train)

    def backward(self, dy, dp):
        Q, K, V, P, s, B = self._cache
        dO = self._split(self.o.backward(dy, dp))
        dP = self._bmm(dp, "bwd", dO, "grad", V.transpose(0, 2, 1), "act", "dP")
        dV = self._bmm(dp, "wgrad", P.transpose(0, 2, 1), "act", dO, "grad", "dV")
        dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * s  # zero where masked (P = 0)
        dQ = self._bmm(dp, "bwd", dS, "grad", K, "act", "dQ")
        dK = self._bmm(dp, "wgrad", dS.transpose(0, 2, 1), "grad", Q, "act", "dK")
        return (self.q.backward(self._merge(dQ, B), dp) + self.k.backward(self._merge(dK, B), dp)
                + self.v.backward(self._merge(dV, B), dp))


class Logits(Layer):
    """(B, T, d) -> (B*T, d): the head's input, one row per position."""

    def forward(self, x, dp, train):
        self._shape = x.shape
        return x.reshape(-1, x.shape[-1])

    def backward(self, dy, dp):
        return dy.reshape(self._shape)


def gpt_char(vocab: int, context: int, rng: np.random.Generator, d: int = GPT_DEFAULTS["d"],
             layers: int = GPT_DEFAULTS["layers"], heads: int = GPT_DEFAULTS["heads"]) -> Sequential:
    """Embedding, ``layers`` pre-LN blocks (attention, 4d ReLU MLP), LayerNorm, linear head."""
    blocks = []
    for _ in range(layers):
        mlp = Sequential([LayerNorm(d), Linear(d, 4 * d, rng), ReLU(), Linear(4 * d, d, rng)])
        mlp.layers[-1].params["W"] *= 1.0 / math.sqrt(2.0 * layers)
        blocks += [Residual(Sequential([LayerNorm(d), CausalSelfAttention(d, heads, rng)])), Residual(mlp)]
    return Sequential([Embedding(vocab, context, d, rng), *blocks, LayerNorm(d), Logits(),
                       Linear(d, vocab, rng, "last")])
