"""``accelsim study``: the grid's tables (with a CI column), plots, resume and Ctrl-C; the t
quantile against scipy; the verdict refuses differences its interval does not resolve."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from accelsim.cli import main
from accelsim.train.study import Metric, mean_ci, summarize, t_quantile, verdict


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 19, 60, 500])
@pytest.mark.parametrize("p", [0.9, 0.975, 0.995])
def test_t_quantile_matches_scipy(df, p):
    from scipy.stats import t

    assert t_quantile(p, df) == pytest.approx(t.ppf(p, df), rel=1e-9)


def test_mean_ci_by_hand():
    m, sd, hw = mean_ci([1.0, 2.0, 3.0])
    assert (m, sd) == (2.0, 1.0)
    assert hw == pytest.approx(4.302652729911275 / math.sqrt(3), rel=1e-9)  # t_{0.975, 2}
    assert math.isnan(mean_ci([5.0])[2])  # one seed: no interval, not a zero-width one


def test_verdict_refuses_unresolved_differences():
    acc = Metric("test_accuracy", True, 1 / 359, "one of 359", 100.0)
    assert verdict(0.01, 0.02, acc, "fp32").startswith("not resolved")
    assert verdict(0.001, 0.0005, acc, "fp32").startswith("below the metric's resolution")
    assert verdict(-0.02, 0.01, acc, "fp32").startswith("worse than fp32")
    loss = Metric("val_loss", False, 1e-4, "")
    assert verdict(-0.05, 0.01, loss, "fp32").startswith("better than fp32")


def test_summary_pairs_by_seed():
    runs = pd.DataFrame({"recipe": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2, "status": "ok",
                         "val_loss": [2.0, 2.1, 2.2, 2.05, 2.16, 2.24]})
    s = summarize(runs, Metric("val_loss", False, 1e-4, ""), "a").set_index("recipe")
    assert s.loc["b", "diff"] == pytest.approx(0.05)
    d = np.array([0.05, 0.06, 0.04])
    assert s.loc["b", "diff_ci95_hi"] - s.loc["b", "diff"] == pytest.approx(
        4.302652729911275 * d.std(ddof=1) / math.sqrt(3), rel=1e-9)
    assert s.loc["b", "verdict"].startswith("worse than a")


def test_study_writes_tables_and_plots_and_resumes(tmp_path, capsys, monkeypatch):
    argv = ["study", "--recipes", "fp32,hfp8", "--model", "mlp", "--dataset", "digits",
            "--seeds", "3", "--steps", "12", "--eval-every", "4", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "95 % CI" in out and "resolution: one of 359 test examples" in out
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary["recipe"]) == ["fp32", "hfp8"] and list(summary["n"]) == [3, 3]
    assert {"mean", "sd", "ci95_lo", "ci95_hi", "diff", "verdict"} <= set(summary.columns)
    assert (summary["ci95_lo"] <= summary["mean"]).all() and (summary["mean"] <= summary["ci95_hi"]).all()
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 6 and set(runs["seed"]) == {0, 1, 2}
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert sorted(set(curves["step"])) == [4, 8, 12]
    for png in ("curves.png", "final.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    import accelsim.train.study as study

    def no_training(*a, **k):  # a rerun finds every run in the journal: nothing trains
        raise AssertionError("a finished run was recomputed")

    monkeypatch.setattr(study, "train", no_training)
    assert main(argv) == 0


def test_study_ctrl_c_says_what_was_saved(tmp_path, capsys, monkeypatch):
    import accelsim.train.study as study

    real, calls = study.train, []

    def interrupt_second(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(study, "train", interrupt_second)
    with pytest.raises(SystemExit) as e:
        main(["study", "--recipes", "fp32", "--seeds", "3", "--steps", "3", "--out", str(tmp_path),
              "--no-progress"])
    assert e.value.code == 130
    err = capsys.readouterr().err
    assert "1 of 3 runs are saved" in err and "rerun the same command to resume" in err


def test_study_bad_recipe_is_one_line(tmp_path, capsys):
    assert main(["study", "--recipes", "fp32,fp9", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown recipe 'fp9'" in err and err.count("\n") == 1


def test_summary_names_diverged_runs():
    """A diverged run's loss comes back from the journal as the text "nan" or "inf": it is a
    number here, and the verdict says the recipe diverged instead of giving an interval."""
    runs = pd.DataFrame({"recipe": ["a"] * 2 + ["b"] * 2, "seed": [0, 1] * 2, "status": "ok",
                         "val_loss": ["2.0", "2.1", "nan", "inf"]})
    s = summarize(runs, Metric("val_loss", False, 1e-4, ""), "a").set_index("recipe")
    assert s.loc["a", "mean"] == pytest.approx(2.05) and s.loc["b", "non_finite"] == 2
    assert s.loc["b", "verdict"].startswith("diverged: non-finite val_loss in 2 of 2 runs")


def test_readme_study_example_resolves_its_difference(tmp_path, capsys):
    """The README's study line (issue 33: its old fp32-vs-hfp8 line could only say "not
    resolved") compares a recipe FP8-LM sec. 2.3 shows to lose accuracy (FP8 master weights);
    reduced here to 50 steps at --gemm blas (seconds, not a minute), it must still call it."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    line = re.search(r"^accelsim study .*$", readme, re.M).group(0).split("  #")[0]
    argv = shlex.split(line)[1:]
    recipes = argv[argv.index("--recipes") + 1].split(",")
    argv[argv.index("--steps") + 1] = "50"
    argv[argv.index("--out") + 1] = str(tmp_path)
    assert main(argv + ["--gemm", "blas", "--no-progress"]) == 0
    s = pd.read_csv(tmp_path / "summary.csv").set_index("recipe")
    assert s.loc[recipes[1], "verdict"].startswith(f"worse than {recipes[0]}")
    assert s.loc[recipes[1], "diff_ci95_hi"] < 0
