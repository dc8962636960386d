"""Multi-seed training studies: one run per (recipe, seed), a summary per recipe with mean,
standard deviation and a 95 % confidence interval (Student's t), and paired comparisons against
a baseline recipe that call a difference only where its interval excludes zero and it exceeds
the metric's resolution.

``run_point`` is the picklable evaluator ``accelsim study`` hands to the sweep machinery
(accelsim.dse.sweep: journal, executors, resume); everything else here takes and returns
pandas tables (the report room draws them).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .data import load_dataset
from .trainer import TrainConfig, train

RUN_COLUMNS = ("final_train_loss", "val_loss", "test_accuracy", "skipped_steps", "inf_events",
               "loss_scale_final", "seconds", "curve")


@dataclass(frozen=True)
class Metric:
    """The final metric a study compares: its column, direction and resolution."""

    column: str
    higher_is_better: bool
    resolution: float  # the smallest difference the metric can express
    resolution_note: str
    scale: float = 1.0  # printed as value * scale
    unit: str = ""


def study_metric(dataset: str) -> Metric:
    """Test accuracy for classification sets (resolution: one test example), validation loss in
    nats per character for ``pydoc`` (a mean over the fixed validation text)."""
    data = load_dataset(dataset, np.random.default_rng(0))
    if data.task == "lm":
        n = data.y_test.size
        # per-character losses of one run are known to float64; what limits a comparison is the
        # spread over seeds, which the interval measures. The table prints 4 decimals.
        return Metric("val_loss", False, 1e-4, f"mean over {n:,} validation characters, printed "
                      f"to 1e-4 nats", 1.0, " nats/char")
    n = len(data.y_test)
    return Metric("test_accuracy", True, 1.0 / n, f"one of {n} test examples = {100 / n:.2f} pp",
                  100.0, " %")


def run_point(params: Mapping[str, Any]) -> dict[str, Any]:
    """One training run of a study (a sweep evaluator: parameters in, output columns out)."""
    cfg = TrainConfig(recipe=params["recipe"], model=params["model"], dataset=params["dataset"],
                      steps=int(params["steps"]), seed=int(params["seed"]),
                      batch_size=int(params["batch_size"]),
                      lr=None if params.get("lr") in (None, "") else float(params["lr"]),
                      eval_every=int(params["eval_every"]), gemm=params["gemm"])
    t0 = time.perf_counter()
    res = train(cfg, np.random.default_rng(cfg.seed))
    s = res.summary
    curve = res.history[["step", "train_loss", "val_loss", "test_accuracy"]].to_dict("list")
    return {"final_train_loss": s["final_train_loss"], "val_loss": s["val_loss"],
            "test_accuracy": s["test_accuracy"], "skipped_steps": s["skipped_steps"],
            "inf_events": s["inf_events"], "loss_scale_final": s["loss_scale_final"],
            "seconds": round(time.perf_counter() - t0, 2), "curve": json.dumps(curve)}


run_point.columns = RUN_COLUMNS


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (0.5 < p < 1), by bisection on
    its CDF, 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2) (the regularized incomplete beta
    function by its continued fraction, Numerical Recipes 3rd ed. sec. 6.4). Tested against
    scipy.stats.t.ppf."""
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df >= 1, got p={p}, df={df}")

    def cdf(t: float) -> float:
        return 1.0 - 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return 0.5 * (lo + hi)


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, modified Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def mean_ci(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, sample standard deviation, half-width of the t confidence interval); with one
    value the spread and interval are NaN (unknown, not zero)."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if n < 2:
        return m, math.nan, math.nan
    sd = float(v.std(ddof=1))
    return m, sd, t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)


def summarize(runs, metric: Metric, baseline: str | None = None, recipes=None):
    """One row per recipe: n, mean, sd, 95 % CI; against ``baseline`` (paired by seed): the mean
    difference, its CI and a verdict that names a difference only where it is resolved."""
    import pandas as pd

    ok = runs[runs["status"] == "ok"] if "status" in runs else runs
    # a diverged run's metric is NaN or inf (the journal keeps it as text): numbers, never strings
    ok = ok.assign(**{metric.column: pd.to_numeric(ok[metric.column], errors="coerce")})
    order = list(recipes) if recipes is not None else list(dict.fromkeys(ok["recipe"]))
    base = ok[ok["recipe"] == baseline].set_index("seed")[metric.column] if baseline else None
    rows = []
    for r in order:
        g = ok[ok["recipe"] == r]
        vals = g[metric.column].to_numpy(dtype=float)
        m, sd, hw = mean_ci(vals)
        row = {"recipe": r, "n": len(g), "non_finite": int((~np.isfinite(vals)).sum()), "mean": m,
               "sd": sd, "ci95_lo": m - hw, "ci95_hi": m + hw, "ci95_half": hw}
        if base is not None and r != baseline:
            paired = g.set_index("seed")[metric.column].reindex(base.index).dropna()
            d = (paired - base.reindex(paired.index)).to_numpy(dtype=float)
            dm, _, dhw = mean_ci(d)
            row.update(diff=dm, diff_ci95_lo=dm - dhw, diff_ci95_hi=dm + dhw, paired_seeds=len(d),
                       verdict=verdict(dm, dhw, metric, baseline))
            if row["non_finite"]:
                row["verdict"] = (f"diverged: non-finite {metric.column} in {row['non_finite']} of "
                                  f"{len(g)} runs (no interval)")
        rows.append(row)
    return pd.DataFrame(rows)


def verdict(diff: float, half_width: float, metric: Metric, baseline: str) -> str:
    """Words for a paired difference (this recipe minus the baseline)."""
    if math.isnan(half_width):
        return "unresolved: one paired seed gives no interval"
    if diff - half_width <= 0.0 <= diff + half_width:
        return "not resolved: the 95 % interval includes 0 (no claim of a difference)"
    if abs(diff) < metric.resolution * (1 - 1e-9):
        return "below the metric's resolution (no claim of a difference)"
    better = (diff > 0) == metric.higher_is_better
    return f"{'better' if better else 'worse'} than {baseline} (95 % interval excludes 0)"


def curves(runs):
    """Tidy learning curves (recipe, seed, step, train_loss, val_loss, test_accuracy) from the
    runs' ``curve`` cells."""
    import pandas as pd

    parts = []
    for _, row in runs[runs["status"] == "ok"].iterrows():
        c = pd.DataFrame(json.loads(row["curve"]))
        c.insert(0, "recipe", row["recipe"])
        c.insert(1, "seed", int(row["seed"]))
        parts.append(c)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def curve_bands(tidy, column: str):
    """Per (recipe, step): mean and 95 % CI of ``column`` over seeds."""
    import pandas as pd

    rows = []
    for (r, step), g in tidy.groupby(["recipe", "step"], sort=False):
        m, _, hw = mean_ci(g[column])
        rows.append({"recipe": r, "step": step, "mean": m, "lo": m - hw, "hi": m + hw, "n": len(g)})
    return pd.DataFrame(rows)
