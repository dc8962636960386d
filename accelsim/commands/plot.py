"""``accelsim plot``: a PNG from any sweep table (CSV or Parquet), the timeline of a trace
written by ``--trace`` (``accelsim plot --trace OUT.json --out timeline.png``), or the Pareto
front of a design-space table (``accelsim plot pareto --csv T.csv --x samples_per_s --y
samples_per_J --out front.png``)."""

from __future__ import annotations

NAME = "plot"
HELP = ("plot any sweep table: choose the x and y columns, and optionally a hue (one line per "
        "value) and a facet (one panel per value); or --trace a Chrome trace as a timeline; "
        "or 'pareto --csv TABLE' the Pareto front of two metrics; writes a PNG")


def add_arguments(parser) -> None:
    from accelsim.report.trace import MAX_EVENTS, MAX_TRACKS

    parser.add_argument("table", metavar="TABLE", nargs="?", default=None,
                        help="a sweep table (.csv or .parquet), or the word 'pareto' to draw "
                             "the Pareto front of the --csv table over --x and --y")
    parser.add_argument("--csv", default=None, metavar="TABLE",
                        help="with 'pareto': the table (.csv or .parquet; a sweep table, or "
                             "explore's <stem>_plans.csv)")
    parser.add_argument("--x-lower-better", action="store_true",
                        help="with 'pareto': smaller x is better (default: larger is, except "
                             "for step_s, energy_J and power_W)")
    parser.add_argument("--y-lower-better", action="store_true",
                        help="with 'pareto': smaller y is better (default as for x)")
    parser.add_argument("--trace", default=None, metavar="TRACE.json",
                        help="instead of a table: draw a trace written by predict/llm/infer/explore "
                             "--trace as one track per stream (any Chrome trace of complete "
                             f"events; at most {MAX_TRACKS} tracks and {MAX_EVENTS:,} events)")
    parser.add_argument("--cdf", default=None, metavar="COLUMN",
                        help="instead of --x/--y: the empirical CDF of one column (e.g. "
                             "time_to_first_token_s of serve --requests-out), --hue lines")
    parser.add_argument("--x", default=None, metavar="COLUMN", help="column on the x axis")
    parser.add_argument("--y", default=None, metavar="COLUMN",
                        help="column on the y axis (e.g. samples_per_s, step_s)")
    parser.add_argument("--hue", default=None, metavar="COLUMN",
                        help="one line / bar group per value of this column")
    parser.add_argument("--facet", default=None, metavar="COLUMN",
                        help="one panel per value of this column")
    parser.add_argument("--kind", choices=("line", "bar"), default="line",
                        help="line (default) or grouped bars")
    parser.add_argument("--logx", action="store_true", help="logarithmic x axis")
    parser.add_argument("--logy", action="store_true", help="logarithmic y axis")
    parser.add_argument("--title", default=None, help="figure title (default: from the data)")
    parser.add_argument("--out", required=True, metavar="PNG", help="output PNG")


def run(args) -> int:
    import sys
    import warnings
    from pathlib import Path

    import pandas as pd

    from accelsim.commands._common import check_distinct_paths, check_figure_path
    from accelsim.errors import AccelsimError, UserError
    from accelsim.report.plot import plot_table

    if not args.out.lower().endswith(".png"):
        raise UserError(f"--out {args.out}: must end in .png")
    check_distinct_paths([("--out", args.out)], [
        (flag, path) for flag, path in (("TABLE", args.table), ("--csv", args.csv),
                                        ("--trace", args.trace))
        if path is not None and path != "pareto"])
    if args.trace is not None:
        if args.table is not None:
            raise UserError("give a TABLE or --trace, not both")
        return _plot_trace(args)
    if args.table == "pareto":
        return _plot_pareto(args)
    if args.csv is not None:
        raise UserError("--csv goes with 'accelsim plot pareto'; give a plain table as TABLE")
    if args.table is None:
        raise UserError("a TABLE to plot (or --trace TRACE.json) is required")
    if args.cdf is not None:
        return _plot_cdf(args)
    missing = [f for f in ("x", "y") if getattr(args, f) is None]
    if missing:
        raise UserError(f"{' and '.join('--' + f for f in missing)} required to plot a table")
    src = Path(args.table)
    if not src.is_file():
        raise UserError(f"{src}: " + ("not a regular file (a table was expected)" if src.exists()
                                      else "no such file"))
    if not args.out.lower().endswith(".png"):
        raise UserError(f"--out {args.out}: must end in .png")
    check_figure_path(args.out, "--out")
    try:
        table = pd.read_parquet(src) if src.suffix == ".parquet" else pd.read_csv(src)
    except (ValueError, OSError, ImportError, pd.errors.ParserError) as exc:
        raise UserError(f"{src}: cannot read the table: {' '.join(str(exc).split())}") from None
    with warnings.catch_warnings(record=True) as caught:
        # matplotlib's warnings (a glyph missing from the font, a tight_layout that cannot fit
        # the labels) carry site-packages paths: shown below as one line each, or not at all
        warnings.simplefilter("always")
        try:
            out = plot_table(table, args.out, x=args.x, y=args.y, hue=args.hue,
                             facet=args.facet, kind=args.kind, logx=args.logx, logy=args.logy,
                             title=args.title)
        except AccelsimError as exc:
            raise UserError(f"{src}: {exc}") from None
    for text in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
        print(f"accelsim plot: warning: {text}", file=sys.stderr)
    print(f"wrote {out} ({args.y} vs {args.x}, {len(table):,} rows of {src})")
    return 0


def _plot_cdf(args) -> int:
    """The CDF of one column of a table (a latency of ``serve --requests-out``)."""
    from accelsim.commands._common import check_figure_path
    from accelsim.errors import InputError, UserError
    from accelsim.report.serve import plot_cdf

    given = [f"--{f}" for f in ("x", "y", "facet") if getattr(args, f) is not None]
    if given:
        raise UserError(f"{', '.join(given)}: not with --cdf (one column, --hue lines)")
    check_figure_path(args.out, "--out")
    table = _read_table(args.table)
    try:
        out = plot_cdf(table, args.out, args.cdf, hue=args.hue, logx=args.logx,
                       title=args.title)
    except InputError as exc:
        raise UserError(f"{args.table}: {exc}") from None
    print(f"wrote {out} (CDF of {args.cdf}, {len(table):,} rows of {args.table})")
    return 0


def _plot_trace(args) -> int:
    """Read a Chrome trace (the complete events and thread names) into a table and draw it."""
    from pathlib import Path

    from accelsim.commands._common import check_figure_path
    from accelsim.engine.trace import read_trace
    from accelsim.errors import InputError, UserError
    from accelsim.report.trace import plot_trace

    src = Path(args.trace)
    if not src.is_file():
        raise UserError(f"--trace {src}: " + ("not a regular file (a trace JSON was expected)"
                                              if src.exists() else "no such file"))
    given = [f"--{f}" for f in ("x", "y", "hue", "facet") if getattr(args, f) is not None]
    if given:
        raise UserError(f"{', '.join(given)}: table options; a --trace draws its own tracks")
    check_figure_path(args.out, "--out")
    try:
        events = read_trace(src)
    except InputError as exc:
        raise UserError(f"--trace {exc}") from None
    try:
        out = plot_trace(events, args.out,
                         title=args.title or events.attrs.get("process") or src.name)
    except ValueError as exc:  # InputError: too many tracks; matplotlib: an unusable axis
        raise UserError(f"--trace {src}: {exc}") from None
    print(out)
    return 0


def _read_table(src):
    from pathlib import Path

    import pandas as pd

    from accelsim.errors import UserError

    src = Path(src)
    if not src.is_file():
        raise UserError(f"{src}: " + ("not a regular file (a table was expected)" if src.exists()
                                      else "no such file"))
    try:
        return pd.read_parquet(src) if src.suffix == ".parquet" else pd.read_csv(src)
    except (ValueError, OSError, ImportError, pd.errors.ParserError) as exc:
        raise UserError(f"{src}: cannot read the table: {' '.join(str(exc).split())}") from None


def _plot_pareto(args) -> int:
    """The Pareto front of --x and --y over the feasible rows of the --csv table: drawn, and
    its rows printed."""
    import numpy as np
    import pandas as pd

    from accelsim.commands._common import check_figure_path
    from accelsim.dse.energy import RANK_METRICS
    from accelsim.dse.pareto import pareto_front
    from accelsim.errors import AccelsimError, UserError
    from accelsim.report.plot import plot_pareto

    if args.csv is None:
        raise UserError("plot pareto: --csv TABLE is required")
    missing = [f for f in ("x", "y") if getattr(args, f) is None]
    if missing:
        raise UserError(f"plot pareto: {' and '.join('--' + f for f in missing)} required")
    if args.facet is not None or args.kind != "line":
        raise UserError("plot pareto: --facet and --kind are for plain tables")
    check_figure_path(args.out, "--out")
    table = _read_table(args.csv)
    for flag, col in (("--x", args.x), ("--y", args.y)):
        if col not in table.columns:
            raise UserError(f"{flag} {col}: not a column of {args.csv} (columns: "
                            f"{', '.join(map(str, table.columns))})")
        if not pd.api.types.is_numeric_dtype(table[col]):
            raise UserError(f"{flag} {col}: not a numeric column of {args.csv}")
    ok = table
    if "status" in ok.columns:
        ok = ok[ok["status"] == "ok"]
    for col in ("feasible", "fits_memory"):  # explore/sweep; infer --serve
        if col in ok.columns:
            ok = ok[ok[col].astype(bool)]
    ok = ok[np.isfinite(ok[args.x].astype(float)) & np.isfinite(ok[args.y].astype(float))]
    if ok.empty:
        raise UserError(f"plot pareto: {args.csv} has no feasible row with finite "
                        f"{args.x} and {args.y}")
    better = [not (args.x_lower_better or not RANK_METRICS.get(args.x, True)),
              not (args.y_lower_better or not RANK_METRICS.get(args.y, True))]
    ok = ok.assign(on_front=pareto_front(ok[args.x], ok[args.y], tuple(better)))
    try:
        out = plot_pareto(ok, args.out, x=args.x, y=args.y, hue=args.hue, logx=args.logx,
                          logy=args.logy, title=args.title)
    except AccelsimError as exc:
        raise UserError(f"{args.csv}: {exc}") from None
    front = ok[ok["on_front"]].sort_values(args.x)
    # what tells the points apart (the swept keys, a plan's strategy), then the two metrics
    keys = [c for c in ok.columns if c not in ("point_id", "row_crc", "on_front", args.x, args.y)
            and 1 < ok[c].nunique(dropna=False) <= 20
            and (not pd.api.types.is_float_dtype(ok[c]) or c in str(args.hue))]
    with pd.option_context("display.width", 220, "display.max_columns", None):
        print(front[keys + [args.x, args.y]].to_string(index=False))
    print(f"wrote {out}: Pareto front of {args.y} ({'higher' if better[1] else 'lower'} is "
          f"better) vs {args.x} ({'higher' if better[0] else 'lower'} is better), "
          f"{len(front)} of {len(ok):,} feasible rows of {args.csv}")
    return 0
