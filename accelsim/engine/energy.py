"""Energy and average power of a step from its per-op breakdown rows and the chip's power model
(:class:`accelsim.arch.ChipPower`, fitted by ``scripts/fit_power.py``; formulas of
:mod:`accelsim.perf.power`).

A step's energy over all its GPUs = every GPU's static power x the step time + the dynamic
energy of every op: its tensor-core FLOPs at the energy per FLOP of the datapath they run on,
its chip-memory bytes at the energy per byte, both scaled by ``(V(f)/V(f_max))^2`` at the clock
the timing assumed (the system's ``core.frequency_GHz``: the preset's effective clock, or under
``--power-model`` the step's clock that :mod:`accelsim.engine.limiter` found).
Link (NVLink, NIC) energy is not modelled: the power model has no energy per byte sent.

The breakdown rows of one prediction describe one tensor-parallel rank's share of every layer
of one pipeline (the ops of every stage), so the whole system's dynamic energy is the rows'
times ``tp x dp``; element-wise and attention rows count their bytes, GEMM rows their FLOPs and
compulsory bytes. :func:`work_energy` prices the same from totals (:class:`Work`): a serving
run's window, its iterations' FLOPs and bytes summed (:mod:`accelsim.serving`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accelsim.arch import System
from accelsim.engine.graph import attention_precision
from accelsim.engine.trace import Row
from accelsim.perf.power import voltage_ratio


@dataclass(frozen=True)
class StepEnergy:
    """Energy of one step over the whole system and the average power per GPU."""

    energy_J: float  # all GPUs
    power_W: float  # average per GPU over the step
    dynamic_J: float
    static_J: float
    power_limit_W: float  # the chip's board limit: a mean above it means the real chip would
    #                       lower its clock below the timing's fixed one (accelsim gemm
    #                       --power-model times a kernel at that clock)

    @property
    def over_limit(self) -> bool:
        return self.power_W > self.power_limit_W

    def as_dict(self) -> dict:
        return {"energy_J": self.energy_J, "power_W": self.power_W}


@dataclass(frozen=True)
class Work:
    """What a pass (or a run of them) does on every GPU together: tensor-core FLOPs at the
    precision's datapath, attention's FLOPs at its own
    (:func:`accelsim.engine.graph.attention_precision`), and chip-memory bytes."""

    flops: float = 0.0
    attention_flops: float = 0.0
    bytes: float = 0.0


def step_energy(system: System, rows: Iterable[Row], precision: str, time_s: float, gpus: int,
                replicas: int) -> StepEnergy | None:
    """Energy of a step of ``time_s`` on ``gpus`` GPUs whose breakdown ``rows`` (FLOPs at
    ``precision``'s datapath -- attention's at :func:`accelsim.engine.graph.attention_precision`
    -- and HBM bytes) are run ``replicas`` times over the system (tp x dp for a transformer
    plan); None when the chip has no power model or it prices no energy for the datapath."""
    w = rows_work(rows)
    return work_energy(system, precision, time_s, gpus,
                       Work(replicas * w.flops, replicas * w.attention_flops, replicas * w.bytes))


def rows_work(rows: Iterable[Row]) -> Work:
    """The FLOPs (attention's apart) and HBM bytes of breakdown ``rows``, as they count them."""
    flops = attn = nbytes = 0.0
    for r in rows:
        if r.op == "attention":
            attn += r.flops
        else:
            flops += r.flops
        nbytes += r.bytes
    return Work(flops, attn, nbytes)


def work_energy(system: System, precision: str, time_s: float, gpus: int,
                work: Work) -> StepEnergy | None:
    """Energy of ``time_s`` on ``gpus`` GPUs that do ``work`` (all of them together): static
    power the whole time on every GPU, the work priced at the timing's clock; None when the
    chip has no power model or it prices no energy for the datapath."""
    p = system.chip.power
    if p is None or time_s <= 0:
        return None
    core = system.chip.core
    if not (p.has_energy(core.datapath(precision))
            and p.has_energy(core.datapath(attention_precision(precision, core)))):
        return None  # a datapath the fit does not price (fp32 on the SIMT cores)
    e_flop = p.energy_per_flop_J(core.datapath(precision))
    e_attn = p.energy_per_flop_J(core.datapath(attention_precision(precision, core)))
    v2 = voltage_ratio(p, min(core.frequency_Hz, p.max_clock_Hz)) ** 2  # the timing's clock
    dynamic = v2 * (work.flops * e_flop + work.attention_flops * e_attn
                    + work.bytes * p.memory_J_per_byte)
    static = p.static_W * time_s * gpus
    total = dynamic + static
    return StepEnergy(energy_J=total, power_W=total / time_s / gpus, dynamic_J=dynamic,
                      static_J=static, power_limit_W=p.power_limit_W)


def power_note(e: StepEnergy | None, what: str) -> str | None:
    """A one-line note when ``e``'s mean power exceeds the chip's limit, else None."""
    if e is None or not e.over_limit:
        return None
    return (f"note: {what} draws {e.power_W:.0f} W per GPU at the timing's fixed clock, above "
            f"the {e.power_limit_W:.0f} W limit: a real chip lowers its clock and takes longer "
            "(--power-model runs it at the clock its average power allows)")
