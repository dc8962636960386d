"""PyTorch FSDP and HSDP as they run (Zhao et al., "PyTorch FSDP", VLDB 2023, section 3.3;
FSDP2's ``fully_shard``): one iteration's per-unit collectives and compute as a graph on the
one scheduler (:mod:`accelsim.engine.scheduler`).

Every decoder layer is one FSDP unit; the root unit holds the embedding (tied with the LM
head) and the final norm. Per micro-batch (gradient accumulation re-gathers, as FSDP does
without ``no_sync``: Composer's multi-auto-sync and FSDP2's default):

* forward: each unit's parameters are all-gathered (in MixedPrecisionPolicy's ``param_dtype``,
  :mod:`accelsim.engine.mixed_precision`) on the gather stream, prefetched one unit ahead: a gather starts once the
  unit two places earlier has computed (its buffer freed: at most two gathered units in
  flight, FSDP's rate limiter); the unit computes once its gather is done;
* the units are resharded after their forward pass (``reshard_after_forward``; off: kept, no
  backward gather); the root stays gathered until its gradients are reduced;
* backward, in reverse: the gather of each unit again (prefetched one ahead), its backward
  (and recomputed forward), then its gradients reduce-scattered on the reduction stream
  (``reduce_dtype``), under HSDP then all-reduced across the replicas;
* the optimizer step once every reduction and the last backward pass are done.

Compute beside a collective runs slower (NCCL's kernels take SMs and HBM bandwidth): each
compute task is lengthened by the stack's ``comm_contention`` x the time a collective runs
beside it in the schedule without contention, and the graph scheduled again
(:func:`fsdp_schedule`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import Phase, Stream
from accelsim.engine.plan import FSDP_REDUCE_DTYPES, Plan
from accelsim.engine.scheduler import Graph, Schedule, Task, concurrent_s, schedule

@dataclass(frozen=True)
class FsdpComm:
    """Seconds and bytes (sent per GPU) of one unit's collectives: the parameter all-gather,
    the gradient reduce-scatter, and (HSDP) the all-reduce of the gradient shard across the
    replicas; for a decoder layer and for the root unit."""

    gather_s: float
    reduce_s: float
    allreduce_s: float
    gather_bytes: float
    reduce_bytes: float
    allreduce_bytes: float
    root_gather_s: float
    root_reduce_s: float
    root_allreduce_s: float
    root_gather_bytes: float
    root_reduce_bytes: float
    root_allreduce_bytes: float


def unit_params(model: Decoder, plan: Plan) -> tuple[float, float]:
    """(one decoder layer's, the root unit's) parameters on one GPU (the tensor-parallel
    slice, routed experts over ``ep x tp``): a model with MoE layers is sized by one of them
    (its largest unit); the root holds the word embedding (vocabulary-parallel), a learned
    position table, the final norm and an untied head."""
    moe = any(model.config.is_moe_layer(i) for i in range(model.config.layers))
    split, _, _, expert, total = model.layer_param_split(moe)
    layer = split / plan.tp + (total - split - expert) + expert / (plan.ep * plan.tp)
    h = model.hidden
    root = model.vocab * h / plan.tp + model.n_positions * h + model.config.head_ops()[0].params
    if not model.config.tied_embeddings:
        root += model.vocab * h / plan.tp
    return layer, root


def fsdp_comm(model: Decoder, plan: Plan, fabric, param_bytes: int) -> FsdpComm:
    """The unit collectives on ``fabric`` (:class:`accelsim.netsim.fabric.Fabric`): gathers
    of ``param_bytes`` per parameter and reduce-scatters (the plan's reduce dtype) over the
    shard group (ranks ``tp`` apart), HSDP's all-reduce of the ``1 / shard``-sized gradient
    over the ``dp / shard`` replicas (``tp x shard`` apart)."""
    from accelsim.ring import bus_factor

    n, t = plan.shard_group, plan.tp
    r = plan.dp // n
    rb = FSDP_REDUCE_DTYPES[plan.fsdp_reduce_dtype]
    out = {}
    for key, params in zip(("", "root_"), unit_params(model, plan)):
        g, red = params * param_bytes, params * rb
        out[f"{key}gather_s"] = fabric.collective_s("all-gather", g, n, t) if n > 1 else 0.0
        out[f"{key}reduce_s"] = fabric.collective_s("reduce-scatter", red, n, t) \
            if n > 1 else 0.0
        out[f"{key}allreduce_s"] = fabric.collective_s("all-reduce", red / n, r, t * n) \
            if r > 1 else 0.0
        out[f"{key}gather_bytes"] = bus_factor("all-gather", n) * g
        out[f"{key}reduce_bytes"] = bus_factor("reduce-scatter", n) * red
        out[f"{key}allreduce_bytes"] = bus_factor("all-reduce", r) * red / n
    return FsdpComm(**out)


def fsdp_graph(layers: int, n_micro: int, fwd_s: float, bwd_s: float, head_fwd_s: float,
               head_bwd_s: float, comm: FsdpComm, optimizer_s: float,
               reshard_after_forward: bool = True,
               contention_s: dict[int, float] | None = None) -> tuple[Task, ...]:
    """One FSDP iteration as a task list: ``layers`` units of ``fwd_s`` forward and ``bwd_s``
    backward (recomputation included) seconds per micro-batch, the head's passes on the root's
    gathered parameters, ``n_micro`` micro-batches, then the optimizer step. Compute tasks are
    named ``pipeline`` (the breakdown shows the layers' ops from their own rows); each is
    followed by its ``contention`` task (``contention_s`` by compute-task index, 0 without)."""
    g = Graph()
    contention_s = contention_s or {}
    compute: list[int] = []  # every compute task in order (the rate limiter's clock)
    gathers: list[int] = []

    def gather(name: str, phase: Phase, s: float, nbytes: float) -> tuple[int, ...]:
        # the gather stream runs in order; at most two gathered units in flight: this one
        # waits for the compute two units back (its buffer freed)
        deps = (compute[-2],) if len(compute) >= 2 else ()
        i = g.add(Task(name, "fsdp_all_gather", phase, s, Stream.FSDP, deps=deps,
                       bytes=nbytes, bound="comm"))
        gathers.append(i)
        return (i,)

    def run(name: str, phase: Phase, s: float, after: tuple[int, ...]) -> int:
        # the compute task, then its slowdown: what waits for the compute waits for both
        i = g.add(Task("pipeline", name, phase, s, deps=tuple(sorted({*after, *g.last(
            Stream.COMPUTE)}))))
        end = g.add(Task("fsdp", "comm_contention", phase, contention_s.get(i, 0.0),
                         deps=(i,), bound="contention"))
        compute.append(end)
        return end

    def reduce(name: str, after: int, rs: float, rs_b: float, ar: float, ar_b: float) -> None:
        if rs > 0 or rs_b > 0:
            g.add(Task(name, "fsdp_reduce_scatter", Phase.BWD, rs, Stream.DP, deps=(after,),
                       bytes=rs_b, bound="comm"))
        if ar > 0 or ar_b > 0:
            g.add(Task(name, "hsdp_all_reduce", Phase.BWD, ar, Stream.DP,
                       deps=g.last(Stream.DP) or (after,), bytes=ar_b, bound="comm"))

    c = comm
    for _ in range(n_micro):
        root = gather("root", Phase.FWD, c.root_gather_s, c.root_gather_bytes)
        for i in range(layers):
            ag = gather(f"layer{i}", Phase.FWD, c.gather_s, c.gather_bytes)
            run(f"layer{i} forward", Phase.FWD, fwd_s, ag + root)
        head = run("head", Phase.FWD, head_fwd_s + head_bwd_s, root)
        last = head
        for i in reversed(range(layers)):
            ag = gather(f"layer{i}", Phase.BWD, c.gather_s, c.gather_bytes) \
                if reshard_after_forward else ()
            last = run(f"layer{i} backward", Phase.BWD, bwd_s, ag)
            reduce(f"layer{i}", last, c.reduce_s, c.reduce_bytes, c.allreduce_s,
                   c.allreduce_bytes)
        reduce("root", last, c.root_reduce_s, c.root_reduce_bytes, c.root_allreduce_s,
               c.root_allreduce_bytes)
    g.add(Task("optimizer", "update", Phase.STEP, optimizer_s,
               deps=tuple(sorted({*g.last(Stream.COMPUTE), *g.last(Stream.DP)}))))
    return tuple(g.tasks)


def overlap_s(sched: Schedule, i: int) -> float:
    """Seconds of task ``i`` during which a collective (a gather or a reduction) runs."""
    return concurrent_s(sched, i, (Stream.FSDP, Stream.DP))


def fsdp_schedule(layers: int, n_micro: int, fwd_s: float, bwd_s: float, head_fwd_s: float,
                  head_bwd_s: float, comm: FsdpComm, optimizer_s: float, contention: float,
                  reshard_after_forward: bool = True) -> Schedule:
    """:func:`fsdp_graph` scheduled, then scheduled again with each compute task followed by
    ``contention`` x the time a collective ran beside it in the first schedule (one pass: a
    collective that the slower compute newly overlaps is not slowed again)."""
    args = (layers, n_micro, fwd_s, bwd_s, head_fwd_s, head_bwd_s, comm, optimizer_s,
            reshard_after_forward)
    sched = schedule(fsdp_graph(*args))
    if contention <= 0:
        return sched
    extra = {i: contention * overlap_s(sched, i) for i, t in enumerate(sched.tasks)
             if t.layer == "pipeline"}
    return schedule(fsdp_graph(*args, contention_s=extra))


def fsdp_state_bytes(model: Decoder, plan: Plan, sharded: tuple[float, float],
                     param_bytes: int) -> tuple[float, float]:
    """(weights, gradients) bytes one GPU holds: its shards (``sharded``: weights and
    gradients over the shard group) plus the gathered parameters (``param_bytes`` each) of two
    units in flight (all layers without resharding after forward) and of the root, and their
    unsharded gradients (two units and the root's) before the reduce-scatter."""
    layer, root = unit_params(model, plan)
    units = 2 if plan.reshard_after_forward else model.layers
    w = sharded[0] + (min(units, model.layers) * layer + root) * param_bytes
    g = sharded[1] + (min(2, model.layers) * layer + root) * param_bytes
    return w, g


def with_fsdp_memory(mem, model: Decoder, plan: Plan, param_bytes: int):
    """``mem`` (:class:`accelsim.engine.memory.Memory`, its states sharded over the shard
    group) with the gathered units added (:func:`fsdp_state_bytes`)."""
    w, g = fsdp_state_bytes(model, plan, (mem.weights_bytes, mem.grads_bytes), param_bytes)
    return replace(mem, weights_bytes=w, grads_bytes=g)
