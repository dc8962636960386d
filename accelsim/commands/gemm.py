"""``accelsim gemm``: time of one GEMM on one chip of a system (memory-hierarchy model)."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands._common import (add_power_arguments, dimension, power_system,
                                       scheme_choices)

NAME = "gemm"
HELP = ("Time and TFLOP/s of one GEMM [M,K] @ [K,N] on one chip of a system config "
        "(tiles over cores, shared cache levels, waves, launch cost; accelsim.perf.gemm).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", required=True, metavar="FILE",
                        help="arch_configs/*.toml file or shipped name (e.g. h100-sxm)")
    parser.add_argument("--m", type=dimension, required=True, help="rows of A and C")
    parser.add_argument("--n", type=dimension, required=True, help="columns of B and C")
    parser.add_argument("--k", type=dimension, required=True, help="reduction dimension")
    parser.add_argument("--scheme", choices=scheme_choices(), default="fp16",
                        help="precision of the GEMM (a scheme's compute precision; default fp16)")
    add_power_arguments(parser)
    from accelsim.commands._hardware import add_hardware_arguments

    add_hardware_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import datapath_note, require_precisions
    from accelsim.paths import resolve_input
    from accelsim.perf.gemm import gemm_time, strides_aligned

    spath = resolve_input(args.system, "system")
    from accelsim.commands._hardware import hardware_note, hardware_system

    system = hardware_system(load_system(spath), args)
    precision = get_scheme(args.scheme).compute_precision
    require_precisions(system, spath, [precision], f"--scheme {args.scheme}")
    datapath = system.chip.core.datapath(precision)
    datapath_note(system, get_scheme(args.scheme))
    system, power_model = power_system(system, spath, args, precision)
    if hardware_note(system, args):  # after every check: an error stays one line
        print(hardware_note(system, args), file=sys.stderr)
    if power_model:
        from accelsim.perf.power import gemm_power_limited

        pg = gemm_power_limited(system, args.m, args.n, args.k, precision)
        g = pg.gemm
        power = {"clock_MHz": pg.clock_MHz, "power_W": pg.power_W, "energy_J": pg.energy_J,
                 "power_limit_W": pg.power_limit_W}
    else:
        g = gemm_time(system, args.m, args.n, args.k, precision)
        power = _fixed_clock_power(system, g)
    if not power_model and d_over(power):
        print(f"note: at the preset's fixed {power['clock_MHz']:.0f} MHz (--clock boost) this "
              f"GEMM draws {power['power_W']:.0f} W, above the {power['power_limit_W']:g} W "
              "limit: only a burst shorter than the limiter's ~1 s window runs it there (the "
              "default, --clock power, times it at the clock its power allows)", file=sys.stderr)
    if system.chip.unaligned_gemm_rate < 1 and not strides_aligned(args.n, args.k, precision):
        print(f"note: --n {args.n} / --k {args.k} is not a multiple of 16 bytes of {precision}: "
              f"the library falls back to kernels without vector loads, timed at "
              f"{system.chip.unaligned_gemm_rate:g} of the tensor-core rate (pad it: "
              "docs/perf.md, 'alignment')", file=sys.stderr)
    d = g.as_dict()
    d.update(system=system.name, scheme=args.scheme, datapath=datapath,
             peak_tflops=system.chip.peak_flops(precision) / 1e12, power_model=power_model,
             **power)
    from accelsim.engine.uncertainty import gemm_band

    band = gemm_band(system, precision)
    d.update(band.as_dict())
    if args.json:
        print(json.dumps(d))
    else:
        clock = "" if d["clock_MHz"] is None else (
            f"; {d['clock_MHz']:.0f} MHz, {d['power_W']:.0f} W"
            + (f" (limit {d['power_limit_W']:g} W)" if power_model else "")
            + (f", {d['energy_J'] * 1e3:.3g} mJ" if d["energy_J"] is not None else ""))
        print(f"{system.name}: {args.m}x{args.n}x{args.k} {precision}: {g.time_s * 1e6:.2f} us, "
              f"{g.tflops:.1f} TFLOP/s of {d['peak_tflops']:.1f} peak, {g.bound}-bound "
              f"(tile {g.tile_m}x{g.tile_n}"
              + (f", K split {g.split_k} ways" if g.split_k > 1 else "")
              + f", {g.waves} waves, {g.dataflow}; chip-memory "
              f"traffic {g.memory_bytes / g.compulsory_bytes:.2f}x compulsory){clock}")
        print(band.line())
    return 0


def d_over(power: dict) -> bool:
    """The fixed-clock power exceeds the chip's limit."""
    return power["power_W"] is not None and power["power_W"] > power["power_limit_W"]


def _fixed_clock_power(system, g) -> dict:
    """The power-table keys at the preset's fixed clock (None without a [chip.power] table);
    the power may exceed the limit: that clock is an effective one, not a power-limited one."""
    keys = {"clock_MHz": None, "power_W": None, "energy_J": None, "power_limit_W": None}
    power = system.chip.power
    if power is None:
        return keys
    from accelsim.perf.power import kernel_power_W

    f = system.chip.core.frequency_Hz
    if f > power.max_clock_Hz or not power.has_energy(system.chip.core.datapath(g.precision)):
        return keys
    watts = kernel_power_W(system, g, f)
    return {"clock_MHz": f / 1e6, "power_W": watts, "energy_J": watts * g.time_s,
            "power_limit_W": power.power_limit_W}
