"""Accuracy as a cost: the training steps each run of a study needs to reach a target validation
loss, and per recipe their mean, 95 % interval and ratio to the baseline's.

A run's ``steps_to_target`` is the first *evaluated* step whose validation loss is <= the target
(no interpolation between evaluations: the answer is resolved to ``eval_every`` steps and errs
late, never early); a run that never gets there has ``reached`` False and no steps. A recipe is
``feasible`` only when every one of its runs reaches the target. Its interval is the study's
(:func:`accelsim.train.study.mean_ci`, Student t over seeds), and ``steps_ratio`` is the mean of
the per-seed ratios to the baseline run of the same seed, with the same t interval (paired by
seed, as the study pairs its differences). Carrying that ratio from the small model a study trains
to a large workload is an assumption (:data:`SCALING_ASSUMPTION`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from accelsim.errors import InputError

from .study import mean_ci

SCALING_ASSUMPTION = (
    "assumption: a recipe's step ratio to the baseline measured on the study's small model "
    "is carried unchanged to the workload being timed; nothing here shows it holds at scale")

#: Columns of the per-recipe table (``target.csv``; ``accelsim codesign --steps-csv`` reads it).
TARGET_COLUMNS = ("recipe", "baseline", "target_loss", "n", "reached", "feasible", "mean", "sd",
                  "ci95_lo", "ci95_hi", "steps_ratio", "steps_ratio_ci95_lo",
                  "steps_ratio_ci95_hi")
CURVE_COLUMNS = ("recipe", "seed", "step", "val_loss")


def check_target(target: float, what: str = "--target-loss") -> float:
    """The target loss as a float (finite and > 0), else InputError naming ``what``."""
    if isinstance(target, bool) or not isinstance(target, int | float) \
            or not (math.isfinite(target) and target > 0):
        raise InputError(f"{what} must be a finite loss > 0, got {target!r}")
    return float(target)


def first_step_at(steps: Sequence[float], losses: Sequence[float], target: float) -> float:
    """The first step whose loss is <= ``target`` (steps in increasing order), NaN if none.
    A NaN or infinite loss (a diverged evaluation) never counts as reaching it."""
    for s, v in zip(steps, losses):
        if v == v and v <= target:
            return float(s)
    return math.nan


def run_steps(curves, target: float):
    """One row per (recipe, seed) of the tidy ``curves`` (``curves.csv``: recipe, seed, step,
    val_loss, ...): ``steps_to_target`` (NaN when not reached) and ``reached``."""
    import pandas as pd

    target = check_target(target)
    missing = [c for c in CURVE_COLUMNS if c not in curves.columns]
    if missing:
        raise InputError(f"learning curves have no {', '.join(missing)} column(s) "
                         f"(expected {', '.join(CURVE_COLUMNS)})")
    rows = []
    for (recipe, seed), g in curves.groupby(["recipe", "seed"], sort=False):
        g = g.sort_values("step", kind="stable")
        s = first_step_at(g["step"].to_numpy(dtype=float),
                          pd.to_numeric(g["val_loss"], errors="coerce").to_numpy(dtype=float),
                          target)
        rows.append({"recipe": recipe, "seed": int(seed), "steps_to_target": s,
                     "reached": s == s})
    return pd.DataFrame(rows, columns=["recipe", "seed", "steps_to_target", "reached"])


def recipe_steps(runs, target: float, baseline: str, recipes: Sequence[str] | None = None):
    """Per recipe (:data:`TARGET_COLUMNS`): runs, runs that reached ``target``, ``feasible``
    (all of them did), mean / sd / 95 % t interval of ``steps_to_target``, and ``steps_ratio``
    (mean of per-seed ratios to ``baseline``'s run of that seed, 95 % t interval); every number
    is NaN for an infeasible recipe, and every ratio when the baseline is infeasible."""
    import pandas as pd

    order = list(recipes) if recipes is not None else list(dict.fromkeys(runs["recipe"]))
    if baseline not in order:
        raise InputError(f"baseline recipe {baseline!r} has no runs (recipes: "
                         f"{', '.join(order)})")
    by = {r: runs[runs["recipe"] == r].set_index("seed")["steps_to_target"] for r in order}
    base = by[baseline]
    base_ok = bool(len(base)) and bool(np.isfinite(base.to_numpy(dtype=float)).all())
    rows = []
    for r in order:
        s = by[r].to_numpy(dtype=float)
        reached = int(np.isfinite(s).sum())
        feasible = len(s) > 0 and reached == len(s)
        m, sd, hw = mean_ci(s) if feasible else (math.nan,) * 3
        rm = rlo = rhi = math.nan
        if feasible and base_ok:
            seeds = by[r].index.intersection(base.index)
            if len(seeds):
                ratio = (by[r].reindex(seeds) / base.reindex(seeds)).to_numpy(dtype=float)
                rm, _, rhw = mean_ci(ratio)
                rlo, rhi = rm - rhw, rm + rhw
        rows.append({"recipe": r, "baseline": baseline, "target_loss": float(target),
                     "n": len(s), "reached": reached, "feasible": feasible, "mean": m, "sd": sd,
                     "ci95_lo": m - hw, "ci95_hi": m + hw, "steps_ratio": rm,
                     "steps_ratio_ci95_lo": rlo, "steps_ratio_ci95_hi": rhi})
    return pd.DataFrame(rows, columns=list(TARGET_COLUMNS))


def target_markdown(table, runs) -> str:
    """The per-recipe steps-to-target table (printed by ``study --target-loss`` and saved)."""
    def f(v, fmt="{:.0f}"):
        return "-" if v != v else fmt.format(v)

    t = table.iloc[0]
    lines = [f"## steps to validation loss <= {t['target_loss']:g} (baseline `{t['baseline']}`)",
             "", "steps_to_target: the first evaluated step at or below the target (resolved to "
             "--eval-every steps); 95 % CI: Student t over seeds; steps_ratio: per-seed ratio to "
             "the baseline, paired by seed. A recipe is infeasible when any run never reaches "
             "the target.", "",
             "| recipe | runs reached | feasible | mean steps | 95 % CI | steps ratio [95 % CI] |",
             "|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        ci = "-" if r["ci95_lo"] != r["ci95_lo"] else f"[{f(r['ci95_lo'])}, {f(r['ci95_hi'])}]"
        if r["steps_ratio"] != r["steps_ratio"]:
            ratio = "-"
        elif r["steps_ratio_ci95_lo"] != r["steps_ratio_ci95_lo"]:
            ratio = f(r["steps_ratio"], "{:.3f}")
        else:
            ratio = (f"{r['steps_ratio']:.3f} [{r['steps_ratio_ci95_lo']:.3f}, "
                     f"{r['steps_ratio_ci95_hi']:.3f}]")
        lines.append(f"| {r['recipe']} | {int(r['reached'])} of {int(r['n'])} | "
                     f"{'yes' if r['feasible'] else 'no: infeasible'} | {f(r['mean'])} | {ci} "
                     f"| {ratio} |")
    lines += ["", SCALING_ASSUMPTION + "."]
    return "\n".join(lines) + "\n"


def study_baseline(summary) -> str:
    """The baseline of a study's ``summary.csv``: the one recipe compared with nothing (no
    verdict), or the only recipe."""
    if "verdict" not in summary.columns:
        if len(summary) == 1:
            return str(summary["recipe"].iloc[0])
        raise InputError("summary.csv has no verdict column to tell its baseline")
    base = summary[summary["verdict"].isna()]["recipe"].tolist()
    if len(base) != 1:
        raise InputError(f"summary.csv: expected one baseline row (no verdict), found "
                         f"{len(base)}")
    return str(base[0])


def study_steps(folder, target: float, baseline: str | None = None):
    """(per-run table, per-recipe table) of a study results folder, from its saved
    ``curves.csv`` (no training); ``baseline`` None: the study's own (``summary.csv``)."""
    from pathlib import Path

    import pandas as pd

    folder = Path(folder)
    paths = {n: folder / n for n in ("curves.csv", "summary.csv")}
    for name, p in paths.items():
        if not p.is_file():
            raise InputError(f"study folder {folder}: no {name} (run accelsim study --out "
                             f"{folder} first)")
    try:
        curves = pd.read_csv(paths["curves.csv"])
        summary = pd.read_csv(paths["summary.csv"])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"study folder {folder}: unreadable table ({exc})") from None
    if "recipe" not in summary.columns:
        raise InputError(f"{paths['summary.csv']}: no recipe column")
    recipes = summary["recipe"].astype(str).tolist()
    base = baseline if baseline is not None else study_baseline(summary)
    runs = run_steps(curves, target)
    return runs, recipe_steps(runs, target, base, recipes)
