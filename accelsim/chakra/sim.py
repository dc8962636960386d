"""A checked Chakra trace directory (:mod:`accelsim.chakra.load`) timed and scheduled by the
engine: compute nodes at their recorded durations, collectives and point-to-point transfers
timed by netsim on the system's fabric (:func:`accelsim.engine.comm.op_s`), every simulated
rank's nodes placed by the one scheduler (:func:`accelsim.engine.scheduler.schedule`), a
receive waiting for its matching send on the other rank.

Ranks that share a file run the same graph and are simulated once (their collectives are
assumed in step, as the engine's symmetric ranks are); a collective's group comes from the
manifest's process groups (``pg_name``), else it spans the world.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.arch import System
from accelsim.chakra.codec import Node, NodeType
from accelsim.chakra.load import Job, RankTrace, attr_value, node_label
from accelsim.chakra.retime import gemms, retime_s
from accelsim.chakra.trace import COMM_KIND
from accelsim.engine.graph import CommOp, Phase, Stream
from accelsim.engine.scheduler import Schedule, Task, schedule
from accelsim.engine.trace import Row, Timeline
from accelsim.errors import InputError

_DEFAULT_STREAM = {NodeType.COMP_NODE: "compute", NodeType.MEM_LOAD_NODE: "compute",
                   NodeType.MEM_STORE_NODE: "compute", NodeType.COMM_COLL_NODE: "comm",
                   NodeType.COMM_SEND_NODE: "send", NodeType.COMM_RECV_NODE: "recv"}


@dataclass(frozen=True)
class ChakraRun:
    """The trace's iteration as scheduled: its makespan is the step time, rows and the trace
    are read from the one schedule (as every prediction's)."""

    job: Job
    system: System
    sched: Schedule
    batch: int = 0  # samples per rank (0: not given)

    @property
    def step_time_s(self) -> float:
        return self.sched.makespan_s

    def rows(self) -> list[Row]:
        return self.sched.rows()

    def timeline(self) -> Timeline:
        return self.sched.timeline()

    def energy(self, precision: str):
        """The step's energy on the chip's power model (:func:`accelsim.engine.energy.
        step_energy`: every rank's FLOPs at ``precision`` and bytes, a file's rows counted once
        per rank that runs it, static power over the world); None without a power model."""
        from dataclasses import replace

        from accelsim.engine.energy import step_energy

        runs = {rt.rank: sum(1 for f in self.job.files.values() if f == self.job.files[rt.rank])
                for rt in self.job.ranks}
        rows = [replace(r, flops=r.flops * runs[t.stage], bytes=r.bytes * runs[t.stage])
                for r, t in zip(self.rows(), self.sched.tasks) if r.bound != "comm"]
        return step_energy(self.system, rows, precision, self.step_time_s, self.job.world, 1)

    def as_dict(self, precision: str | None = None) -> dict:
        """The summary ``predict --json`` prints; with ``precision`` the energy keys too."""
        tasks = self.sched.tasks
        comm = [t for t in tasks if t.bound == "comm"]
        step = self.step_time_s
        return {"workload": f"chakra:{self.job.path}", "system": self.system.name,
                "ranks": self.job.world, "simulated_ranks": len(self.job.ranks),
                "nodes": len(tasks), "step_time_s": step,
                "samples_per_s": self.batch * self.job.world / step if self.batch and step
                else None,
                "compute_s": sum(t.time_s for t in tasks if t.bound != "comm"),
                "comm_s": sum(t.time_s for t in comm),
                "comm_bytes": sum(t.bytes for t in comm),
                "flops": sum(t.flops for t in tasks)} | self._energy_keys(precision)

    def _energy_keys(self, precision: str | None) -> dict:
        if precision is None:
            return {}
        e = self.energy(precision)
        return {"energy_J": None if e is None else e.energy_J,
                "power_W_per_gpu": None if e is None else e.power_W}


def _num(n: Node, name: str, rt: RankTrace, required: bool = True) -> float:
    v = attr_value(n, name, rt.file, required)
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
        raise InputError(f"{node_label(rt.file, n)}: attribute {name!r} must be a finite "
                         f"number >= 0, got {v!r}")
    return float(v)


def _peer(n: Node, name: str, rt: RankTrace, job: Job) -> int:
    v = attr_value(n, name, rt.file, required=True)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < job.world:
        raise InputError(f"{node_label(rt.file, n)}: {name} {v!r} is not a rank 0.."
                         f"{job.world - 1}")
    return v


def _group(n: Node, rt: RankTrace, job: Job) -> tuple[int, int]:
    """(ranks, stride) of a collective's group on this rank."""
    pg = attr_value(n, "pg_name", rt.file)
    if not pg or not job.groups:
        return job.world, 1
    if pg not in job.groups:
        raise InputError(f"{node_label(rt.file, n)}: pg_name {pg!r} is not a process group of "
                         f"the manifest ({', '.join(sorted(job.groups))})")
    mine = [g for g in job.groups[pg] if rt.rank in g]
    if len(mine) != 1:
        raise InputError(f"{node_label(rt.file, n)}: rank {rt.rank} is in {len(mine)} groups "
                         f"of process group {pg!r} (needs exactly one)")
    g = sorted(mine[0])
    steps = {b - a for a, b in zip(g, g[1:])}
    if len(steps) > 1:
        raise InputError(f"{node_label(rt.file, n)}: process group {pg!r} {g} is not evenly "
                         "spaced (netsim times groups of ranks a fixed stride apart)")
    return len(g), (steps.pop() if steps else 1)


def _op_s(fabric, op: CommOp, cache: dict) -> float:
    """:func:`accelsim.engine.comm.op_s`, once per distinct collective of a job (a trace
    repeats each layer's thousands of times)."""
    from accelsim.engine.comm import op_s

    key = (op.kind, op.size_bytes, op.group, op.stride)
    if key not in cache:
        cache[key] = op_s(fabric, op)
    return cache[key]


def _stream(n: Node, t: NodeType, rt: RankTrace) -> str:
    """A node's queue when the trace names none: a CPU op (``is_cpu_op``) on the host's, a GPU
    op on its CUDA stream (``stream``, as Chakra's PyTorch converter writes it), else one queue
    per node kind."""
    if t == NodeType.COMP_NODE:
        if attr_value(n, "is_cpu_op", rt.file) is True:
            return "cpu"
        s = attr_value(n, "stream", rt.file)
        if isinstance(s, int) and not isinstance(s, bool):
            return f"stream {s}"
    return _DEFAULT_STREAM[t]


def _task(n: Node, rt: RankTrace, job: Job, fabric, cache: dict, retime: str | None = None,
          job_system: System | None = None) -> tuple[Task, tuple | None]:
    """The task of one node (its deps filled in later) and, for a transfer, its key
    (src, dst, tag); ``retime``: a GEMM node's time by perf's formula on ``job_system``, its
    precision this one unless the node names its own."""
    t = NodeType(n.type)
    stream = str(attr_value(n, "accelsim.stream", rt.file) or _stream(n, t, rt))
    ph = attr_value(n, "accelsim.phase", rt.file)
    try:
        phase = Phase(str(ph)) if ph else (Phase.FWD if t in (NodeType.COMP_NODE,) else Phase.STEP)
    except ValueError:
        raise InputError(f"{node_label(rt.file, n)}: accelsim.phase {str(ph)!r} is not one of "
                         f"{', '.join(p.value for p in Phase)}") from None
    layer = str(attr_value(n, "accelsim.layer", rt.file) or f"rank {rt.rank}")
    name = n.name or f"node {n.id}"
    if name.startswith(layer + " "):  # the breakdown shows the layer beside the op
        name = name[len(layer) + 1:]
    where = f"rank {rt.rank} {stream}"
    if t in (NodeType.COMP_NODE, NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE):
        dur = attr_value(n, "accelsim.duration_s", rt.file)
        sec = _num(n, "accelsim.duration_s", rt) if dur is not None else n.duration_micros * 1e-6
        if retime is not None and t == NodeType.COMP_NODE:
            ops = gemms(n, rt.file, retime)
            if ops:
                sec = retime_s(job_system, ops, rt.file, n)
        return Task(layer, name, phase, sec, where, flops=_num(n, "num_ops", rt, False),
                    bytes=_num(n, "tensor_size", rt, False), bound="compute",
                    stage=rt.rank), None
    size = _num(n, "comm_size", rt)
    if t == NodeType.COMM_COLL_NODE:
        ct = attr_value(n, "comm_type", rt.file, required=True)
        if isinstance(ct, bool) or not isinstance(ct, int) or ct not in COMM_KIND:
            raise InputError(f"{node_label(rt.file, n)}: comm_type {ct!r} is not a collective "
                             "netsim times (ALL_REDUCE 0, ALL_GATHER 2, ALL_TO_ALL 6, "
                             "REDUCE_SCATTER 7)")
        ranks, stride = _group(n, rt, job)
        op = CommOp(name, COMM_KIND[ct], size, ranks, stride, Stream.DP, phase)
        return Task(layer, name, phase, _op_s(fabric, op, cache) if ranks > 1 else 0.0, where,
                    bytes=op.bytes if ranks > 1 else 0.0, bound="comm", stage=rt.rank), None
    src, dst = _peer(n, "comm_src", rt, job), _peer(n, "comm_dst", rt, job)
    me = src if t == NodeType.COMM_SEND_NODE else dst
    if me != rt.rank:
        raise InputError(f"{node_label(rt.file, n)}: rank mismatch: a "
                         f"{'send from' if t == NodeType.COMM_SEND_NODE else 'receive at'} "
                         f"rank {me} in the trace of rank {rt.rank}")
    key = (src, dst, attr_value(n, "comm_tag", rt.file) or 0)
    if t == NodeType.COMM_RECV_NODE:
        return Task(layer, name, phase, 0.0, where, bound="comm", stage=rt.rank), key
    g = fabric.gpus_per_node
    sec = fabric.p2p_s(size, src // g != dst // g)
    return Task(layer, name, phase, sec, where, bytes=size, bound="comm", stage=rt.rank), key


def simulate_job(job: Job, system: System, fabric, batch: int = 0,
                 retime: str | None = None) -> ChakraRun:
    """Time every simulated rank's nodes and schedule them together (see the module
    docstring); a receive without its send, or ranks waiting on each other, is an error.
    ``retime``: GEMM nodes timed by perf's formula (:mod:`accelsim.chakra.retime`) at this
    precision unless a node names its own."""
    simulated = {rt.rank for rt in job.ranks}
    per: list[list[tuple[Node, Task, tuple | None]]] = []
    sends: dict[tuple, tuple[int, Node]] = {}
    cache: dict = {}
    for i, rt in enumerate(job.ranks):
        rows = []
        for n in rt.nodes:
            task, key = _task(n, rt, job, fabric, cache, retime, system)
            if key is not None:
                peer = key[1] if n.type == NodeType.COMM_SEND_NODE else key[0]
                if peer not in simulated:
                    raise InputError(f"{node_label(rt.file, n)}: peer rank {peer} runs a shared "
                                     "file with an offset; only ranks written for themselves "
                                     "are simulated (give it its own file)")
                if n.type == NodeType.COMM_SEND_NODE:
                    if key in sends:
                        raise InputError(f"{node_label(rt.file, n)}: a second send from rank "
                                         f"{key[0]} to {key[1]} with tag {key[2]}")
                    sends[key] = (i, n)
            rows.append((n, task, key))
        per.append(rows)
    recvs = {key for rows in per for n, _, key in rows
             if key is not None and n.type == NodeType.COMM_RECV_NODE}
    for key, (i, n) in sends.items():
        if key not in recvs:
            raise InputError(f"{node_label(job.ranks[i].file, n)}: no receive at rank {key[1]} "
                             f"matches this send (tag {key[2]})")
    tasks: list[Task] = []
    index: list[dict[int, int]] = [{} for _ in per]
    sent: dict[tuple, int] = {}
    pos = [0] * len(per)
    while any(pos[i] < len(per[i]) for i in range(len(per))):
        progressed = False
        for i, rows in enumerate(per):
            while pos[i] < len(rows):
                n, task, key = rows[pos[i]]
                deps = [index[i][d] for d in {*n.data_deps, *n.ctrl_deps}]
                if n.type == NodeType.COMM_RECV_NODE:
                    if key not in sends:
                        raise InputError(f"{node_label(job.ranks[i].file, n)}: no send from "
                                         f"rank {key[0]} matches this receive (tag {key[2]})")
                    if key not in sent:
                        break
                    deps.append(sent[key])
                index[i][n.id] = len(tasks)
                if n.type == NodeType.COMM_SEND_NODE:
                    sent[key] = len(tasks)
                tasks.append(Task(task.layer, task.op, task.phase, task.time_s, task.stream,
                                  tuple(sorted(deps)), task.flops, task.bytes, task.bound,
                                  task.stage))
                pos[i] += 1
                progressed = True
        if not progressed:
            i = next(i for i in range(len(per)) if pos[i] < len(per[i]))
            n = per[i][pos[i]][0]
            raise InputError(f"{node_label(job.ranks[i].file, n)}: ranks wait on each other "
                             "(its send comes after a receive that needs it: a cross-rank "
                             "cycle)")
    return ChakraRun(job, system, schedule(tasks), batch)

