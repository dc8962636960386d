"""The power limiter over a repeated step: the highest SM clock at which a step's average power
stays within the chip's limit.

A GPU's limiter holds a time average of board power (about 1 s), not each kernel's: measured
on an H100 SXM (accelsim/data/h100_device/step_power.json), eager GPT training steps, which
mix GEMMs with memory-bound kernels, average 462-571 W and run at 1959-1980 MHz, although
their GEMMs alone would hold a lower clock, while a long Llama-3-8B prefill averages 693 W at
1499 MHz. A step repeated back to back is the averaging window's content, so the step -- every
op timed at one clock ``f`` -- is what the limit applies to:

    average power(f) = static + dynamic energy(f) / step time(f) <= limit,

``f`` the highest clock (up to the maximum) that satisfies it. The chip's other clocks (HBM,
links, L2) do not follow ``f`` (:func:`accelsim.perf.power.system_at_clock`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from accelsim.arch import System
from accelsim.engine.energy import StepEnergy
from accelsim.perf.power import free_running, system_at_clock  # noqa: F401 (re-exported)

T = TypeVar("T")

_CLOCK_TOL_HZ = 1e6  # 1 MHz: the limiter's granularity is coarser (the H100 steps by 15 MHz)


def at_power_limit(system: System, timed: Callable[[System], tuple[T, StepEnergy | None]]
                   ) -> tuple[T, float]:
    """(result, clock Hz): ``timed`` (a step's prediction and its energy) at the highest SM
    clock whose average power per GPU is within ``system``'s power limit. ``timed`` runs on
    copies of ``system`` at trial clocks (power table present, not enforced per kernel)."""
    p = system.chip.power
    if p is None:
        raise ValueError("at_power_limit needs a chip with a [chip.power] table")
    base = free_running(system)

    def at(f: float) -> tuple[T, StepEnergy | None]:
        return timed(system_at_clock(base, f))

    hi = p.max_clock_Hz
    top, e = at(hi)
    if e is None:  # a datapath the power fit does not price: the preset's fixed clock
        return timed(base)[0], system.chip.core.frequency_Hz
    if e.power_W <= p.power_limit_W:
        return top, hi
    lo = hi * 0.05
    best, e_lo = at(lo)
    if e_lo is not None and e_lo.power_W > p.power_limit_W:
        return best, lo  # even a crawling clock draws more: the static power is near the limit
    # the highest clock within the limit, bracketed [lo within, hi above] and narrowed by
    # regula falsi with the Illinois step (the average power is smooth and rising in f: a
    # handful of steps, against bisection's dozen, reach the limiter's granularity)
    g_lo, g_hi = e_lo.power_W - p.power_limit_W, e.power_W - p.power_limit_W
    side = 0
    while hi - lo > _CLOCK_TOL_HZ:
        mid = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        mid = min(max(mid, lo + 0.25 * _CLOCK_TOL_HZ), hi - 0.25 * _CLOCK_TOL_HZ)
        r, e = at(mid)
        g = (e.power_W if e is not None else 0.0) - p.power_limit_W
        if g <= 0:
            lo, best, g_lo = mid, r, g
            if side == -1:
                g_hi *= 0.5
            side = -1
        else:
            hi, g_hi = mid, g
            if side == 1:
                g_lo *= 0.5
            side = 1
    return best, lo


__all__ = ["at_power_limit", "free_running"]
