"""Accuracy as a cost (``study --target-loss``): steps to a target loss per run, per recipe with
the study's t interval, infeasible recipes, the paired step ratio; recomputed from a finished
study's saved curves without training."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.train.study import mean_ci
from accelsim.train.target import first_step_at, recipe_steps, run_steps, study_steps


def _curves(losses: dict[tuple[str, int], list[float]], every: int = 10) -> pd.DataFrame:
    rows = [{"recipe": r, "seed": s, "step": every * (i + 1), "train_loss": v, "val_loss": v,
             "test_accuracy": 0.0}
            for (r, s), vs in losses.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_first_step_at_is_the_first_evaluation_at_or_below():
    assert first_step_at([10, 20, 30], [3.0, 2.0, 1.0], 2.0) == 20  # <= counts
    assert first_step_at([10, 20, 30], [3.0, 1.9, 2.5], 2.0) == 20  # first, not last
    assert math.isnan(first_step_at([10, 20], [3.0, 2.1], 2.0))  # never: not reached
    assert math.isnan(first_step_at([10, 20], [float("nan"), float("inf")], 2.0))  # diverged


def test_recipe_table_by_hand():
    c = _curves({("a", 0): [3, 2, 1], ("a", 1): [2, 1, 1], ("a", 2): [3, 3, 2],
                 ("b", 0): [3, 3, 2], ("b", 1): [3, 2, 1], ("b", 2): [3, 3, 2],
                 ("c", 0): [3, 2, 1], ("c", 1): [3, 3, 3], ("c", 2): [1, 1, 1]})
    runs = run_steps(c, 2.0)
    assert runs.set_index(["recipe", "seed"]).loc[("c", 1), "reached"] == False  # noqa: E712
    t = recipe_steps(runs, 2.0, "a").set_index("recipe")
    a, b = np.array([20.0, 10.0, 30.0]), np.array([30.0, 20.0, 30.0])
    m, sd, hw = mean_ci(a)
    assert (t.loc["a", "mean"], t.loc["a", "sd"]) == (m, sd)
    assert (t.loc["a", "ci95_lo"], t.loc["a", "ci95_hi"]) == (m - hw, m + hw)
    rm, _, rhw = mean_ci(b / a)  # paired by seed
    assert t.loc["b", "steps_ratio"] == pytest.approx(rm, rel=1e-15)
    assert t.loc["b", "steps_ratio_ci95_hi"] == pytest.approx(rm + rhw, rel=1e-15)
    assert t.loc["a", "steps_ratio"] == 1.0
    assert not t.loc["c", "feasible"] and t.loc["c", "reached"] == 2
    assert all(math.isnan(t.loc["c", k]) for k in ("mean", "ci95_lo", "steps_ratio"))


def test_an_infeasible_baseline_gives_no_ratio():
    runs = run_steps(_curves({("a", 0): [3, 3], ("b", 0): [1, 1]}), 2.0)
    t = recipe_steps(runs, 2.0, "a").set_index("recipe")
    assert t.loc["b", "feasible"] and math.isnan(t.loc["b", "steps_ratio"])
    with pytest.raises(InputError, match="baseline recipe 'z' has no runs"):
        recipe_steps(runs, 2.0, "z")
    with pytest.raises(InputError, match="--target-loss must be a finite loss > 0"):
        run_steps(_curves({("a", 0): [1]}), float("nan"))


def test_study_target_loss_and_recompute_from_saved_curves(tmp_path, capsys, monkeypatch):
    argv = ["study", "--recipes", "fp32,hfp8", "--seeds", "2", "--steps", "12", "--eval-every",
            "2", "--gemm", "blas", "--out", str(tmp_path), "--no-progress"]
    assert main(argv + ["--target-loss", "2.2"]) == 0
    out = capsys.readouterr().out
    assert "steps to validation loss <= 2.2" in out and "assumption:" in out
    table = pd.read_csv(tmp_path / "target.csv")
    runs = pd.read_csv(tmp_path / "target_runs.csv")
    assert list(table["recipe"]) == ["fp32", "hfp8"] and len(runs) == 4
    # the saved tables are what the curves say (an independent recomputation from curves.csv)
    curves = pd.read_csv(tmp_path / "curves.csv")
    for r in runs.itertuples():
        g = curves[(curves.recipe == r.recipe) & (curves.seed == r.seed)]
        hit = g[g.val_loss <= 2.2]["step"]
        assert (r.steps_to_target == hit.min()) if len(hit) else not r.reached
    _, again = study_steps(tmp_path, 2.2)
    pd.testing.assert_frame_equal(again, table, check_dtype=False)

    import accelsim.train.study as study

    def no_training(*a, **k):
        raise AssertionError("a finished run was retrained")

    monkeypatch.setattr(study, "train", no_training)  # another target: resume, no training
    assert main(argv + ["--target-loss", "1e-9"]) == 0
    t = pd.read_csv(tmp_path / "target.csv")
    assert not t["feasible"].any() and "no: infeasible" in capsys.readouterr().out
