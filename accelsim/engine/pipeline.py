"""A 1F1B pipeline as a schedule: one representative rank per stage, each micro-batch's forward
and backward pass a task on its stage's stream, the activations and their gradients sent
between stages, placed by the one scheduler (:mod:`accelsim.engine.scheduler`).

Each stage runs PipeDream-Flush's 1F1B order (Narayanan et al. SC'21, section 2.2, Fig. 4):
``p - s - 1`` warm-up forwards on stage ``s`` (of ``p``), then one forward and one backward in
turn, then the remaining backwards. A forward waits for the previous stage's forward of the
same micro-batch and its send; a backward for the next stage's backward and its send. With
equal stages the schedule takes ``(m + p - 1)`` slots of forward + backward, the closed form
of :func:`accelsim.engine.schedule.pipeline_s` (``tests/test_engine_pipeline.py``); the llm
trace draws it, one track per stage (:meth:`accelsim.engine.prediction.Prediction.timeline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelsim.engine.graph import Phase
from accelsim.engine.scheduler import Graph, Schedule, Task, schedule
from accelsim.errors import InputError

if TYPE_CHECKING:
    from accelsim.engine.plan import Plan

def one_f_one_b(stages: int, stage: int, micro: int, chunks: int = 1
                ) -> list[tuple[Phase, int, int]]:
    """Stage ``stage``'s order of (phase, model chunk, micro-batch) under 1F1B; with
    ``chunks > 1`` Megatron-LM's interleaved 1F1B (Narayanan et al. SC'21, section 2.2;
    ``get_model_chunk_id`` of megatron/core/pipeline_parallel/schedules.py): the forwards go
    through the chunks ``stages`` micro-batches at a time, warm-up ``2 (p - s - 1) + (v - 1) p``
    of them, the backwards through the chunks in reverse."""
    p, v = stages, chunks
    total = micro * v

    def pass_of(i: int, backward: bool) -> tuple[int, int]:
        c = (i // p) % v
        return (v - 1 - c if backward else c), (i // (p * v)) * p + i % p

    if v == 1:
        warm = min(p - stage - 1, total)
    else:
        warm = min(2 * (p - stage - 1) + (v - 1) * p, total)
    order = [(Phase.FWD, *pass_of(i, False)) for i in range(warm)]
    f = warm
    for b in range(total):
        if f < total:
            order.append((Phase.FWD, *pass_of(f, False)))
            f += 1
        order.append((Phase.BWD, *pass_of(b, True)))
    return order


def _inputs(ph: Phase, s: int, c: int, k: int, p: int, v: int) -> list[tuple]:
    """The passes (phase, stage, chunk, micro) whose output this one needs."""
    if ph == Phase.FWD:
        if s > 0:
            return [(ph, s - 1, c, k)]
        return [(ph, p - 1, c - 1, k)] if c > 0 else []
    own = [(Phase.FWD, s, c, k)]
    if s < p - 1:
        return own + [(ph, s + 1, c, k)]
    return own + ([(ph, 0, c + 1, k)] if c < v - 1 else [])


def _graph(fwd_s: Sequence[float], bwd_s: Sequence[float], micro: int, send_s: float,
           chunks: int = 1) -> tuple[Task, ...]:
    """The 1F1B graph of ``micro`` micro-batches: each stage's passes on its stream in its
    1F1B order (a chunk's pass ``1/chunks`` of the stage's), each send between stages on the
    sender's send stream."""
    p, v = len(fwd_s), chunks
    g = Graph()
    done: dict[tuple, int] = {}  # (phase, stage, chunk, micro) -> the task others wait for
    orders = [one_f_one_b(p, s, micro, v) for s in range(p)]
    pos = [0] * p
    while any(pos[s] < len(orders[s]) for s in range(p)):  # add tasks once their inputs exist
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                ph, c, k = orders[s][pos[s]]
                need = _inputs(ph, s, c, k, p, v)
                if any(x not in done for x in need):
                    break
                t = g.add(Task(f"stage {s} chunk {c}", f"micro-batch {k}", ph,
                               (fwd_s[s] if ph == Phase.FWD else bwd_s[s]) / v, f"stage {s}",
                               tuple(sorted(done[x] for x in need)), stage=s))
                crosses = (ph == Phase.FWD and (s < p - 1 or c < v - 1)) or \
                    (ph == Phase.BWD and (s > 0 or c > 0))
                done[(ph, s, c, k)] = t
                if crosses and p > 1:  # the activation (or its gradient) goes to another stage
                    done[(ph, s, c, k)] = g.add(Task(f"stage {s}", "send", ph, send_s,
                                                     f"stage {s} send", (t,), stage=s))
                pos[s] += 1
                progressed = True
        if not progressed:  # a 1F1B order always proceeds; a guard against a bad order
            raise RuntimeError("1F1B pipeline: no stage can proceed")
    return tuple(g.tasks)


def pipeline_schedule(fwd_s: Sequence[float], bwd_s: Sequence[float], micro: int,
                      send_s: float = 0.0, chunks: int = 1) -> Schedule:
    """The 1F1B schedule of ``micro`` micro-batches over ``len(fwd_s)`` stages, stage ``s``
    taking ``fwd_s[s]`` and ``bwd_s[s]`` per micro-batch and every send ``send_s``: tasks
    ``stage s chunk c`` / ``micro-batch k`` on stream ``stage s``, the sends on ``stage s
    send``; ``chunks`` model chunks per stage (interleaved 1F1B)."""
    p = len(fwd_s)
    if p < 1 or len(bwd_s) != p:
        raise InputError(f"a pipeline needs one forward and one backward time per stage, got "
                         f"{len(fwd_s)} and {len(bwd_s)}")
    if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:
        raise InputError(f"micro-batches must be an integer >= 1, got {micro!r}")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1 \
            or (chunks > 1 and micro % p):
        raise InputError(f"an interleaved pipeline needs chunks >= 1 and micro-batches a "
                         f"multiple of the {p} stages, got chunks {chunks!r}, {micro} "
                         "micro-batches")
    return schedule(_graph(fwd_s, bwd_s, micro, send_s, chunks))


#: most stage passes (stages x micro-batches x chunks) an overlapped pipeline schedules
MAX_OVERLAP_PASSES = 20_000


def overlapped_pipeline_s(fwd_s: float, bwd_s: float, plan: Plan, send_s: float
                          ) -> tuple[float, float]:
    """``(pipeline, bubble)`` seconds of ``plan``'s interleaved 1F1B with its sends on their
    own stream (Megatron-core's ``overlap_p2p_comm``): equal stages of ``fwd_s`` and ``bwd_s``
    per micro-batch (no send in them), every send ``send_s``, as :func:`pipeline_schedule`
    places them; the bubble is what the micro-batches' passes do not fill (sends waited for
    included)."""
    p, m, v = plan.pp, plan.n_micro, plan.interleave
    if p * m * v > MAX_OVERLAP_PASSES:
        raise InputError(f"pp_comm_overlap schedules every pass: pp x micro-batches x "
                         f"interleave = {p * m * v:,} is over {MAX_OVERLAP_PASSES:,}")
    total = pipeline_schedule([fwd_s] * p, [bwd_s] * p, m, send_s, v).makespan_s
    return total, total - m * (fwd_s + bwd_s)
