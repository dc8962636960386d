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

from accelsim.engine.graph import Phase
from accelsim.engine.scheduler import Graph, Schedule, Task, schedule
from accelsim.errors import InputError

def one_f_one_b(stages: int, stage: int, micro: int) -> list[tuple[Phase, int]]:
    """Stage ``stage``'s order of (phase, micro-batch) under 1F1B."""
    warm = min(stages - stage - 1, micro)
    order = [(Phase.FWD, k) for k in range(warm)]
    f = warm
    for b in range(micro):
        if f < micro:
            order.append((Phase.FWD, f))
            f += 1
        order.append((Phase.BWD, b))
    return order


def _graph(fwd_s: Sequence[float], bwd_s: Sequence[float], micro: int,
           send_s: float) -> tuple[Task, ...]:
    """The 1F1B graph of ``micro`` micro-batches: each stage's passes on its stream in 1F1B
    order, each send on the sender's send stream."""
    p = len(fwd_s)
    g = Graph()
    sent: dict[tuple[Phase, int, int], int] = {}  # (phase, stage, micro) -> its send
    orders = [one_f_one_b(p, s, micro) for s in range(p)]
    pos = [0] * p
    while any(pos[s] < len(orders[s]) for s in range(p)):  # add tasks once their inputs exist
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                ph, k = orders[s][pos[s]]
                src = (ph, s - 1 if ph == Phase.FWD else s + 1, k)
                needs_input = 0 <= src[1] < p
                if needs_input and src not in sent:
                    break
                t = g.add(Task(f"stage {s}", f"micro-batch {k}", ph,
                               fwd_s[s] if ph == Phase.FWD else bwd_s[s], f"stage {s}",
                               (sent[src],) if needs_input else (), stage=s))
                nxt = s + 1 if ph == Phase.FWD else s - 1
                if 0 <= nxt < p:
                    sent[(ph, s, k)] = g.add(Task(f"stage {s}", "send", ph, send_s,
                                                  f"stage {s} send", (t,), stage=s))
                pos[s] += 1
                progressed = True
        if not progressed:  # a 1F1B order always proceeds; a guard against a bad order
            raise RuntimeError("1F1B pipeline: no stage can proceed")
    return tuple(g.tasks)


def pipeline_schedule(fwd_s: Sequence[float], bwd_s: Sequence[float], micro: int,
                      send_s: float = 0.0) -> Schedule:
    """The 1F1B schedule of ``micro`` micro-batches over ``len(fwd_s)`` stages, stage ``s``
    taking ``fwd_s[s]`` and ``bwd_s[s]`` per micro-batch and every send ``send_s``: tasks
    ``stage s`` / ``micro-batch k`` on stream ``stage s``, the sends on ``stage s send``."""
    p = len(fwd_s)
    if p < 1 or len(bwd_s) != p:
        raise InputError(f"a pipeline needs one forward and one backward time per stage, got "
                         f"{len(fwd_s)} and {len(bwd_s)}")
    if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:
        raise InputError(f"micro-batches must be an integer >= 1, got {micro!r}")
    return schedule(_graph(fwd_s, bwd_s, micro, send_s))
