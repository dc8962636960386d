"""``accelsim sweep``: training throughput over any config key, in parallel, resumable."""

from __future__ import annotations

from accelsim.commands._common import positive_int

NAME = "sweep"
HELP = ("sweep the training-step model over scenario keys (off-chip bandwidth, compression, "
        "chips, cores, array size, scheme, minibatch, ...); rows are appended to one table as "
        "points finish, a rerun resumes, and a manifest beside it records the defaults")

EPILOG = """\
keys (one meaning each; every key and value is checked before any point runs):
  system, workload            a TOML path or a shipped name (hfp8-64chip, resnet50, bert-base)
  scheme                      fp16, fp8, hfp8
  minibatch, overlap, per_tensor_overhead_s, memory_efficiency, optimizer, compression, engine
  chip_GBps                   a chip's total off-chip bandwidth, one direction (the HFP8 paper's
                              32/64/128 GB/s), split evenly over its links
  link_GBps                   one off-chip link, one direction
  inter_board_GBps            one board-to-board link, one direction
  chips, cores, rows, cols, array (RxC), memory_bandwidth_GBps, frequency_GHz, scratchpad_MiB
  any dotted key of the system TOML, e.g. core.rows or system.inter_board.bandwidth_GBps
Defaults: the HFP8 study's system, workload and calibrated step parameters (recorded in each row
and in <out>.manifest.json); bandwidths as the system config sets them.

examples:
  accelsim sweep --axis scheme=fp16,fp8,hfp8 --axis chip_GBps=32,64,128 --out sweep.csv
  accelsim sweep --axis compression=32:512:x2 --set scheme=hfp8 --out c.csv
  accelsim sweep --file my_sweep.toml --workers 2 --out s.csv     # rerun the same line to resume
  accelsim sweep --axis scheme=fp16,fp8,hfp8 --rank-by samples_per_J --out e.csv
  accelsim plot s.csv --x chip_GBps --y samples_per_s --hue scheme --out s.png
  accelsim plot pareto --csv e.csv --x samples_per_s --y samples_per_J --out front.png
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
    parser.add_argument("--out", required=True, metavar="FILE.csv",
                        help="output table (.csv; or .parquet with pyarrow); existing rows are "
                             "kept and not recomputed")
    parser.add_argument("--executor", choices=("auto", "serial", "process", "dask"),
                        default="auto",
                        help="where points run: auto (default: a local process pool when 2 cores "
                             "are idle and there are at least 6 compute profiles per worker, "
                             "else this process), "
                             "serial, process, or a Dask cluster (needs pip install "
                             "'accelsim[dask]')")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="worker processes (default: all cores)")
    parser.add_argument("--dask-address", default=None, metavar="HOST:PORT",
                        help="scheduler of a running Dask cluster (default: start a local one)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--max-points", type=positive_int, default=None, metavar="N",
                        help="refuse sweeps (and ranges) with more points than this, counted "
                             "before anything is built (default: 100,000)")
    parser.add_argument("--rank-by", default=None, choices=_rank_metrics(), metavar="METRIC",
                        help="after the sweep, print its points best first by this metric: "
                             "step_s, samples_per_s, samples_per_J, samples_per_s_per_mm2, "
                             "energy_J, power_W (the table on disk keeps sweep order)")
    parser.add_argument("--top", type=positive_int, default=10, metavar="K",
                        help="with --rank-by: how many points to print (default 10)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check every key and value and list the points (and which are "
                             "already done) without running them")


def _rank_metrics() -> tuple[str, ...]:
    from accelsim.dse.energy import RANK_METRICS

    return tuple(RANK_METRICS)


def print_ranked(table, spec, metric: str, top: int) -> None:
    """The sweep's ok points best first by ``metric``: the swept keys, then the metrics."""
    import pandas as pd

    from accelsim.dse.energy import RANK_METRICS, rank

    ok = table[table["status"] == "ok"]
    cols = [k for k, _ in spec.axes] + list(dict.fromkeys(
        [metric, *(c for c in RANK_METRICS if c in table.columns)]))
    with pd.option_context("display.width", 220, "display.max_columns", None):
        print(rank(ok[cols], metric).head(top).to_string(index=False))


def build_spec(args):
    """The validated sweep spec of the command line (ValueError naming the bad key/value)."""
    from accelsim.dse import scenario
    from accelsim.dse import sweep as sw

    defaults = scenario.defaults()
    limit = max_points(args)
    if args.file:
        spec = sw.load_sweep_file(args.file, defaults=defaults)
        extra = sw.spec_from_assignments(axes=args.axis, base=args.fixed, max_points=limit)
        spec = sw.SweepSpec(
            base=tuple({**dict(spec.base), **dict(extra.base)}.items()),
            axes=tuple((k, v) for k, v in spec.axes if k not in dict(extra.axes)) + extra.axes)
    else:
        spec = sw.spec_from_assignments(axes=args.axis, base=args.fixed, defaults=defaults,
                                        max_points=limit)
    spec.check_size(limit)
    scenario.validate_spec(spec)
    return spec


def max_points(args) -> int:
    from accelsim.dse import sweep as sw

    if args.max_points is None:
        return sw.MAX_POINTS
    return args.max_points


def run(args) -> int:
    import functools
    import json
    import warnings

    from accelsim.commands._common import (TABLE_SUFFIXES, check_distinct_paths,
                                           check_output_name, check_outputs)
    from accelsim.errors import UserError
    from accelsim.commands._common import exit_interrupted, journal_rows
    from accelsim.dse import scenario
    from accelsim.dse import sweep as sw

    try:
        spec = build_spec(args)
    except (ValueError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from None
    out = check_output_name(args.out, "--out", suffixes=TABLE_SUFFIXES)
    check_distinct_paths([("--out", out)], [("--file", args.file)])
    if args.dry_run:
        done = set()
        if out.suffix == ".csv" and out.is_file():
            import csv
            with out.open(newline="") as f:
                done = {r.get("point_id") for r in csv.DictReader(f)}
        for p in spec.iter_points():
            pid = sw.point_id(p)
            print(pid, "done" if pid in done else "todo",
                  " ".join(f"{k}={v}" for k, v in p.items()))
        print(f"{spec.n_points} points; keys and values checked")
        return 0
    check_outputs([("--out", out, TABLE_SUFFIXES)], [("--file", args.file)])
    sw.check_executor(args.executor)  # a missing extra fails before the manifest and the bar
    manifest_path = out.with_name(out.name + ".manifest.json")
    manifest_path.write_text(json.dumps(scenario.manifest(spec), indent=2, default=str) + "\n")
    evaluate = functools.partial(scenario.evaluate_point, drop=tuple(spec.param_names))
    try:
        with warnings.catch_warnings():
            # the journal's warnings (quarantined lines) as one line each, no source location
            warnings.showwarning = _one_line_warning
            table = sw.run_sweep(spec, evaluate, out, columns=scenario.output_columns(spec),
                                 executor=args.executor, workers=args.workers,
                                 progress=not args.no_progress, dask_address=args.dask_address,
                                 group_by=scenario.group_by(), max_points=max_points(args))
    except KeyboardInterrupt:
        exit_interrupted("sweep", f"{journal_rows(out)} of {spec.n_points} points", out)
    n_ok = int((table["status"] == "ok").sum())
    if args.rank_by is not None:
        print_ranked(table, spec, args.rank_by, args.top)
    print(f"{len(table)} points in {out} (manifest {manifest_path}): {n_ok} ok, "
          f"{len(table) - n_ok} infeasible")
    return 0


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    import sys

    print(f"accelsim sweep: warning: {message}", file=sys.stderr)
