"""Shared command-line pieces: the bandwidth flags (one meaning each, as in sweeps and tables),
workload/system arguments that take shipped names, and positive-number checks."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return v


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return v


def _integer(text: str, minimum: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text!r}")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _integer(text, 1)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _integer(text, 0)


def add_bandwidth_arguments(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    """--chip-GBps / --link-GBps (mutually exclusive) and --inter-board-GBps."""
    nargs = "+" if many else None
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--chip-GBps", type=positive_float, nargs=nargs, default=None, metavar="GBPS",
                   help="a chip's total off-chip bandwidth in one direction, split evenly over "
                        "its links (the HFP8 paper's 'off-chip bandwidth'; default: as configured)"
                        + ("; several values make a sweep" if many else ""))
    g.add_argument("--link-GBps", type=positive_float, nargs=nargs, default=None, metavar="GBPS",
                   help="one off-chip link in one direction (every link of a chip; default: as "
                        "configured)" + ("; several values make a sweep" if many else ""))
    parser.add_argument("--inter-board-GBps", type=positive_float, default=None, metavar="GBPS",
                        help="one board-to-board link in one direction, applied after "
                             "--link-GBps (default: as configured)")


def optimizer_choices() -> tuple[str, ...]:
    """The optimizers a plan can name (:data:`accelsim.arch.schemes.OPTIMIZERS`)."""
    from accelsim.arch.schemes import OPTIMIZERS

    return tuple(OPTIMIZERS)


def check_scheme_optimizer(schemes, optimizer: str) -> None:
    """Refuse (one line, naming both flags) a scheme that defines no recipe for the optimizer."""
    from accelsim.arch.schemes import check_optimizer, get_scheme
    from accelsim.cli import UserError

    for name in schemes:
        try:
            check_optimizer(get_scheme(name), optimizer)
        except ValueError as exc:
            raise UserError(f"--scheme {name} --optimizer {optimizer}: {exc}") from None


def scheme_choices() -> tuple[str, ...]:
    """The preset training schemes (:mod:`accelsim.arch.schemes`), for ``--scheme`` flags."""
    from accelsim.arch.schemes import SCHEME_NAMES

    return SCHEME_NAMES


def require_precisions(system, path, precisions, flag: str) -> None:
    """UserError unless the system's cores have a MAC rate for every one of ``precisions``."""
    from accelsim.cli import UserError

    for prec in dict.fromkeys(precisions):
        if not system.chip.core.supports(prec):
            raise UserError(f"{path}: core.macs_per_pe_per_cycle has no {prec} rate "
                            f"(needed by {flag})")


def system_path(spec: str | Path) -> Path:
    from accelsim.paths import resolve_input

    return resolve_input(spec, "system")


def load_workload_arg(spec: str):
    """A workload TOML, a SCALE-Sim topology CSV or a shipped name (resnet50, bert-base, ...)."""
    from accelsim.paths import resolve_input
    from accelsim.workload import load_workload, read_scalesim_topology

    path = resolve_input(spec, "workload")
    return read_scalesim_topology(path) if path.suffix.lower() == ".csv" else load_workload(path)


def journal_rows(out) -> int:
    """Finished points in the sweep journal of ``out`` (a .csv, or a .parquet's journal; 0 if
    none)."""
    out = Path(out)
    journal = out if out.suffix == ".csv" else out.with_name(out.name + ".journal.csv")
    try:
        with journal.open("rb") as f:
            return max(0, sum(1 for line in f if line.endswith(b"\n")) - 1)
    except OSError:
        return 0


def exit_interrupted(command: str, saved: str, out) -> None:
    """Ctrl-C in a resumable run: say what is saved where, then exit 130 (one line on stderr).

    ``saved``: what is on disk, e.g. "12 of 108 points"."""
    print(f"accelsim {command}: interrupted; {saved} are saved in {out}; rerun the same command "
          f"to resume", file=sys.stderr, flush=True)
    raise SystemExit(130) from None



def datapath_note(system, scheme) -> None:
    """Tell the user (stderr) when the chip computes the scheme's precision no faster than its
    high precision: the config has no faster datapath for it, so the scheme runs there at the
    wider rate and any gain comes from smaller tensors in memory. PRECISIONS runs from wide to
    narrow: the note is for a narrower scheme (fp8 beside fp16), never for fp32/tf32/bf16
    beside the fp16 default."""
    import sys

    from accelsim.arch.model import PRECISIONS

    core, cp, hp = system.chip.core, scheme.compute_precision, scheme.high_precision
    narrower = PRECISIONS.index(cp) > PRECISIONS.index(hp)
    if narrower and core.supports(hp) and \
            core.macs_per_cycle_per_pe(cp) <= core.macs_per_cycle_per_pe(hp):
        print(f"note: {system.name} computes {cp} no faster than {hp} (its config has no "
              f"faster {cp} datapath); any gain over {hp} comes from {cp}'s smaller tensors "
              "in memory", file=sys.stderr)
