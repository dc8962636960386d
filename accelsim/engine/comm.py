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

import functools
import math
from dataclasses import dataclass

from accelsim.arch import System
from accelsim.arch.states import ParamCounts, StateFormats, param_bytes
from accelsim.engine.memory import Memory
from accelsim.engine.plan import LlmParams, Plan
from accelsim.ring import bus_factor, ring_collective_time
from accelsim.engine.decoder import Decoder, a2a_elements
from accelsim.engine.graph import CommKind, CommOp, Phase, Stream
from accelsim.engine.lower import zero_comm_ops
from accelsim.workload.gpt import GptConfig
from accelsim.errors import InputError

ENGINES = ("analytic", "des")
#: DES packet size: collectives move in pipelined chunks of this many bytes (assumption: the
#: order of NCCL's per-channel chunks, 512 KiB-4 MiB; with cut-through switches the time does
#: not depend on it, the event count does)
DES_PACKET_BYTES = 4 * 2 ** 20


@functools.lru_cache(maxsize=4096)
def _des_ring(kind: str, ranks: int, size_bytes: float, bandwidth_Bps: float,
              latency_s: float) -> float:
    """One ring collective on a ``ranks``-port switch, timed by netsim's DES (symmetric mode)."""
    # the DES only on request: importing it (simpy, networkx) is not free for every prediction
    from accelsim.netsim import symmetric
    from accelsim.netsim.phases import collective_time

    # a switch ring step crosses two links (GPU -> switch -> GPU): half the node file's
    # GPU-to-GPU latency on each, so a step costs the latency the closed form charges
    pl = symmetric.plan("switch", ranks, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s / 2)
    return collective_time(pl, kind, math.ceil(size_bytes), 1.0, engine="des",
                           packet_bytes=DES_PACKET_BYTES).time_s


@dataclass(frozen=True)
class Fabric:
    """The two tiers a node file describes, with the achievable-bandwidth factor applied."""

    gpus_per_node: int
    intra_Bps: float
    intra_latency_s: float
    inter_Bps: float
    inter_latency_s: float
    engine: str = "analytic"
    a2a_scale: float = 1.0  # an all-to-all's achievable bandwidth over a ring collective's

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InputError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")

    def ring(self, kind: str, ranks: int, size_bytes: float, bandwidth_Bps: float,
             latency_s: float) -> float:
        if self.engine == "des" and ranks > 1 and size_bytes > 0:
            return _des_ring(kind, ranks, float(size_bytes), bandwidth_Bps, latency_s)
        return ring_collective_time(kind, ranks, size_bytes, bandwidth_Bps, latency_s)

    @classmethod
    def of(cls, system: System, params: LlmParams, engine: str = "analytic") -> Fabric:
        if system.boards != 1:
            raise InputError(f"system {system.name!r}: the llm model takes a node file "
                             f"(boards = 1), got boards = {system.boards}")
        if system.inter_board_link is None:
            raise InputError(f"system {system.name!r}: no inter_board link (the per-GPU NIC) "
                             "to reach other nodes")
        e = params.network_efficiency
        ln, ib = system.link, system.inter_board_link
        return cls(gpus_per_node=system.chips,
                   intra_Bps=ln.bandwidth_Bps * ln.links_per_chip * e,
                   intra_latency_s=ln.latency_s,
                   inter_Bps=ib.bandwidth_Bps * ib.links_per_chip * e,
                   inter_latency_s=ib.latency_s, engine=engine,
                   a2a_scale=params.all_to_all_efficiency / e)

    def split(self, size: int, stride: int) -> tuple[int, int]:
        """(members per node, nodes) of a group of ``size`` ranks spaced ``stride`` apart."""
        n = self.gpus_per_node
        if stride >= n:
            return 1, size
        per_node = min(size, max(1, n // stride))
        return per_node, -(-size // per_node)

    def collective_s(self, kind: str, size_bytes: float, ranks: int, stride: int) -> float:
        """Time of one ring collective (nccl-tests ``size`` = the whole buffer) in a group."""
        if ranks <= 1 or size_bytes <= 0:
            return 0.0
        kin, kout = self.split(ranks, stride)
        intra = (self.intra_Bps, self.intra_latency_s)
        inter = (self.inter_Bps, self.inter_latency_s)
        if kout == 1:
            return self.ring(kind, kin, size_bytes, *intra)
        if kin == 1:
            return self.ring(kind, kout, size_bytes, *inter)
        # hierarchical: node-level reduce-scatter, rail-level collective on 1/kin, node all-gather
        if kind == "all-reduce":
            return (self.ring("reduce-scatter", kin, size_bytes, *intra)
                    + self.ring("all-reduce", kout, size_bytes / kin, *inter)
                    + self.ring("all-gather", kin, size_bytes, *intra))
        return (self.ring(kind, kin, size_bytes, *intra)
                + self.ring(kind, kout, size_bytes / kin, *inter))

    def all_to_all_s(self, size_bytes: float, ranks: int, stride: int,
                     inter_fraction: float = 1.0) -> float:
        """Time of one all-to-all of ``size_bytes`` per GPU in a group of ``ranks`` spaced
        ``stride`` apart: pairwise inside each node, then across nodes on the NICs
        (:func:`accelsim.netsim.alltoall.two_tier_plan`, closed form); the cross-node level
        carries ``inter_fraction`` of its pairwise share (a dispatch that sends each token once
        per node, not once per expert)."""
        if ranks <= 1 or size_bytes <= 0:
            return 0.0
        from accelsim.netsim import alltoall

        kin, kout = self.split(ranks, stride)
        pl = alltoall.two_tier_plan(kin, kout, intra_Bps=self.intra_Bps * self.a2a_scale,
                                    inter_Bps=self.inter_Bps * self.a2a_scale,
                                    intra_latency_s=self.intra_latency_s,
                                    inter_latency_s=self.inter_latency_s)
        if inter_fraction == 1.0 or kout == 1:
            return alltoall.analytic_time(pl, size_bytes).time_s
        per = size_bytes / pl.streams
        intra, inter = pl.levels if kin > 1 else ((), pl.levels[0])
        t = inter.time_s(per * inter_fraction)
        return t + (intra.time_s(per) if kin > 1 else 0.0)

    def op_s(self, op: CommOp) -> float:
        """Seconds of one CommOp of the op graph: a ring collective by :meth:`collective_s`,
        an all-to-all by :meth:`all_to_all_s`, a send-recv point to point (across nodes when
        its group spans nodes)."""
        if op.kind == CommKind.ALL_TO_ALL:
            return self.all_to_all_s(op.size_bytes, op.group, op.stride)
        if op.kind == CommKind.SEND_RECV:
            return self.p2p_s(op.size_bytes, self.nodes_of(op.group, op.stride) > 1)
        return self.collective_s(str(op.kind), op.size_bytes, op.group, op.stride)

    def nodes_of(self, ranks: int, stride: int) -> int:
        """Nodes a group of ``ranks`` spaced ``stride`` apart spans."""
        return self.split(ranks, stride)[1]

    def p2p_s(self, nbytes: float, across_nodes: bool) -> float:
        if nbytes <= 0:
            return 0.0
        if across_nodes:
            return self.inter_latency_s + nbytes / self.inter_Bps
        return self.intra_latency_s + nbytes / self.intra_Bps


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

    @property
    def dp_s(self) -> float:
        """Gradient and weight collectives of the data-parallel group per iteration."""
        return self.dp_reduce_s + self.dp_gather_s

    @property
    def activation_bytes(self) -> float:
        return self.tp_bytes + self.pp_bytes + self.ep_bytes

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
    act = model.seq * plan.micro_batch * model.hidden  # elements of one s x b x h tensor
    dense_layers, moe_layers = max(model.stage_layers(p, v), key=sum)
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
    pp_across = t * d >= fabric.gpus_per_node or p * t * d > fabric.gpus_per_node
    pp_p2p_s = fabric.p2p_s(p2p_bytes, pp_across)
    # data parallel, over ranks tp apart (routed experts: over the dp / ep ranks tp x ep apart)
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
    dp_bytes, dp_reduce_s, dp_gather_s = _dp(fabric, plan, mem.counts, scheme, d, t)
    if mem.expert_params and d // plan.ep > 1:
        eb, er, eg = _dp(fabric, plan, mem.expert_counts, scheme, d // plan.ep, t * plan.ep)
        dp_bytes, dp_reduce_s, dp_gather_s = dp_bytes + eb, dp_reduce_s + er, dp_gather_s + eg
    return Comm(tp_bytes=tp_bytes, tp_input_bytes=tp_input_bytes, pp_bytes=pp_bytes,
                dp_bytes=dp_bytes, tp_layer_pass_s=2 * fwd_s, tp_layer_bwd_s=2 * bwd_s,
                pp_p2p_s=pp_p2p_s, dp_reduce_s=dp_reduce_s, dp_gather_s=dp_gather_s,
                ep_bytes=ep_bytes, ep_layer_pass_s=ep_fwd, ep_layer_bwd_s=ep_bwd,
                tp_ops=tp_ops, ep_ops=ep_ops)


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
        stride: int) -> tuple[float, float, float]:
    """(bytes sent, reduce s, gather s) of the data-parallel collectives over ``d`` ranks
    ``stride`` apart for ``counts`` parameters (the linear weight matrices in the scheme's
    bytes, the other parameters in its other scheme's): the CommOps of
    :func:`accelsim.engine.lower.zero_comm_ops`, timed by :meth:`Fabric.op_s`."""
    gb = param_bytes(counts, scheme, lambda x: x.grad_comm_bytes)
    wb = param_bytes(counts, scheme, lambda x: x.weight_comm_bytes)
    reduce, *gathers = zero_comm_ops(gb, wb, plan.zero, d, stride)
    return (reduce.bytes + sum((op.bytes for op in gathers), 0.0), fabric.op_s(reduce),
            sum((fabric.op_s(op) for op in gathers), 0.0))
