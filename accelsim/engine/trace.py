"""Where the time goes: the per-op breakdown table and the Chrome trace of one iteration.

A breakdown row is one op of one layer, phase and pipeline stage over the whole iteration (all
its micro-batch instances: ``count``): ``time_s`` is its total time on its stream, ``exposed_s``
its share of the critical path -- the time it adds to the iteration (0 for ops of other
pipeline stages, only the unhidden part of overlapped communication; pipeline bubbles are rows
of their own) -- so ``exposed_s`` sums to the iteration time.

The trace lays the critical path out in time in the Chrome trace-event format (``ph: "X"``
complete events, ``ts``/``dur`` in microseconds) that Perfetto and chrome://tracing open: one
track per stream (compute, tensor-parallel communication, data-parallel communication,
pipeline send/recv); the last event ends at the iteration time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from accelsim.engine.graph import Phase, Stream

BREAKDOWN_COLUMNS = ("layer", "op", "phase", "stage", "count", "time_s", "exposed_s", "flops",
                     "bytes", "bound", "stream")
#: micro-batches drawn one by one in a trace; the rest of a long pipeline is one event each
TRACE_MICROBATCHES = 4


@dataclass(frozen=True)
class Row:
    """One breakdown row (see the module docstring)."""

    layer: str
    op: str
    phase: Phase
    stage: int
    count: int
    time_s: float
    exposed_s: float
    flops: float
    bytes: float
    bound: str
    stream: Stream = Stream.COMPUTE


def breakdown_frame(rows: Iterable[Row]):
    """The breakdown as a tidy pandas table (columns :data:`BREAKDOWN_COLUMNS`)."""
    import pandas as pd

    recs = [asdict(r) for r in rows]
    for r in recs:
        r["phase"], r["stream"] = str(r["phase"]), str(r["stream"])
    return pd.DataFrame(recs, columns=list(BREAKDOWN_COLUMNS))


@dataclass(frozen=True)
class Event:
    """One trace event: ``name`` on ``stream`` from ``start_s`` for ``dur_s`` seconds."""

    name: str
    stream: Stream
    start_s: float
    dur_s: float
    args: tuple[tuple[str, object], ...] = ()


class Timeline:
    """Lays events end to end per stream; ``at`` moves the cursor of the compute stream."""

    def __init__(self) -> None:
        self.t = 0.0
        self.events: list[Event] = []

    def run(self, name: str, dur_s: float, stream: Stream = Stream.COMPUTE, **args) -> None:
        """An event on the critical path: it starts now and the clock moves past it."""
        if dur_s > 0:
            self.events.append(Event(name, stream, self.t, dur_s, tuple(args.items())))
            self.t += dur_s

    def beside(self, name: str, start_s: float, dur_s: float, stream: Stream, **args) -> None:
        """An event off the compute stream's clock (overlapped communication)."""
        if dur_s > 0:
            self.events.append(Event(name, stream, start_s, dur_s, tuple(args.items())))

    def micro_batches(self, n_micro: int, fwd: Sequence[tuple[str, float, Stream]],
                      bwd: Sequence[tuple[str, float, Stream]]) -> None:
        """``n_micro`` forward + backward slots of (name, seconds, stream) pieces: the first
        :data:`TRACE_MICROBATCHES` drawn piece by piece, the rest as one event per phase."""
        shown = min(n_micro, TRACE_MICROBATCHES)
        for k in range(shown):
            for phase, pieces in (("fwd", fwd), ("bwd", bwd)):
                for name, dur, stream in pieces:
                    self.run(f"{name} ({phase})", dur, stream, micro_batch=k)
        rest = n_micro - shown
        if rest:
            f = sum(d for _, d, _ in fwd)
            b = sum(d for _, d, _ in bwd)
            self.run(f"micro-batches {shown}..{n_micro - 1} (fwd + bwd)", rest * (f + b),
                     micro_batches=rest)

    def chrome(self, process: str) -> dict:
        """The Chrome trace-event JSON object (one thread per stream, named)."""
        tids = {s: i for i, s in enumerate(Stream)}
        ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0,
                           "args": {"name": process}}]
        ev += [{"ph": "M", "name": "thread_name", "pid": 0, "tid": tids[s],
                "args": {"name": str(s)}} for s in Stream]
        ev += [{"ph": "X", "name": e.name, "cat": str(e.stream), "pid": 0,
                "tid": tids[e.stream], "ts": e.start_s * 1e6, "dur": e.dur_s * 1e6,
                "args": dict(e.args)} for e in self.events]
        return {"traceEvents": ev, "displayTimeUnit": "ms"}

    @property
    def end_s(self) -> float:
        return max((e.start_s + e.dur_s for e in self.events), default=0.0)


def write_trace(timeline: Timeline, path: str | Path, process: str) -> None:
    """Write ``timeline`` as a Chrome trace (Perfetto, chrome://tracing)."""
    Path(path).write_text(json.dumps(timeline.chrome(process)))
