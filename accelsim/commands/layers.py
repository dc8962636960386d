"""``accelsim layers WORKLOAD``: per-layer GEMM shapes and FLOPs for each training phase."""

from __future__ import annotations

import argparse

from accelsim.commands._common import output_path, positive_int

NAME = "layers"
HELP = ("Table of GEMM shapes (M, N, K) and FLOPs per layer and phase (fwd, bwd_data, wgrad), "
        "plus element-wise work, for a workload TOML or a SCALE-Sim topology CSV.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="WORKLOAD",
                        help="workload TOML file, SCALE-Sim topology .csv, or the name of a "
                             "shipped workload (resnet50, bert-base, tiny-cnn)")
    parser.add_argument("--batch", type=positive_int, default=1, metavar="N",
                        help="minibatch size per GEMM (default: 1)")
    parser.add_argument("--csv", type=output_path, default=None, metavar="OUT.csv",
                        help="also write the tidy table (one row per layer x phase) to OUT as CSV")
    parser.add_argument("--gemm-only", action="store_true",
                        help="show only GEMM rows (omit element-wise rows)")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from accelsim.commands._common import check_outputs, load_workload_arg
    from accelsim.paths import resolve_input

    if args.csv is not None:
        check_outputs([("--csv", args.csv, (".csv",))],
                      [("WORKLOAD", resolve_input(args.workload, "workload"))])
    wl = load_workload_arg(args.workload)
    df = pd.DataFrame(wl.rows(args.batch))
    if args.gemm_only:
        df = df[df["flops"] > 0]
    if args.csv is not None:
        df.to_csv(args.csv, index=False)
    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(df.drop(columns=["index"]).to_string(index=False))
    fl = wl.flops(args.batch)
    print(f"# {wl.name}: {len(wl.layers)} layers, {wl.n_params:,} parameters; batch {args.batch}: "
          f"GEMM GFLOPs fwd {fl['fwd'] / 1e9:.6g}, bwd_data {fl['bwd_data'] / 1e9:.6g}, "
          f"wgrad {fl['wgrad'] / 1e9:.6g} (fwd {wl.macs(args.batch) / 1e9:.6g} GMACs)")
    if args.csv is not None:
        print(f"# wrote {args.csv}")
    return 0
