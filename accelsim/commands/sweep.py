"""``accelsim sweep``: training throughput over any config key, in parallel, resumable."""

from __future__ import annotations

NAME = "sweep"
HELP = ("sweep the training-step model over config keys (bandwidth, compression, chips, cores, "
        "array size, scheme, minibatch, ...); rows are appended to one CSV as points finish and "
        "a rerun resumes")

EPILOG = """\
keys: system, workload, scheme, minibatch, link_GBps, compression, engine, overlap, and any
system config value as an override: chips, cores, rows, cols, array (RxC), or a dotted
attribute path of the loaded System (e.g. chip.core.rows).

examples:
  accelsim sweep --axis scheme=fp16,fp8,hfp8 --axis link_GBps=32,64,128 --out reports/sweep.csv
  accelsim sweep --axis compression=32:512:x2 --set scheme=hfp8 --out c.csv
  accelsim sweep --file my_sweep.toml --workers 2 --out s.csv     # rerun the same line to resume
"""


def add_arguments(parser) -> None:
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--file", metavar="TOML",
                        help="sweep file with [base] (fixed values) and [axes] (lists) tables")
    parser.add_argument("--axis", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="a swept key and its values; ranges as START:STOP:STEP or "
                             "START:STOP:xFACTOR (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="fixed",
                        help="a fixed key for every point (repeatable)")
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="output table (.csv; or .parquet with pyarrow); existing rows are "
                             "kept and not recomputed")
    parser.add_argument("--executor", choices=("serial", "process", "dask"), default="process",
                        help="where points run: this process, a local process pool (default), or "
                             "a Dask cluster (needs accelsim[dask])")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (default: all cores)")
    parser.add_argument("--dask-address", default=None, metavar="HOST:PORT",
                        help="scheduler of a running Dask cluster (default: start a local one)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the points (and which are already done) without running them")


def run(args) -> int:
    from pathlib import Path

    from accelsim.cli import UserError
    from accelsim.dse import sweep as sw
    from accelsim.dse import training

    defaults = training.sweep_defaults()
    try:
        if args.file:
            spec = sw.load_sweep_file(args.file, defaults=defaults)
            extra = sw.spec_from_assignments(axes=args.axis, base=args.fixed)
            spec = sw.SweepSpec(
                base=tuple({**dict(spec.base), **dict(extra.base)}.items()),
                axes=tuple((k, v) for k, v in spec.axes if k not in dict(extra.axes))
                + extra.axes)
        else:
            spec = sw.spec_from_assignments(axes=args.axis, base=args.fixed, defaults=defaults)
        training.check_sweep_keys(spec.param_names)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be >= 1, got {args.workers}")
    if args.dry_run:
        done = set()
        out = Path(args.out)
        if out.suffix == ".csv" and out.exists():
            import csv
            with out.open(newline="") as f:
                done = {r.get("point_id") for r in csv.DictReader(f)}
        for p in spec.points():
            pid = sw.point_id(p)
            print(pid, "done" if pid in done else "todo",
                  " ".join(f"{k}={v}" for k, v in p.items()))
        return 0
    table = sw.run_sweep(spec, training.evaluate_point, args.out, executor=args.executor,
                         workers=args.workers, progress=not args.no_progress,
                         dask_address=args.dask_address)
    n_ok = int((table["status"] == "ok").sum())
    print(f"{len(table)} points in {args.out}: {n_ok} ok, {len(table) - n_ok} infeasible")
    return 0
