"""Context parallelism: the sequence split over ``cp`` ranks and how keys and values meet the
queries (Megatron-core ``context_parallel_size`` / Transformer Engine ``cp_comm_type``).

Each rank holds two load-balanced chunks of ``seq / (2 cp)`` tokens (Megatron-LM's
``get_batch_on_this_cp_rank``: chunks ``r`` and ``2 cp - 1 - r``, so every rank does 1 / cp of
the causal work). Three algorithms (Transformer Engine's ``attn_forward_func_with_cp``):
``ring`` passes the rank's K and V block peer to peer, ``cp - 1`` steps, each under the
attention of the block before (Liu et al. 2023, Ring Attention; backward: the KV and their
gradients); ``allgather`` gathers the full K and V before the local attention (not overlapped;
its backward reduce-scatters their gradients); ``ulysses`` re-shards Q, K, V from sequence to
heads and the output back by all-to-all (Jacobs et al. 2023, DeepSpeed-Ulysses: four forward,
four backward). The ring's overlap is a schedule (:mod:`accelsim.engine.scheduler`), not a rule.
Communication times come from the fabric (:func:`accelsim.engine.comm.cp_comm`).
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import AttentionOp, Phase, Stream
from accelsim.engine.plan import Plan
from accelsim.engine.scheduler import Graph, Task, schedule
from accelsim.perf.gemm import OPERAND_BYTES


def kv_block_bytes(model: Decoder, plan: Plan, precision: str) -> float:
    """Bytes of one rank's K and V (``seq / cp`` tokens of its ``kv_heads / tp`` heads, one
    micro-batch) at the attention's ``precision``: one ring message."""
    kv = max(1, model.kv_heads // plan.tp)
    tokens = model.seq // plan.cp * plan.micro_batch
    return float(tokens * kv * (model.head_dim + model.v_head_dim) * OPERAND_BYTES[precision])


def ulysses_bytes(model: Decoder, plan: Plan, precision: str) -> tuple[float, float, float, float]:
    """Per-rank buffers of Ulysses' four all-to-alls (Q, K, V in; the output back): the rank's
    ``seq / cp`` tokens of its tensor-parallel heads."""
    tokens = model.seq // plan.cp * plan.micro_batch * OPERAND_BYTES[precision]
    q, kv = model.heads // plan.tp, max(1, model.kv_heads // plan.tp)
    return (float(tokens * q * model.head_dim), float(tokens * kv * model.head_dim),
            float(tokens * kv * model.v_head_dim), float(tokens * q * model.v_head_dim))


def buffer_bytes(model: Decoder, plan: Plan, precision: str) -> float:
    """The attention's transient KV memory per rank beyond the layer's saved activations: the
    ring's two receive buffers (one arriving while the other is used), the all-gather's full
    K and V; 0 without context parallelism or with Ulysses (its buffers are the layer's)."""
    if plan.cp == 1 or plan.cp_algo == "ulysses":
        return 0.0
    block = kv_block_bytes(model, plan, precision)
    return 2 * block if plan.cp_algo == "ring" else plan.cp * block


def rank_attention(attn: AttentionOp, cp: int, algo: str) -> tuple[AttentionOp, int, int]:
    """The attention one of ``cp`` ranks runs, as ``(op, mul, div)``: time, FLOPs and bytes are
    ``op``'s x ``mul`` / ``div``. The ring and the all-gather do 1 / cp of the sequence's causal
    work as ``cp`` causal blocks of ``seq / cp`` queries and keys (the load-balanced chunks'
    work, each a kernel call at its own length: ``cp (s / cp)^2 / 2 = s^2 / (2 cp)`` pairs);
    Ulysses (and a windowed or non-causal attention) the whole sequence's divided by ``cp``
    (its heads / cp over every key)."""
    if cp == 1:
        return attn, 1, 1
    if algo != "ulysses" and attn.causal and not attn.window:
        return replace(attn, seq=attn.seq // cp), cp, 1
    return attn, 1, cp


def ring_exposed_s(steps: int, comm_s: float, compute_s: float, phase: Phase) -> float:
    """Seconds a ring of ``steps`` attention blocks (``compute_s`` each: load balancing splits
    the rank's attention evenly) adds beyond its compute, as the one scheduler places it: block
    ``i > 0`` waits for its KV message (``comm_s`` on the cp stream); message ``i`` follows
    message ``i - 1`` and reuses the buffer of block ``i - 2`` (two buffers), so it may start
    only when that block is done."""
    g = Graph()
    blocks = [g.add(Task("attention", "block0", phase, compute_s))]
    sends: list[int] = []
    for i in range(1, steps):
        deps = tuple(sends[-1:]) + ((blocks[i - 2],) if i >= 2 else ())
        sends.append(g.add(Task("cp", f"kv{i}", phase, comm_s, Stream.CP, deps=deps)))
        blocks.append(g.add(Task("attention", f"block{i}", phase, compute_s,
                                 deps=(sends[-1], blocks[-1]))))
    return max(0.0, schedule(g.tasks).makespan_s - steps * compute_s)


__all__ = ["buffer_bytes", "kv_block_bytes", "rank_attention", "ring_exposed_s",
           "ulysses_bytes"]
