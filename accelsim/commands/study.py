"""``accelsim study``: a grid of training runs (recipes x seeds) with confidence intervals.

Each run is one point of a sweep (accelsim.dse.sweep: the journal ``DIR/runs.csv`` gets each run
the moment it finishes, a rerun resumes, Ctrl-C says what was saved; serial, process or Dask
executors). Then: ``summary.csv`` / ``summary.md`` (per recipe: n, mean, sd, 95 % t interval;
paired differences against the baseline with a verdict that names a difference only where the
interval resolves it), ``curves.csv`` and ``curves.png`` (learning curves with 95 % bands),
``final.png`` (final metric with 95 % error bars). ``--target-loss L``: ``target.csv``,
``target_runs.csv`` and ``target.md`` (steps to validation loss <= L per run and per recipe,
:mod:`accelsim.train.target`).
"""

from __future__ import annotations

import argparse

from accelsim.commands._common import (MAX_STUDY_SEEDS, MAX_TRAIN_STEPS, int_type,
                                       nonnegative_int, output_path, positive_float,
                                       positive_int, train_steps)

NAME = "study"
HELP = ("Train recipes x seeds (resumable grid), summarize each recipe's final metric with a 95 %% "
        "confidence interval and plot learning curves with bands.")

#: most training steps in the whole study (runs x steps; a run's own limit is
#: accelsim.bounds.MAX_TRAIN_STEPS): the mlp on digits takes about 2 ms a step, so 10^7 steps
#: are ~6 hours; the progress bar counts runs
MAX_TOTAL_STEPS = 10_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.dse.sweep_executors import EXECUTORS
    from accelsim.train import DATASET_NAMES, GEMM_LEVELS, MODEL_NAMES, RECIPE_NAMES

    parser.add_argument("--recipes", required=True, metavar="R1,R2,...",
                        help=f"comma-separated recipes ({', '.join(RECIPE_NAMES)}); the first is the "
                             f"baseline unless --baseline names another")
    parser.add_argument("--baseline", default=None, help="recipe the others are compared with")
    parser.add_argument("--model", choices=MODEL_NAMES, default="mlp", help="default: mlp")
    parser.add_argument("--dataset", choices=DATASET_NAMES, default="digits", help="default: digits")
    parser.add_argument("--seeds", type=int_type(1, MAX_STUDY_SEEDS), default=3,
                        help=f"seeds 0..N-1 per recipe (default 3; at most {MAX_STUDY_SEEDS:,})")
    parser.add_argument("--steps", type=train_steps, default=1000,
                        help=f"training steps per run (default 1000; at most "
                             f"{MAX_TRAIN_STEPS:,}, and {MAX_TOTAL_STEPS:,} over all recipes x "
                             "seeds)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="minibatch (default 32)")
    parser.add_argument("--lr", type=positive_float, default=None,
                        help="learning rate (default: the recipe's)")
    parser.add_argument("--eval-every", type=nonnegative_int, default=None, metavar="N",
                        help="evaluate every N steps for the curves (default: steps/10)")
    parser.add_argument("--gemm", choices=GEMM_LEVELS, default="engine",
                        help="engine (bit-exact arith engine, default) or blas (float32 BLAS)")
    parser.add_argument("--out", type=output_path, required=True, help="output folder")
    parser.add_argument("--executor", choices=EXECUTORS, default="serial",
                        help="serial (default), process (worker processes) or dask")
    parser.add_argument("--workers", type=positive_int, default=None, help="pool size (default: cores)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--target-loss", type=positive_float, default=None, metavar="L",
                        help="also report each run's steps to validation loss <= L (the first "
                             "evaluated step; 'not reached' otherwise) and per recipe their "
                             "mean, 95 %% CI and ratio to the baseline (target.csv, "
                             "target_runs.csv, target.md); on a finished folder the rerun "
                             "resumes and only recomputes this from the saved curves")


def run(args: argparse.Namespace) -> int:
    import warnings

    from accelsim.commands._common import check_output_path
    from accelsim.errors import UserError
    from accelsim.commands._common import exit_interrupted, journal_rows
    from accelsim.dse.sweep import JournalWarning, SweepSpec, run_sweep
    from accelsim.train import RECIPE_NAMES
    from accelsim.train.study import curve_bands, curves, run_point, study_metric, summarize

    listed = [r.strip() for r in args.recipes.split(",") if r.strip()]
    for r in listed:
        if r not in RECIPE_NAMES:
            raise UserError(f"--recipes: unknown recipe {r!r}; choose from {', '.join(RECIPE_NAMES)}")
    recipes = list(dict.fromkeys(listed))
    if not recipes:
        raise UserError("--recipes needs at least one recipe")
    if len(recipes) < len(listed):
        print(f"--recipes: a recipe listed more than once is run once ({', '.join(recipes)})")
    baseline = args.baseline or recipes[0]
    if baseline not in recipes:
        raise UserError(f"--baseline {baseline!r} is not one of --recipes ({', '.join(recipes)})")
    total = len(recipes) * args.seeds * args.steps
    if total > MAX_TOTAL_STEPS:
        raise UserError(f"{len(recipes)} recipes x --seeds {args.seeds:,} x --steps "
                        f"{args.steps:,} = {total:,} training steps, more than the "
                        f"{MAX_TOTAL_STEPS:,} a study runs (fewer seeds or steps)")
    eval_every = args.eval_every if args.eval_every is not None else max(1, args.steps // 10)
    out = check_output_path(args.out, "--out", directory=True)
    spec = SweepSpec(
        base=(("model", args.model), ("dataset", args.dataset), ("steps", args.steps),
              ("batch_size", args.batch_size), ("lr", "" if args.lr is None else args.lr),
              ("eval_every", eval_every), ("gemm", args.gemm)),
        axes=(("recipe", tuple(recipes)), ("seed", tuple(range(args.seeds)))))
    journal = out / "runs.csv"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", JournalWarning)
            runs = run_sweep(spec, run_point, journal, executor=args.executor, workers=args.workers,
                             progress=not args.no_progress)
    except KeyboardInterrupt:
        exit_interrupted("study", f"{journal_rows(journal)} of {spec.n_points} runs", journal)

    metric = study_metric(args.dataset)
    summary = summarize(runs, metric, baseline, recipes)
    tidy = curves(runs)
    summary.to_csv(out / "summary.csv", index=False)
    tidy.to_csv(out / "curves.csv", index=False)
    md = summary_markdown(summary, metric, args, baseline, runs)
    (out / "summary.md").write_text(md)

    from accelsim.report.train_study import plot_curves, plot_final

    title = f"{args.model} on {args.dataset}, {args.steps} steps, --gemm {args.gemm}"
    bands = {"training loss (minibatch, nats)": curve_bands(tidy, "train_loss"),
             ("validation loss (nats/char)" if metric.column == "val_loss" else "test accuracy"):
                 curve_bands(tidy, metric.column)}
    png_c = plot_curves(bands, out / "curves.png", title)
    png_f = plot_final(summary, out / "final.png",
                       f"final {metric.column}{' (%)' if metric.scale == 100 else ''}", title, metric.scale)
    print(md)
    print(f"wrote {journal}, {out / 'summary.csv'}, {out / 'summary.md'}, {out / 'curves.csv'}, "
          f"{png_c} and {png_f}")
    if args.target_loss is not None:
        _target(out, tidy, args.target_loss, baseline, recipes)
    return 0


def _target(out, tidy, target: float, baseline: str, recipes) -> None:
    """Steps to the target loss from the learning curves just written (accelsim.train.target)."""
    from accelsim.train.target import recipe_steps, run_steps, target_markdown

    runs = run_steps(tidy, target)
    table = recipe_steps(runs, target, baseline, recipes)
    runs.to_csv(out / "target_runs.csv", index=False)
    table.to_csv(out / "target.csv", index=False)
    md = target_markdown(table, runs)
    (out / "target.md").write_text(md)
    print(md)
    print(f"wrote {out / 'target.csv'}, {out / 'target_runs.csv'} and {out / 'target.md'}")


def summary_markdown(summary, metric, args, baseline: str, runs) -> str:
    """The per-recipe table with the CI column and the paired verdicts (printed and saved)."""
    s = metric.scale

    def f(v, signed=False):
        if v != v:  # NaN: one seed has no spread
            return "-"
        return f"{v * s:+.4f}" if signed else f"{v * s:.4f}"

    lines = [f"# study: {args.model} on {args.dataset}, {args.steps} steps, --gemm {args.gemm}, "
             f"seeds 0..{args.seeds - 1}", "",
             f"metric: final {metric.column}{metric.unit} ({'higher' if metric.higher_is_better else 'lower'} "
             f"is better); resolution: {metric.resolution_note}. 95 % CI: Student t over seeds; "
             f"differences are paired by seed against `{baseline}`.", "",
             "| recipe | runs | mean | sd | 95 % CI | diff vs baseline [95 % CI] | verdict |",
             "|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        ci = "-" if r["ci95_half"] != r["ci95_half"] else f"[{f(r['ci95_lo'])}, {f(r['ci95_hi'])}]"
        if r["recipe"] == baseline:
            diff, verdict = "baseline", ""
        else:
            diff = f"{f(r['diff'], True)} [{f(r['diff_ci95_lo'], True)}, {f(r['diff_ci95_hi'], True)}]"
            verdict = r["verdict"]
        lines.append(f"| {r['recipe']} | {int(r['n'])} | {f(r['mean'])} | {f(r['sd'])} | {ci} | {diff} | {verdict} |")
    failed = runs[runs["status"] != "ok"] if "status" in runs else runs.iloc[:0]
    if len(failed):
        lines += ["", f"{len(failed)} run(s) did not finish: " + "; ".join(
            f"{r.recipe} seed {r.seed}: {r.reason}" for r in failed.itertuples())]
    return "\n".join(lines) + "\n"
