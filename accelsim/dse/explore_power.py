"""``explore`` at the power-limited clock (the default of a chip with a ``[chip.power]`` table).

The mappings are ranked at the preset's clock; the best plan's clock is then the highest at
which its step-average power per chip stays within the limit (:mod:`accelsim.engine.limiter`,
the same limiter as ``predict`` and ``llm``), and every plan is re-timed at that clock. Plans
draw different power, so a plan far from the best one could hold another clock: the table
states the one clock it was timed at (``clock_MHz``).
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.arch import System
from accelsim.engine.energy import StepEnergy
from accelsim.engine.limiter import at_power_limit, free_running
from accelsim.perf.power import system_at_clock


def _best_energy(system: System, best: dict) -> StepEnergy | None:
    """The best plan's energy columns (:mod:`accelsim.dse.energy`) as the limiter reads them:
    average power per chip."""
    if not best.get("feasible", False) or system.chip.power is None:
        return None
    p, chips = system.chip.power, system.chips
    total = float(best["energy_J"])
    static = p.static_W * chips * float(best["step_s"])
    return StepEnergy(energy_J=total, power_W=float(best["power_W"]) / chips,
                      dynamic_J=total - static, static_J=static, power_limit_W=p.power_limit_W)


def explore_at_power_limit(explore, system: System, workload, batch: int, scheme, **kw):
    """``explore(system, ...)`` (the fixed-clock exploration) at the best plan's power-limited
    clock; returns its result with ``clock_MHz`` set."""
    base = free_running(system)
    first = explore(base, workload, batch, scheme, **kw)
    b = first.best
    if not b.get("feasible", False):
        return first
    one = {**kw, "dataflows": (b["dataflow"],), "strategies": (b["strategy"],),
           "overlap": (bool(b["overlap"]),), "progress": False}

    def timed(s: System):
        r = explore(s, workload, batch, scheme, **one)
        return r, _best_energy(s, r.best)

    _, clock = at_power_limit(system, timed)
    res = explore(system_at_clock(base, clock), workload, batch, scheme, **kw)
    return replace(res, clock_MHz=clock / 1e6)
