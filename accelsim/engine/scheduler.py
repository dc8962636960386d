"""The one scheduler: a per-rank op graph placed on its streams, and every result read from it.

A :class:`Task` is one op instance of the graph (a layer's phase, a collective, the optimizer
step, a pipeline bubble) with its seconds on its stream, the tasks it waits for and its FLOPs
and bytes. :func:`schedule` is a list scheduler with CUDA-stream semantics: each stream runs its
tasks in the order they were added, a task starts when its dependencies have ended and its
stream is free. Overlap is what that gives -- a reduce-scatter on the data-parallel stream runs
beside the compute stream until something waits for it -- never a rule per case.

The :class:`Schedule` is the one source of a prediction's results: its makespan is the step
time, :meth:`Schedule.rows` the breakdown (``exposed_s`` attributes every instant of the
makespan to one running task -- the compute stream's first, else the earliest started -- so the
rows sum to the makespan by construction), :meth:`Schedule.timeline` the Chrome trace (every
task at its scheduled start) and :meth:`Schedule.memory_peak_bytes` the peak of the running sum
of the tasks' allocations and frees along the schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelsim.engine.graph import Phase, Stream
from accelsim.engine.trace import Row, Timeline
from accelsim.errors import InputError


@dataclass(frozen=True)
class Task:
    """One op instance: ``time_s`` on ``stream`` after every task in ``deps`` (indices of
    earlier tasks) has ended. ``layer``, ``op``, ``phase``, ``stage``, ``count``, ``flops``,
    ``bytes`` and ``bound`` are its breakdown row's; ``alloc_bytes`` is allocated when it
    starts and ``free_bytes`` freed when it ends (the memory events of the graph)."""

    layer: str
    op: str
    phase: Phase
    time_s: float
    stream: Stream = Stream.COMPUTE
    deps: tuple[int, ...] = ()
    flops: float = 0.0
    bytes: float = 0.0
    bound: str = ""
    stage: int = 0
    count: int = 1
    alloc_bytes: float = 0.0
    free_bytes: float = 0.0


class Graph:
    """A per-rank op graph under construction: :meth:`add` appends a task (its dependencies
    must already be in the graph, so the insertion order is a topological order)."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def add(self, task: Task) -> int:
        n = len(self.tasks)
        for d in task.deps:
            if not 0 <= d < n:
                raise ValueError(f"task {task.layer}/{task.op}: dependency {d} is not an "
                                 f"earlier task (0..{n - 1})")
        if not task.time_s >= 0:
            raise InputError(f"task {task.layer}/{task.op}: time {task.time_s!r} s must be "
                             ">= 0")
        self.tasks.append(task)
        return n

    def last(self, stream: Stream | None = None) -> tuple[int, ...]:
        """The last task (on ``stream``), as a dependency tuple (empty when there is none)."""
        for i in range(len(self.tasks) - 1, -1, -1):
            if stream is None or self.tasks[i].stream == stream:
                return (i,)
        return ()


@dataclass(frozen=True)
class Schedule:
    """Every task of a graph at its start and end (seconds from the step's start)."""

    tasks: tuple[Task, ...]
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]

    @property
    def makespan_s(self) -> float:
        return max(self.end_s, default=0.0)

    def exposed_s(self) -> list[float]:
        """Each task's share of the makespan: every instant goes to one running task, the
        compute stream's if it runs, else the one that started first (then the first added).
        Idle instants (none running) go to the task that ends the gap, so the shares sum to
        the makespan."""
        n = len(self.tasks)
        out = [0.0] * n
        cuts = sorted({0.0, *self.start_s, *self.end_s})
        order = sorted(range(n), key=lambda i: (self.start_s[i], i))
        active: list[int] = []
        k = 0
        pending_gap = 0.0
        for a, b in zip(cuts, cuts[1:]):
            while k < n and self.start_s[order[k]] <= a:
                active.append(order[k])
                k += 1
            active = [i for i in active if self.end_s[i] > a]
            running = [i for i in active if self.start_s[i] <= a < self.end_s[i]]
            if not running:
                pending_gap += b - a
                continue
            owner = min(running, key=lambda i: (self.tasks[i].stream != Stream.COMPUTE,
                                                self.start_s[i], i))
            out[owner] += b - a + pending_gap
            pending_gap = 0.0
        return out

    def rows(self) -> list[Row]:
        """The breakdown: one row per task, ``exposed_s`` from :meth:`exposed_s`."""
        return [Row(t.layer, t.op, t.phase, t.stage, t.count, t.time_s, e, t.flops, t.bytes,
                    t.bound or t.op, t.stream)
                for t, e in zip(self.tasks, self.exposed_s())]

    def timeline(self) -> Timeline:
        """The trace: every task with a duration, at its scheduled start on its stream."""
        tl = Timeline()
        for t, s in zip(self.tasks, self.start_s):
            name = t.op if t.layer in ("", t.op) else f"{t.layer} {t.op}"
            tl.beside(f"{name} ({t.phase})", s, t.time_s, t.stream, op=t.op,
                      phase=str(t.phase), stage=t.stage)
        tl.t = self.makespan_s
        return tl

    def memory_peak_bytes(self, base_bytes: float = 0.0) -> float:
        """The peak of ``base_bytes`` plus the running sum of the tasks' allocations (at their
        starts) and frees (at their ends) along the schedule; at a tie, frees first."""
        events = [(s, 1, t.alloc_bytes) for t, s in zip(self.tasks, self.start_s)
                  if t.alloc_bytes] + [(e, 0, -t.free_bytes) for t, e in
                                       zip(self.tasks, self.end_s) if t.free_bytes]
        level = peak = base_bytes
        for _, _, delta in sorted(events):
            level += delta
            peak = max(peak, level)
        return peak


def concurrent_s(sched: Schedule, i: int, streams: tuple[Stream, ...]) -> float:
    """Seconds of task ``i`` during which a task on one of ``streams`` runs (the union of
    their spans inside task ``i``'s): what a collective beside a compute task costs it
    (a stack's ``comm_contention`` x this, :mod:`accelsim.engine.fsdp`,
    :mod:`accelsim.engine.tp_overlap`)."""
    a, b = sched.start_s[i], sched.end_s[i]
    spans = sorted((max(a, s), min(b, e)) for t, s, e in zip(sched.tasks, sched.start_s,
                                                              sched.end_s)
                   if t.stream in streams and t.time_s > 0 and s < b and e > a)
    total, reach = 0.0, a
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def schedule(tasks: Sequence[Task]) -> Schedule:
    """Place ``tasks`` (a topological order: every dependency earlier) on their streams: each
    stream runs its tasks in order, a task starts once its dependencies have ended and its
    stream is free."""
    free: dict[Stream, float] = {}
    start: list[float] = []
    end: list[float] = []
    for i, t in enumerate(tasks):
        if any(not 0 <= d < i for d in t.deps):
            raise ValueError(f"task {i} ({t.layer}/{t.op}): dependencies {t.deps} must be "
                             "earlier tasks")
        s = max([free.get(t.stream, 0.0), *(end[d] for d in t.deps)])
        start.append(s)
        end.append(s + t.time_s)
        free[t.stream] = s + t.time_s
    return Schedule(tuple(tasks), tuple(start), tuple(end))


@dataclass(frozen=True)
class LayerPhases:
    """One layer of a data-parallel step: its phases in the order they run (forward first;
    backward: the phases that make its gradient ready, then the data gradient) as
    ``(phase, seconds, flops, bytes, bound)``, and its gradient's reduce-scatter seconds."""

    name: str
    kind: str
    phases: tuple[tuple[Phase, float, float, float, str], ...]
    reduce_scatter_s: float = 0.0
    reduce_scatter_bytes: float = 0.0


def data_parallel_graph(layers: Sequence[LayerPhases], *, step: Sequence[Task],
                        compression_s: float = 0.0, buckets: bool = False) -> tuple[Task, ...]:
    """One data-parallel training step as a graph: every layer's forward phase in order, its
    backward phases in reverse layer order on the compute stream; then the compression pass
    and the gradient reduce-scatter on the data-parallel stream, and ``step`` (the all-gather
    and the optimizer update, in the scheme's phase order; each waits for the one before and
    for the whole reduction).

    ``buckets``: each layer's reduce-scatter starts as soon as its gradient is ready (its
    weight gradient and element-wise backward done: PyTorch DDP's buckets, one per layer),
    compressed first on the compute stream by its share of ``compression_s``; otherwise the
    reduction starts after back-propagation and the compression pass (the HFP8 paper's
    numbers). Overlap is what the schedule gives."""
    g = Graph()
    for ly in layers:
        for ph, t, fl, by, bd in ly.phases:
            if ph == Phase.FWD:
                g.add(Task(ly.name, ly.kind, ph, t, deps=g.last(Stream.COMPUTE), flops=fl,
                           bytes=by, bound=bd))
    rs_total = sum(ly.reduce_scatter_s for ly in layers)
    rs_bytes = sum(ly.reduce_scatter_bytes for ly in layers)
    for ly in reversed(layers):
        back = [p for p in ly.phases if p[0] != Phase.FWD]
        ready = [p for p in back if p[0] != Phase.BWD_DATA]
        for ph, t, fl, by, bd in ready:
            g.add(Task(ly.name, ly.kind, ph, t, deps=g.last(Stream.COMPUTE), flops=fl,
                       bytes=by, bound=bd))
        if buckets and ly.reduce_scatter_s > 0:
            if compression_s > 0:
                g.add(Task("grads", "compression", Phase.STEP,
                           compression_s * ly.reduce_scatter_s / rs_total,
                           deps=g.last(Stream.COMPUTE), bound="compression"))
            g.add(Task(ly.name, "reduce_scatter", Phase.STEP, ly.reduce_scatter_s, Stream.DP,
                       deps=g.last(Stream.COMPUTE), bytes=ly.reduce_scatter_bytes,
                       bound="reduce_scatter"))
        for ph, t, fl, by, bd in back:
            if ph == Phase.BWD_DATA:
                g.add(Task(ly.name, ly.kind, ph, t, deps=g.last(Stream.COMPUTE), flops=fl,
                           bytes=by, bound=bd))
    if not buckets or rs_total == 0:  # (no bucket to compress with: the pass on its own)
        if compression_s > 0:
            g.add(Task("grads", "compression", Phase.STEP, compression_s,
                       deps=g.last(Stream.COMPUTE), bound="compression"))
        if rs_total > 0:
            g.add(Task("grads", "reduce_scatter", Phase.STEP, rs_total, Stream.DP,
                       deps=g.last(Stream.COMPUTE), bytes=rs_bytes, bound="reduce_scatter"))
    for i, t in enumerate(step):  # each after the one before and the whole reduction
        deps = {*g.last(Stream.COMPUTE), *g.last(Stream.DP)}
        if i:
            deps.add(len(g.tasks) - 1)
        deps = tuple(sorted(deps))
        g.add(Task(t.layer, t.op, t.phase, t.time_s, t.stream, deps=deps, flops=t.flops,
                   bytes=t.bytes, bound=t.bound or t.op))
    return tuple(g.tasks)
