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
import re
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
    stream: Stream | str  # a stream, or a track of its own (a pipeline stage)
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
        """The Chrome trace-event JSON object (one thread per stream or track, named: the
        streams first, then tracks such as a pipeline's ``stage 3`` as they appear)."""
        tids = {s: i for i, s in enumerate(Stream)}
        for e in self.events:
            tids.setdefault(e.stream, len(tids))
        ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0,
                           "args": {"name": process}}]
        ev += [{"ph": "M", "name": "thread_name", "pid": 0, "tid": tid,
                "args": {"name": str(s)}} for s, tid in tids.items()]
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


#: largest trace file read (a trace of accelsim's is kilobytes; a profiler's of 10^5 events
#: tens of megabytes)
MAX_TRACE_BYTES = 64 * 2**20


def read_trace(path: str | Path):
    """The complete (``ph: "X"``) events of a Chrome trace file as a table (``name``, ``track``:
    the thread name or id, ``start_s``, ``dur_s``, ``kind``: the op kind an accelsim event
    carries in its args, else the name without its ``(phase)``; ``attrs["process"]`` the process
    name, what wrote it), checked as it is read: the root is an
    object with a ``traceEvents`` list (or the list itself), every event an object, a complete
    event's ``ts`` a finite number and ``dur`` a finite number >= 0, a ``tid`` a number or a
    string. Anything else is an :class:`~accelsim.errors.InputError` naming the file, the
    event's index and the value."""
    import math

    import pandas as pd

    from accelsim.errors import TOO_DEEP, InputError

    src = Path(path)

    def bad(what: str) -> InputError:
        return InputError(f"{src}: not a Chrome trace of complete events: {what}")

    try:
        size = src.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise InputError(f"{src}: {size:,} bytes is more than the {MAX_TRACE_BYTES:,} a "
                             "trace may have")
        data = json.loads(src.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"not JSON ({exc})") from None
    except RecursionError:
        raise bad(TOO_DEEP) from None
    raw = data.get("traceEvents", data) if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise bad(f"traceEvents must be a list of events, got {type(raw).__name__}")

    def number(i: int, e: dict, key: str, lo: float | None) -> float:
        v = e.get(key)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) \
            and (lo is None or v >= lo)
        if not ok:
            want = "a finite number" + ("" if lo is None else f" >= {lo:g}")
            raise bad(f"event {i}: {key} must be {want}, got {v!r}")
        return float(v)

    def tid(i: int, e: dict):
        v = e.get("tid")
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float | str)):
            raise bad(f"event {i}: tid must be a number or a string, got {v!r}")
        return v

    names: dict = {}
    process = ""
    rows = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict):
            raise bad(f"event {i} is not an object: {e!r:.60}")
        if e.get("ph") == "M" and e.get("name") == "process_name" \
                and isinstance(e.get("args"), dict) and isinstance(e["args"].get("name"), str):
            process = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            args = e.get("args")
            if not isinstance(args, dict) or not isinstance(args.get("name"), str):
                raise bad(f"event {i}: a thread_name's args must be {{\"name\": \"...\"}}, got "
                          f"{args!r:.60}")
            names[tid(i, e)] = args["name"]
        elif e.get("ph") == "X":
            if "name" not in e:
                raise bad(f"event {i}: a complete event needs a name")
            args = e.get("args")
            op = args.get("op") if isinstance(args, dict) else None
            name = str(e["name"])
            kind = op if isinstance(op, str) else re.sub(r" \(.*\)$", "", name)
            rows.append((name, tid(i, e), number(i, e, "ts", None) / 1e6,
                         number(i, e, "dur", 0.0) / 1e6, kind))
    table = pd.DataFrame([(n, names.get(t, str(t)), s, d, k) for n, t, s, d, k in rows],
                         columns=["name", "track", "start_s", "dur_s", "kind"])
    table.attrs["process"] = process  # what wrote it (accelsim's: the command and the case)
    return table
