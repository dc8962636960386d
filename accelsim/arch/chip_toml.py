"""The text of a built chip's arch config (:mod:`accelsim.arch.chip_model`): the schema of
docs/configs.md, every number with a ``# source:`` comment naming the flag, the cited value or
the rule that derived it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.arch import chip_model as b
from accelsim.arch.datapath_cost import HOROWITZ, PRECISION_MAC, STILLMAKER

if TYPE_CHECKING:
    from accelsim.arch.chip_model import BuiltChip


def _num(x: float | int) -> str:
    """A TOML number that reads back exactly (shortest round-trip repr)."""
    if isinstance(x, int):
        return str(x)
    return repr(float(x))


def _line(key: str, value: float | int, source: str) -> str:
    return f"{key} = {_num(value)}  # source: {source}"


def _unit(p: str) -> str:
    operand, acc = PRECISION_MAC[p]
    return f"{operand} x {operand} + {acc} MAC"


def chip_toml(chip: BuiltChip) -> str:
    """The arch config of ``chip``."""
    s = chip.spec
    node, f = f"{s.node_nm:g} nm", s.frequency_GHz
    rows, cols = s.array
    share = (f"non-MAC share {b.NON_MAC_SHARE:g} of the logic ({b.NON_MAC_SHARE_SOURCE})")
    bitcell, bitcell_src = b.SRAM_BITCELL_UM2[float(s.node_nm)]
    sram_src = ("--sram-MiB" if s.sram_MiB is not None else
                f"default: the fit chip's SRAM share of its die, {b.default_sram_share():.4g} "
                f"(accelsim/data/chips/chips.csv), of {s.area_mm2:g} mm2 at {node}")
    narrow = min(s.formats, key=lambda p: chip.rates[p].mac.area_um2)
    flags = (f"--area-mm2 {s.area_mm2:g} --node {s.node_nm:g} --format {','.join(s.formats)} "
             f"--frequency-GHz {f:g} --array {rows}x{cols} --sram-MiB {chip.sram_MiB:g} "
             f"--memory-bandwidth-GBps {s.memory_bandwidth_GBps:g} --memory-capacity-GiB "
             f"{s.memory_capacity_GiB:g}"
             + (f" --power-limit-W {s.power_limit_W:g}" if s.power_limit_W is not None else ""))
    peaks = ", ".join(f"{p} {chip.peak_flops(p) / 1e12:.4g}" for p in s.formats)
    out = [
        "# Built by `accelsim chip` (accelsim.arch.builder; docs/configs.md, \"Building a chip\"):",
        f"#   {flags}",
        f"# Die {s.area_mm2:g} mm2 at {node}: SRAM {chip.sram_MiB:.6g} MiB = "
        f"{chip.sram_mm2:.4g} mm2 ({bitcell:g} um2 bit cell / {b.SRAM_ARRAY_EFFICIENCY:g} array "
        f"efficiency); MAC arrays {chip.mac_budget_mm2:.4g} mm2 (the logic less its "
        f"{share}), {chip.mac_area_used_mm2:.4g} mm2 used by {chip.cores} cores of "
        f"{rows}x{cols} PEs of {chip.pe_area_um2:.5g} um2 (the {narrow} MAC).",
        f"# Dense peaks (TFLOPS): {peaks}. MAC energies at the node's nominal "
        f"{chip.node_vdd_V:g} V (accelsim.arch.datapath_cost.NOMINAL_VDD_V). MAC area and "
        f"energy: {HOROWITZ}; node scaling: {STILLMAKER}.",
        "",
        "[system]",
        f'name = "{s.name}"',
        f'description = "Built by accelsim chip: {s.area_mm2:g} mm2 at {node}, '
        f'{",".join(s.formats)}, {chip.cores} cores of {rows}x{cols}"',
        _line("chips", 1, "rule: the builder builds one chip (sweep/explore scale it out)"),
        'topology = "single"',
        _line("boards", 1, "rule: one chip on one board"),
        _line("chips_per_board", 1, "rule: one chip on one board"),
        "",
        "[system.link]",
        _line("bandwidth_GBps", 4, "assumption: unused with one chip; as "
              "arch_configs/rapid-1chip.toml"),
        _line("latency_ns", 500, "assumption: as arch_configs/rapid-1chip.toml"),
        _line("links_per_chip", 6, "assumption: as arch_configs/rapid-1chip.toml"),
        "",
        "[system.inter_board]",
        _line("bandwidth_GBps", 4, "assumption: unused with one board; as "
              "arch_configs/rapid-1chip.toml"),
        _line("latency_ns", 1000, "assumption: as arch_configs/rapid-1chip.toml"),
        _line("links_per_chip", 2, "assumption: as arch_configs/rapid-1chip.toml"),
        "",
        "[chip]",
        _line("cores", chip.cores, f"rule: floor(MAC area {chip.mac_budget_mm2:.6g} mm2 / one "
              f"{rows}x{cols} array of {chip.pe_area_um2:.6g} um2 PEs)"),
        _line("ring_bandwidth_GBps", 256 * f, "rule: 256 B/cycle x the clock, as "
              "arch_configs/hfp8-64chip.toml"),
        _capacity(s.memory_capacity_GiB),
        _line("memory_bandwidth_GBps", s.memory_bandwidth_GBps,
              "--memory-bandwidth-GBps" if s.memory_bandwidth_GBps != b.DEFAULT_MEMORY_GBps
              else "default: the fit chip's, A100 40GB 1555 GB/s HBM2 (NVIDIA A100 datasheet)"),
        "",
        "[chip.power]",
        _line("power_limit_W", chip.power_limit_W, "--power-limit-W" if s.power_limit_W
              is not None else "rule: the chip's peak power (every MAC of its hungriest "
              "datapath busy, chip memory at full bandwidth, static), so it never throttles"),
        _line("static_W", chip.static_W, "rule: 120/700 of the limit, the H100 SXM's idle "
              "share (arch_configs/h100-sxm.toml; a100-sxm.toml uses the same rule)"),
        _line("max_clock_MHz", f * 1000, "rule: the built clock (--frequency-GHz); the power "
              "limit can only lower it"),
        _line("voltage_floor", b.VOLTAGE_FLOOR, "fitted by scripts/fit_power.py on H100 (V "
              "proportional to f), the only V-f fit in accelsim"),
        _line("memory_pJ_per_byte", b.HBM_PJ_PER_BYTE, "HBM2 3.9 pJ/bit (O'Connor et al., "
              "'Fine-Grained DRAM', MICRO 2017), as accelsim.dse.energy; the on-chip path is "
              "not priced (the H100 fit, 92.5 pJ/B, includes it)"),
        "",
        "[chip.power.flop_pJ]",
    ]
    for p, r in chip.rates.items():
        how = "" if r.host == p else f" (not built: runs on the {r.host} unit)"
        out.append(_line(p, r.mac.energy_pJ / 2, f"accelsim.arch.datapath_cost: the "
                         f"{_unit(r.host)} at {node}, {r.mac.energy_pJ:.4g} pJ per MAC / 2 "
                         f"FLOP{how}"))
    out += [
        "",
        "[core]",
        _line("rows", rows, "--array" if s.array != b.DEFAULT_ARRAY else
              "default: 128 x 128, a TPU MXU (Jouppi et al., ISCA 2021)"),
        _line("cols", cols, "see rows"),
        _line("frequency_GHz", f, "--frequency-GHz"),
        _line("scratchpad_KiB", chip.scratchpad_KiB, f"rule: {chip.sram_MiB:.6g} MiB of SRAM "
              f"({sram_src}) over {chip.cores} cores, whole KiB"),
        _line("scratchpad_bandwidth_GBps", (rows + cols) * 4 * f, "rule: (rows + cols) x 4 B "
              "per cycle x the clock, as arch_configs/hfp8-64chip.toml (256 B/cycle, 32x32)"),
        _line("sfu_ops_per_cycle", 2 * cols, "rule: 2 per array column, as "
              "arch_configs/hfp8-64chip.toml (64 for 32 columns)"),
        "",
        "[core.macs_per_pe_per_cycle]",
    ]
    for p, r in chip.rates.items():
        if p == narrow:
            src = (f"rule: the narrowest built format sizes the PE ({r.mac.area_um2:.6g} um2 "
                   f"at {node}, accelsim.arch.datapath_cost)")
        elif r.host == p:
            src = (f"rule: area of the {narrow} MAC / area of the {_unit(p)} = "
                   f"{chip.pe_area_um2:.6g} / {r.mac.area_um2:.6g} um2 at {node}")
        else:
            src = f"rule: not built; runs on the {r.host} unit (holds its bits) at its rate"
        out.append(_line(p, r.rate, src))
    out.append(f"# bit cell: {bitcell_src}; array efficiency: {b.SRAM_EFFICIENCY_SOURCE}")
    return "\n".join(out) + "\n"


def _capacity(gib: float) -> str:
    """Chip memory as whole GiB, else MiB holding the byte-rounded capacity exactly."""
    src = ("--memory-capacity-GiB" if gib != b.DEFAULT_MEMORY_GiB else
           "default: the fit chip's, A100 40GB (NVIDIA A100 datasheet)")
    if float(gib).is_integer():
        return _line("memory_capacity_GiB", int(gib), src)
    return _line("memory_capacity_MiB", round(gib * 2**30) / 2**20, src + ", to a byte")
