"""``accelsim comm``: the three-phase gradient-reduction breakdown per precision scheme."""

from __future__ import annotations

import argparse
import json

NAME = "comm"
HELP = ("Reduce-scatter, all-gather and weight-update time per training step for the fp16, fp8 "
        "and hfp8 schemes on a system config (HFP8 paper appendix D), at given link "
        "bandwidths and gradient-compression factors, from either engine.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="arch_configs/hfp8-64chip.toml",
                        help="architecture config TOML (default arch_configs/hfp8-64chip.toml)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--workload", default=None,
                     help="workload TOML; its parameter count and parameter-tensor count are used")
    src.add_argument("--params", type=int, default=None,
                     help="number of model parameters (default: ResNet-50's 25,557,032)")
    parser.add_argument("--tensors", type=int, default=None,
                        help="number of parameter tensors for the per-tensor update overhead "
                        "(default: from --workload, else 0)")
    parser.add_argument("--scheme", nargs="+", default=["fp16", "fp8", "hfp8"],
                        help="schemes to report (default: fp16 fp8 hfp8)")
    parser.add_argument("--link-GBps", type=float, nargs="+", default=[None],
                        help="bandwidth of one link in one direction, GB/s; several values make "
                        "a sweep (default: as configured)")
    parser.add_argument("--compression", type=float, nargs="+", default=[1.0],
                        help="gradient compression factor(s) >= 1 applied to the reduce-scatter "
                        "(default 1 = none)")
    parser.add_argument("--engine", choices=("analytic", "des"), default="analytic",
                        help="collective timing engine")
    parser.add_argument("--optimizer", choices=("sgd", "sgd-momentum", "adam"),
                        default="sgd-momentum", help="optimizer of the weight update")
    parser.add_argument("--memory-efficiency", type=float, default=1.0,
                        help="fraction of peak memory bandwidth the update kernel reaches "
                        "(default 1)")
    parser.add_argument("--per-tensor-overhead-us", type=float, default=0.0,
                        help="fixed update cost per parameter tensor, microseconds (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per line instead of a table")


RESNET50_PARAMS = 25_557_032  # torchvision resnet50: sum of parameter numels


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import load_system
    from accelsim.netsim import UpdateParams, gradient_reduction_times

    from pathlib import Path

    import accelsim

    cfg = Path(args.config)
    if not cfg.exists() and not cfg.is_absolute():  # default works from any directory
        alt = Path(accelsim.__file__).resolve().parents[1] / cfg
        cfg = alt if alt.exists() else cfg
    system = load_system(cfg)
    n_params, n_tensors = RESNET50_PARAMS, 0
    if args.workload is not None:
        from accelsim.workload import load_workload

        wl = load_workload(args.workload)
        n_params = int(wl.n_params)
        nt = getattr(wl, "n_param_tensors", None)
        n_tensors = int(nt() if callable(nt) else nt) if nt is not None else 0
    elif args.params is not None:
        n_params = args.params
    if args.tensors is not None:
        n_tensors = args.tensors
    if not n_params > 0:
        raise ValueError(f"--params must be > 0, got {n_params}")
    if args.per_tensor_overhead_us < 0:
        raise ValueError("--per-tensor-overhead-us must be >= 0, got "
                         f"{args.per_tensor_overhead_us}")
    upd = UpdateParams(memory_efficiency=args.memory_efficiency,
                       per_tensor_overhead_s=args.per_tensor_overhead_us * 1e-6)
    rows = []
    for bw in args.link_GBps:
        for c in args.compression:
            for sc in args.scheme:
                p = gradient_reduction_times(system, n_params, sc, link_GBps=bw, compression=c,
                                             engine=args.engine, optimizer=args.optimizer,
                                             n_tensors=n_tensors, update=upd)
                d = p.as_dict()
                d["link_GBps"] = bw if bw is not None else system.link.bandwidth_Bps / 1e9
                d["system"] = system.name
                rows.append(d)
    if args.json:
        for d in rows:
            print(json.dumps(d))
        return 0
    print(f"{system.name} ({rows[0]['chips']} chips, {rows[0]['algorithm']}), "
          f"{n_params:,} parameters, engine {args.engine}, optimizer {args.optimizer}")
    hdr = ("scheme", "link GB/s", "compr", "RS ms", "AG ms", "WU ms", "total ms", "order")
    print(f"{hdr[0]:<6} {hdr[1]:>9} {hdr[2]:>6} {hdr[3]:>9} {hdr[4]:>9} {hdr[5]:>9} "
          f"{hdr[6]:>9}  {hdr[7]}")
    for d in rows:
        print(f"{d['scheme']:<6} {d['link_GBps']:>9.4g} {d['compression']:>6.4g} "
              f"{d['reduce_scatter_s'] * 1e3:>9.4f} {d['all_gather_s'] * 1e3:>9.4f} "
              f"{d['weight_update_s'] * 1e3:>9.4f} {d['total_s'] * 1e3:>9.4f}  "
              f"{d['phase_order']}")
    return 0
