"""The ``accelsim`` command line: one sub-command per module in :mod:`accelsim.commands`.

The pipeline, in the order a user meets it::

    formats      number-format table and precision plot          (numerics -> report)
    swamping     accumulation-error study of dot-product engines  (arith -> report)
    check-config / layers / systolic / explore                     (arch, workload -> perf -> dse)
    collective / comm                                              (netsim)
    figures / sweep                                                (dse + netsim -> report)
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import accelsim
from accelsim import commands


class UserError(Exception):
    """An error caused by the user's input; printed as one line, exit status 2."""


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelsim",
        description="Low-precision training accelerator simulator: number formats, "
        "arithmetic golden models, systolic timing, network simulation and throughput reports.",
    )
    parser.add_argument("--version", action="version", version=f"accelsim {accelsim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"accelsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, FileNotFoundError) as exc:
        # Input errors raised by the library carry their own message (file, key, value).
        print(f"accelsim {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
