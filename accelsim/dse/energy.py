"""Energy per training step and silicon area of a design point, for ranking design points by
performance per joule and per mm^2 (samples_per_J, samples_per_s_per_mm2).

One step's energy (whole system, all chips), each term from a cited per-unit cost::

    energy_J = sum over GEMMs of MACs x pJ/MAC of the layer's precision   (arch.datapath_cost)
             + chip-memory bytes x dram_pJ_per_byte
             + off-chip link bytes x link_pJ_per_byte
             + static power x chips x step_s

* chip-memory bytes: the compulsory traffic of every GEMM (operands read once, output written
  once, ``(MK + KN + MN) x count`` elements at the layer's operand bytes) plus every
  element-wise pass's reads and writes; tiling re-reads and on-chip SRAM traffic are not
  counted (a lower bound).
* link bytes: the gradient reduction's ring collectives (:func:`accelsim.engine.comm.ring_sent`
  per chip, reduce-scatter and all-gather payloads of the scheme, divided by the compression
  factor where the scheme compresses that phase). Model-parallel activation collectives are
  not counted.
* static power per chip: ``static_fraction`` of the chip's peak MAC power.

A chip with a fitted power model (``[chip.power]``: H100, A100) is priced by it instead -- one
energy account with ``llm``/``infer``/``gemm`` (:mod:`accelsim.engine.energy`): 2 x its fitted
energy per FLOP of the datapath per MAC, its fitted energy per chip-memory byte, both at the
preset clock's voltage, and its measured static power; a precision the fit does not price
falls back to the datapath table. The 14 nm datapath table prices design points without a
fitted chip (the HFP8 system).

Area of a chip: every PE holds its widest mode (``max over the array's precisions of
MACs/PE/cycle x MAC area``: the HFP8 design fits 2 FP8 MACs in one FP16 MAC's area), over
``mac_area_fraction`` of the die. ``samples_per_s_per_mm2`` divides by the area of all chips.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from accelsim.arch.datapath_cost import precision_mac
from accelsim.arch.model import OPERAND_BYTES
from accelsim.arch.schemes import get_scheme
from accelsim.engine.comm import ring_sent
from accelsim.errors import InputError
from accelsim.perf.precision import layer_precisions

ENERGY_SOURCES = {
    "node_nm": "HFP8 paper (Sun et al., NeurIPS 2019, appendix D): the design is 14 nm",
    "dram_pJ_per_byte": "HBM2 at 3.9 pJ/bit = 31.2 pJ/B (O'Connor et al., \"Fine-Grained "
                        "DRAM\", MICRO 2017)",
    "link_pJ_per_byte": "off-package SerDes at 5.5 pJ/bit = 44 pJ/B (NVIDIA's NVLink-C2C "
                        "announcement, 2022: 1.3 pJ/bit vs 5.5 pJ/bit for SerDes)",
    "mac_area_fraction": "TPU v1 die: the matrix unit is 24 % of the area (Jouppi et al., "
                         "ISCA 2017, Fig. 2 floor plan)",
    "static_fraction": "assumption: leakage 30 % of the chip's peak MAC power (FinFET-era "
                       "accelerators; no per-chip measurement here: a what-if knob)",
}


@dataclass(frozen=True)
class EnergyParams:
    """Per-unit costs of :func:`step_energy` and :func:`chip_area_mm2` (sources:
    :data:`ENERGY_SOURCES`)."""

    node_nm: float = 14.0
    vdd_V: float | None = None
    dram_pJ_per_byte: float = 31.2
    link_pJ_per_byte: float = 44.0
    mac_area_fraction: float = 0.24
    static_fraction: float = 0.30

    def __post_init__(self) -> None:
        for f in ("dram_pJ_per_byte", "link_pJ_per_byte", "static_fraction"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"EnergyParams.{f} must be finite and >= 0, got {v!r}")
        if not (0 < self.mac_area_fraction <= 1):
            raise InputError("EnergyParams.mac_area_fraction must be in (0, 1], got "
                             f"{self.mac_area_fraction!r}")


DEFAULT_ENERGY = EnergyParams()


def _array_precisions(core) -> list[str]:
    simt = set(core.simt_precisions)
    return [p for p, _ in core.mac_rates if p not in simt]


def pe_area_um2(core, params: EnergyParams = DEFAULT_ENERGY) -> float:
    """One PE's MAC area: its widest mode (MACs/PE/cycle x MAC area, over the array's
    precisions)."""
    return max(core.macs_per_cycle_per_pe(p) * precision_mac(p, params.node_nm,
                                                             params.vdd_V).area_um2
               for p in _array_precisions(core))


def chip_area_mm2(system, params: EnergyParams = DEFAULT_ENERGY) -> float:
    """One chip's area: its PEs' MAC area over ``mac_area_fraction`` (memories, SFUs, I/O)."""
    chip = system.chip
    return chip.cores * chip.core.pes * pe_area_um2(chip.core, params) * 1e-6 \
        / params.mac_area_fraction


def static_power_W(system, params: EnergyParams = DEFAULT_ENERGY) -> float:
    """One chip's static power: ``static_fraction`` x its peak MAC power (every PE busy in its
    most power-hungry mode at the core clock)."""
    core = system.chip.core
    peak_pJ_per_cycle = max(core.macs_per_cycle_per_pe(p)
                            * precision_mac(p, params.node_nm, params.vdd_V).energy_pJ
                            for p in _array_precisions(core))
    return (params.static_fraction * system.chip.cores * core.pes * peak_pJ_per_cycle * 1e-12
            * core.frequency_Hz)


@dataclass(frozen=True)
class StepWork:
    """What one training step does, independent of how long it takes."""

    mac_J: float  # datapath energy of every GEMM MAC
    memory_bytes: float  # compulsory chip-memory traffic, all chips
    link_bytes: float  # gradient-reduction bytes sent over off-chip links, all chips
    memory_pJ_per_byte: float | None = None  # the chip's fitted rate (None: params' DRAM rate)


def step_work(system, workload, scheme, batch: int, compression: float = 1.0,
              params: EnergyParams = DEFAULT_ENERGY) -> StepWork:
    """MAC energy and bytes moved by one training step of ``workload`` at global minibatch
    ``batch`` (see the module docstring for what is counted)."""
    sc = get_scheme(scheme)
    prec = layer_precisions(workload, sc)
    mac_J = mem = 0.0
    power, v2 = _fitted(system)
    for layer in workload.layers:
        p = prec[layer.name]
        ob = OPERAND_BYTES[p]
        if layer.is_gemm:
            dp = system.chip.core.datapath(p)
            if power is not None and power.has_energy(dp):  # the chip's fitted energy
                pj = 2 * power.energy_per_flop_J(dp) * v2 * 1e12
            else:
                pj = precision_mac(dp, params.node_nm, params.vdd_V).energy_pJ
            for g in layer.gemms(batch).values():
                mac_J += g.macs * pj * 1e-12
                mem += (g.M * g.K + g.K * g.N + g.M * g.N) * g.count * ob
        for e in layer.elementwise(batch).values():
            mem += e.bytes_moved(ob)
    n = system.chips
    comp = {str(ph) for ph in sc.compressible_phases}
    rs = workload.n_params * sc.reduce_scatter_bytes_per_elem
    ag = workload.n_params * sc.all_gather_bytes_per_elem
    if "reduce_scatter" in comp:
        rs /= compression
    if "all_gather" in comp:
        ag /= compression
    link = n * (ring_sent("reduce_scatter", n, rs) + ring_sent("all_gather", n, ag))
    rate = None if power is None else power.memory_J_per_byte * v2 * 1e12
    return StepWork(mac_J, mem, link, rate)


def _fitted(system):
    """(the chip's fitted power model or None, (V(f)/V(f_max))^2 at the preset clock)."""
    power = system.chip.power
    if power is None:
        return None, 1.0
    from accelsim.perf.power import voltage_ratio

    return power, voltage_ratio(power, min(system.chip.core.frequency_Hz,
                                           power.max_clock_Hz)) ** 2


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one training step, its terms, and the efficiency columns."""

    mac_J: float
    memory_J: float
    link_J: float
    static_J: float
    energy_J: float
    power_W: float
    area_mm2: float  # all chips
    samples_per_J: float
    samples_per_s_per_mm2: float

    def as_row(self) -> dict[str, float]:
        return asdict(self)


ENERGY_COLUMNS = ("energy_J", "power_W", "area_mm2", "samples_per_J", "samples_per_s_per_mm2")


def step_energy(system, work: StepWork, step_s: float, batch: int,
                params: EnergyParams = DEFAULT_ENERGY) -> StepEnergy:
    """The energy of a step that does ``work`` in ``step_s`` seconds."""
    if not (math.isfinite(step_s) and step_s > 0):
        raise InputError(f"step_s must be a finite time > 0, got {step_s!r}")
    rate = params.dram_pJ_per_byte if work.memory_pJ_per_byte is None \
        else work.memory_pJ_per_byte
    memory_J = work.memory_bytes * rate * 1e-12
    link_J = work.link_bytes * params.link_pJ_per_byte * 1e-12
    static_W = system.chip.power.static_W if system.chip.power is not None \
        else static_power_W(system, params)
    static_J = static_W * system.chips * step_s
    total = work.mac_J + memory_J + link_J + static_J
    area = system.chips * chip_area_mm2(system, params)
    return StepEnergy(work.mac_J, memory_J, link_J, static_J, total, total / step_s, area,
                      batch / total, batch / step_s / area)


#: Metrics a design-space table can be ranked by, and whether larger is better.
RANK_METRICS: dict[str, bool] = {
    "step_s": False, "samples_per_s": True, "samples_per_J": True,
    "samples_per_s_per_mm2": True, "energy_J": False, "power_W": False,
}


def rank(table, metric: str):
    """``table`` (pandas) sorted best first by ``metric`` (:data:`RANK_METRICS`); rows where
    it is missing (infeasible points) go last."""
    if metric not in RANK_METRICS:
        raise InputError(f"unknown rank metric {metric!r}; expected one of "
                         f"{', '.join(RANK_METRICS)}")
    return table.sort_values(metric, ascending=not RANK_METRICS[metric], na_position="last",
                             kind="stable")


def add_energy_columns(plans, system, workload, scheme, batch, compression,
                        params: EnergyParams) -> None:
    """Each feasible plan's step energy and area efficiency (``explore``'s plans table), in
    place; NaN where a plan is infeasible."""
    for c in ENERGY_COLUMNS:
        plans[c] = math.nan
    if not plans["feasible"].any():
        return
    work = step_work(system, workload, scheme, batch, compression, params)
    for i in plans.index[plans["feasible"]]:
        row = step_energy(system, work, float(plans.at[i, "step_s"]), batch, params).as_row()
        for c in ENERGY_COLUMNS:
            plans.at[i, c] = row[c]
