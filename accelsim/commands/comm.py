"""``accelsim comm``: the three-phase gradient-reduction breakdown per precision scheme."""

from __future__ import annotations

import argparse
import json

from accelsim.commands._common import (
    add_bandwidth_arguments,
    float_type,
    nonnegative_int,
    per_tensor_overhead_us,
    positive_int,
    scheme_choices,
)

NAME = "comm"
HELP = ("Reduce-scatter, all-gather and weight-update time per training step for the fp16, fp8 "
        "and hfp8 schemes on a system config (HFP8 paper appendix D), at given off-chip "
        "bandwidths and gradient-compression factors, from either engine.")

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "--system", dest="config", default="hfp8-64chip",
                        metavar="TOML",
                        help="architecture config: a TOML path or a shipped name "
                             "(default: hfp8-64chip)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--workload", default=None, metavar="WORKLOAD",
                     help="workload TOML or shipped name (default resnet50); its parameter count "
                          "and parameter-tensor count are used")
    src.add_argument("--params", type=positive_int, default=None,
                     help="number of model parameters instead of a workload")
    parser.add_argument("--tensors", type=nonnegative_int, default=None,
                        help="number of parameter tensors for the per-tensor update overhead, at "
                        "most the parameters (default: the workload's; 0 with --params)")
    parser.add_argument("--scheme", nargs="+", choices=scheme_choices(),
                        default=["fp16", "fp8", "hfp8"],
                        help="schemes to report (default: fp16 fp8 hfp8)")
    add_bandwidth_arguments(parser, many=True)
    parser.add_argument("--compression", type=float_type(1.0), nargs="+", default=[1.0],
                        help="gradient compression factor(s) >= 1 applied to the reduce-scatter "
                        "(default 1 = none)")
    parser.add_argument("--engine", choices=("analytic", "des"), default="analytic",  # Engine
                        help="collective timing engine")
    parser.add_argument("--optimizer", choices=("sgd", "sgd-momentum", "adamw"),
                        default="sgd-momentum", help="optimizer of the weight update")
    parser.add_argument("--memory-efficiency", type=float_type(0.0, 1.0, lo_open=True), default=None,
                        help="fraction of peak memory bandwidth the update kernel reaches "
                        "(default: the calibrated HFP8-study value, as in sweeps and figures)")
    parser.add_argument("--per-tensor-overhead-us", type=per_tensor_overhead_us, default=None,
                        help="fixed update cost per parameter tensor, microseconds (default: the "
                        "calibrated HFP8-study value, as in sweeps and figures)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per line instead of a table")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import build_system
    from accelsim.arch import scenario as arch_scenario
    from accelsim.errors import UserError
    from accelsim.commands._common import load_workload_arg, system_path
    from accelsim.dse.hfp8_study import PAPER_SETUP
    from accelsim.errors import choose
    from accelsim.netsim import Engine, UpdateParams, gradient_reduction_times

    engine = choose(Engine, args.engine, "--engine")  # the flag's string dies here
    path = system_path(args.config)
    if args.params is not None:
        n_params, n_tensors = args.params, 0
    else:
        wl = load_workload_arg(args.workload or "resnet50")
        n_params, n_tensors = int(wl.n_params), wl.n_param_tensors
    if args.tensors is not None:
        n_tensors = args.tensors
    if not n_params > 0:
        raise UserError(f"--params must be > 0, got {n_params}")
    if n_tensors > n_params:
        raise UserError(f"--tensors {n_tensors:,} is more than the {n_params:,} parameters"
                        + (" (--params)" if args.params is not None else " of the workload")
                        + ": every parameter tensor holds at least one parameter")
    eff = PAPER_SETUP.memory_efficiency if args.memory_efficiency is None \
        else args.memory_efficiency
    overhead_s = PAPER_SETUP.per_tensor_overhead_s if args.per_tensor_overhead_us is None \
        else args.per_tensor_overhead_us * 1e-6
    upd = UpdateParams(memory_efficiency=eff, per_tensor_overhead_s=overhead_s)
    if args.chip_GBps is not None:
        variants = [("chip_GBps", v) for v in args.chip_GBps]
    elif args.link_GBps is not None:
        variants = [("link_GBps", v) for v in args.link_GBps]
    else:
        variants = [(None, None)]
    rows = []
    for knob, value in variants:
        system = build_system(path, **({knob: value} if knob else {}),
                              inter_board_GBps=args.inter_board_GBps)
        for c in args.compression:
            for sc in args.scheme:
                p = gradient_reduction_times(system, n_params, sc, compression=c,
                                             engine=engine, optimizer=args.optimizer,
                                             n_tensors=n_tensors, update=upd)
                d = p.as_dict()
                d.update(system=system.name, chip_GBps=arch_scenario.chip_GBps(system),
                         link_GBps=arch_scenario.link_GBps(system),
                         inter_board_GBps=arch_scenario.inter_board_GBps(system),
                         n_tensors=n_tensors, memory_efficiency=eff,
                         per_tensor_overhead_s=overhead_s)
                rows.append(d)
    if args.json:
        for d in rows:
            print(json.dumps(d))
        return 0
    print(f"{rows[0]['system']} ({rows[0]['chips']} chips, {rows[0]['algorithm']}), "
          f"{n_params:,} parameters in {n_tensors} tensors, engine {args.engine}, "
          f"optimizer {args.optimizer}, update at {eff:g} of memory bandwidth + "
          f"{overhead_s * 1e6:g} us per tensor")
    hdr = ("scheme", "chip GB/s", "link GB/s", "compr", "RS ms", "AG ms", "WU ms", "total ms",
           "order")
    print(f"{hdr[0]:<6} {hdr[1]:>9} {hdr[2]:>9} {hdr[3]:>6} {hdr[4]:>9} {hdr[5]:>9} "
          f"{hdr[6]:>9} {hdr[7]:>9}  {hdr[8]}")
    for d in rows:
        print(f"{d['scheme']:<6} {d['chip_GBps']:>9.4g} {d['link_GBps']:>9.4g} "
              f"{d['compression']:>6.4g} {d['reduce_scatter_s'] * 1e3:>9.4f} "
              f"{d['all_gather_s'] * 1e3:>9.4f} {d['weight_update_s'] * 1e3:>9.4f} "
              f"{d['total_s'] * 1e3:>9.4f}  {d['phase_order']}")
    return 0
