"""``accelsim plot``: a PNG from any sweep table (CSV or Parquet)."""

from __future__ import annotations

NAME = "plot"
HELP = ("plot any sweep table: choose the x and y columns, and optionally a hue (one line per "
        "value) and a facet (one panel per value); writes a PNG")


def add_arguments(parser) -> None:
    parser.add_argument("table", metavar="TABLE", help="a sweep table (.csv or .parquet)")
    parser.add_argument("--x", required=True, metavar="COLUMN", help="column on the x axis")
    parser.add_argument("--y", required=True, metavar="COLUMN",
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

    from accelsim.commands._common import check_output_path
    from accelsim.errors import AccelsimError, UserError
    from accelsim.report.plot import plot_table

    src = Path(args.table)
    if not src.is_file():
        raise UserError(f"{src}: " + ("not a regular file (a table was expected)" if src.exists()
                                      else "no such file"))
    if not args.out.lower().endswith(".png"):
        raise UserError(f"--out {args.out}: must end in .png")
    check_output_path(args.out, "--out")
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
