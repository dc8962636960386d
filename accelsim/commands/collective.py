"""``accelsim collective``: time one collective on one topology with either engine."""

from __future__ import annotations

import argparse
import json
from accelsim.commands._common import (MAX_COUNT, config_range_float, float_type, int_type,
                                       positive_int)
from accelsim.errors import UserError

NAME = "collective"
HELP = ("Time one reduce-scatter / all-gather / all-reduce / all-to-all on a topology (ring, "
        "dgx1, hfp8-64, ...) or on a system preset's fabric (--system dgx-h100: the network "
        "model every front-end uses) with the analytic alpha-beta model or the simpy "
        "discrete-event simulation; prints time and bus bandwidth (nccl-tests convention).")

#: Largest per-hop latency / per-step overhead a flag takes (1 s), as a config's latency_ns
MAX_LATENCY_US = 1e6

TOPOLOGY_CHOICES = ("ring", "dgx1", "hfp8-64", "torus-2d", "fully-connected", "switch",
                    "multi-board")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--topology", choices=TOPOLOGY_CHOICES,
                       help="interconnect: ring, dgx1 (8-GPU hybrid cube-mesh), hfp8-64 (8 cube-"
                       "mesh boards, rail-aligned), torus-2d, fully-connected, switch, "
                       "multi-board (--chips a multiple of 8)")
    where.add_argument("--system", metavar="FILE",
                       help="a node file (TOML path or shipped name, e.g. dgx-h100): its fabric "
                       "as every front-end times it -- NVSwitch ports inside a node, one NIC "
                       "per GPU across nodes, both at the preset's network_efficiency")
    parser.add_argument("--chips", type=positive_int, default=None,
                        help="number of chips P (fixed: 8 for dgx1, 64 for hfp8-64; with "
                        "--system: the ranks, default one node's GPUs, more span nodes)")
    parser.add_argument("--stride", type=positive_int, default=1,
                        help="with --system: ranks this many GPUs apart (8 on 8-GPU nodes: one "
                        "rank per node, on the NICs; default 1)")
    parser.add_argument("--op", required=True,
                        choices=("reduce-scatter", "all-gather", "all-reduce", "all-to-all"),
                        help="collective operation (all-to-all: every rank sends N/P to every "
                        "rank)")
    parser.add_argument("--bytes", type=positive_int, required=True, dest="nbytes",
                        help="vector size N in bytes (nccl-tests 'size': the whole vector; "
                        "all-to-all: each rank's send buffer)")
    parser.add_argument("--elem-bytes", type=int_type(1, 1024), default=1,
                        help="element size in bytes; N must be a multiple of it (default 1)")
    parser.add_argument("--link-GBps", type=config_range_float("bandwidth_GBps"), default=None,
                        help="bandwidth of one link in one direction, GB/s (1e9 B/s); default "
                        "25 (NVLink2) for dgx1/hfp8-64, required otherwise")
    parser.add_argument("--inter-board-GBps", type=config_range_float("bandwidth_GBps"),
                        default=None,
                        help="board-to-board link bandwidth for hfp8-64/multi-board "
                        "(default: --link-GBps)")
    parser.add_argument("--latency-us", type=float_type(0.0, MAX_LATENCY_US), default=None,
                        help="per-hop link latency in microseconds (default 1 us for dgx1-based "
                        "topologies, 0 otherwise)")
    parser.add_argument("--alpha-us", type=float_type(0.0, MAX_LATENCY_US), default=0.0,
                        help="extra software overhead per step, microseconds (default 0)")
    parser.add_argument("--engine", choices=("analytic", "des", "both"), default="analytic",
                        help="analytic alpha-beta model, simpy discrete-event simulation, or "
                        "both side by side (JSON: analytic fields plus des_* fields)")
    parser.add_argument("--packet-bytes", type=float_type(1.0, MAX_COUNT),
                        default=None,
                        help="DES packet size in bytes (default: one packet per transfer)")
    parser.add_argument("--mode", choices=("symmetric", "explicit"), default="symmetric",
                        help="symmetric: closed form (analytic) / one representative rank (DES), "
                        "any size; explicit: build every transfer of the schedule (the "
                        "reference, O(chips^2))")
    # defaults: accelsim.netsim.limits (resolved in run(), so that building the parser does not
    # import the network simulator)
    parser.add_argument("--max-transfers", type=positive_int, default=None,
                        help="refuse explicit schedules of more transfers (default 4,000,000)")
    parser.add_argument("--max-packets", type=positive_int, default=None,
                        help="refuse DES runs of more packets (default 1,000,000)")
    parser.add_argument("--max-links", type=positive_int, default=None,
                        help="refuse topology graphs of more links (default 2,000,000; ring, "
                        "switch, multi-board and torus need no graph in symmetric mode)")
    parser.add_argument("--no-pad", action="store_true",
                        help="error out instead of zero-padding when the elements do not split "
                        "evenly over rings x chips")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_system(args: argparse.Namespace) -> int:
    """``--system``: the collective on a node file's fabric (:mod:`accelsim.netsim.fabric`)."""
    from accelsim.arch import build_system
    from accelsim.commands._common import system_path
    from accelsim.netsim.fabric import Fabric, collective_time_s
    from accelsim.ring import bus_factor

    for flag, value, default in (("--link-GBps", args.link_GBps, None),
                                 ("--inter-board-GBps", args.inter_board_GBps, None),
                                 ("--latency-us", args.latency_us, None),
                                 ("--packet-bytes", args.packet_bytes, None),
                                 ("--alpha-us", args.alpha_us, 0.0),
                                 ("--mode", args.mode, "symmetric")):
        if value != default:
            raise UserError(f"{flag} is a --topology option: with --system the links, "
                            "latencies and efficiency are the preset's (edit a copy of it)")
    for flag, given in (("--elem-bytes", args.elem_bytes != 1), ("--no-pad", args.no_pad),
                        ("--max-transfers", args.max_transfers is not None),
                        ("--max-packets", args.max_packets is not None),
                        ("--max-links", args.max_links is not None)):
        if given:
            raise UserError(f"{flag} is a --topology option (an explicit schedule or a "
                            "simulated packet stream); --system times the preset's fabric")
    if args.engine == "both":
        raise UserError("--engine both is a --topology option: with --system run analytic and "
                        "des one at a time")
    if args.engine == "des" and args.op == "all-to-all":
        raise UserError("--engine des: a node file's all-to-all has the two-tier closed form "
                        "only (--topology ... --engine des simulates one)")
    path = system_path(args.system)
    system = build_system(path)
    if system.boards != 1 or system.topology not in ("switch", "single"):
        return _run_graph_system(args, system, path)
    fab = Fabric.of(system, engine=args.engine)
    ranks = args.chips if args.chips is not None else system.chips
    if ranks < 2:
        raise UserError(f"a collective needs at least 2 ranks: {system.name} has one GPU per "
                        "node, give --chips N" if args.chips is None else
                        f"--chips {ranks}: a collective needs at least 2 ranks")
    t = collective_time_s(system, args.op, float(args.nbytes), ranks, args.stride,
                          engine=args.engine)
    per_node, nodes = fab.split(ranks, args.stride)
    algbw = args.nbytes / t / 1e9 if t > 0 else float("inf")
    bus = algbw * (bus_factor(args.op, ranks) if args.op != "all-to-all" else 1.0)
    kind = "pairwise" if args.op == "all-to-all" else "ring"
    algo = (f"{kind}, inside a node" if nodes == 1 else f"{kind}, across nodes (NICs)"
            if per_node == 1 else f"hierarchical: {per_node} per node x {nodes} nodes")
    out = {"system": system.name, "op": args.op, "engine": args.engine, "chips": ranks,
           "stride": args.stride, "nodes": nodes, "algorithm": algo,
           "payload_bytes": float(args.nbytes), "time_s": t, "algbw_GBps": algbw,
           "bus_bandwidth_GBps": bus, "network_efficiency": system.network_efficiency}
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [("system", f"{system.name} ({path})"), ("op", args.op), ("engine", args.engine),
            ("ranks", f"{ranks} (stride {args.stride}, {nodes} node{'s' * (nodes > 1)})"),
            ("algorithm", algo), ("size", f"{args.nbytes} B"),
            ("network efficiency", f"{system.network_efficiency:g} of the wire rate "
                                   "(the preset's [system] network_efficiency)"),
            ("time", f"{t * 1e6:.6g} us"), ("algorithm bandwidth", f"{algbw:.6g} GB/s"),
            ("bus bandwidth", f"{bus:.6g} GB/s")]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0


def _run_graph_system(args: argparse.Namespace, system, path) -> int:
    """``--system`` on a board-level topology (a hybrid cube-mesh, multi-board): the collective
    over all its chips on its graph at the preset's network efficiency, as ``predict`` times
    its gradient reduction (:func:`accelsim.netsim.system.system_graph`)."""
    from accelsim.netsim import collective_time
    from accelsim.netsim.system import system_graph

    if args.chips not in (None, system.chips) or args.stride != 1:
        raise UserError(f"--chips / --stride: {system.name} is a {system.topology} topology; "
                        f"its collectives span all {system.chips} chips")
    if args.op == "all-to-all":
        raise UserError(f"--op all-to-all on {system.name}: give --topology (its all-to-all "
                        "schedules are there)")
    r = collective_time(system_graph(system), args.op, args.nbytes, bytes_per_elem=1.0,
                        engine=args.engine)
    out = {**r.as_dict(), "system": system.name, "network_efficiency":
           system.network_efficiency}
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [("system", f"{system.name} ({path})"), ("op", r.op), ("engine", r.engine),
            ("ranks", f"{r.chips} ({system.topology})"), ("algorithm", r.algorithm),
            ("network efficiency", f"{system.network_efficiency:g} of the wire rate"),
            ("time", f"{r.time_s * 1e6:.6g} us"), ("bus bandwidth",
                                                  f"{r.bus_bandwidth_GBps:.6g} GB/s")]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.system is not None:
        return run_system(args)
    if args.stride != 1:
        raise UserError("--stride is a --system option (ranks spaced over a node file's GPUs)")
    from accelsim.netsim import limits

    for flag, default in (("max_transfers", limits.MAX_TRANSFERS),
                          ("max_packets", limits.MAX_PACKETS),
                          ("max_links", limits.MAX_GRAPH_LINKS)):
        if getattr(args, flag) is None:
            setattr(args, flag, default)
    from accelsim.netsim import symmetric
    from accelsim.netsim import topology as topo
    from accelsim.netsim.limits import SizeLimitError
    from accelsim.errors import choose
    from accelsim.netsim.phases import ENGINES, Engine, Mode, time_schedule
    from accelsim.netsim.schedule import best_schedule

    if args.nbytes % args.elem_bytes:
        raise UserError(f"--bytes {args.nbytes} is not a multiple of --elem-bytes "
                        f"{args.elem_bytes}")
    flags = {"max_transfers": "--max-transfers", "max_packets": "--max-packets",
             "max_links": "--max-links"}
    n, bpe = args.nbytes // args.elem_bytes, float(args.elem_bytes)
    # the flag's string dies here: one Engine each ("both": the two side by side)
    engines = ENGINES if args.engine == "both" else (choose(Engine, args.engine, "--engine"),)
    mode = choose(Mode, args.mode, "--mode")
    kw = dict(alpha_s=args.alpha_us * 1e-6, packet_bytes=args.packet_bytes,
              max_packets=args.max_packets)
    try:
        spec = topo.resolve(args.topology, args.chips,
                            bandwidth_Bps=None if args.link_GBps is None else args.link_GBps * 1e9,
                            inter_board_Bps=None if args.inter_board_GBps is None
                            else args.inter_board_GBps * 1e9,
                            latency_s=None if args.latency_us is None else args.latency_us * 1e-6)
        if args.op == "all-to-all" and mode is Mode.SYMMETRIC:
            from accelsim.netsim import alltoall
            pl = alltoall.plan_for(spec)
            name = pl.name
            res = [alltoall.time_all_to_all(pl, float(args.nbytes), e, **kw) for e in engines]
        elif args.op == "all-to-all":
            from accelsim.netsim import alltoall
            g = topo.generate(spec, max_links=args.max_links)
            name = g.graph.get("name", args.topology)
            s = alltoall.explicit_schedule(g, float(args.nbytes),
                                           max_transfers=args.max_transfers)
            res = [time_schedule(s, e, **kw) for e in engines]
        elif mode is Mode.SYMMETRIC:
            pl = symmetric.plan_for(spec, max_links=args.max_links)
            name = pl.name
            res = [symmetric.time_collective(pl, args.op, n, bpe, e, pad=not args.no_pad, **kw)
                   for e in engines]
        else:
            g = topo.generate(spec, max_links=args.max_links)
            name = g.graph.get("name", args.topology)
            s = best_schedule(g, args.op, n, bpe, pad=not args.no_pad,
                              max_transfers=args.max_transfers)
            res = [time_schedule(s, e, **kw) for e in engines]
    except SizeLimitError as exc:
        raise UserError(exc.message(flags.get(exc.knob, exc.knob))) from None
    except ValueError as exc:  # netsim's checks of these flags' values (e.g. --no-pad: chunks)
        raise UserError(str(exc)) from None
    r = res[0]
    out = r.as_dict()
    out["topology"] = name
    if len(res) == 2:
        d = res[1]
        out.update(des_time_s=d.time_s, des_bus_bandwidth_GBps=d.bus_bandwidth_GBps,
                   des_events=d.events, des_wall_s=d.wall_s, des_vs_analytic=d.time_s / r.time_s)
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [("topology", out["topology"]), ("op", r.op), ("engine", r.engine),
            ("chips", r.chips), ("algorithm", f"{r.algorithm} ({r.mode})"),
            ("size", f"{r.payload_bytes:.0f} B (padded {r.padded_bytes:.0f} B)"),
            ("steps / transfers", f"{r.steps:,} / {r.transfers:,}"),
            ("time", f"{r.time_s * 1e6:.6g} us"),  # significant digits at any scale
            ("algorithm bandwidth", f"{r.algbw_GBps:.6g} GB/s"),
            ("bus bandwidth", f"{r.bus_bandwidth_GBps:.6g} GB/s")]
    if r.engine == "des":
        rows.append(("simulated events", f"{r.events} in {r.wall_s:.3f} s"))
    if len(res) == 2:
        d = res[1]
        rows[2] = ("engine", "analytic | des")
        rows[7] = ("time", f"{r.time_s * 1e6:.3f} us | {d.time_s * 1e6:.3f} us "
                           f"(des/analytic {d.time_s / r.time_s:.6f})")
        rows[9] = ("bus bandwidth", f"{r.bus_bandwidth_GBps:.3f} | {d.bus_bandwidth_GBps:.3f} GB/s")
        rows.append(("simulated events", f"{d.events} in {d.wall_s:.3f} s"))
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0
