"""``accelsim gemm``: time of one GEMM on one chip of a system (memory-hierarchy model)."""

from __future__ import annotations

import argparse
import json

from accelsim.commands._common import dimension, scheme_choices

NAME = "gemm"
HELP = ("Time and TFLOP/s of one GEMM [M,K] @ [K,N] on one chip of a system config "
        "(tiles over cores, shared cache levels, waves, launch cost; accelsim.perf.gemm).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", required=True, metavar="FILE",
                        help="arch_configs/*.toml file or shipped name (e.g. h100-sxm)")
    parser.add_argument("--m", type=dimension, required=True, help="rows of A and C")
    parser.add_argument("--n", type=dimension, required=True, help="columns of B and C")
    parser.add_argument("--k", type=dimension, required=True, help="reduction dimension")
    parser.add_argument("--scheme", choices=scheme_choices(), default="fp16",
                        help="precision of the GEMM (a scheme's compute precision; default fp16)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import datapath_note, require_precisions
    from accelsim.paths import resolve_input
    from accelsim.perf.gemm import gemm_time

    spath = resolve_input(args.system, "system")
    system = load_system(spath)
    precision = get_scheme(args.scheme).compute_precision
    require_precisions(system, spath, [precision], f"--scheme {args.scheme}")
    datapath = system.chip.core.datapath(precision)
    datapath_note(system, get_scheme(args.scheme))
    g = gemm_time(system, args.m, args.n, args.k, precision)
    d = g.as_dict()
    d.update(system=system.name, scheme=args.scheme, datapath=datapath,
             peak_tflops=system.chip.peak_flops(precision) / 1e12)
    if args.json:
        print(json.dumps(d))
    else:
        print(f"{system.name}: {args.m}x{args.n}x{args.k} {precision}: {g.time_s * 1e6:.2f} us, "
              f"{g.tflops:.1f} TFLOP/s of {d['peak_tflops']:.1f} peak, {g.bound}-bound "
              f"(tile {g.tile_m}x{g.tile_n}, {g.waves} waves, {g.dataflow}; chip-memory "
              f"traffic {g.memory_bytes / g.compulsory_bytes:.2f}x compulsory)")
    return 0
