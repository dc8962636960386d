"""An inference prediction (:class:`accelsim.engine.inference.InferenceResult`) as one op graph
per pipeline stage: each pass (the prefill, the decode step) runs the stage's layers -- their
GEMMs, attention and element-wise kernels at the prediction's seconds, the two
tensor-parallel all-reduces of a layer (after the attention block and after the MLP) and an MoE
layer's dispatch and combine all-to-alls -- after receiving the previous stage's activations,
then sends them on; the last stage runs the LM head. The passes run one after another (as the
prediction's timeline): the next pass waits for the last stage through a zero-byte message.

Ranks: the stage's tensor-parallel GPUs adjacent (rank = tp index + tp x stage); every GPU of a
stage runs the same graph, the stage's first is written.
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.chakra.codec import NodeType
from accelsim.chakra.trace import EtOp, Export, Group, RankGraph
from accelsim.engine.graph import CommKind, Phase
from accelsim.engine.inference import InferenceResult, OpCost, PassTime
from accelsim.errors import InputError

COMP, COLL = NodeType.COMP_NODE, NodeType.COMM_COLL_NODE
_MLP = ("fc1", "fc2", "router", "gate", "up", "down", "expert", "shared")


def _is_mlp(name: str) -> bool:
    return any(k in name for k in _MLP)


def _layer_ops(ops: tuple[OpCost, ...], layer: str, kind: str) -> list[EtOp]:
    """One layer's ops in order: the attention block, its all-reduce, the MLP block (the
    all-to-alls around it), its all-reduce."""
    def comp(o: OpCost) -> EtOp:
        return EtOp(f"{layer} {o.op}", COMP, o.time_s, "compute", Phase.FWD, flops=o.flops,
                    bytes=o.bytes, layer=f"{kind} {layer}")

    def coll(o: OpCost, name: str, ck: CommKind, parts: int) -> EtOp:
        return EtOp(f"{layer} {name}", COLL, o.time_s / parts, "tp_comm", Phase.FWD, comm=ck,
                    size_bytes=o.bytes / parts, pg="tp", layer=f"{kind} {layer}")

    compute = [o for o in ops if o.stream == "compute"]
    tp = [o for o in ops if o.op == "tp_comm"]
    a2a = [o for o in ops if o.op == "all_to_all"]
    if len(tp) + len(a2a) + len(compute) != len(ops):
        raise ValueError(f"inference layer ops {[o.op for o in ops]}: an op of no known kind")
    out = [comp(o) for o in compute if not _is_mlp(o.op) and o.op != "elementwise"]
    out += [coll(o, "tp_all_reduce", CommKind.ALL_REDUCE, 2) for o in tp]
    out += [coll(o, "dispatch", CommKind.ALL_TO_ALL, 2) for o in a2a]
    out += [comp(o) for o in compute if _is_mlp(o.op) or o.op == "elementwise"]
    out += [coll(o, "combine", CommKind.ALL_TO_ALL, 2) for o in a2a]
    out += [coll(o, "tp_all_reduce", CommKind.ALL_REDUCE, 2) for o in tp]
    return out


def _stage(r: InferenceResult, passes: list[PassTime], s: int, rep: list[int]) -> list[EtOp]:
    p = r.plan.pp
    dense, moe = r.model.stage_layers(p)[s]
    first = sum(sum(x) for x in r.model.stage_layers(p)[:s])
    ops: list[EtOp] = []
    prev: tuple[int, ...] = ()

    def add(op: EtOp, deps: tuple[int, ...]) -> int:
        ops.append(replace(op, deps=deps))
        return len(ops) - 1

    for j, ps in enumerate(passes):
        n_moe = r.model.config.n_moe_layers  # PassTime.layers: the dense kind, the MoE kind
        kinds = {}
        if r.model.layers - n_moe:
            kinds[False] = ps.layers[0][1]
        if n_moe:
            kinds[True] = ps.layers[-1][1]
        act = ps.p2p_bytes / (p - 1) if p > 1 else 0.0
        hop = ps.p2p_s / (p - 1) if p > 1 else 0.0
        deps = prev
        if j > 0 and p > 1 and s == 0:  # the next pass waits for the last stage
            deps = (*deps, add(EtOp(f"{ps.kind} start", NodeType.COMM_RECV_NODE, 0.0, "recv",
                                    peer=rep[p - 1], tag=2 * j, layer="pipeline"), ()))
        if s > 0:
            deps = (*deps, add(EtOp(f"{ps.kind} recv", NodeType.COMM_RECV_NODE, 0.0, "recv",
                                    size_bytes=act, peer=rep[s - 1], tag=2 * j + 1,
                                    layer="pipeline"), ()))
        chain, before = deps, len(ops)
        for i in range(first, first + dense + moe):
            for op in _layer_ops(kinds[r.model.config.is_moe_layer(i)], f"layer{i}", ps.kind):
                chain = (add(op, tuple(sorted(set(chain)))),)
        if s == p - 1:
            for o in ps.head:
                chain = (add(EtOp(f"{o.op}", COMP, o.time_s, "compute", flops=o.flops,
                                  bytes=o.bytes, layer=f"{ps.kind} head"),
                             tuple(sorted(set(chain)))),)
        if len(ops) == before:  # a stage without ops in this pass: one empty node
            chain = (add(EtOp(f"{ps.kind} stage {s}", COMP, 0.0, "compute",
                              layer=ps.kind), tuple(sorted(set(chain)))),)
        if s < p - 1:
            chain = (add(EtOp(f"{ps.kind} send", NodeType.COMM_SEND_NODE, hop, "send",
                              size_bytes=act, peer=rep[s + 1], tag=2 * j + 1,
                              layer="pipeline"), chain),)
        elif p > 1 and j + 1 < len(passes):
            add(EtOp(f"{passes[j + 1].kind} start", NodeType.COMM_SEND_NODE, 0.0, "send",
                     peer=rep[0], tag=2 * (j + 1), layer="pipeline"), chain)
        prev = chain
    return ops


def infer_export(r: InferenceResult) -> Export:
    """The prediction's prefill and decode step as Chakra graphs, one per pipeline stage (see
    the module docstring); a request's decode steps (``--output-tokens``) are totals over the
    steps, not a graph: refused."""
    if r.request_latency_s is not None:
        raise InputError("--chakra: a request's decode steps (--output-tokens) are timed as "
                         "totals, not as a graph; export the prefill (--prompt) and one decode "
                         "step (--context) instead")
    if r.plan.cp > 1:
        raise InputError(f"--chakra: context parallelism (cp {r.plan.cp}) is not exported as "
                         "graphs yet; export the tp x pp plan")
    passes = [x for x in (r.prefill, r.decode) if x is not None]
    t, p = r.plan.tp, r.plan.pp
    rep = [s * t for s in range(p)]
    graphs = tuple(RankGraph(rep[s], tuple(_stage(r, passes, s, rep)),
                             tuple((rep[s] + o, o) for o in range(t))) for s in range(p))
    return Export(graphs, t * p, (("tp", Group(t, 1)),),
                  f"accelsim infer: {r.model.name}, batch {r.batch}, tp {t} x pp {p}, "
                  f"{r.scheme}")
