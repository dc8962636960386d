"""Training data, nothing downloaded: the 8x8 ``digits`` (scikit-learn's bundled copy of the UCI
optdigits test set, 1,797 images, 10 classes), a synthetic sequence task, and ``pydoc`` (the
text of Python 3.11.7's ``pydoc_data.topics``, a character-level language-modelling corpus).
``digits`` and ``pydoc`` are files shipped in ``accelsim/data/train/``, written once by
``scripts/make_train_data.py`` and pinned here by sha256.

A classification :class:`Dataset` holds float64 inputs of shape (N, L, F): L rows/tokens of F
features each (digits: 8 rows of 8 pixels in [0, 1]; seq: L one-hot tokens). Models view it as
they need (an MLP flattens it, the CNN reads it as a 1-channel image, the transformer as
tokens). A language-modelling one (``task="lm"``) holds int64 windows of T token ids, x, and
the next tokens, y, both (N, T); the training windows start at every character (a strided view,
no copy), the validation windows tile the validation text without overlap.
"""

from __future__ import annotations

import hashlib
import lzma
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from accelsim.errors import InputError

DATASET_NAMES = ("digits", "seq", "pydoc")
TEST_FRACTION = 0.2
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "train"
# sha256 of the shipped files (scripts/make_train_data.py prints them)
SHA256 = {
    "digits.u8.xz": "232afe2cacbdefcaecd6a892c374025b0bc3dd14f24c4179e78e6a3333e125cd",
    "pydoc_topics.txt.xz": "ea19723be49a25e432d8272fa5e3b3dbb3e66912c4344e5bc7c6b69eabfbbe29",
}
PYDOC_CONTEXT = 64  # characters per window (gpt-char's context)
PYDOC_BLOCK = 4096  # the text is cut into blocks of this many characters ...
PYDOC_VAL_EVERY = 10  # ... and every 10th block (the 10th, 20th, ...) is validation text


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int  # classes, or the vocabulary size of a language-modelling set
    image: bool  # True when (L, F) is a 2-D image the CNN may read
    task: str = "classify"  # "classify" or "lm" (next-token prediction at every position)
    unigram_entropy: float | None = None  # lm: entropy of the corpus' symbol frequencies (nats)
    vocab: str | None = None  # lm: the symbols, in token-id order


def read_shipped(name: str) -> bytes:
    """The decompressed content of a shipped data file, after checking its sha256."""
    path = DATA_DIR / name
    try:
        blob = path.read_bytes()
    except OSError as e:
        raise InputError(f"training data file {path} cannot be read ({e.strerror}); "
                         f"reinstall accelsim or run scripts/make_train_data.py") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256[name]:
        raise InputError(f"training data file {path} has sha256 {digest}, expected {SHA256[name]}; "
                         f"reinstall accelsim")
    return lzma.decompress(blob)


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


@lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    rec = np.frombuffer(read_shipped("digits.u8.xz"), dtype=np.uint8).reshape(-1, 65)
    return rec[:, :64].astype(np.float64), rec[:, 64].astype(np.int64)


def load_digits_dataset(rng: np.random.Generator) -> Dataset:
    pixels, y = _digits_arrays()
    x = (pixels / 16.0).reshape(-1, 8, 8)
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


@lru_cache(maxsize=1)
def pydoc_text() -> str:
    """The shipped corpus: Python 3.11.7's pydoc_data.topics, topics in sorted order."""
    return read_shipped("pydoc_topics.txt.xz").decode("utf-8")


def unigram_entropy(tokens: np.ndarray, n: int) -> float:
    """Entropy (nats) of the token frequencies: the loss of the best model that ignores context."""
    p = np.bincount(tokens, minlength=n) / len(tokens)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def load_pydoc_dataset(context: int = PYDOC_CONTEXT) -> Dataset:
    """Character-level ``pydoc``: the vocabulary is every symbol of the corpus; every
    ``PYDOC_VAL_EVERY``-th block of ``PYDOC_BLOCK`` characters is validation text (a fixed
    split, the same for every seed), the rest training text."""
    text = pydoc_text()
    vocab = "".join(sorted(set(text)))
    lut = {c: i for i, c in enumerate(vocab)}
    ids = np.fromiter((lut[c] for c in text), dtype=np.int64, count=len(text))
    block = np.arange(len(ids)) // PYDOC_BLOCK
    val = (block % PYDOC_VAL_EVERY) == PYDOC_VAL_EVERY - 1
    train_ids, val_ids = ids[~val], ids[val]
    win = np.lib.stride_tricks.sliding_window_view(train_ids, context + 1)  # (N, T+1), no copy
    n_val = (len(val_ids) - 1) // context
    v = val_ids[:n_val * context + 1]
    x_val = v[:-1].reshape(n_val, context)
    y_val = v[1:].reshape(n_val, context)
    return Dataset("pydoc", win[:, :-1], win[:, 1:], x_val, y_val, len(vocab), False, task="lm",
                   unigram_entropy=unigram_entropy(ids, len(vocab)), vocab=vocab)


def load_dataset(name: str, rng: np.random.Generator) -> Dataset:
    """A dataset by name; ``rng`` draws the digits / seq split (pydoc's split is fixed)."""
    if name == "digits":
        return load_digits_dataset(rng)
    if name == "seq":
        return make_sequence_dataset(rng)
    if name == "pydoc":
        return load_pydoc_dataset()
    raise InputError(f"unknown dataset {name!r}; choose from {', '.join(DATASET_NAMES)}")
