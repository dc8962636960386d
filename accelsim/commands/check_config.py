"""``accelsim check-config FILE``: load an architecture config (a file or a shipped name such as
``h100-sxm``) strictly and summarize it."""

from __future__ import annotations

import argparse

NAME = "check-config"
HELP = ("Validate an architecture config (arch_configs/*.toml): exit 0 with a one-line summary, "
        "or exit 2 with a one-line error naming the file, key and bad value.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="architecture config TOML file or shipped name (e.g. h100-sxm) to validate")


def summary(system) -> str:
    """One line: name, chips x cores x array, peaks, memory and link bandwidths."""
    core, chip = system.chip.core, system.chip
    return (f"{system.name}: {system.chips} chip(s) [{system.topology}, {system.boards} board(s)] x "
            f"{chip.cores} cores x {core.rows}x{core.cols} PEs @ {core.frequency_Hz / 1e9:g} GHz; "
            f"peak {system.peak_flops('fp16') / 1e12:.4g} TFLOPS fp16, "
            f"{system.peak_flops('fp8') / 1e12:.4g} fp8, {system.peak_flops('hfp8') / 1e12:.4g} hfp8; "
            f"memory {chip.memory_bandwidth_Bps / 1e9:g} GB/s per chip; "
            f"link {system.link.bandwidth_Bps / 1e9:g} GB/s x {system.link.links_per_chip} per chip")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import load_system
    from accelsim.paths import resolve_input

    # Shipped names resolve as in every other command; a missing file lists them. A ConfigError
    # (an AccelsimError): the CLI prints its one-line message and exits 2.
    print(summary(load_system(resolve_input(args.file, "system"))))
    return 0
