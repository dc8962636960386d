"""Power-limited clocks and kernel energy: a GPU holds its board power limit by lowering its SM
clock, so a long dense GEMM runs below the maximum clock while a memory- or launch-bound kernel
runs at it (the DVFS power model P = P_static + activity x C V(f)^2 f, e.g. Kaxiras & Martonosi,
"Computer Architecture Techniques for Power-Efficiency", 2008, ch. 2).

The chip's parameters are :class:`accelsim.arch.ChipPower` (``[chip.power]`` of the config).
For a kernel timed at SM clock ``f``:

* time: the GEMM model (:func:`accelsim.perf.gemm.gemm_time`) on the chip with its core clock set
  to ``f`` and its on-chip level bandwidths (given per clock in the presets) scaled by
  ``f / f_ref``, where ``f_ref`` is the preset's ``core.frequency_GHz``; chip memory (HBM) and the
  per-kernel launch time do not scale. So the compute part scales with 1/f, the memory part not.
* power: ``static_W + (V(f)/V(f_max))^2 (e_flop FLOPs + e_byte bytes) / t`` with ``e_flop`` the
  tensor-core energy per FLOP of the precision's datapath and ``e_byte`` the energy per byte of
  the model's chip-memory traffic, both at V(f_max), and ``V(f)/V(f_max) = v0 + (1 - v0) f /
  f_max`` (``v0`` = voltage_floor). ``e_byte`` is fitted on a copy at the maximum clock: most of
  it is the on-chip path (SM load/store, L2, crossbar) on the SM's voltage rail, so it scales
  with V(f)^2 like the FLOPs (the data cannot separate the HBM interface's share).
* efficiency: the default model's global :data:`accelsim.perf.gemm.FITTED` (array 0.88): fitted
  anew at the measured clocks of the fit rows, the array efficiency comes out at 0.875
  (``scripts/fit_power.py`` prints the check), the same within its scatter, so it is kept.
* clock: the highest ``f <= f_max`` whose power is within the limit (power rises with ``f``:
  the FLOP rate and V(f) both do), found by bisection; ``f_max`` when the kernel fits at it.

The energies are fitted by ``scripts/fit_power.py`` on real H100 SXM GEMMs
(``accelsim/data/h100_power``); ``reports/power_validation.md`` compares the predictions.
Used by ``accelsim gemm/op --power-model`` / ``--power-limit-W``; every other front-end keeps the
preset's fixed effective clock (docs/perf.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from accelsim.perf import gemm as _gemm
from accelsim.perf.gemm import FITTED, Efficiency, GemmTime

if TYPE_CHECKING:
    from accelsim.arch import ChipPower, System

#: bisection stops when the clock interval is this narrow (Hz)
_CLOCK_TOL_HZ = 0.05e6


def voltage_ratio(power: ChipPower, clock_Hz: float) -> float:
    """V(f) / V(f_max): linear in f from ``voltage_floor`` at f = 0 to 1 at ``max_clock_Hz``."""
    if not 0 < clock_Hz <= power.max_clock_Hz * (1 + 1e-12):
        raise ValueError(f"clock {clock_Hz / 1e6:g} MHz outside (0, "
                         f"{power.max_clock_Hz / 1e6:g}] MHz")
    v0 = power.voltage_floor
    return v0 + (1.0 - v0) * clock_Hz / power.max_clock_Hz


def _power_of(system: System) -> ChipPower:
    if system.chip.power is None:
        raise ValueError(f"system {system.name!r} has no [chip.power] table: no power model")
    return system.chip.power


def free_running(system: System) -> System:
    """``system`` with its power table kept but not enforced per kernel: a clock set from
    outside (a step-level search, :mod:`accelsim.engine.limiter`; a GEMM's own,
    :func:`gemm_power_limited`) times it."""
    p = system.chip.power
    if p is None or not p.enforced:
        return system
    return replace(system, chip=replace(system.chip, power=replace(p, enforced=False)))


def system_at_clock(system: System, clock_Hz: float) -> System:
    """The same system with its SM clock at ``clock_Hz``: the core clock and the bandwidth of
    each core's private levels (shared memory) scale with ``clock_Hz / core.frequency_Hz``;
    shared levels (L2), chip memory, links and the launch time do not.

    L2 is measured not to follow the SM clock: on one H100 SXM, L2-resident re-reads ran at
    7127 GB/s at 1980 MHz and 6540 GB/s at 1410 MHz (0.92x for 0.71x the clock) and an HBM copy
    at 3011 / 3028 GB/s (accelsim/data/h100_device/breakdown.json, ``limited_clock``)."""
    return replace(system, chip=system.chip.at_clock(clock_Hz))  # the rule's one owner


def kernel_power_W(system: System, g: GemmTime, clock_Hz: float) -> float:
    """Average board power (W) of GEMM ``g`` timed at SM clock ``clock_Hz`` on ``system``'s chip
    (``g.time_s`` includes the launch time, during which only static power is drawn)."""
    p = _power_of(system)
    e_flop = p.energy_per_flop_J(system.chip.core.datapath(g.precision))
    dynamic = voltage_ratio(p, clock_Hz) ** 2 * (e_flop * g.flops
                                                 + p.memory_J_per_byte * g.memory_bytes)
    return p.static_W + dynamic / g.time_s


@dataclass(frozen=True)
class PoweredGemm:
    """A GEMM timed at the clock its power allows: ``gemm`` is the timing at ``clock_Hz``;
    ``limited`` says the power limit (not the maximum clock) set the clock."""

    gemm: GemmTime
    clock_Hz: float
    power_W: float
    power_limit_W: float
    limited: bool

    @property
    def clock_MHz(self) -> float:
        return self.clock_Hz / 1e6

    @property
    def energy_J(self) -> float:
        return self.power_W * self.gemm.time_s


def gemm_at_clock(system: System, m: int, n: int, k: int, precision: str, clock_Hz: float, *,
                  count: int = 1, efficiency: Efficiency = FITTED) -> PoweredGemm:
    """The GEMM timed at a given SM clock, with the power that clock draws (which may exceed
    the limit: ``limited`` is then False and ``power_W > power_limit_W``)."""
    p = _power_of(system)
    g = _gemm.gemm_time(system_at_clock(free_running(system), clock_Hz), m, n, k, precision,
                  count=count, efficiency=efficiency)
    return PoweredGemm(gemm=g, clock_Hz=float(clock_Hz),
                       power_W=kernel_power_W(system, g, clock_Hz),
                       power_limit_W=p.power_limit_W, limited=False)


def gemm_power_limited(system: System, m: int, n: int, k: int, precision: str, *,
                       count: int = 1, efficiency: Efficiency = FITTED) -> PoweredGemm:
    """The GEMM at the highest SM clock (up to ``max_clock_Hz``) whose average power is within
    the chip's power limit."""
    p = _power_of(system)
    top = gemm_at_clock(system, m, n, k, precision, p.max_clock_Hz, count=count,
                        efficiency=efficiency)
    if top.power_W <= p.power_limit_W:
        return top
    lo, hi = p.max_clock_Hz * 1e-3, p.max_clock_Hz
    best = gemm_at_clock(system, m, n, k, precision, lo, count=count, efficiency=efficiency)
    if best.power_W > p.power_limit_W:  # only above the static power, which ChipPower excludes
        return replace(best, limited=True)
    while hi - lo > _CLOCK_TOL_HZ:
        mid = 0.5 * (lo + hi)
        r = gemm_at_clock(system, m, n, k, precision, mid, count=count, efficiency=efficiency)
        if r.power_W <= p.power_limit_W:
            lo, best = mid, r
        else:
            hi = mid
    return replace(best, limited=True)


def gemm_time(system: System, m: int, n: int, k: int, precision: str, *, count: int = 1,
              dataflow: str | None = None, efficiency: Efficiency = FITTED) -> GemmTime:
    """The time of a GEMM on ``system`` as configured (``accelsim.gemm_time``, and ``accelsim
    gemm``): :func:`accelsim.perf.gemm.gemm_time` at the preset's clock, or, with the chip's
    power model on (``system.with_power_model()``), at the highest clock its power allows
    (:func:`gemm_power_limited`)."""
    power = system.chip.power
    if power is None or not power.enforced or dataflow is not None \
            or not power.has_energy(system.chip.core.datapath(precision)):
        # no power model, the --clock boost what-if, a dataflow pinned by the caller (a
        # what-if at the preset's clock), or a datapath the fit does not price (fp32 SIMT)
        return _gemm.gemm_time(system, m, n, k, precision, count=count, dataflow=dataflow,
                               efficiency=efficiency)
    return gemm_power_limited(system, m, n, k, precision, count=count,
                              efficiency=efficiency).gemm

