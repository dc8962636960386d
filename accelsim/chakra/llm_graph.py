"""A 3-D parallel transformer iteration (:class:`accelsim.engine.prediction.Prediction`) as one
op graph per pipeline stage: every micro-batch's forward and backward pass in the stage's 1F1B
order (:func:`accelsim.engine.pipeline.one_f_one_b`, interleaved with model chunks), each pass
its layers' ops at the prediction's per-op seconds with the tensor- and expert-parallel
collectives in between, the activation (or its gradient) sent to the next stage and received
from the previous one, then the data-parallel collectives and the optimizer step as
:func:`accelsim.engine.transformer.step_schedule` orders them.

Ranks are laid out as the engine's groups assume: tensor-parallel ranks adjacent, then data
parallel, then pipeline stages (rank = tp + t (dp + d stage)). Every rank of a stage runs the
same graph; the stage's first rank is written, the others map to it with their rank offset.
"""

from __future__ import annotations

import math
from dataclasses import replace

from accelsim.chakra.codec import NodeType
from accelsim.chakra.trace import EtOp, Export, Group, RankGraph
from accelsim.engine.graph import CommOp, Phase
from accelsim.engine.pipeline import one_f_one_b
from accelsim.engine.prediction import OpTime, Prediction
from accelsim.errors import InputError

COMP, COLL = NodeType.COMP_NODE, NodeType.COMM_COLL_NODE


def _is_mlp(name: str) -> bool:
    """An op of the MLP block (FC1/FC2 with their shared_ and expert prefixes, the router)."""
    return name == "router" or "fc1" in name or "fc2" in name or "expert" in name


class _Builder:
    def __init__(self) -> None:
        self.ops: list[EtOp] = []

    def add(self, op: EtOp) -> int:
        self.ops.append(op)
        return len(self.ops) - 1


def _chunk_layers(pred: Prediction) -> list[list[list[int]]]:
    """``[stage][chunk]`` -> the layer indices it holds (the plan's split, as
    :meth:`accelsim.engine.decoder.Decoder.chunk_layers` assigns them)."""
    p = pred.plan
    return [[list(r) for r in chunks]
            for chunks in pred.model.chunk_layers(p.pp, p.interleave, p.stage_split)]


Shapes = dict[tuple[bool, str, Phase], tuple[tuple[int, int, int, int], ...]]


def gemm_shapes(pred: Prediction) -> tuple[Shapes, str]:
    """Each linear op's GEMMs ((moe layer?, op, phase) -> (m, n, k, count) each: the forward
    GEMM, or backward its data- and weight-gradient GEMMs) and their precision, from the
    lowering (:func:`accelsim.engine.transformer.layer_ops`); an op whose FLOPs differ from
    the prediction's gets none (it keeps its duration under ``--retime``)."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.transformer import layer_ops

    try:
        formats = get_scheme(pred.scheme).formats(pred.plan.optimizer)
    except ValueError:
        return {}, ""
    out: Shapes = {}
    for moe, times in ((False, pred.layer_ops), (True, pred.moe_layer_ops)):
        if not times:
            continue
        flops = {(o.op, o.phase): o.flops for o in times}
        for g in layer_ops(pred.model, pred.plan, formats, moe)[0]:
            for ph, ops in ((Phase.FWD, (g,)), (Phase.BWD, g.backward)):
                if math.isclose(sum(x.flops for x in ops), flops.get((g.name, ph), -1.0),
                                rel_tol=1e-9):
                    out[(moe, g.name, ph)] = tuple((x.m, x.n, x.k, x.count) for x in ops)
    return out, formats.gemm_precision


def _comm(op: CommOp, sec: float, layer: str, pg: str, phase: Phase, stream: str) -> EtOp:
    return EtOp(f"{layer} {op.name}", COLL, sec, stream, phase, comm=op.kind,
                size_bytes=op.size_bytes, pg=pg, layer=layer)


def _layer_pieces(pred: Prediction, i: int, phase: Phase, shapes: tuple[Shapes, str]
                  ) -> list[tuple[EtOp, bool]]:
    """One layer's ops in one pass, in order; ``True`` marks a collective that runs beside the
    op after it (the sequence-parallel input re-gather the engine hides behind the
    data-gradient GEMM)."""
    moe = pred.model.config.is_moe_layer(i)
    ops: tuple[OpTime, ...] = pred.moe_layer_ops if moe else pred.layer_ops
    layer = f"layer{i}"
    cm = pred.comm
    fwd = phase == Phase.FWD

    def comp(o: OpTime, name: str | None = None) -> tuple[EtOp, bool]:
        gemms = shapes[0].get((moe, o.op, o.phase), ())
        return (EtOp(f"{layer} {name or o.op}", COMP, o.time_s, "compute", phase,
                     flops=o.flops, bytes=o.bytes, layer=layer, gemms=gemms,
                     precision=shapes[1] if gemms else ""), False)

    def comms(block: str, ph: Phase) -> list[tuple[EtOp, bool]]:
        out = [(_comm(o, s, layer, "tp", phase, "tp_comm"), s == 0 and o.size_bytes > 0)
               for o, s in cm.tp_ops if o.phase == ph and o.name.startswith(block + ".")]
        if moe and block == "mlp":
            out += [(_comm(o, s, layer, "ep", phase, "tp_comm"), False)
                    for o, s in cm.ep_ops if o.phase == ph]
        return out

    def blocks(ph: Phase, order: tuple[str, str]) -> list[tuple[EtOp, bool]]:
        out: list[tuple[EtOp, bool]] = []
        for block in order:
            mine = [o for o in ops if o.phase == ph and (_is_mlp(o.op) == (block == "mlp"))]
            if ph == Phase.FWD:
                out += [comp(o) for o in mine] + comms(block, ph)
            else:  # backward: the output's gradient collective first, then the block's ops
                out += comms(block, ph) + [comp(o) for o in mine]
        return out

    if fwd:
        return blocks(Phase.FWD, ("attn", "mlp"))
    out: list[tuple[EtOp, bool]] = []
    if pred.plan.recompute == "full":  # the forward again, collectives included
        out += [(replace(op, name=op.name.replace(layer, f"{layer} recompute", 1)), b)
                for op, b in blocks(Phase.FWD, ("attn", "mlp"))]
    elif pred.plan.recompute == "selective":
        out += [comp(o, "recompute attention") for o in ops
                if o.phase == Phase.FWD and o.op == "attention"]
    return out + blocks(Phase.BWD, ("mlp", "attn"))


def _pass(b: _Builder, pieces: list[tuple[EtOp, bool]], deps: tuple[int, ...]) -> int:
    """Chain ``pieces`` after ``deps``; a marked collective runs beside the next op (both after
    the same ops, the one after them waits for both). Returns the pass's last op."""
    last, beside = deps, []
    for op, parallel in pieces:
        i = b.add(_with_deps(op, last))
        if parallel:
            beside.append(i)
        else:
            last, beside = tuple(sorted({i, *beside})), []
    last = tuple(sorted({*last, *beside}))
    if len(last) != 1:
        last = (b.add(EtOp("join", COMP, 0.0, "compute", pieces[-1][0].phase, deps=last)),)
    return last[0]


def _with_deps(op: EtOp, deps: tuple[int, ...]) -> EtOp:
    return replace(op, deps=tuple(deps))


def _tag(phase: Phase, chunk: int, micro: int, chunks: int) -> int:
    """The transfer's tag: the receiving pass (phase, model chunk, micro-batch)."""
    return 2 * (micro * chunks + chunk) + (phase == Phase.BWD)


def _chunk_pass(pred: Prediction, s: int, c: int, ph: Phase, layers: list[list[int]],
                shapes: tuple[Shapes, str]) -> list[tuple[EtOp, bool]]:
    """The ops of one pass of model chunk ``c`` on stage ``s`` (the same for every
    micro-batch): its layers, the head and loss on the last chunk of the last stage, the
    gradient accumulation of the chunk's weights after a backward pass."""
    p, v = pred.plan.pp, pred.plan.interleave
    fwd = ph == Phase.FWD

    def head(names) -> list[tuple[EtOp, bool]]:
        return [(EtOp(o.op, COMP, o.time_s, "compute", ph, flops=o.flops, bytes=o.bytes,
                      layer="head"), False) for n in names for o in pred.head_ops
                if o.phase == ph and o.op == n]

    last = s == p - 1 and c == v - 1
    pieces = head(("loss", "lm_head")) if last and not fwd else []
    for i in (layers[c] if fwd else layers[c][::-1]):
        pieces += _layer_pieces(pred, i, ph, shapes)
    if last and fwd:
        pieces += head(("lm_head", "loss"))
    if not fwd and pred.grad_accumulation_s > 0:  # each chunk's weights, its share
        pieces.append((EtOp("grad_accumulation", COMP, pred.grad_accumulation_s / v,
                            "compute", ph, layer="grads"), False))
    return pieces


def _peers(s: int, c: int, ph: Phase, p: int, v: int):
    """(stage, chunk) this pass receives from and sends to (None: none)."""
    if ph == Phase.FWD:
        src = (s - 1, c) if s > 0 else (p - 1, c - 1) if c > 0 else None
        dst = (s + 1, c) if s < p - 1 else (0, c + 1) if c < v - 1 else None
    else:
        src = (s + 1, c) if s < p - 1 else (0, c + 1) if c < v - 1 else None
        dst = (s - 1, c) if s > 0 else (p - 1, c - 1) if c > 0 else None
    return (src, dst) if p > 1 else (None, None)


def _stage(pred: Prediction, s: int, rep: list[int], layers: list[list[int]],
           balance: bool) -> list[EtOp]:
    plan = pred.plan
    p, v, m = plan.pp, plan.interleave, plan.n_micro
    cm = pred.comm
    msg = cm.pp_bytes / (2 * v * m) if p > 1 else 0.0  # one transfer's message
    b = _Builder()
    fwd_end: dict[tuple[int, int], int] = {}
    deps_of_last_bwd: tuple[int, ...] = ()
    prev: tuple[int, ...] = ()
    shapes = gemm_shapes(pred)
    passes = {(ph, c): _chunk_pass(pred, s, c, ph, layers, shapes)
              for ph in (Phase.FWD, Phase.BWD) for c in range(v)}
    gap = {}  # the balance of each chunk's pass: the stage's shortfall, spread over its chunks
    for ph, target in ((Phase.FWD, pred.forward_s), (Phase.BWD, pred.backward_s)):
        own = sum(o.time_s for c in range(v) for o, beside in passes[(ph, c)] if not beside)
        own += sum(cm.pp_p2p_s for c in range(v) if _peers(s, c, ph, p, v)[1] is not None)
        gap[ph] = max(0.0, target - own) / v if balance else 0.0
    for ph, c, k in one_f_one_b(p, s, m, v):
        fwd = ph == Phase.FWD
        deps = list(prev)
        src, dst = _peers(s, c, ph, p, v)
        if src is not None:
            deps.append(b.add(EtOp(f"recv {ph} chunk {c} micro-batch {k}",
                                   NodeType.COMM_RECV_NODE, 0.0, "recv", ph, (),
                                   size_bytes=msg, peer=rep[src[0]], tag=_tag(ph, c, k, v),
                                   layer="pipeline")))
        if not fwd:
            deps.append(fwd_end[(c, k)])
        pieces = list(passes[(ph, c)])
        sends = dst is not None
        if gap[ph] > 0:  # the pass at the critical stage's pace (see llm_export)
            pieces.append((EtOp("stage balance", COMP, gap[ph], "compute", ph,
                                layer="pipeline"), False))
        if not pieces:
            pieces = [(EtOp(f"chunk {c} {ph}", COMP, 0.0, "compute", ph, layer="pipeline"),
                       False)]
        end = _pass(b, pieces, tuple(sorted(set(deps))))
        if fwd:
            fwd_end[(c, k)] = end
        else:
            deps_of_last_bwd = tuple(sorted(set(deps)))
        prev = (end,)
        if sends:
            rc = dst[1]
            sent = b.add(EtOp(f"send {ph} chunk {rc} micro-batch {k}", NodeType.COMM_SEND_NODE,
                              cm.pp_p2p_s, "send", ph, (end,), size_bytes=msg,
                              peer=rep[dst[0]], tag=_tag(ph, rc, k, v), layer="pipeline"))
            if balance:  # Megatron's blocking send: the stage's next pass waits for it
                prev = (sent,)
    # the step: gradient reductions (from the last backward's start with overlap, else after
    # it), the optimizer once they and the backward are done, the ZeRO gathers after it
    start = deps_of_last_bwd if plan.overlap_grad_reduce else prev
    reduces = []
    for op, sec in cm.dp_ops:
        if op.name.endswith("dp_reduce"):
            pg = "expert_dp" if op.name.startswith("expert_") else "dp"
            reduces.append(b.add(_with_deps(_comm(op, sec, "grads", pg, Phase.STEP,
                                                  "dp_comm"), start)))
    opt = b.add(EtOp("optimizer update", COMP, pred.optimizer_s, "compute", Phase.STEP,
                     tuple(sorted({*prev, *reduces})), layer="optimizer"))
    for op, sec in cm.dp_ops:
        if not op.name.endswith("dp_reduce"):
            pg = "expert_dp" if op.name.startswith("expert_") else "dp"
            b.add(_with_deps(_comm(op, sec, "grads", pg, Phase.STEP, "dp_comm"), (opt,)))
    return b.ops


def llm_export(pred: Prediction, balance: bool = True) -> Export:
    """The prediction's ranks as Chakra graphs: one per pipeline stage (see the module
    docstring). MoE all-to-alls overlapped with another micro-batch
    (``overlap_moe_comm``) have no graph yet: refused.

    ``balance``: the prediction times every stage at its critical stage's pace, its pass
    (``forward_s``, ``backward_s``) including one send per model chunk (the closed form
    ``(m + p - 1)`` slots of :func:`accelsim.engine.schedule.pipeline_s`); a stage whose own ops
    take less ends each chunk's pass with a ``stage balance`` node (the shortfall over its
    chunks) and waits for its send (Megatron-LM's blocking send), so that the written graph
    takes the prediction's time. With interleaving the closed form spreads the last stage's
    head evenly over its chunks, the graph keeps it on the last chunk: there the two differ.
    Without it the graph holds the stage's own ops only and sends beside the next pass (as
    :func:`accelsim.engine.pipeline.pipeline_schedule`); its schedule is then at most the
    prediction's."""
    plan = pred.plan
    if plan.overlap_moe_comm and pred.comm.ep_ops:
        raise InputError("--chakra: an MoE plan with overlap_moe_comm has no per-rank op graph "
                         "yet (its overlap is a closed form); export without it")
    if plan.cp > 1:
        raise InputError(f"--chakra: a context-parallel plan (cp {plan.cp}) has no per-rank op "
                         "graph yet; export without it")
    t, p, d = plan.tp, plan.pp, plan.dp
    world = t * p * d
    rep = [s * t * d for s in range(p)]
    layers = _chunk_layers(pred)
    graphs = tuple(
        RankGraph(rep[s], tuple(_stage(pred, s, rep, layers[s], balance)),
                  tuple((rep[s] + o, o) for o in range(t * d)))
        for s in range(p))
    groups = [("tp", Group(t, 1)), ("dp", Group(d, t))]
    if plan.ep > 1:
        groups += [("ep", Group(plan.ep, t)), ("expert_dp", Group(d // plan.ep, t * plan.ep))]
    src = (f"accelsim llm: {pred.model.name}, tp {t} x pp {p} x dp {d}"
           + (f" (ep {plan.ep})" if plan.ep > 1 else "") + f", {pred.scheme}")
    return Export(graphs, world, tuple(groups), src)

