"""The model families: ``mlp``, ``cnn`` (BatchNorm and a residual block with a 1x1 shortcut
convolution), ``transformer`` (one attention + MLP block) for classification, and ``gpt-char``
(accelsim.train.gpt) for character-level language modelling. Layer tags mark the first and last
layer and the shortcut, which recipes may keep in higher precision."""

from __future__ import annotations

import numpy as np

from accelsim.errors import InputError

from .data import Dataset
from .gpt import gpt_char
from .layers import (AvgPool2d, BatchNorm, Conv2d, Flatten, Layer, Linear, MeanPool,
                     PositionalEmbedding, ReLU, Residual, Sequential, TransformerBlock)

MODEL_NAMES = ("mlp", "cnn", "transformer", "gpt-char")


class Reshape(Layer):
    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x, dp, train):
        self._in = x.shape
        return x.reshape((x.shape[0],) + self.shape)

    def backward(self, dy, dp):
        return dy.reshape(self._in)


def mlp(L: int, F: int, n_classes: int, rng: np.random.Generator, hidden: int = 64) -> Sequential:
    return Sequential([Flatten(), Linear(L * F, hidden, rng, "first"), ReLU(),
                       Linear(hidden, hidden, rng), ReLU(), Linear(hidden, n_classes, rng, "last")])


def cnn(L: int, F: int, n_classes: int, rng: np.random.Generator, width: int = 8) -> Sequential:
    w2 = 2 * width
    block = Residual(
        Sequential([Conv2d(width, w2, 3, rng), BatchNorm(w2), ReLU(), Conv2d(w2, w2, 3, rng), BatchNorm(w2)]),
        Sequential([Conv2d(width, w2, 1, rng, tag="shortcut"), BatchNorm(w2)]),
    )
    return Sequential([Reshape((1, L, F)), Conv2d(1, width, 3, rng, tag="first"), BatchNorm(width), ReLU(),
                       block, ReLU(), AvgPool2d(2), Flatten(),
                       Linear(w2 * (L // 2) * (F // 2), n_classes, rng, "last")])


def transformer(L: int, F: int, n_classes: int, rng: np.random.Generator, d: int = 16) -> Sequential:
    return Sequential([Linear(F, d, rng, "first"), PositionalEmbedding(L, d, rng),
                       TransformerBlock(d, 2 * d, rng), MeanPool(), Linear(d, n_classes, rng, "last")])


def build_model(name: str, data: Dataset, rng: np.random.Generator) -> Sequential:
    if name not in MODEL_NAMES:
        raise InputError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}")
    if (name == "gpt-char") != (data.task == "lm"):
        raise InputError(f"model {name!r} does not fit dataset {data.name!r}: 'gpt-char' is the "
                         f"language model (dataset 'pydoc'), the others classify ('digits', 'seq')")
    if name == "gpt-char":
        return gpt_char(data.n_classes, data.x_train.shape[1], rng)
    _, L, F = data.x_train.shape
    if name == "mlp":
        return mlp(L, F, data.n_classes, rng)
    if name == "cnn":
        if not data.image or L % 2 or F % 2:
            raise InputError(f"model 'cnn' needs an image dataset with even sides, not {data.name!r}")
        return cnn(L, F, data.n_classes, rng)
    if name == "transformer":
        return transformer(L, F, data.n_classes, rng)
    raise InputError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}")
