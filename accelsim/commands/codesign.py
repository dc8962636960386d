"""``accelsim codesign``: chip designs x training recipes x one workload and plan -> the time and
energy to a target validation loss per design point, with 95 % intervals from the study's steps,
infeasible points marked, and the time-energy Pareto front (:mod:`accelsim.dse.codesign`).

The step times run as a sweep (accelsim.dse.sweep: ``<out stem>.journal.csv`` gets each design x
scheme as it finishes, a rerun resumes, Ctrl-C says what was saved; serial, process or Dask
executors); the table and the plot are rebuilt from it and the steps every run.
"""

from __future__ import annotations

import argparse

from accelsim.commands._common import (nonnegative_int, optimizer_choices, positive_float,
                                       positive_int)

NAME = "codesign"
HELP = ("Chip designs x recipes x a workload: time and energy to a target validation loss "
        "(steps from a study, with 95 %% CIs), infeasible points marked, Pareto plot.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.dse.sweep_executors import EXECUTORS

    d = parser.add_mutually_exclusive_group(required=True)
    d.add_argument("--chips", metavar="A.toml,B.toml",
                   help="comma-separated arch configs (or shipped names), one design each "
                        "(no area_mm2: give it in a --designs file)")
    d.add_argument("--designs", metavar="TOML",
                   help="designs file: [[design]] tables with a name and either config "
                        "(optional area_mm2) or chip-builder keys (area_mm2, node_nm, formats, "
                        "frequency_GHz, ...; optional system: place the built chip in that "
                        "system's topology); docs/codesign.md")
    s = parser.add_mutually_exclusive_group(required=True)
    s.add_argument("--study", metavar="DIR",
                   help="a study results folder (accelsim study --out DIR); with --target-loss "
                        "its saved learning curves give the steps (nothing is trained)")
    s.add_argument("--steps-csv", metavar="CSV",
                   help="steps-to-target per recipe: a study's target.csv (study --target-loss)")
    parser.add_argument("--target-loss", type=positive_float, default=None, metavar="L",
                        help="target validation loss (with --study)")
    parser.add_argument("--baseline", default=None, metavar="RECIPE",
                        help="with --study: the recipe step ratios are taken against (default: "
                             "the study's baseline)")
    parser.add_argument("--baseline-steps", type=positive_float, default=None, metavar="N",
                        help="the baseline's steps to the target on the timed workload; each "
                             "recipe then needs N x its step ratio (an assumption: the ratio "
                             "measured on the study's model carries over). Default: the study's "
                             "own steps per recipe")
    parser.add_argument("--recipes", default=None, metavar="R1,R2,...",
                        help="recipes to place (default: every recipe of the steps table)")
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help="workload TOML or shipped name: a layer list (CNN, data parallel "
                             "over the chips) or a transformer workload (accelsim workload gpt)")
    parser.add_argument("--batch", type=positive_int, required=True, metavar="B",
                        help="samples per chip (a transformer: the micro-batch per replica)")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor parallel (transformer)")
    parser.add_argument("--pp", type=positive_int, default=1, help="pipeline stages (transformer)")
    parser.add_argument("--optimizer", default=None, choices=optimizer_choices(),
                        help="default: sgd-momentum for a layer list, adamw for a transformer")
    parser.add_argument("--out", required=True, metavar="FILE.csv", help="the co-design table")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="Pareto plot, time vs energy to target (default: --out with .png)")
    parser.add_argument("--executor", choices=EXECUTORS, default="serial",
                        help="serial (default), process or dask")
    parser.add_argument("--workers", type=positive_int, default=None, help="pool size")
    parser.add_argument("--dask-address", default=None, metavar="HOST:PORT",
                        help="scheduler of a running Dask cluster (default: a local one)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--top", type=nonnegative_int, default=20, metavar="K",
                        help="rows printed, fastest to the target first (default 20)")


def _steps(args):
    """The per-recipe steps table from --study (+ --target-loss) or --steps-csv."""
    from accelsim.dse.codesign import check_steps, load_steps_csv
    from accelsim.errors import UserError

    if args.study is not None:
        if args.target_loss is None:
            raise UserError("--study needs --target-loss L (the loss whose steps are counted)")
        from accelsim.train.target import study_steps

        _, table = study_steps(args.study, args.target_loss, args.baseline)
        return check_steps(table, f"--study {args.study}")
    for flag, v in (("--target-loss", args.target_loss), ("--baseline", args.baseline)):
        if v is not None:
            raise UserError(f"{flag} goes with --study (a --steps-csv table is for one target "
                            "and baseline already)")
    return load_steps_csv(args.steps_csv)


def run(args: argparse.Namespace) -> int:
    import warnings

    from accelsim.arch.recipe_schemes import recipe_scheme
    from accelsim.commands._common import (check_distinct_paths, check_figure_path,
                                           check_output_name, exit_interrupted, journal_rows,
                                           load_workload_arg)
    from accelsim.dse import codesign as cd
    from accelsim.dse.sweep import JournalWarning, SweepSpec, run_sweep
    from accelsim.errors import UserError
    from accelsim.paths import resolve_input
    from accelsim.train.target import SCALING_ASSUMPTION

    out = check_output_name(args.out, "--out", suffixes=(".csv",))
    plot = check_figure_path(args.plot or out.with_suffix(".png"), "--plot")
    journal = out.with_name(out.stem + ".journal.csv")
    check_distinct_paths([("--out", out), ("--plot", plot), ("journal", journal)],
                         [("--designs", args.designs), ("--steps-csv", args.steps_csv)])
    designs = (cd.load_designs(args.designs) if args.designs else
               cd.designs_from_chips([c.strip() for c in args.chips.split(",") if c.strip()]))
    if not designs:
        raise UserError("--chips needs at least one arch config")
    for dsg in designs:  # a bad config is a one-line error before anything runs
        dsg.system()
    steps = _steps(args)
    known = steps["recipe"].tolist()
    recipes = known if args.recipes is None else list(dict.fromkeys(
        r.strip() for r in args.recipes.split(",") if r.strip()))
    unknown = [r for r in recipes if r not in known]
    if unknown or not recipes:
        raise UserError(f"--recipes: {', '.join(unknown) or 'none given'}: not in the steps "
                        f"table (its recipes: {', '.join(known)})")
    for r in recipes:
        recipe_scheme(r)  # a recipe outside the mapping table is an error, not a row
    schemes = cd.schemes_to_time(steps, recipes, args.baseline_steps)
    wpath = resolve_input(args.workload, "workload")
    workload = load_workload_arg(str(wpath))
    optimizer = args.optimizer or ("sgd-momentum" if workload.transformer is None else "adamw")
    if workload.transformer is None and (args.tp, args.pp) != (1, 1):
        raise UserError(f"--tp/--pp: workload {wpath} is a layer list, trained data parallel "
                        "over each design's chips")
    spec = SweepSpec(
        base=(("workload", str(wpath)), ("batch", args.batch), ("optimizer", optimizer),
              ("tp", args.tp), ("pp", args.pp)),
        axes=(("chip", tuple(dict.fromkeys(d.key for d in designs))),
              ("scheme", tuple(schemes) or ("",))))
    if schemes:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", JournalWarning)
                rows = run_sweep(spec, cd.step_point, journal, executor=args.executor,
                                 workers=args.workers, progress=not args.no_progress,
                                 dask_address=args.dask_address)
        except KeyboardInterrupt:
            exit_interrupted("codesign", f"{journal_rows(journal)} of {spec.n_points} design "
                             "x scheme steps", journal)
    else:
        import pandas as pd

        rows = pd.DataFrame(columns=["chip", "scheme", "status", "reason", *cd.STEP_COLUMNS])
    table = cd.codesign_table(steps, designs, recipes, rows, args.baseline_steps)
    table.to_csv(out, index=False)
    _print(table, args, out, journal)
    feasible = table[table["pareto"].astype(bool)]
    if len(feasible):
        from accelsim.report.plot import plot_pareto

        ok = table[table["feasible"] & table["energy_to_target_J"].notna()]
        plot_pareto(ok, plot, x="time_to_target_s", y="energy_to_target_J", front="pareto",
                    hue="scheme", logx=True, logy=True,
                    title=f"time vs energy to the target: {workload.name}")
        print(f"wrote {plot} (Pareto front of {len(feasible)} of {len(ok)} feasible points)")
    else:
        print(f"no feasible point with an energy: no plot ({plot} not written)")
    print(SCALING_ASSUMPTION + "." if args.baseline_steps is not None else
          "steps: each recipe's own steps to the target in the study; timing them on this "
          "workload is an assumption: nothing here shows the study's model needs the steps "
          "the timed workload does (give --baseline-steps for the workload's own)")
    return 0


def _print(table, args, out, journal) -> None:
    import pandas as pd

    ok = table[table["feasible"]].sort_values("time_to_target_s", kind="stable")
    cols = ["design", "recipe", "scheme", "steps_to_target", "time_to_target_s",
            "time_to_target_s_ci95_lo", "time_to_target_s_ci95_hi", "energy_to_target_J",
            "samples_per_s", "power_W", "area_mm2", "pareto"]
    if len(ok) and args.top:
        with pd.option_context("display.width", 220, "display.max_columns", None,
                               "display.float_format", "{:.4g}".format):
            print(ok[cols].head(args.top).to_string(index=False))
    bad = table[~table["feasible"]]
    for r in bad.itertuples():
        print(f"infeasible: {r.design} x {r.recipe}: {r.reason}")
    print(f"wrote {out} ({len(table)} design points: {len(ok)} feasible, {len(bad)} not; "
          f"the step times are journalled in {journal})")
