"""The hardware what-if flags of every command that takes ``--system``: a variant of the preset
(another memory capacity, memory bandwidth or SM clock) without writing a new file. Applied once,
right after the system is loaded, through the typed ``System.with_*`` methods; the ranges are a
config file's (:data:`accelsim.bounds.PLAUSIBLE`)."""

from __future__ import annotations

import argparse

from accelsim.commands._common import config_range_float
from accelsim.errors import InputError, UserError


def add_hardware_arguments(parser: argparse.ArgumentParser) -> None:
    """``--memory-capacity-GiB``, ``--memory-bandwidth-GBps``, ``--frequency-GHz``."""
    g = parser.add_argument_group("hardware what-if (each overrides the --system preset's "
                                  "value for every chip; any decimal)")
    g.add_argument("--memory-capacity-GiB", type=config_range_float("memory_capacity_GiB"),
                   default=None, metavar="GIB",
                   help="chip memory per GPU in GiB (2^30 bytes; rounded to a byte), e.g. 96 "
                        "for a 96 GB H100 variant")
    g.add_argument("--memory-bandwidth-GBps",
                   type=config_range_float("memory_bandwidth_GBps"), default=None,
                   metavar="GBPS", help="chip memory (HBM) bandwidth in GB/s (1e9 bytes/s)")
    g.add_argument("--frequency-GHz", type=config_range_float("frequency_GHz"),
                   default=None, metavar="GHZ",
                   help="fixed SM clock in GHz (shared-memory bandwidth follows it; L2 and HBM "
                        "do not); with a [chip.power] table at most its max_clock_MHz, and not "
                        "with --power-model / --power-limit-W, which set the clock themselves")


def _given(args: argparse.Namespace) -> list[tuple[str, float, str]]:
    """(flag, value, unit) of each override given."""
    return [(flag, value, unit) for flag, value, unit in (
        ("--memory-capacity-GiB", args.memory_capacity_GiB, "GiB"),
        ("--memory-bandwidth-GBps", args.memory_bandwidth_GBps, "GB/s"),
        ("--frequency-GHz", args.frequency_GHz, "GHz")) if value is not None]


def hardware_system(system, args: argparse.Namespace):
    """``system`` with the command line's hardware overrides (each a one-line UserError naming
    its flag when the chip refuses the value)."""
    for flag, value, _ in _given(args):
        try:
            if flag == "--memory-capacity-GiB":
                system = system.with_memory_capacity(value * 2**30)
            elif flag == "--memory-bandwidth-GBps":
                system = system.with_memory_bandwidth(value * 1e9)
            else:
                system = system.with_frequency(value * 1e9)
        except InputError as exc:
            raise UserError(f"{flag} {value:g}: {exc}") from None
    return system


def hardware_overrides(args: argparse.Namespace) -> str:
    """What the flags overrode, for a settings line ("" when nothing): ``memory capacity 96 GiB
    (--memory-capacity-GiB)``, ..."""
    names = {"--memory-capacity-GiB": "memory capacity", "--memory-bandwidth-GBps":
             "memory bandwidth", "--frequency-GHz": "clock"}
    return ", ".join(f"{names[flag]} {value:g} {unit} ({flag})"
                     for flag, value, unit in _given(args))


def hardware_note(system, args: argparse.Namespace) -> str | None:
    """A one-line note for the commands without a settings line (None when nothing changed)."""
    text = hardware_overrides(args)
    return f"note: {system.name} with {text}, overriding the preset" if text else None
