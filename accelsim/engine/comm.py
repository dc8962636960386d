"""Communication of a 3-D parallel GPT training run: what each GPU sends per iteration and how
long it takes on the node (NVSwitch) and fabric (one InfiniBand NIC per GPU, rail-aligned).

Volumes are the bytes one GPU sends (ring algorithms: (n-1)/n of the buffer per reduce-scatter
or all-gather, twice that per all-reduce). Per layer and micro-batch, Megatron's tensor
parallelism does two all-reduces of the s x b x h activation in the forward pass and two in
the backward pass (Shoeybi et al. 2019, Fig. 4); with sequence parallelism each becomes a
reduce-scatter plus an all-gather of the same volume (Korthikanti et al. 2022, section 4.2.2),
and the backward pass all-gathers the sequence-sharded inputs of the QKV and FC1 GEMMs once
more for their weight gradients (Megatron-LM saves the sharded input and re-gathers it,
``_LinearWithGradAccumulationAndAsyncCommunication.backward``; the re-gather overlaps the
data-gradient GEMM there, so it adds bytes, not time); full recomputation repeats the forward
ones. FP8-LM's "activation-related communication" (its Table 7) is the traffic of the
tensor-parallel region's input conversion (its Fig. 2 ``g``): the forward all-gathers, the
backward re-gathers and the reduce-scatters of the input gradients -- ``Comm.tp_input_bytes``.
Pipeline stages exchange the s x b x h activation (its 1/t slice with Megatron's
scatter/gather) forward and its gradient backward, once per model chunk. Data parallelism
all-reduces the stage's gradients (ZeRO 0) or reduce-scatters them and all-gathers the updated
weights (ZeRO 1, 2; the distributed optimizer), ZeRO 3 gathers weights in the forward and the
backward pass.

Times use :func:`accelsim.ring.ring_collective_time` (the ring term of accelsim), or
on request netsim's discrete-event engine on a switch ring (``engine="des"``), per tier: inside
a node at the NVSwitch port bandwidth, across nodes at the NIC bandwidth, a group spanning both
as a hierarchical reduce-scatter / all-gather (node, then rail). The data-parallel volumes price
each parameter at its scheme's bytes through :func:`accelsim.arch.states.param_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from accelsim.arch import System
from accelsim.arch.states import ParamCounts, StateFormats, param_bytes
from accelsim.engine.memory import Memory
from accelsim.engine.plan import LlmParams, Plan
from accelsim.ring import bus_factor
from accelsim.engine.decoder import Decoder, a2a_elements
from accelsim.engine.graph import CommKind, CommOp, Phase, Stream
from accelsim.engine.lower import zero_comm_ops
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:  # netsim (networkx, simpy) only when a prediction runs
    from accelsim.netsim.fabric import Fabric


def fabric_of(system: System, params: LlmParams, engine: str = "analytic") -> Fabric:
    """The system's fabric (:class:`accelsim.netsim.fabric.Fabric`) for a prediction under
    ``params``: its network efficiency unless ``params`` overrides it (the one place the
    override applies), all-to-alls at ``params.all_to_all_efficiency``, NCCL's latency across
    nodes with ``params.nccl_latency``."""
    from accelsim.netsim.fabric import Fabric
    from accelsim.netsim.nccl import NCCL_SIMPLE

    if params.network_efficiency is not None:
        system = system.with_network_efficiency(params.network_efficiency)
    return Fabric.of(system, engine=engine, all_to_all_efficiency=params.all_to_all_efficiency,
                     nccl=NCCL_SIMPLE if params.nccl_latency else None)


def op_s(fabric: Fabric, op: CommOp) -> float:
    """Seconds of one CommOp of the op graph on ``fabric``: a ring collective by
    :meth:`~accelsim.netsim.fabric.Fabric.collective_s`, an all-to-all by
    :meth:`~accelsim.netsim.fabric.Fabric.all_to_all_s`, a send-recv point to point (across
    nodes when its group spans nodes)."""
    if op.kind == CommKind.ALL_TO_ALL:
        return fabric.all_to_all_s(op.size_bytes, op.group, op.stride)
    if op.kind == CommKind.SEND_RECV:
        return fabric.p2p_s(op.size_bytes, fabric.nodes_of(op.group, op.stride) > 1)
    return fabric.collective_s(str(op.kind), op.size_bytes, op.group, op.stride)


def ring_sent(kind: str, ranks: int, size_bytes: float) -> float:
    """Bytes one rank sends in a ring collective of a ``size_bytes`` buffer
    (:func:`accelsim.ring.bus_factor`, the one owner of the ring factor)."""
    return bus_factor(kind, ranks) * size_bytes


@dataclass(frozen=True)
class Comm:
    """Per-iteration communication of one GPU: bytes sent and seconds on the critical path."""

    tp_bytes: float  # tensor/sequence-parallel activation collectives
    tp_input_bytes: float  # of which the input conversion (FP8-LM Table 7's convention)
    pp_bytes: float  # pipeline point-to-point
    dp_bytes: float  # gradient reduction and ZeRO weight gathers
    tp_layer_pass_s: float  # one layer, one micro-batch, one forward pass
    tp_layer_bwd_s: float  # one layer, one micro-batch, one backward pass (exposed part)
    pp_p2p_s: float  # one activation (or gradient) transfer between stages
    dp_reduce_s: float  # the gradient all-reduce (ZeRO 0) or reduce-scatter (ZeRO 1-3)
    dp_gather_s: float  # the ZeRO weight all-gathers after the update (0 for ZeRO 0)
    ep_bytes: float = 0.0  # expert-parallel all-to-alls (token dispatch and combine)
    #: the CommOps the tensor-parallel split inserts into one layer (forward and backward),
    #: each with its seconds on the critical path (the SP input re-gather: 0, hidden)
    tp_ops: tuple[tuple[CommOp, float], ...] = ()
    #: the CommOps expert parallelism inserts into one MoE layer, with their seconds
    ep_ops: tuple[tuple[CommOp, float], ...] = ()
    ep_layer_pass_s: float = 0.0  # one MoE layer, one micro-batch, one forward pass
    ep_layer_bwd_s: float = 0.0  # one MoE layer, one micro-batch, one backward pass
    #: the data-parallel CommOps (gradient reduction, ZeRO weight gathers; the routed experts'
    #: over their own ranks), each with its seconds
    dp_ops: tuple[tuple[CommOp, float], ...] = ()
    cp_bytes: float = 0.0  # context-parallel KV exchange (:func:`cp_comm`)
    #: the CommOps context parallelism inserts into one layer, each with its exposed seconds
    cp_ops: tuple[tuple[CommOp, float], ...] = ()
    cp_layer_pass_s: float = 0.0  # one layer, one micro-batch, forward (exposed)
    cp_layer_bwd_s: float = 0.0  # one layer, one micro-batch, backward (exposed)
    #: with tensor-parallel overlap (:mod:`accelsim.engine.tp_overlap`): the exposed seconds
    #: of each of ``tp_ops`` (empty: each exposed for its whole time)
    tp_exposed: tuple[float, ...] = ()

    @property
    def dp_s(self) -> float:
        """Gradient and weight collectives of the data-parallel group per iteration."""
        return self.dp_reduce_s + self.dp_gather_s

    @property
    def activation_bytes(self) -> float:
        return self.tp_bytes + self.pp_bytes + self.ep_bytes + self.cp_bytes

    @property
    def weight_bytes(self) -> float:
        return self.dp_bytes


def tp_passes(plan: Plan) -> int:
    """Forward-like passes per micro-batch that run the tensor-parallel collectives."""
    return 3 if plan.recompute == "full" else 2


def comm(model: GptConfig | Decoder, plan: Plan, scheme: StateFormats, fabric: Fabric,
         mem: Memory) -> Comm:
    """Volumes and times of the tensor-, expert-, pipeline- and data-parallel traffic of one
    GPU on the largest stage; ``mem`` gives the stage's parameters (all, the linear weight
    matrices, the routed experts)."""
    model = Decoder.of(model)
    t, p, d, v = plan.tp, plan.pp, plan.dp, plan.interleave
    # elements of one s x b x h tensor (this rank's seq / cp tokens)
    act = model.seq // plan.cp * plan.micro_batch * model.hidden
    dense_layers, moe_layers = max(model.stage_layers(p, v, plan.stage_split), key=sum)
    layers = dense_layers + moe_layers
    # two of each per layer: input conversion (g) and output reduction (g-bar) of the
    # attention block and of the MLP block
    ag_in, red = act * scheme.act_gather_bytes, act * scheme.act_reduce_bytes
    if plan.sequence_parallel:
        fwd_in = ring_sent("all-gather", t, ag_in)  # g: all-gather the sharded input
        fwd_out = ring_sent("reduce-scatter", t, red)  # g-bar: reduce-scatter the partial sums
        bwd_in = ring_sent("reduce-scatter", t, red) + fwd_in  # input grads; input re-gather
        bwd_out = ring_sent("all-gather", t, red)  # gather the output gradient
        fwd_s = (fabric.collective_s("all-gather", ag_in, t, 1)
                 + fabric.collective_s("reduce-scatter", red, t, 1))
        bwd_s = (fabric.collective_s("reduce-scatter", red, t, 1)
                 + fabric.collective_s("all-gather", red, t, 1))
    else:
        fwd_in, bwd_out = 0.0, 0.0
        fwd_out = bwd_in = ring_sent("all-reduce", t, red)
        fwd_s = bwd_s = fabric.collective_s("all-reduce", red, t, 1)
    recomputed = tp_passes(plan) - 2  # full recomputation repeats the forward collectives
    per_micro_layer = 2 * ((1 + recomputed) * (fwd_in + fwd_out) + bwd_in + bwd_out)
    tp_bytes = per_micro_layer * layers * plan.n_micro
    tp_input_bytes = 2 * ((1 + recomputed) * fwd_in + bwd_in) * layers * plan.n_micro
    # pipeline: a 16-bit activation forward and its gradient backward, per chunk boundary
    p2p_bytes = 2 * act / t if p > 1 else 0.0
    pp_bytes = 2 * p2p_bytes * v * plan.n_micro if p > 1 else 0.0
    # a stage boundary crosses nodes when a stage fills a node or the pipeline spans nodes
    # (stages advance in lock step: the slowest boundary sets the pace)
    tcd = t * plan.cp * d  # the GPUs of one stage
    pp_across = tcd >= fabric.gpus_per_node or p * tcd > fabric.gpus_per_node
    pp_p2p_s = fabric.p2p_s(p2p_bytes, pp_across)
    # data parallel (with context parallelism: over dp x cp), over ranks tp apart (routed
    # experts: over the dp / ep ranks tp x ep apart)
    ep_bytes, ep_fwd, ep_bwd = 0.0, 0.0, 0.0
    if moe_layers and plan.ep > 1:
        # two all-to-alls forward (dispatch, combine) and two backward per MoE layer, over the
        # ep ranks tp apart; dispatch at the GEMM-input bytes, combine at the output's
        elems = a2a_elements(model, model.seq * plan.micro_batch, t)
        dispatch, combine = elems * scheme.act_gather_bytes, elems * scheme.act_reduce_bytes
        f = inter_node_fraction(model, fabric.nodes_of(plan.ep, t))
        ep_fwd = fabric.all_to_all_s(dispatch, plan.ep, t, f) + fabric.all_to_all_s(
            combine, plan.ep, t, f)
        ep_bwd = fabric.all_to_all_s(combine, plan.ep, t, f) + fabric.all_to_all_s(
            dispatch, plan.ep, t, f)
        leave = (plan.ep - 1) / plan.ep
        ep_bytes = 2 * (1 + recomputed) * leave * (dispatch + combine) * moe_layers \
            * plan.n_micro
    tp_ops = _tp_layer_ops(plan, fabric, ag_in, red)
    ep_ops: tuple[tuple[CommOp, float], ...] = ()
    if moe_layers and plan.ep > 1:
        ops = (CommOp("moe.dispatch", CommKind.ALL_TO_ALL, dispatch, plan.ep, t, Stream.TP,
                      Phase.FWD),
               CommOp("moe.combine", CommKind.ALL_TO_ALL, combine, plan.ep, t, Stream.TP,
                      Phase.FWD),
               CommOp("moe.combine_grad", CommKind.ALL_TO_ALL, combine, plan.ep, t, Stream.TP,
                      Phase.BWD),
               CommOp("moe.dispatch_grad", CommKind.ALL_TO_ALL, dispatch, plan.ep, t,
                      Stream.TP, Phase.BWD))
        ep_ops = tuple((o, fabric.all_to_all_s(o.size_bytes, o.group, o.stride, f))
                       for o in ops)
    dp_ops = _dp(fabric, plan, mem.counts, scheme, plan.dp_cp, t)
    if mem.expert_params and d // plan.ep > 1:
        dp_ops += tuple((replace(o, name=f"expert_{o.name}"), sec) for o, sec in _dp(
            fabric, plan, mem.expert_counts, scheme, d // plan.ep, t * plan.ep))
    dp_bytes = sum((o.bytes for o, _ in dp_ops), 0.0)
    dp_reduce_s = sum((sec for o, sec in dp_ops if o.name.endswith("dp_reduce")), 0.0)
    dp_gather_s = sum((sec for o, sec in dp_ops if o.name.endswith("dp_gather")), 0.0)
    return Comm(tp_bytes=tp_bytes, tp_input_bytes=tp_input_bytes, pp_bytes=pp_bytes,
                dp_bytes=dp_bytes, tp_layer_pass_s=2 * fwd_s, tp_layer_bwd_s=2 * bwd_s,
                pp_p2p_s=pp_p2p_s, dp_reduce_s=dp_reduce_s, dp_gather_s=dp_gather_s,
                ep_bytes=ep_bytes, ep_layer_pass_s=ep_fwd, ep_layer_bwd_s=ep_bwd,
                tp_ops=tp_ops, ep_ops=ep_ops, dp_ops=dp_ops)


def cp_comm(model: Decoder, plan: Plan, fabric: Fabric, precision: str, attn_fwd_s: float,
            attn_bwd_s: float) -> tuple[tuple[tuple[CommOp, float], ...], float, float, float]:
    """Context parallelism's CommOps in one layer and micro-batch over the ``cp`` ranks ``tp``
    apart (:mod:`accelsim.engine.context`), each with its exposed seconds; (ops, forward
    exposed, backward exposed, bytes sent per iteration). Ring: ``cp - 1`` messages of the
    rank's K and V forward, K, V and their gradients backward, under the attention blocks
    (``attn_*_s``, this rank's) as scheduled; all-gather: the full K and V gathered forward,
    their gradients reduce-scattered backward, exposed; Ulysses: four all-to-alls each way.
    Recomputation (full or selective: it reruns the attention) repeats the forward ones."""
    from accelsim.engine import context

    c, t = plan.cp, plan.tp
    if c == 1:
        return (), 0.0, 0.0, 0.0
    cp_op = lambda name, kind, size, phase: CommOp(  # noqa: E731
        f"attn.cp_{name}", kind, size, c, t, Stream.CP, phase)
    block = context.kv_block_bytes(model, plan, precision)
    if plan.cp_algo == "ring":
        msgs = (block, 2 * block)  # forward: K, V; backward: K, V and dK, dV
        ops = []
        for phase, msg, attn_s in zip((Phase.FWD, Phase.BWD), msgs, (attn_fwd_s, attn_bwd_s)):
            step_s = op_s(fabric, cp_op("ring", CommKind.SEND_RECV, msg, phase))
            exposed = context.ring_exposed_s(c, step_s, attn_s / c, phase)
            # one row per pass: its cp - 1 messages together
            ops.append((cp_op("ring_kv", CommKind.SEND_RECV, (c - 1) * msg, phase), exposed))
    elif plan.cp_algo == "allgather":
        ops = [(o, op_s(fabric, o)) for o in (
            cp_op("kv_all_gather", CommKind.ALL_GATHER, c * block, Phase.FWD),
            cp_op("kv_grad_reduce_scatter", CommKind.REDUCE_SCATTER, c * block, Phase.BWD))]
    else:  # ulysses: Q, K, V in and the output back; their gradients the other way
        q, k, v, out = context.ulysses_bytes(model, plan, precision)
        ops = [(o, op_s(fabric, o)) for o in (
            *(cp_op(f"a2a_{n}", CommKind.ALL_TO_ALL, b, Phase.FWD)
              for n, b in (("q", q), ("k", k), ("v", v), ("out", out))),
            *(cp_op(f"a2a_{n}", CommKind.ALL_TO_ALL, b, Phase.BWD)
              for n, b in (("out_grad", out), ("q_grad", q), ("k_grad", k), ("v_grad", v))))]
    fwd = sum(s for o, s in ops if o.phase == Phase.FWD)
    bwd = sum(s for o, s in ops if o.phase == Phase.BWD)
    passes = 2 if plan.recompute != "none" else 1  # forward passes that exchange K and V
    per_layer = sum(o.bytes * (passes if o.phase == Phase.FWD else 1) for o, _ in ops)
    layers = sum(max(model.stage_layers(plan.pp, plan.interleave, plan.stage_split),
                       key=sum))
    return tuple(ops), fwd, bwd, per_layer * layers * plan.n_micro


def _tp_layer_ops(plan: Plan, fabric: Fabric, ag_in: float, red: float
                  ) -> tuple[tuple[CommOp, float], ...]:
    """The tensor-parallel split's CommOps in one layer (Megatron's g and g-bar around the
    attention block and the MLP block), each with its seconds: all-reduces forward and
    backward, or with sequence parallelism an all-gather + reduce-scatter forward and a
    reduce-scatter + all-gather backward, the input re-gather hidden behind the data-gradient
    GEMM (0 s)."""
    t = plan.tp
    if t <= 1:
        return ()
    out = []
    for block in ("attn", "mlp"):
        if plan.sequence_parallel:
            for name, kind, size, phase, hidden in (
                    ("tp_all_gather", CommKind.ALL_GATHER, ag_in, Phase.FWD, False),
                    ("tp_reduce_scatter", CommKind.REDUCE_SCATTER, red, Phase.FWD, False),
                    ("tp_reduce_scatter", CommKind.REDUCE_SCATTER, red, Phase.BWD, False),
                    ("tp_all_gather", CommKind.ALL_GATHER, red, Phase.BWD, False),
                    ("tp_regather", CommKind.ALL_GATHER, ag_in, Phase.BWD, True)):
                op = CommOp(f"{block}.{name}", kind, size, t, 1, Stream.TP, phase)
                out.append((op, 0.0 if hidden else fabric.collective_s(str(kind), size, t, 1)))
        else:
            ar = fabric.collective_s("all-reduce", red, t, 1)
            for phase in (Phase.FWD, Phase.BWD):
                out.append((CommOp(f"{block}.tp_all_reduce", CommKind.ALL_REDUCE, red, t, 1,
                                   Stream.TP, phase), ar))
    return tuple(out)


def inter_node_fraction(model: Decoder, nodes: int) -> float:
    """Share of a token's ``top_k`` copies that cross nodes, relative to per-expert sending,
    when the routing reaches at most ``groups_per_token`` of ``expert_groups`` = ``nodes``
    nodes and the dispatch sends a token once per node, then forwards it on the node's links
    (DeepSeek-V3 section 3.2.2: "tokens are first transmitted via IB to the GPUs with the same
    in-node index on their target nodes ... then forwarded via NVLink"); 1 otherwise."""
    m = model.config.moe
    if m is None or not m.groups_per_token or m.expert_groups != nodes:
        return 1.0
    return min(m.top_k, m.groups_per_token) / m.top_k


def _dp(fabric: Fabric, plan: Plan, counts: ParamCounts, scheme: StateFormats, d: int,
        stride: int) -> tuple[tuple[CommOp, float], ...]:
    """The data-parallel CommOps over ``d`` ranks ``stride`` apart for ``counts`` parameters
    (the linear weight matrices in the scheme's bytes, the other parameters in its other
    scheme's), :func:`accelsim.engine.lower.zero_comm_ops`, each timed by :func:`op_s`."""
    gb = param_bytes(counts, scheme, lambda x: x.grad_comm_bytes)
    wb = param_bytes(counts, scheme, lambda x: x.weight_comm_bytes)
    return tuple((op, op_s(fabric, op)) for op in zero_comm_ops(gb, wb, plan.zero, d, stride))
