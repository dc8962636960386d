"""The shipped training data (digits equal scikit-learn's, pydoc pinned and split as documented),
gpt-char through every recipe's datapath at both GEMM levels, and what --gemm blas computes."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.train import (RECIPE_NAMES, GemmLevel, Trainer, TrainConfig, build_model, get_recipe,
                            load_dataset, train)
from accelsim.train.data import PYDOC_CONTEXT, pydoc_text, read_shipped


def test_shipped_digits_equal_scikit_learn():
    from sklearn.datasets import load_digits

    d = load_digits()
    ours = load_dataset("digits", np.random.default_rng(0))
    theirs_x = (d.data / 16.0).reshape(-1, 8, 8)
    x = np.concatenate([ours.x_train, ours.x_test])
    y = np.concatenate([ours.y_train, ours.y_test])
    # same multiset of (image, label) records, same split size
    key = lambda xx, yy: sorted(map(bytes, np.concatenate([xx.reshape(len(yy), -1) * 16, yy[:, None]], 1).astype(np.uint8)))  # noqa: E731
    assert key(x, y) == key(theirs_x, d.target)
    assert len(ours.y_test) == 359


def test_shipped_file_is_checked(monkeypatch, tmp_path):
    import accelsim.train.data as data

    bad = tmp_path / "digits.u8.xz"
    bad.write_bytes(b"not the digits")
    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    with pytest.raises(ValueError, match="sha256"):
        read_shipped("digits.u8.xz")


def test_pydoc_corpus_and_split():
    text = pydoc_text()
    assert 465_000 <= len(text) <= 510_000
    d = load_dataset("pydoc", None)
    assert d.task == "lm" and d.n_classes == len(set(text)) == 103
    assert d.unigram_entropy == pytest.approx(3.25, abs=0.01)
    assert d.x_train.shape[1] == PYDOC_CONTEXT
    assert np.array_equal(d.x_train[5, 1:], d.y_train[5, :-1])  # targets: the next characters
    assert np.array_equal(d.x_test[3, 1:], d.y_test[3, :-1])
    n_val = d.y_test.size
    assert 0.09 < n_val / len(text) < 0.11  # every 10th block of 4096 characters
    assert "".join(d.vocab[i] for i in d.x_train[0]) == text[:PYDOC_CONTEXT]


@pytest.mark.parametrize("recipe_name", [r for r in RECIPE_NAMES if r != "int4-fp4"])
@pytest.mark.parametrize("level", list(GemmLevel))
def test_gpt_char_steps_through_every_recipe(recipe_name, level):
    data = load_dataset("pydoc", None)
    recipe = get_recipe(recipe_name)
    model = build_model("gpt-char", data, np.random.default_rng(1))
    tr = Trainer(model, recipe, 0.01, np.random.default_rng(2), check=True, gemm=level)
    loss = tr.step(data.x_train[:4, :16], data.y_train[:4, :16])
    assert np.isfinite(loss) and abs(loss - np.log(data.n_classes)) < 3.0
    assert all(r.a_representable and r.b_representable for r in tr.dp.records)


def test_blas_level_is_float32_blas_of_the_quantized_operands():
    """--gemm blas: the output is float32 BLAS of the recipe-quantized operands, rounded to the
    engine's output format (hfp8 body: 1-4-3 x 1-5-2 operands, DLFloat16 output)."""
    from accelsim.numerics import quantize
    from accelsim.train import Datapath

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 70)), rng.standard_normal((70, 5)) * 0.1
    dp = Datapath(get_recipe("hfp8"), np.random.default_rng(0), gemm=GemmLevel.BLAS)
    got = dp.gemm("bwd", a, "grad", b, "weight", "body")
    aq, bq = quantize(a, "hfp8-152", "rne"), quantize(b, "hfp8-143", "rne", saturate=True)
    want = quantize((aq.astype(np.float32) @ bq.astype(np.float32)).astype(np.float64), "dlfloat16", "rna")
    assert np.array_equal(got, want)


def test_gpt_char_learns_a_little():
    """A few blas steps lower the validation loss below the uniform model's log(vocab)."""
    res = train(TrainConfig(recipe="fp32", model="gpt-char", dataset="pydoc", steps=6, batch_size=8,
                            gemm="blas"), np.random.default_rng(0))
    s = res.summary
    assert s["val_loss"] < np.log(103) and s["unigram_entropy"] == pytest.approx(3.25, abs=0.01)
    assert s["gemm"] == "blas"


def test_digits_load_without_scikit_learn():
    """The README's `accelsim train ... --json` needs no extra: digits come from the package
    (scikit-learn is never imported, even when installed)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from accelsim.train import load_dataset; "
            "d = load_dataset('digits', np.random.default_rng(0)); "
            "print(len(d.y_train) + len(d.y_test), 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1797", "False"]
