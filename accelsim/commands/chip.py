"""``accelsim chip``: build an arch config from a die area, a node and MAC formats
(:mod:`accelsim.arch.builder`; docs/configs.md, "Building a chip")."""

from __future__ import annotations

import argparse
import re

from accelsim.commands._common import choice_list, config_range_float, float_type

NAME = "chip"
HELP = ("Build an arch config (arch_configs/*.toml format) from a die area, a technology node "
        "and MAC formats: MAC counts, power table and area split from the datapath table "
        "(accelsim.arch.datapath_cost), every number with its source.")


def _array(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m or not all(1 <= int(g) <= 65536 for g in m.groups()):
        raise argparse.ArgumentTypeError(f"must be ROWSxCOLS, each an integer in [1, 65,536], "
                                         f"got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _formats() -> tuple[str, ...]:
    from accelsim.arch.datapath_cost import PRECISION_MAC

    return tuple(PRECISION_MAC)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--area-mm2", type=float_type(0.0, lo_open=True), required=True,
                        metavar="MM2", help="die area in mm^2")
    parser.add_argument("--node", type=float_type(0.0, lo_open=True), required=True,
                        metavar="NM", help="technology node in nm: one of the scaling table's "
                        "130, 90, 65, 45, 32, 20, 16, 14, 10, 7")
    parser.add_argument("--format", type=choice_list(_formats, "format"), required=True,
                        metavar="F[,F2...]", help="MAC formats the datapath is built for "
                        "(precision names: fp16, bf16, fp8, hfp8, hif8, mxfp8, nvfp4, int8, ...); "
                        "the config needs an fp16 rate, so one must run fp16 (fp16, tf32, fp32)")
    parser.add_argument("--frequency-GHz", type=config_range_float("frequency_GHz"),
                        required=True, metavar="GHZ", help="core clock in GHz (required: no "
                        "clock is typical of a node)")
    parser.add_argument("--power-limit-W", type=config_range_float("power_limit_W"),
                        default=None, metavar="W", help="board power limit (default: the chip's "
                        "peak power, so it never throttles)")
    parser.add_argument("--array", type=_array, default=None, metavar="RxC",
                        help="systolic array of one core (default 128x128)")
    parser.add_argument("--sram-MiB", type=float_type(0.0, lo_open=True), default=None,
                        metavar="MIB", help="on-chip SRAM in MiB, split over the cores as "
                        "scratchpads (default: the fit chip's SRAM share of its die, 3.4 %%)")
    parser.add_argument("--memory-bandwidth-GBps", type=config_range_float(
        "memory_bandwidth_GBps"), default=None, metavar="GBPS",
        help="chip memory bandwidth in GB/s (default 1555, an A100 40GB's HBM2)")
    parser.add_argument("--memory-capacity-GiB", type=config_range_float("memory_capacity_GiB"),
                        default=None, metavar="GIB", help="chip memory in GiB (default 40)")
    parser.add_argument("--name", default="built-chip", help="the config's system.name")
    parser.add_argument("--out", required=True, metavar="FILE.toml",
                        help="the arch config to write")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import builder as b
    from accelsim.commands._common import check_output_name, check_output_path

    check_output_name(args.out, "--out", suffixes=(".toml",))
    spec = b.ChipSpec(
        area_mm2=args.area_mm2, node_nm=args.node, formats=tuple(args.format),
        frequency_GHz=args.frequency_GHz, array=args.array or b.DEFAULT_ARRAY,
        sram_MiB=args.sram_MiB, power_limit_W=args.power_limit_W,
        memory_bandwidth_GBps=(b.DEFAULT_MEMORY_GBps if args.memory_bandwidth_GBps is None
                               else args.memory_bandwidth_GBps),
        memory_capacity_GiB=(b.DEFAULT_MEMORY_GiB if args.memory_capacity_GiB is None
                             else args.memory_capacity_GiB),
        name=args.name)
    chip = b.build_chip(spec)
    out = check_output_path(args.out, "--out", suffixes=(".toml",))
    b.write(chip, out)
    rows, cols = spec.array
    peaks = ", ".join(f"{p} {chip.peak_flops(p) / 1e12:.4g}" for p in spec.formats)
    print(f"{spec.name}: {spec.area_mm2:g} mm2 at {spec.node_nm:g} nm = SRAM "
          f"{chip.sram_mm2:.4g} mm2 ({chip.sram_MiB:.4g} MiB) + MAC arrays "
          f"{chip.mac_area_used_mm2:.4g} mm2 ({chip.cores} cores x {rows}x{cols} PEs) + the "
          f"rest; peak TFLOPS {peaks} @ {spec.frequency_GHz:g} GHz; power limit "
          f"{chip.power_limit_W:.4g} W; wrote {out}")
    return 0
