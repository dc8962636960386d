"""``accelsim explore``: best mapping of a workload on a system, with a per-layer breakdown."""

from __future__ import annotations

import argparse
import sys

from accelsim.commands import _report
from accelsim.commands._common import (add_bandwidth_arguments, choice_list, float_type,
                                       nonnegative_int, optimizer_choices, output_path,
                                       positive_int, scheme_choices)
from accelsim.perf.systolic import Dataflow

NAME = "explore"
HELP = ("Design-space exploration: map every layer (data / model / hybrid parallelism over chips "
        "and cores, dataflow, scratchpad tiles, gradient-communication overlap) and print the "
        "best plan with a per-layer breakdown.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", required=True, metavar="TOML",
                        help="architecture config: a TOML path or a shipped name (hfp8-64chip)")
    parser.add_argument("--workload", required=True, metavar="WORKLOAD",
                        help="workload TOML, SCALE-Sim topology CSV, or shipped name (resnet50)")
    parser.add_argument("--batch", type=positive_int, required=True, metavar="N",
                        help="global minibatch (samples per iteration over the whole system)")
    parser.add_argument("--scheme", choices=scheme_choices(), default="hfp8",
                        help="training precision scheme (default: hfp8)")
    parser.add_argument("--out", type=output_path, default=None, metavar="POINTS.csv",
                        help="write every evaluated point (layer x mapping x phase) to this CSV; "
                             "the plans table goes beside it as <stem>_plans.csv and the best "
                             "plan's per-layer breakdown as <stem>_best_layers.csv")
    parser.add_argument("--dataflows", type=choice_list(Dataflow, "dataflow"), default="ws,os,is",
                        metavar="LIST",
                        help="comma-separated dataflows to consider (default: ws,os,is)")
    parser.add_argument("--strategies", type=choice_list(_strategies, "strategy"),
                        default="data,data-chips,hybrid", metavar="LIST",
                        help="comma-separated plan strategies: data, data-chips, hybrid "
                             "(default: all)")
    add_bandwidth_arguments(parser)
    from accelsim.commands._hardware import add_hardware_arguments

    add_hardware_arguments(parser)
    parser.add_argument("--compression", type=float_type(1.0), default=1.0, metavar="X",
                        help="gradient compression factor for the reduce-scatter (default: 1)")
    parser.add_argument("--executor", choices=["serial", "process", "thread", "dask"],
                        default="serial",
                        help="how to run the per-layer evaluations (default: serial; a process "
                             "pool pays off for large networks on many cores)")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="parallel workers (default: all CPUs)")
    parser.add_argument("--top", type=nonnegative_int, default=0, metavar="K",
                        help="print only the K slowest layers of the breakdown (default: all)")
    parser.add_argument("--rank-by", choices=_rank_metrics(), default="step_s", metavar="METRIC",
                        help="metric the best plan optimizes and the plans table is sorted by: "
                             "step_s (default), samples_per_s, samples_per_J, "
                             "samples_per_s_per_mm2, energy_J, power_W (energy and area: "
                             "accelsim.dse.energy, docs/dse.md)")
    parser.add_argument("--fusion", choices=("on", "off"), default=None,
                        help="fuse element-wise layers into GEMMs (default: predict's and "
                        "sweep's, the chip's: on for a chip with a memory hierarchy)")
    parser.add_argument("--optimizer", choices=optimizer_choices(),
                        default="sgd-momentum",
                        help="optimizer and its state formats (default sgd-momentum)")
    parser.add_argument("--stack", choices=("megatron", "pytorch"), default=None,
                        help="software stack preset (accelsim/engine/stack.py), as predict's: "
                        "its attention kernel, vocabulary padding, element-wise kernels and "
                        "update efficiency (default: predict's, megatron with no memory "
                        "reserve; --fusion's default becomes the stack's)")
    parser.add_argument("--clock", choices=("power", "boost"), default="power",
                        help="power (default): the best plan's power-limited clock on a chip "
                             "with a [chip.power] table; boost: the preset's fixed clock")
    _report.add_arguments(parser)


def _rank_metrics() -> tuple[str, ...]:
    from accelsim.dse.energy import RANK_METRICS

    return tuple(RANK_METRICS)


def _strategies() -> tuple[str, ...]:
    from accelsim.dse.explore import STRATEGIES

    return STRATEGIES


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from accelsim.arch import build_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import (check_scheme_optimizer, load_workload_arg,
                                           require_precisions, system_path)
    from accelsim.errors import UserError
    from accelsim.dse import explore
    from accelsim.dse.energy import rank
    from accelsim.paths import resolve_input

    outputs = [("--out", args.out, (".csv",))]
    if args.out is not None:  # the two tables written beside it
        outputs += [(f"--out's {what}", args.out.with_name(args.out.stem + tail), (".csv",))
                    for what, tail in (("plans table", "_plans.csv"),
                                       ("best plan's layers", "_best_layers.csv"))]
    _report.check(args, outputs, inputs=[("--system", system_path(args.system)),
                                         ("--workload", resolve_input(args.workload,
                                                                      "workload"))])
    check_scheme_optimizer([args.scheme], args.optimizer)
    spath = system_path(args.system)
    system = build_system(spath, chip_GBps=args.chip_GBps,
                          link_GBps=args.link_GBps, inter_board_GBps=args.inter_board_GBps)
    from accelsim.commands._hardware import hardware_note, hardware_system
    from accelsim.engine import LlmParams
    from accelsim.engine.stack import get_stack

    system = hardware_system(system, args)
    if hardware_note(system, args):
        print(hardware_note(system, args), file=sys.stderr)
    stack = LlmParams(stack=get_stack(args.stack or "megatron"), memory_reserve_GiB=0.0)
    system = system.with_fusion(args.fusion == "on" if args.fusion else (
        stack.stack.fused if args.stack else system.chip.default_fusion)).with_clock(
        "boost" if args.frequency_GHz is not None else args.clock)  # a pinned clock is fixed
    sc = get_scheme(args.scheme)
    require_precisions(system, spath, [sc.compute_precision, sc.high_precision],
                       f"--scheme {args.scheme}")
    wl = load_workload_arg(args.workload)
    res = explore(system, wl, args.batch, args.scheme, dataflows=args.dataflows,
                  strategies=args.strategies, compression=args.compression,
                  executor=args.executor, optimizer=args.optimizer,
                  max_workers=args.workers, progress=True, rank_by=args.rank_by,
                  stack=stack)
    b = res.best
    if not b.get("feasible", False):
        print(res.plans[["strategy", "dataflow", "overlap", "reason"]].to_string(index=False))
        raise UserError(f"no feasible plan for {wl.name} on {system.name} at batch "
                        f"{args.batch}: {b.get('reason', '')}")
    cols = ["layer", "phase", "precision", "chip_dp", "chip_mp", "core_dp", "core_mp",
            "dataflow", "M", "N", "K", "tile_m", "tile_n", "tile_k", "time_s", "bound"]
    lay = res.layers[cols].copy()
    lay["time_us"] = lay.pop("time_s") * 1e6
    if args.top:
        lay = lay.nlargest(args.top, "time_us")
    with pd.option_context("display.max_rows", None, "display.width", 220,
                           "display.float_format", "{:.2f}".format):
        print(lay.to_string(index=False))
        print()
        show = ["strategy", "dataflow", "overlap", "feasible", "compute_s", "exposed_comm_s",
                "step_s", "samples_per_s", "utilization", "samples_per_J",
                "samples_per_s_per_mm2"]
        print(rank(res.plans[show], args.rank_by).to_string(index=False))
    print(f"\n# best: {b['strategy']} / {b['dataflow']} / overlap {b['overlap']} -- "
          f"{wl.name} on {system.name}, {args.scheme}, batch {args.batch}")
    print(f"# step {b['step_s'] * 1e3:.3f} ms = fwd {b['fwd_s'] * 1e3:.3f} + bwd_data "
          f"{b['bwd_data_s'] * 1e3:.3f} + wgrad {b['wgrad_s'] * 1e3:.3f} + exposed comm "
          f"{b['exposed_comm_s'] * 1e3:.3f} ms (reduce-scatter {b['reduce_scatter_s'] * 1e3:.3f}, "
          f"all-gather {b['all_gather_s'] * 1e3:.3f}, weight update "
          f"{b['weight_update_s'] * 1e3:.3f})")
    print(f"# {b['samples_per_s']:,.0f} samples/s, {b['achieved_flops'] / 1e12:,.1f} TFLOP/s "
          f"= {b['utilization']:.1%} of peak; {b['model_parallel_layers']} layers model-parallel;"
          f" {len(res.points):,} points, {int((~res.points.feasible).sum()):,} infeasible")
    print(f"# energy {b['energy_J']:,.3g} J per step ({b['power_W']:,.3g} W): "
          f"{b['samples_per_J']:,.3g} samples/J; {b['area_mm2']:,.0f} mm2 of silicon: "
          f"{b['samples_per_s_per_mm2']:,.3g} samples/s/mm2 (best by {args.rank_by}; model "
          "and sources: docs/dse.md)")
    from accelsim.commands._common import clock_text

    print("# " + (f"clock {res.clock_MHz:.0f} MHz: the best plan's power-limited one "
                  f"({system.chip.power.power_limit_W:g} W limit; every plan timed at it)"
                  if res.clock_MHz is not None else clock_text(system)))
    _report.write(args, res.rows(), res.timeline,
                  f"accelsim explore: {wl.name} on {system.name}, {args.scheme}")
    if args.out is not None:
        from accelsim.engine.trace import breakdown_frame

        args.out.parent.mkdir(parents=True, exist_ok=True)
        res.points.to_csv(args.out, index=False)
        plans = args.out.with_name(args.out.stem + "_plans.csv")
        best = args.out.with_name(args.out.stem + "_best_layers.csv")
        res.plans.to_csv(plans, index=False)
        # the breakdown table (as --breakdown writes it), with each layer's mapping beside it
        mapping = res.layers.drop(columns=["kind", "time_s", "flops", "bound"],
                                  errors="ignore").rename(columns={"count": "gemm_count"})
        table = breakdown_frame(res.rows()).merge(mapping, on=["layer", "phase"], how="left")
        table.to_csv(best, index=False)
        print(f"# wrote {args.out}, {plans}, {best}")
    return 0
