"""``accelsim train``: the JSON keys external scripts rely on, --compare's files, clean errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from accelsim.cli import main

KEYS = {"recipe", "model", "dataset", "steps", "final_train_loss", "test_accuracy", "skipped_steps",
        "loss_scale_final"}


def test_json_summary(capsys):
    assert main(["train", "--recipe", "bf16-amp", "--model", "mlp", "--dataset", "digits",
                 "--steps", "5", "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out)
    assert (out["recipe"], out["model"], out["dataset"], out["steps"]) == ("bf16-amp", "mlp", "digits", 5)
    assert out["loss_scale_final"] == 2.0**16
    assert 0.0 <= out["test_accuracy"] <= 1.0 and out["final_train_loss"] > 0


def test_json_null_loss_scale_for_fp32(capsys):
    assert main(["train", "--recipe", "fp32", "--model", "transformer", "--dataset", "seq",
                 "--steps", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["loss_scale_final"] is None and out["model"] == "transformer"


def test_compare_writes_png_and_tidy_csv(tmp_path, capsys):
    assert main(["train", "--compare", "fp32,bf16-amp", "--steps", "4", "--eval-every", "2",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    df = pd.read_csv(tmp_path / "train_mlp_digits.csv")
    assert list(df.columns[:5]) == ["recipe", "model", "dataset", "seed", "step"]
    assert set(df["recipe"]) == {"fp32", "bf16-amp"}
    assert list(df[df.recipe == "fp32"]["step"]) == [2, 4]
    png = (tmp_path / "train_mlp_digits.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.parametrize("argv,msg", [
    (["--compare", "fp32,fp9"], "unknown recipe 'fp9'"),
    (["--recipe", "fp32", "--steps", "0"], "argument --steps: must be an integer in [1, "),
    (["--recipe", "fp32", "--model", "cnn", "--dataset", "seq", "--steps", "1"], "needs an image dataset"),
])
def test_errors_are_one_line(argv, msg, capsys):
    try:
        rc = main(["train", *argv])
    except SystemExit as exc:  # argparse refuses a flag's value
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_compare_saves_each_recipe_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    import accelsim.train as train_pkg
    from accelsim.cli import main as cli_main

    argv = ["train", "--compare", "fp32,bf16-amp", "--model", "mlp", "--dataset", "digits",
            "--steps", "3", "--seed", "1", "--out", str(tmp_path), "--no-progress", "--json"]
    assert cli_main(argv) == 0
    first = capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "train_mlp_digits.bf16-amp.json", "train_mlp_digits.fp32.json"]

    def no_training(*a, **k):
        raise AssertionError("a saved recipe was trained again")

    monkeypatch.setattr(train_pkg, "train", no_training)
    assert cli_main(argv) == 0  # everything comes from the saved parts
    assert capsys.readouterr().out == first
    # other settings are another run: that part is recomputed, not reused
    # (the stub's AssertionError is not an AccelsimError: the CLI reports it as a bug)
    assert cli_main(argv[:8] + ["4"] + argv[9:]) == 70
    assert "internal error: AssertionError: a saved recipe was trained again" \
        in capsys.readouterr().err


def test_compare_dedupes_and_prints_no_nan(tmp_path, capsys):
    """--compare fp32,fp32 trains fp32 once and says so; a recipe without a loss scaler shows
    "-" for loss_scale_final, never NaN."""
    assert main(["train", "--compare", "fp32,fp32", "--steps", "2", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "listed more than once" in out
    assert "NaN" not in out and "nan" not in out
    rows = [ln for ln in out.splitlines() if ln.lstrip().startswith("fp32")]
    assert len(rows) == 1 and " - " in rows[0] and "None" not in rows[0]
    df = pd.read_csv(tmp_path / "train_mlp_digits.csv")
    assert set(df["recipe"]) == {"fp32"} and list(df["step"]) == [1, 2]  # trained once


def test_gemm_level_in_json(capsys):
    assert main(["train", "--recipe", "hfp8", "--steps", "3", "--gemm", "blas", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gemm"] == "blas" and out["val_loss"] > 0


def test_gpt_char_needs_pydoc(capsys):
    assert main(["train", "--recipe", "fp32", "--model", "gpt-char", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "'gpt-char' is the language model" in err and err.count("\n") == 1
