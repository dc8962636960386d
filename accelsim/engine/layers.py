"""Compute of one data-parallel training iteration of a layer workload, summed per phase
(the engine's compute stage for ``predict``; the explorer searches mappings instead).

Every chip takes ``batch`` samples (data parallel over all chips, as the HFP8 paper and GPU
frameworks do); the workload is lowered to one typed op per layer
(:func:`accelsim.engine.lower.lower_workload`) and inside a chip each op is timed by perf's
per-layer formula :func:`accelsim.perf.evaluate_layer` (with a memory hierarchy: tiles over
all cores). The array dataflow is one per network, the best
of ws/os/is. Element-wise layers' backward counts as backward-data. Also the memory a chip needs:
model state plus the activations stashed for the backward pass. Pure numpy (no pandas), so the
``predict`` command answers quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelsim.engine.graph import LayerOp
from accelsim.engine.lower import lower_workload, time_layer_op
from accelsim.engine.memory import workload_memory_bytes
from accelsim.engine.plan import LlmParams
from accelsim.perf.gemm import FITTED, Efficiency
from accelsim.perf.layer_model import Mapping
from accelsim.perf.precision import layer_precisions
from accelsim.perf.systolic import DATAFLOWS
from accelsim.errors import InputError


@dataclass(frozen=True)
class OpPhase:
    """One phase of one lowered op on one chip under the chosen dataflow: seconds, FLOPs of the
    whole system, modelled chip-memory bytes per chip and what bounds it (perf's numbers)."""

    op: LayerOp
    phase: str
    time_s: float
    flops: float
    bytes: float
    bound: str


@dataclass(frozen=True)
class PhaseSums:
    """Per-iteration compute of one chip (seconds) and its memory need."""

    fwd_s: float
    bwd_data_s: float
    wgrad_s: float
    elementwise_s: float  # part of fwd_s + bwd_data_s in element-wise layers
    launch_s: float  # part of the total in per-kernel launch cost
    flops: float  # useful FLOPs of the whole system per iteration
    dataflow: str
    memory_bytes: float  # per chip: weights, gradients, optimizer state, stashed activations
    #: per lowered op (one per layer) and phase, in forward order
    layer_phases: tuple[OpPhase, ...] = ()
    #: the lowered workload (:func:`accelsim.engine.lower.lower_workload`), one op per layer
    ops: tuple[LayerOp, ...] = ()

    @property
    def compute_s(self) -> float:
        return self.fwd_s + self.bwd_data_s + self.wgrad_s


def phase_sums(system, workload, batch: int, scheme, *, efficiency: Efficiency = FITTED,
               optimizer: str = "sgd-momentum", stack: LlmParams | None = None) -> PhaseSums:
    """Compute time per phase of one iteration at ``batch`` samples per chip (best dataflow),
    and the memory a chip holds under ``optimizer``'s state formats. Under a software
    ``stack`` the op kinds it has kernels for (attention, the LM head's vocabulary, a fused
    stack's element-wise layers and loss: :mod:`accelsim.engine.stack_ops`) are timed and
    stashed as the stack runs them, the rest by perf's per-layer model; without one an
    attention layer is refused (no stack, no attention kernel)."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.stack import KernelKind
    from accelsim.engine.stack_ops import (Rules, extra_phases, refuse_without_stack,
                                           stack_memory, stack_phases)

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"batch must be a positive integer, got {batch!r}")
    sc = get_scheme(scheme)
    prec = layer_precisions(workload, sc)
    total = batch * system.chips
    maps = [Mapping(system.chips, 1, system.chip.cores, 1, d) for d in DATAFLOWS]
    n = len(maps)
    sums = np.zeros((n, 5))  # fwd, bwd_data, wgrad, elementwise, launch
    flops = 0.0
    per_layer = []
    # chip-memory bytes from the memory stream's time (perf times it at this bandwidth)
    mem_Bps = system.chip.memory_bandwidth_Bps * (efficiency.memory_efficiency
                                                  if system.chip.has_hierarchy else 1.0)
    ops = lower_workload(workload, total, sc, None if stack is None else stack.stack)
    rules = None if stack is None else Rules.of(system, workload, stack)
    gemm_floor = 0.0 if stack is None else stack.stack.floor_s(KernelKind.GEMM)
    for op in ops:
        ruled, extra = None, ()
        if rules is not None:  # one chip's share: its batch, the stack's kernels
            ruled = stack_phases(system, replace(op, batch=batch), rules)
            extra = extra_phases(replace(op, batch=batch), rules)
        else:
            refuse_without_stack(op)
        for phase, t, fl, by, bd in (ruled or ()) + extra:
            idx = {"fwd": 0, "bwd": 1}[phase]
            sums[:, idx] += t
            if op.kind != "attention":
                sums[:, 3] += t
            flops += fl * system.chips
            per_layer.append((op, phase, np.full(n, t), fl * system.chips,
                              np.full(n, by), np.full(n, bd, dtype=object)))
        if ruled is not None:
            continue
        cols = time_layer_op(system, op, maps, efficiency=efficiency)
        bad = ~cols["feasible"]
        if bad.any():
            raise InputError(f"layer {op.name!r}: {cols['reason'][bad][0]}")
        for j, phase in enumerate(cols["phase"][::n]):
            t = cols["time_s"][j * n:(j + 1) * n]
            if op.layer.is_gemm:  # the stack's per-call floor (eager PyTorch's)
                t = np.maximum(t, gemm_floor)
            idx = {"fwd": 0, "bwd_data": 1, "bwd": 1, "wgrad": 2}[phase]
            sums[:, idx] += t
            sums[:, 4] += cols["latency_s"][j * n:(j + 1) * n]
            if not op.layer.is_gemm:
                sums[:, 3] += t
            flops += float(cols["flops"][j * n])
            per_layer.append((op, phase, t, float(cols["flops"][j * n]),
                              cols["memory_s"][j * n:(j + 1) * n] * mem_Bps,
                              cols["bound"][j * n:(j + 1) * n]))
    best = int(np.argmin(sums[:, :3].sum(axis=1)))
    fwd, bwd, wg, ew, launch = (float(x) for x in sums[best])
    rows = tuple(OpPhase(op, ph, float(t[best]), fl, float(by[best]), str(bd[best]))
                 for op, ph, t, fl, by, bd in per_layer)
    if stack is None:
        mem = workload_memory_bytes(workload, batch, sc.for_optimizer(optimizer), prec,
                                    dp=system.chips, optimizer=optimizer)
    else:  # the transformer path's account: its state formats, the stack's stash
        mem = stack_memory(ops, total, sc, optimizer, rules)(system.chips)
    return PhaseSums(fwd_s=fwd, bwd_data_s=bwd, wgrad_s=wg, elementwise_s=ew, launch_s=launch,
                     flops=flops, dataflow=DATAFLOWS[best], memory_bytes=mem,
                     layer_phases=rows, ops=ops)
