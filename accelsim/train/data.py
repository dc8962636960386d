"""Training data, nothing downloaded: scikit-learn's bundled 8x8 ``digits`` (1,797 images,
10 classes; optional extra ``train``) and a synthetic sequence task.

A :class:`Dataset` holds float64 inputs of shape (N, L, F): L rows/tokens of F features each
(digits: 8 rows of 8 pixels in [0, 1]; seq: L one-hot tokens). Models view it as they need
(an MLP flattens it, the CNN reads it as a 1-channel image, the transformer as tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DATASET_NAMES = ("digits", "seq")
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    image: bool  # True when (L, F) is a 2-D image the CNN may read


def stratified_split(y: np.ndarray, test_fraction: float, rng: np.random.Generator):
    """(train indices, test indices): each class split round(n_c * test_fraction) to test,
    members drawn by ``rng``; both index arrays sorted."""
    test = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n_test = int(round(len(idx) * test_fraction))
        test.append(rng.permutation(idx)[:n_test])
    test = np.sort(np.concatenate(test))
    train = np.setdiff1d(np.arange(len(y)), test)
    return train, test


def load_digits_dataset(rng: np.random.Generator) -> Dataset:
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - depends on the install
        raise ValueError("dataset 'digits' needs scikit-learn: pip install 'accelsim[train]'") from None
    d = load_digits()
    x = (d.data / 16.0).reshape(-1, 8, 8)
    y = d.target.astype(np.int64)
    tr, te = stratified_split(y, TEST_FRACTION, rng)
    return Dataset("digits", x[tr], y[tr], x[te], y[te], 10, True)


def make_sequence_dataset(rng: np.random.Generator, n: int = 2000, length: int = 8,
                          vocab: int = 8) -> Dataset:
    """Majority token: each sample is ``length`` tokens from ``vocab``; the label is the most
    frequent token (ties: the smallest). Solving it needs to compare tokens across positions."""
    tok = rng.integers(0, vocab, size=(n, length))
    counts = np.stack([(tok == v).sum(axis=1) for v in range(vocab)], axis=1)
    y = counts.argmax(axis=1).astype(np.int64)
    x = np.eye(vocab)[tok]
    tr, te = stratified_split(y, TEST_FRACTION, rng)
    return Dataset("seq", x[tr], y[tr], x[te], y[te], vocab, False)


def load_dataset(name: str, rng: np.random.Generator) -> Dataset:
    if name == "digits":
        return load_digits_dataset(rng)
    if name == "seq":
        return make_sequence_dataset(rng)
    raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASET_NAMES)}")
