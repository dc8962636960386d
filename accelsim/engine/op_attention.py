"""One attention op on one chip, as ``accelsim op attention`` asks it: the fused (flash) kernel
at the stack's streaming bandwidth or the unfused GEMM pair and score pass at the megatron
stack's, at the clock its average power allows when the chip has a power table (the default;
the op repeated back to back is the limiter's window, as a GEMM repeated alone is), else at the
preset's fixed clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.arch import System
from accelsim.engine.energy import StepEnergy, step_energy
from accelsim.engine.graph import AttentionOp, Phase, attention_parts, flash_attention_parts
from accelsim.engine.plan import LlmParams
from accelsim.engine.stack import STREAM_EFFICIENCY, FlashKernel
from accelsim.engine.trace import Row


@dataclass(frozen=True)
class AttentionTime:
    """Forward and backward seconds, the bound, and (power table only) the clock and the
    average power of the forward + backward pair repeated."""

    fwd_s: float
    bwd_s: float
    bound: str
    clock_MHz: float | None = None
    power_W: float | None = None


def _parts(system: System, op: AttentionOp, kernel: FlashKernel) -> tuple[float, float, str]:
    if op.flash:  # one fused kernel, streaming at the fitted achievable bandwidth
        return flash_attention_parts(system, op, kernel,
                                     system.chip.memory_bandwidth_Bps * STREAM_EFFICIENCY)
    return attention_parts(system, op,
                           system.chip.memory_bandwidth_Bps * LlmParams().memory_efficiency)


def _energy(system: System, op: AttentionOp, f: float, b: float, bound: str
            ) -> StepEnergy | None:
    bflops, bbytes = (op.backward_flops, op.backward_bytes) if op.flash \
        else (2 * op.flops, 2 * op.bytes)
    rows = [Row("attention", "attention", Phase.FWD, 0, 1, f, f, op.flops, op.bytes, bound),
            Row("attention", "attention", Phase.BWD, 0, 1, b, b, bflops, bbytes, bound)]
    return step_energy(system, rows, op.precision, f + b, 1, 1)


def attention_time(system: System, op: AttentionOp, kernel: FlashKernel = FlashKernel()
                   ) -> AttentionTime:
    """``op`` on one chip of ``system`` (see the module docstring)."""
    if not system.chip.power_limited:
        f, b, bound = _parts(system, op, kernel)
        e = _energy(system, op, f, b, bound)
        return AttentionTime(f, b, bound, None, None if e is None else e.power_W)
    from accelsim.engine.limiter import at_power_limit

    def timed(s: System):
        f, b, bound = _parts(s, op, kernel)
        e = _energy(s, op, f, b, bound)
        return (f, b, bound, e), e

    (f, b, bound, e), clock = at_power_limit(system, timed)
    return AttentionTime(f, b, bound, clock / 1e6, None if e is None else e.power_W)
