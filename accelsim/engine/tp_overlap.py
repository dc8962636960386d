"""Tensor-parallel communication overlapped with its GEMMs, as Transformer Engine's userbuffers
run it under Megatron-core's ``--tp-comm-overlap`` (sequence parallelism on, tp > 1): one
layer's pass as a schedule of chunked GEMM tasks and collective tasks on two streams.

The methods are TE's defaults per GEMM (``NVTE_Comm_Overlap_Algo`` in TE's
``comm_gemm_overlap.h``; the userbuffers presets of Megatron-Bridge's
``bridge.training.comm_overlap``):

* ring exchange (``qkv_fprop``, ``fc1_fprop``, ``proj_dgrad``, ``fc2_dgrad``;
  ``SPLIT_PIPELINED_AG_P2P``): the all-gather of the sequence-sharded input (forward) or output
  gradient (backward) as ``tp - 1`` peer-to-peer steps; the GEMM in ``tp`` row chunks, the
  first on the local shard, chunk ``k`` once step ``k`` has arrived, step ``k + 1`` beside it;
* pipeline (``proj_fprop``, ``fc2_fprop``; ``SPLIT_PIPELINED_RS``): the GEMM in ``tp``
  chunks, each chunk's partial sums reduce-scattered beside the next chunk's GEMM (the last
  one exposed);
* bulk (``qkv_wgrad``, ``fc1_wgrad``; ``BULK_OVERLAP_RS``): the reduce-scatter of the input
  gradient beside the whole weight-gradient GEMM. (``qkv_dgrad`` / ``fc1_dgrad``'s bulk
  all-gather is the input re-gather, hidden without the flag too: :mod:`accelsim.engine.comm`.)

Chunks split a GEMM's and a collective's time evenly (a chunk GEMM's lower efficiency and a
chunk's own latency are not modelled). Compute beside a collective runs slower by the stack's
``comm_contention`` (the one factor FSDP's schedule reads, :mod:`accelsim.engine.fsdp`): each
GEMM chunk is lengthened by it x the time a collective runs beside it, and the graph scheduled
again. What a pass exposes is its makespan minus its GEMMs' time: never below 0, never above
the collectives' time (a contention <= 1 costs less than the overlap it comes with).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from accelsim.arch import System
from accelsim.engine.comm import Comm
from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import CommKind, CommOp, GemmOp, Phase, Stream, gemm_s
from accelsim.engine.scheduler import Graph, Schedule, Task, concurrent_s, schedule
from accelsim.engine.stack import KernelKind, Stack
from accelsim.errors import InputError


class Method(StrEnum):
    """How a collective meets its GEMM (TE's names)."""

    RING = "ring_exchange"
    PIPELINE = "pipeline"
    BULK = "bulk"


@dataclass(frozen=True)
class Overlap:
    """One GEMM (``gemm_s`` alone) and the collective ``comm`` (``comm_s`` alone) beside it."""

    gemm: str
    gemm_s: float
    comm: CommOp
    comm_s: float
    method: Method


#: (block, collective kind, phase) -> (the GEMM it overlaps, its pass: fwd / dgrad / wgrad,
#: the method): TE's default userbuffers configuration
PAIRS = {
    ("attn", CommKind.ALL_GATHER, Phase.FWD): ("qkv", "fwd", Method.RING),
    ("attn", CommKind.REDUCE_SCATTER, Phase.FWD): ("proj", "fwd", Method.PIPELINE),
    ("mlp", CommKind.ALL_GATHER, Phase.FWD): ("fc1", "fwd", Method.RING),
    ("mlp", CommKind.REDUCE_SCATTER, Phase.FWD): ("fc2", "fwd", Method.PIPELINE),
    ("mlp", CommKind.ALL_GATHER, Phase.BWD): ("fc2", "dgrad", Method.RING),
    ("mlp", CommKind.REDUCE_SCATTER, Phase.BWD): ("fc1", "wgrad", Method.BULK),
    ("attn", CommKind.ALL_GATHER, Phase.BWD): ("proj", "dgrad", Method.RING),
    ("attn", CommKind.REDUCE_SCATTER, Phase.BWD): ("qkv", "wgrad", Method.BULK),
}


def pass_graph(pairs: Sequence[Overlap], tp: int, phase: Phase,
               contention_s: dict[int, float] | None = None) -> tuple[Task, ...]:
    """One pass's overlapped GEMMs in order, each with its collective (``tp`` chunks), a pair
    starting once the one before has ended on both streams; every GEMM chunk followed by its
    ``comm_contention`` task (``contention_s`` by chunk index, 0 without)."""
    g = Graph()
    extra = contention_s or {}
    for ov in pairs:
        start = tuple(sorted({*g.last(Stream.COMPUTE), *g.last(Stream.TP)}))
        name, op = ov.comm.name.split(".")[0], ov.comm
        chunks = 1 if ov.method is Method.BULK else tp
        steps = tp - 1 if ov.method is Method.RING else chunks

        def comm(deps: tuple[int, ...]) -> int:
            return g.add(Task(name, op.name, phase, ov.comm_s / steps, Stream.TP, deps=deps,
                              bytes=op.bytes / steps, bound="comm"))

        arrived = []
        if ov.method is Method.RING:  # the steps run back to back from the pair's start
            for _ in range(steps):
                arrived.append(comm(start if not arrived else (arrived[-1],)))
        elif ov.method is Method.BULK:
            comm(start)
        last = start
        for k in range(chunks):
            deps = {*last, *((arrived[k - 1],) if ov.method is Method.RING and k else ())}
            i = g.add(Task(name, ov.gemm, phase, ov.gemm_s / chunks, deps=tuple(sorted(deps)),
                           bound="compute"))
            last = (g.add(Task(name, "comm_contention", phase, extra.get(i, 0.0), deps=(i,),
                               bound="contention")),)
            if ov.method is Method.PIPELINE:  # this chunk's partial sums, reduce-scattered
                comm(last)
    return tuple(g.tasks)


def pass_schedule(pairs: Sequence[Overlap], tp: int, phase: Phase, contention: float
                  ) -> Schedule:
    """:func:`pass_graph` scheduled, then (``contention`` > 0) scheduled again with each GEMM
    chunk lengthened by ``contention`` x the time a collective ran beside it (one pass, as
    :func:`accelsim.engine.fsdp.fsdp_schedule`)."""
    sched = schedule(pass_graph(pairs, tp, phase))
    if contention <= 0:
        return sched
    extra = {i: contention * concurrent_s(sched, i, (Stream.TP,))
             for i, t in enumerate(sched.tasks) if t.stream == Stream.COMPUTE
             and t.op != "comm_contention"}
    return schedule(pass_graph(pairs, tp, phase, extra))


def _n_tasks(method: Method, tp: int) -> int:
    """Tasks :func:`pass_graph` adds for one pair: its collectives, GEMM chunks and their
    contention tasks."""
    return {Method.RING: tp - 1 + 2 * tp, Method.PIPELINE: 3 * tp, Method.BULK: 3}[method]


def exposed_s(sched: Schedule, pairs: Sequence[Overlap], tp: int) -> list[float]:
    """Each pair's exposed seconds in ``sched``: its span minus its GEMM's time alone (the
    pairs run one after the other, so these sum to the makespan minus the GEMMs)."""
    out, at, k = [], 0.0, 0
    for ov in pairs:
        n = _n_tasks(ov.method, tp)
        end = max(sched.end_s[k:k + n])
        out.append(max(0.0, end - at - ov.gemm_s))  # max: float rounding of the chunk sums
        at, k = end, k + n
    return out


def layer_pairs(model: Decoder, gemms: Sequence[GemmOp],
                tp_ops: Sequence[tuple[CommOp, float]], system: System, stack: Stack
                ) -> list[Overlap]:
    """The overlapped pairs of one layer in the order they run (:data:`PAIRS`: forward, then
    backward), the GEMMs timed by :func:`accelsim.engine.graph.gemm_s` (with the stack's
    per-call floor) and the collectives as :mod:`accelsim.engine.comm` times them."""
    by_name = {g.name: g for g in gemms}
    if model.is_moe or not {"qkv", "proj", "fc1", "fc2"} <= set(by_name):
        raise InputError(f"tp_comm_overlap is modelled for dense layers with a fused QKV "
                         f"(GPT, Llama): model {model.name!r} has {', '.join(by_name)}")
    floor = stack.floor_s(KernelKind.GEMM)
    ops = {(op.name.split(".")[0], op.kind, op.phase): (op, sec) for op, sec in tp_ops
           if not op.name.endswith("tp_regather")}
    out = []
    for key, (gname, part, method) in PAIRS.items():
        op, sec = ops[key]
        g = by_name[gname]
        timed = {"fwd": g, "dgrad": g.backward[0], "wgrad": g.backward[1]}[part]
        out.append(Overlap(timed.name, gemm_s(system, timed, floor), op, sec, method))
    return out


def with_overlap(cm: Comm, model: Decoder, gemms: Sequence[GemmOp], tp: int, system: System,
                 stack: Stack) -> Comm:
    """``cm`` with its tensor-parallel collectives overlapped: each op's exposed seconds
    (``Comm.tp_exposed``) and the layer's forward and backward exposed sums."""
    pairs = layer_pairs(model, gemms, cm.tp_ops, system, stack)
    shown: dict[tuple[str, Phase], float] = {}
    sums = {}
    for phase in (Phase.FWD, Phase.BWD):
        mine = [p for p in pairs if p.comm.phase == phase]
        sched = pass_schedule(mine, tp, phase, stack.comm_contention)
        for ov, e in zip(mine, exposed_s(sched, mine, tp)):
            shown[(ov.comm.name, phase)] = e
        sums[phase] = sum(shown[(ov.comm.name, phase)] for ov in mine)
    exposed = tuple(shown.get((op.name, op.phase), sec) for op, sec in cm.tp_ops)
    return replace(cm, tp_exposed=exposed, tp_layer_pass_s=sums[Phase.FWD],
                   tp_layer_bwd_s=sums[Phase.BWD])
