"""The chip builder's model (public API: :mod:`accelsim.arch.builder`; ``accelsim chip``;
docs/configs.md, "Building a chip"): the numbers of an architecture config from a die area, a
technology node and a list of MAC formats, each from a cited source or a stated rule.

The model (each rule has one owner below):

* **die split**: ``die = SRAM + logic``; SRAM = ``sram_MiB`` x the node's macro area per MiB
  (:func:`sram_mm2_per_MiB`: published 6T bit cells / a published array efficiency); of the
  logic, the MAC arrays take ``1 - NON_MAC_SHARE`` and the rest (control, vector units, NoC,
  I/O, disabled units) the share, ONE global parameter fitted on one published chip and checked
  on another (``accelsim/data/chips/chips.csv``, ``scripts/fit_chip_area.py``).
* **PEs and rates**: MAC area and energy per format from :mod:`accelsim.arch.datapath_cost` at
  the node. A multi-format PE is sized for its narrowest format (rate 1); a wider format F runs
  at ``area(narrowest) / area(F)`` MACs per PE per cycle (< 1: the timing model takes whole
  rates >= 1 or any rate below 1). So every built format's peak is the MAC area over its own
  MAC area: the same numbers as a PE of the widest format's area into which narrower formats
  pack by their area ratio (``fp8_packing``: 1.87 HFP8 MACs per FP16 MAC at 14 nm); the
  multiplexing of a shared datapath is not priced. A precision not built runs on the fastest
  built datapath that holds it (at least its mantissa and exponent bits, an accumulator at
  least as wide) at that datapath's rate and energy; the block formats not built fall back as
  :data:`accelsim.arch.model.WIDER_DATAPATH` says.
* **power**: ``flop_pJ`` = the unit's MAC energy / 2; chip memory at HBM2's 3.9 pJ/bit; static
  power the H100's measured share of its limit; without a limit the chip never throttles.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from accelsim.arch.datapath_cost import (AREA_FROM_45NM, BLOCK_ACCUMULATION, OPERANDS,
                                         PRECISION_MAC, Accumulator,
                                         MacCost, mac_cost, precision_mac)
from accelsim.arch.model import PRECISIONS, REQUIRED_PRECISIONS, WIDER_DATAPATH
from accelsim.errors import InputError

DATA = Path(__file__).resolve().parent.parent / "data" / "chips" / "chips.csv"

#: High-density 6T SRAM bit cell (um^2) per node of the scaling table, with its source.
SRAM_BITCELL_UM2: dict[float, tuple[float, str]] = {
    130.0: (0.346 * 6.4, "no 130 nm cell cited here: Intel's 45 nm cell x Stillmaker-Baas's "
                         "130 nm area factor 6.4"),
    90.0: (1.0, "Intel 90 nm, 1.0 um2 (Intel, 'Intel Builds World's First One Square Micron "
                "SRAM Cell', 2002; https://en.wikichip.org/wiki/intel/process)"),
    65.0: (0.57, "Intel 65 nm, 0.57 um2 (Intel 65 nm 70 Mb SRAM announcement, 2004; "
                 "https://en.wikichip.org/wiki/intel/process)"),
    45.0: (0.346, "Intel 45 nm, 0.346 um2 (Mistry et al., IEDM 2007; "
                  "https://en.wikichip.org/wiki/intel/process)"),
    32.0: (0.171, "Intel 32 nm, 0.171 um2 (Natarajan et al., IEDM 2008; "
                  "https://en.wikichip.org/wiki/intel/process)"),
    20.0: (0.081, "20 nm bulk planar, 0.081 um2 (IBM alliance, IEDM 2012, https://research.ibm"
                  ".com/publications/high-performance-bulk-planar-20nm-cmos-technology-for-low"
                  "-power-mobile-applications; TSMC 20SoC 112 Mb SRAM, ISSCC 2013, the same)"),
    16.0: (0.07, "TSMC 16 nm FinFET, 0.07 um2 (Wu et al., IEDM 2013; "
                 "https://en.wikichip.org/wiki/16_nm_lithography_process)"),
    14.0: (0.0588, "Intel 14 nm, 0.0588 um2 (Natarajan et al., IEDM 2014; "
                   "https://en.wikichip.org/wiki/intel/process)"),
    10.0: (0.0312, "Intel 10 nm, 0.0312 um2 (Auth et al., IEDM 2017; "
                   "https://en.wikichip.org/wiki/intel/process)"),
    7.0: (0.027, "TSMC N7, 0.027 um2 (Wu et al., IEDM 2016, 'A 7nm CMOS platform technology "
                 "featuring ... a 0.027um2 high density 6-T SRAM cell'; "
                 "https://en.wikichip.org/wiki/7_nm_lithography_process)"),
}
#: Bit-cell area / macro area of a dense SRAM macro: TSMC N5's 31.8 Mb/mm^2 HD macro with a
#: 0.021 um^2 cell (31.8e6 x 0.021e-6 = 0.67, rounded 0.7).
SRAM_ARRAY_EFFICIENCY = 0.7
SRAM_EFFICIENCY_SOURCE = ("TSMC N5 HD SRAM: 0.021 um2 cell, 31.8 Mb/mm2 macros (IEDM 2022, as "
                          "reported in https://www.techpowerup.com/309331/tsmc-n3-nodes-show-"
                          "sram-scaling-is-hitting-the-wall): 0.67, rounded to 0.7")

#: The non-MAC share of the logic area (die less SRAM), fitted by scripts/fit_chip_area.py on
#: the ``fit`` row of accelsim/data/chips/chips.csv (tests/test_chip_builder.py re-derives it).
NON_MAC_SHARE = 0.9524
NON_MAC_SHARE_SOURCE = ("fitted by scripts/fit_chip_area.py on NVIDIA A100 (accelsim/data/chips"
                        "/chips.csv, label fit); checked on Tesla D1 (label checked)")

#: Chip memory energy: HBM2 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017; the
#: rate accelsim.dse.energy prices design points with).
HBM_PJ_PER_BYTE = 3.9 * 8
#: Static power / power limit: the H100 SXM's 120 W at idle of its 700 W limit
#: (arch_configs/h100-sxm.toml's source; a100-sxm.toml uses the same rule).
STATIC_SHARE = 120.0 / 700.0
#: Voltage floor of the linear V(f): the only fit in accelsim (scripts/fit_power.py on H100).
VOLTAGE_FLOOR = 0.0
#: Defaults of the chip memory: the fit chip's (A100 40GB: 1555 GB/s, 40 GB HBM2, A100
#: datasheet) and of the array: a TPU MXU's 128 x 128 (Jouppi et al., ISCA 2021).
DEFAULT_MEMORY_GBps = 1555.0
DEFAULT_MEMORY_GiB = 40.0
DEFAULT_ARRAY = (128, 128)

_ACC_RANK = {Accumulator.FP16: 1, Accumulator.FP32: 2, Accumulator.INT32: 0}


def _show(v) -> str:
    return f"{v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else repr(v)


def _check_node(node_nm: float) -> float:
    if isinstance(node_nm, bool) or not isinstance(node_nm, int | float) \
            or float(node_nm) not in AREA_FROM_45NM:
        raise InputError(f"--node {_show(node_nm)} (node_nm): not a node of the scaling table "
                         "(Stillmaker & Baas 2017 tabulate "
                         f"{', '.join(f'{n:g}' for n in AREA_FROM_45NM)} nm)")
    return float(node_nm)


def sram_mm2_per_MiB(node_nm: float) -> float:
    """Area of 1 MiB of dense SRAM macro at ``node_nm``: bit cell x 2^23 bits / efficiency."""
    return SRAM_BITCELL_UM2[_check_node(node_nm)][0] * 8 * 2**20 / SRAM_ARRAY_EFFICIENCY * 1e-6


def mac_area_mm2(die_mm2: float, sram_MiB: float, node_nm: float,
                 share: float = NON_MAC_SHARE) -> float:
    """The MAC arrays' area: the logic (die less SRAM) less its non-MAC ``share``."""
    return (1.0 - share) * (die_mm2 - sram_MiB * sram_mm2_per_MiB(node_nm))


# ------------------------------------------------------------------ the fit and the check
@dataclass(frozen=True)
class PublishedChip:
    """One row of accelsim/data/chips/chips.csv."""

    name: str
    label: str
    node_nm: float
    die_mm2: float
    peak_dense_TFLOPS: float
    clock_GHz: float
    operand: str
    accumulator: str
    sram_MiB: float
    source: str

    @property
    def dense_macs(self) -> float:
        """MAC units of the datasheet's dense peak: peak / (2 x clock)."""
        return self.peak_dense_TFLOPS * 1e12 / (2 * self.clock_GHz * 1e9)

    @property
    def mac(self) -> MacCost:
        return mac_cost(self.operand, self.accumulator, self.node_nm)

    def fitted_share(self) -> float:
        """The non-MAC share of the logic area that reproduces this chip's MACs exactly."""
        logic = self.die_mm2 - self.sram_MiB * sram_mm2_per_MiB(self.node_nm)
        return 1.0 - self.dense_macs * self.mac.area_um2 * 1e-6 / logic

    def predicted_macs(self, share: float = NON_MAC_SHARE) -> float:
        """MAC units the builder's area split gives this die."""
        return mac_area_mm2(self.die_mm2, self.sram_MiB, self.node_nm, share) \
            / (self.mac.area_um2 * 1e-6)


def published_chips(path: str | Path = DATA) -> tuple[PublishedChip, ...]:
    """The rows of the published-chip table."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return tuple(PublishedChip(r["name"], r["label"], float(r["node_nm"]), float(r["die_mm2"]),
                               float(r["peak_dense_TFLOPS"]), float(r["clock_GHz"]),
                               r["operand"], r["accumulator"], float(r["sram_MiB"]),
                               r["source"]) for r in rows)


def chip_labelled(label: str, path: str | Path = DATA) -> PublishedChip:
    """The one row with ``label`` (``fit`` or ``checked``)."""
    rows = [c for c in published_chips(path) if c.label == label]
    if len(rows) != 1:
        raise InputError(f"{path}: expected one row labelled {label!r}, found {len(rows)}")
    return rows[0]


def default_sram_share() -> float:
    """The fit chip's SRAM area / die area: the default SRAM share of a built die."""
    fit = chip_labelled("fit")
    return fit.sram_MiB * sram_mm2_per_MiB(fit.node_nm) / fit.die_mm2


# ------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class ChipSpec:
    """What the architect fixes: die area, node, formats, clock; the rest has a default."""

    area_mm2: float
    node_nm: float
    formats: tuple[str, ...]
    frequency_GHz: float
    array: tuple[int, int] = DEFAULT_ARRAY
    sram_MiB: float | None = None  # None: the fit chip's SRAM share of its die, at node_nm
    power_limit_W: float | None = None  # None: the chip's peak power (it never throttles)
    memory_bandwidth_GBps: float = DEFAULT_MEMORY_GBps
    memory_capacity_GiB: float = DEFAULT_MEMORY_GiB
    name: str = "built-chip"

    def __post_init__(self) -> None:
        def positive(field: str, flag: str, v, optional: bool = False) -> None:
            if optional and v is None:
                return
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                    or v <= 0:
                raise InputError(f"{flag} {v!r} ({field}): must be a finite number > 0")

        positive("area_mm2", "--area-mm2", self.area_mm2)
        _check_node(self.node_nm)
        positive("frequency_GHz", "--frequency-GHz", self.frequency_GHz)
        positive("sram_MiB", "--sram-MiB", self.sram_MiB, optional=True)
        positive("power_limit_W", "--power-limit-W", self.power_limit_W, optional=True)
        positive("memory_bandwidth_GBps", "--memory-bandwidth-GBps", self.memory_bandwidth_GBps)
        positive("memory_capacity_GiB", "--memory-capacity-GiB", self.memory_capacity_GiB)
        if not isinstance(self.formats, tuple) or not self.formats:
            raise InputError(f"--format {self.formats!r} (formats): must be a non-empty tuple of "
                             "format names")
        for f in self.formats:
            if f not in PRECISION_MAC:
                raise InputError(f"--format {f!r} (formats): unknown format; priced: "
                                 f"{', '.join(PRECISION_MAC)}")
        if len(set(self.formats)) != len(self.formats):
            raise InputError(f"--format {','.join(self.formats)} (formats): names a format twice")
        if (not isinstance(self.array, tuple) or len(self.array) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= 65536
                       for x in self.array)):
            raise InputError(f"--array {self.array!r} (array): must be (rows, cols), each an "
                             "integer in [1, 65536]")
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError(f"--name {self.name!r} (name): must be a non-empty string")

    @property
    def sram(self) -> float:
        """On-chip SRAM in MiB: as given, else the same share of the die as on the fit chip
        (its SRAM area / its die area; an area share carries across nodes, MiB per mm^2 not)."""
        if self.sram_MiB is not None:
            return float(self.sram_MiB)
        return self.area_mm2 * default_sram_share() / sram_mm2_per_MiB(self.node_nm)


# ---------------------------------------------------------------------- the datapath
@dataclass(frozen=True)
class Rate:
    """A precision's MACs per PE per cycle and the built unit (``host``) that runs it."""

    precision: str
    rate: float
    host: str
    mac: MacCost


def _holds(host: str, p: str) -> bool:
    """Whether the MAC unit of precision ``host`` runs ``p`` exactly: at least its mantissa
    and exponent bits (integers: its width) and an accumulator at least as wide."""
    (ho, ha), (po, pa) = PRECISION_MAC[host], PRECISION_MAC[p]
    h, q = OPERANDS[ho], OPERANDS[po]
    if h.is_int or q.is_int:
        return h.is_int and q.is_int and h.int_bits >= q.int_bits and ha == pa
    return (h.mantissa_bits >= q.mantissa_bits and h.exponent_bits >= q.exponent_bits
            and _ACC_RANK[ha] >= _ACC_RANK[pa])


def datapath_rates(formats: tuple[str, ...], node_nm: float) -> dict[str, Rate]:
    """Every precision the built chip runs: the built ones at ``area(narrowest)/area(F)``, the
    others on the fastest built unit that holds them (block formats not built: none here,
    :data:`WIDER_DATAPATH` resolves them). The config's required precisions must be run."""
    built = {p: precision_mac(p, node_nm) for p in formats}
    pe = min(c.area_um2 for c in built.values())
    rates = {p: Rate(p, pe / c.area_um2, p, c) for p, c in built.items()}
    for p in PRECISIONS:
        # the block formats (and bare fp4) not built resolve at run time through
        # WIDER_DATAPATH; every other precision gets the rate of the unit that holds it exactly
        if p in rates or (p in WIDER_DATAPATH and (p in BLOCK_ACCUMULATION or p == "fp4")):
            continue
        hosts = [rates[h] for h in built if _holds(h, p)]
        if hosts:
            best = max(hosts, key=lambda r: r.rate)
            rates[p] = Rate(p, best.rate, best.host, best.mac)
    missing = [p for p in REQUIRED_PRECISIONS if p not in rates]
    if missing:
        raise InputError(f"--format {','.join(formats)} (formats): no built datapath runs "
                         f"{', '.join(missing)}, which every arch config needs a rate for "
                         "(core.macs_per_pe_per_cycle); add fp16 (or tf32/fp32) to --format")
    return {p: rates[p] for p in PRECISIONS if p in rates}


# ------------------------------------------------------------------------- the chip
@dataclass(frozen=True)
class BuiltChip:
    """The numbers of a built chip (the config's units), each derived by one rule of the module
    docstring (:mod:`accelsim.arch.builder` writes its config)."""

    spec: ChipSpec
    node_vdd_V: float
    sram_MiB: float
    sram_mm2: float
    mac_budget_mm2: float
    pe_area_um2: float
    cores: int
    scratchpad_KiB: int  # the SRAM split evenly over the cores, whole KiB
    rates: Mapping[str, Rate]  # read-only: every precision the chip runs
    static_W: float
    power_limit_W: float
    peak_power_W: float

    @property
    def pes(self) -> int:
        return self.cores * self.spec.array[0] * self.spec.array[1]

    @property
    def mac_area_used_mm2(self) -> float:
        return self.pes * self.pe_area_um2 * 1e-6

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s of ``precision`` (1 MAC = 2 FLOP)."""
        return 2.0 * self.pes * self.rates[precision].rate * self.spec.frequency_GHz * 1e9

    def peak_over(self, precision: str, other: BuiltChip, other_precision: str) -> float:
        """This chip's dense peak of ``precision`` over ``other``'s of ``other_precision`` (the
        packing a format buys in the same area, e.g. HFP8 over an FP16 chip)."""
        return self.peak_flops(precision) / other.peak_flops(other_precision)


def build_chip(spec: ChipSpec) -> BuiltChip:
    """The chip ``spec`` describes (module docstring); an :class:`InputError` naming the flag
    when the die cannot hold its SRAM or one array."""
    node = _check_node(spec.node_nm)
    rates = datapath_rates(spec.formats, node)
    sram = spec.sram
    sram_mm2 = sram * sram_mm2_per_MiB(node)
    if sram_mm2 >= spec.area_mm2:
        raise InputError(f"--sram-MiB {sram:g} (sram_MiB): {sram:g} MiB of SRAM take "
                         f"{sram_mm2:.4g} mm2 at {node:g} nm, not less than the die's "
                         f"--area-mm2 {spec.area_mm2:g}")  # the default never does (a share)
    budget = mac_area_mm2(spec.area_mm2, sram, node)
    pe = min(r.mac.area_um2 for p, r in rates.items() if p in spec.formats)
    rows, cols = spec.array
    array_mm2 = rows * cols * pe * 1e-6
    cores = int(budget // array_mm2)
    if cores < 1:
        raise InputError(f"--area-mm2 {spec.area_mm2:g} (area_mm2): too small for one "
                         f"{rows}x{cols} array: its MAC share is {budget:.4g} mm2 (die less "
                         f"{sram_mm2:.4g} mm2 of SRAM, less the non-MAC share "
                         f"{NON_MAC_SHARE:g}), one array needs {array_mm2:.4g} mm2 at "
                         f"{node:g} nm; give a larger --area-mm2, a smaller --array or less "
                         "--sram-MiB")
    scratch = int(sram * 1024 // cores)
    if scratch < 1:
        raise InputError(f"--sram-MiB {sram:g} (sram_MiB): less than 1 KiB per core for "
                         f"{cores} cores")
    f_Hz = spec.frequency_GHz * 1e9
    pes = cores * rows * cols
    mac_W = max(pes * r.rate * f_Hz * r.mac.energy_pJ * 1e-12 for r in rates.values())
    mem_W = spec.memory_bandwidth_GBps * 1e9 * HBM_PJ_PER_BYTE * 1e-12
    peak_dyn = mac_W + mem_W
    limit = spec.power_limit_W if spec.power_limit_W is not None \
        else peak_dyn / (1.0 - STATIC_SHARE)
    return BuiltChip(spec=spec, node_vdd_V=rates[spec.formats[0]].mac.vdd_V, sram_MiB=sram,
                     sram_mm2=sram_mm2, mac_budget_mm2=budget, pe_area_um2=pe, cores=cores,
                     scratchpad_KiB=scratch,
                     rates=MappingProxyType(rates), static_W=STATIC_SHARE * limit, power_limit_W=limit,
                     peak_power_W=peak_dyn + STATIC_SHARE * limit)
