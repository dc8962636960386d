"""``--breakdown OUT.csv`` and ``--trace OUT.json``: the flags every prediction front-end
(``predict``, ``llm``, ``explore``) takes to show where the time goes
(:mod:`accelsim.engine.trace`)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("where the time goes")
    g.add_argument("--breakdown", default=None, metavar="OUT.csv",
                   help="write one row per op per layer, phase and pipeline stage (count, "
                        "time_s, exposed_s: its share of the critical path, summing to the "
                        "iteration time; flops, bytes, bound)")
    g.add_argument("--trace", default=None, metavar="OUT.json",
                   help="write the iteration as a Chrome trace (open in Perfetto or "
                        "chrome://tracing; draw it with `accelsim plot --trace OUT.json`)")


def check(args: argparse.Namespace, outputs=(), inputs=()) -> None:
    """Refuse, before any computing, an unwritable or empty path, a --breakdown that is not a
    .csv or a --trace not a .json, and two outputs on one file (``outputs``: the command's other
    (flag, path, suffixes) outputs) or on one of the files it reads (``inputs``: (flag, path)
    pairs): :func:`accelsim.commands._common.check_outputs`."""
    from accelsim.commands._common import check_outputs

    check_outputs([*outputs, ("--breakdown", args.breakdown, (".csv",)),
                   ("--trace", args.trace, (".json",))], inputs)


def write(args: argparse.Namespace, rows, timeline, process: str) -> None:
    """Write what was asked for (``rows``: breakdown rows; ``timeline``: a callable giving the
    trace's :class:`accelsim.engine.trace.Timeline`, built only when a trace is asked for)."""
    from accelsim.engine.trace import breakdown_frame, write_trace

    if args.breakdown is not None:
        df = breakdown_frame(rows)
        df.to_csv(args.breakdown, index=False, float_format="%.6g")
        print(f"wrote {args.breakdown}: {len(df)} rows, exposed_s sums to "
              f"{df['exposed_s'].sum():.6g} s", file=sys.stderr)
    if args.trace is not None:
        tl = timeline()
        write_trace(tl, args.trace, process)
        print(f"wrote {args.trace}: {len(tl.events)} events over {tl.end_s:.6g} s "
              "(Perfetto, chrome://tracing, or accelsim plot --trace)", file=sys.stderr)
