"""``accelsim systolic``: per-layer compute cycles of a workload on one systolic array."""

from __future__ import annotations

import argparse
from pathlib import Path

from accelsim.commands._common import (config_range_int, int_type, output_path, positive_int,
                                       vocabulary)
from accelsim.perf.systolic import DATAFLOWS, Dataflow
from accelsim.workload.model import PHASES, Phase

NAME = "systolic"
HELP = ("Per-layer compute cycles on an R x C systolic array (ws/os/is dataflow) for a SCALE-Sim "
        "topology CSV or a workload TOML; --scalesim-compat reproduces SCALE-Sim v3's cycles.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--topology-csv", type=Path, metavar="FILE",
                     help="SCALE-Sim topology CSV (Layer name, IFMAP Height, ..., Strides)")
    src.add_argument("--workload", metavar="WORKLOAD",
                     help="workload TOML file or shipped workload name (e.g. resnet50)")
    parser.add_argument("--rows", type=config_range_int("rows"), required=True, metavar="R", help="array rows")
    parser.add_argument("--cols", type=config_range_int("cols"), required=True, metavar="C", help="array columns")
    parser.add_argument("--dataflow", type=vocabulary(Dataflow, "dataflow"), choices=DATAFLOWS,
                        default=Dataflow.WS,
                        help="weight-, output- or input-stationary (default: ws)")
    parser.add_argument("--scalesim-compat", action="store_true",
                        help="SCALE-Sim v3 shape rules (no padding, output size rounded up) and "
                             "cycle convention (index of the last cycle, from 0)")
    parser.add_argument("--batch", type=positive_int, default=1, metavar="N",
                        help="minibatch size (default: 1, as SCALE-Sim)")
    parser.add_argument("--phase", type=vocabulary(Phase, "phase"), choices=PHASES,
                        default=Phase.FWD,
                        help="training phase whose GEMMs are timed (default: fwd)")
    parser.add_argument("--macs-per-pe", type=int_type(1, 10_000), default=1, metavar="P",
                        help="MACs per PE per cycle along K (e.g. 2 for an FP8 mode; default 1)")
    parser.add_argument("--out", type=output_path, default=None, metavar="OUT.csv",
                        help="write the table (one row per layer, in order) to OUT.csv")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from accelsim.commands._common import check_outputs, load_workload_arg
    from accelsim.paths import resolve_input
    from accelsim.perf.systolic import workload_cycles
    from accelsim.workload import read_scalesim_topology

    if args.out is not None:
        source = ("--topology-csv", args.topology_csv) if args.topology_csv is not None \
            else ("--workload", resolve_input(args.workload, "workload"))
        check_outputs([("--out", args.out, (".csv",))], [source])
    if args.topology_csv is not None:
        wl = read_scalesim_topology(args.topology_csv)
    else:
        wl = load_workload_arg(args.workload)
    df = workload_cycles(wl, args.rows, args.cols, args.dataflow, batch=args.batch,
                         phase=args.phase, macs_per_pe=args.macs_per_pe,
                         scalesim_compat=args.scalesim_compat)
    if args.out is not None:
        df.to_csv(args.out, index=False)
    with pd.option_context("display.max_rows", None, "display.width", 200,
                           "display.float_format", "{:.4f}".format):
        print(df.to_string(index=False))
    # totals in Python integers: MACs of a large batch overflow int64 where cycles still fit
    total = sum(int(c) for c in df["compute_cycles"])
    macs = sum(int(m) * int(n) * int(k) * int(c)
               for m, n, k, c in zip(df.M, df.N, df.K, df["count"]))
    util = macs / (args.rows * args.cols * args.macs_per_pe * total)
    print(f"# {wl.name}: {len(df)} GEMM layers, {args.phase}, batch {args.batch}, "
          f"{args.rows}x{args.cols} {args.dataflow}: {total:,} cycles, utilization {util:.3f}"
          + (" (SCALE-Sim convention)" if args.scalesim_compat else ""))
    if args.out is not None:
        print(f"# wrote {args.out}")
    return 0
