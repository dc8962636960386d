"""``--chakra DIR`` (predict, llm, infer: write the prediction's per-rank op graphs as Chakra
execution traces) and ``predict --workload chakra:DIR`` (time a Chakra trace directory on
``--system``): the command-line side of :mod:`accelsim.chakra` (docs/chakra.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PREFIX = "chakra:"


def add_arguments(parser: argparse.ArgumentParser, reads: bool = False) -> None:
    """--chakra (and, on the command that reads traces, --retime)."""
    parser.add_argument("--chakra", default=None, metavar="DIR",
                        help="write the iteration's op graph as MLCommons Chakra execution "
                             "traces: one .et file per distinct rank and manifest.json mapping "
                             "every rank to its file (a new or empty directory; docs/chakra.md)")
    parser.add_argument("--chakra-every-rank", action="store_true",
                        help="with --chakra: one file per rank and each process group "
                             "instance named (comm_group.json), as ASTRA-sim reads them")
    if reads:
        parser.add_argument("--retime", action="store_true",
                            help="with --workload chakra:DIR: time the trace's GEMM nodes by "
                                 "the chip model on --system (at --scheme's precision unless a "
                                 "node names its own) instead of at their recorded durations")


def check(args: argparse.Namespace) -> None:
    """Refuse an unusable --chakra directory before anything is computed."""
    from accelsim.errors import UserError

    if "retime" in vars(args) and args.retime:
        raise UserError("--retime is for --workload chakra:DIR (a trace's GEMM nodes)")
    if args.chakra is None:
        if args.chakra_every_rank:
            raise UserError("--chakra-every-rank needs --chakra DIR")
        return
    out = Path(args.chakra)
    if not args.chakra.strip():
        raise UserError("--chakra: empty path")
    for up in out.parents:
        if up.exists() and not up.is_dir():
            raise UserError(f"--chakra {out}: {up} is not a directory")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--chakra {out}: exists and is not an empty directory")


def refuse_with(args: argparse.Namespace, flag: str) -> None:
    """--chakra is for one prediction: refuse it with ``flag`` (--search, --serve)."""
    from accelsim.errors import UserError

    if args.chakra is not None:
        raise UserError(f"--chakra is for one prediction, not {flag}")


def export(args: argparse.Namespace, prediction) -> None:
    """Write ``prediction`` under --chakra when given."""
    if args.chakra is None:
        return
    from accelsim.chakra.export import write_chakra

    man = write_chakra(args.chakra, prediction, args.chakra_every_rank)
    m = json.loads(man.read_text())
    files = len({v["file"] for v in m["ranks"].values()})
    print(f"wrote {args.chakra}: {files} Chakra trace file(s) for {m['world_size']} ranks "
          f"({man.name} maps each rank to its file)", file=sys.stderr)


def is_trace(workload: str) -> bool:
    return workload.startswith(PREFIX)


def predict(args: argparse.Namespace) -> int:
    """``predict --workload chakra:DIR``: the trace timed on --system, the one-line summary or
    --json, and --breakdown / --trace read from its schedule."""
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.chakra.export import predict_chakra
    from accelsim.commands import _report
    from accelsim.errors import UserError
    from accelsim.paths import resolve_input

    from accelsim.commands import _plan

    given = _plan.transformer_only_flags(args) + [
        f for f, v in (("--chakra", args.chakra), ("--fusion", args.fusion),
                       ("--layout", args.layout), ("--winograd", args.winograd),
                       ("--first-last-high", args.first_last_high), ("--policy", args.policy),
                       ("--precision-override", args.precision_override or None),
                       ("--micro-batch", args.micro_batch), ("--dp", args.dp),
                       ("--global-batch", args.global_batch), ("--stack", args.stack),
                       ("--power-model", args.power_model or None),
                       ("--power-limit-W", args.power_limit_W)) if v is not None]
    if given:
        raise UserError(f"{', '.join(given)}: not used by --workload chakra:DIR (the trace "
                        "fixes the plan and the kernels; --system, --batch, --scheme, "
                        "--retime, --breakdown, --trace and --json apply)")
    spath = resolve_input(args.system, "system")
    system = load_system(spath)
    _report.check(args)
    prec = get_scheme(args.scheme).compute_precision
    r = predict_chakra(args.workload, system, args.batch, retime=prec if args.retime else None)
    _report.write(args, r.rows(), r.timeline,
                  f"accelsim predict: {args.workload} on {system.name}")
    d = r.as_dict(prec)
    if args.json:
        print(json.dumps(d))
        return 0
    print(f"{d['system']} x {d['workload']} ({d['ranks']} ranks, {d['simulated_ranks']} "
          f"simulated, {d['nodes']} nodes): step {d['step_time_s'] * 1e3:.3f} ms, "
          f"{d['samples_per_s']:.0f} samples/s at --batch {args.batch} per rank"
          + (f", {d['power_W_per_gpu']:.0f} W per GPU ({args.scheme})"
             if d["power_W_per_gpu"] is not None else ""))
    return 0
