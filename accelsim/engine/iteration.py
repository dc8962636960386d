"""One serving iteration on the one execution model: a continuous-batching engine's forward pass
over a mix of prefill chunks and decode tokens (Orca's iteration-level batching, Sarathi's
chunked prefill), split into the parts that depend on different shapes so a request-level
simulation can memoize each (:mod:`accelsim.serving`).

A mixed pass of ``T`` new tokens is :func:`accelsim.engine.inference.forward_pass`'s layer at
``T`` tokens (the linear GEMMs, element-wise kernels and collectives see only the token count),
with its attention replaced by each part's own: a prefill chunk of ``t`` tokens after ``past``
cached ones is the flash kernel's time over ``past + t`` tokens times the causal share of its
query rows (``((past + t)^2 - past^2) / (past + t)^2``: exact at ``past = 0``, the prompt's
prefill), and the decode tokens are one flash-decoding kernel over every cached key they attend
(:func:`~accelsim.engine.inference_plan.cached_attention`: FLOPs and bytes proportional to the keys).
The LM head runs for the sequences that emit a token. MoE routing imbalance (``skew``: the
hottest expert's load over the mean) makes the hottest GPU's expert GEMMs set the step.
Each part's FLOPs and bytes (:class:`~accelsim.engine.energy.Work`, every GPU of the replica:
one tensor-parallel rank's ops x ``tp``, as :func:`~accelsim.engine.inference.infer` prices a
pass) come from the same ops that time it, for the energy of a serving run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from accelsim.arch import System
from accelsim.engine import decoder
from accelsim.engine.comm import fabric_of
from accelsim.engine.decoder import Decoder
from accelsim.engine.energy import Work
from accelsim.engine.graph import AttentionOp, attention_precision, flash_attention_parts, gemm_s
from accelsim.engine.inference import InferencePlan, OpCost, _layer
from accelsim.engine.inference_plan import (cached_attention, kernel_s,
                                                 kv_cache_bytes_per_gpu)
from accelsim.engine.plan import LlmParams
from accelsim.engine.stack import FlashKernel
from accelsim.errors import InputError
from accelsim.perf.gemm import FITTED

if TYPE_CHECKING:
    from accelsim.netsim.fabric import Fabric


@dataclass(frozen=True)
class IterationCost:
    """The parts of one iteration's time on the critical path of ``plan`` (all stages in
    series, as :func:`~accelsim.engine.inference.forward_pass`), for ``model`` on ``system``
    at the GEMM precision ``gp``; ``skew`` >= 1 the MoE routing imbalance."""

    model: Decoder
    system: System
    plan: InferencePlan
    gp: str
    params: LlmParams = LlmParams(memory_reserve_GiB=0.0)
    skew: float = 1.0
    _fabric: object = field(default=None, compare=False, repr=False)
    _per_key: dict = field(default_factory=dict, compare=False, repr=False)
    _per_key_work: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.skew, int | float) and math.isfinite(self.skew)
                and 1.0 <= self.skew <= self.model.config.moe.n_experts
                if self.model.config.moe is not None else self.skew == 1.0):
            raise InputError(f"expert skew must be in [1, experts] for an MoE model (1 for a "
                             f"dense one), got {self.skew!r}")
        object.__setattr__(self, "_fabric", fabric_of(self.system, self.params))

    def _linear_ops(self, tokens: int) -> list[tuple[int, bool, list[OpCost]]]:
        """(layers, MoE?, one such layer's ops but attention) for ``tokens`` new tokens."""
        m, out = self.model, []
        n_moe = m.config.n_moe_layers
        for count, moe in ((m.layers - n_moe, False), (n_moe, True)):
            if count:
                ops = _layer(m, moe, self.system, self._fabric, self.plan, self.gp, 1, tokens,
                             1)
                out.append((count, moe, [o for o in ops if o.op != "attention"]))
        return out

    def linear_s(self, tokens: int) -> float:
        """Every layer's ops but attention for ``tokens`` new tokens, and the sends between
        pipeline stages."""
        m, total = self.model, 0.0
        for count, moe, ops in self._linear_ops(tokens):
            per = sum(o.time_s for o in ops)
            if moe and self.skew > 1.0:
                per += self._skew_extra_s(tokens)
            total += count * per
        p = self.plan
        if p.pp > 1:
            act = tokens * m.hidden * 2
            total += (p.pp - 1) * self._fabric.p2p_s(act, p.tp * p.pp
                                                     > self._fabric.gpus_per_node)
        return total

    def linear_work(self, tokens: int) -> Work:
        """The FLOPs and bytes of :meth:`linear_s`'s ops (the sends between stages are link
        bytes, not priced; a routing imbalance moves expert work between GPUs, adds none)."""
        f = b = 0.0
        for count, _, ops in self._linear_ops(tokens):
            f += count * sum(o.flops for o in ops)
            b += count * sum(o.bytes for o in ops)
        t = self.plan.tp
        return Work(t * f, 0.0, t * b)

    def _skew_extra_s(self, tokens: int) -> float:
        """The hottest GPU's expert GEMMs less the balanced ones: one of its local experts
        gets ``skew`` times the mean tokens."""
        p = self.plan
        etp = 1 if p.ep > 1 else p.tp
        extra = 0.0
        for g in decoder.layer_gemms(self.model, True, tokens, p.tp, p.ep, self.gp, etp=etp,
                                     group_tokens=tokens):
            if not g.name.startswith("experts."):
                continue
            hot = replace(g, m=math.ceil(self.skew * g.m), count=1)
            extra += gemm_s(self.system, hot) - gemm_s(self.system, replace(g, count=1))
        return extra

    def head_s(self, sequences: int) -> float:
        """The LM head of ``sequences`` sequences emitting a token (0: none)."""
        if sequences < 1:
            return 0.0
        return gemm_s(self.system, decoder.head_op(self.model, sequences, self.plan.tp, self.gp))

    def head_work(self, sequences: int) -> Work:
        """The FLOPs and bytes of :meth:`head_s`."""
        if sequences < 1:
            return Work()
        g, t = decoder.head_op(self.model, sequences, self.plan.tp, self.gp), self.plan.tp
        return Work(t * g.flops, 0.0, t * g.bytes)

    def _prefill_attention(self, tokens: int, past: int) -> tuple[AttentionOp, float]:
        """The flash kernel over ``past + tokens`` tokens and the causal share of its query
        rows a chunk of ``tokens`` after ``past`` cached ones computes."""
        m, t = self.model, self.plan.tp
        seq = past + tokens
        attn = AttentionOp(batch=1, heads=m.heads // t, seq=seq, head_dim=m.head_dim,
                           kv_heads=max(1, m.kv_heads // t), causal=True, flash=True,
                           precision=attention_precision(self.gp, self.system.chip.core))
        return attn, 1.0 - (past / seq) ** 2

    def prefill_attention_s(self, tokens: int, past: int) -> float:
        """Attention of a prefill chunk of ``tokens`` tokens after ``past`` cached ones, every
        layer."""
        attn, share = self._prefill_attention(tokens, past)
        bw = self.system.chip.memory_bandwidth_Bps * FITTED.memory_efficiency
        f = flash_attention_parts(self.system, attn, FlashKernel(), bw)[0]
        return self.model.layers * f * share

    def prefill_attention_work(self, tokens: int, past: int) -> Work:
        """The FLOPs and bytes of :meth:`prefill_attention_s` (the kernel's, times the same
        share)."""
        attn, share = self._prefill_attention(tokens, past)
        k = self.model.layers * share * self.plan.tp
        return Work(0.0, k * attn.flops, k * attn.bytes)

    def decode_attention_s(self, sequences: int, keys: int, queries: int = 1) -> float:
        """One flash-decoding kernel per layer for ``sequences`` sequences attending ``keys``
        cached keys in all, ``queries`` new tokens each (a speculative verify: K + 1): the
        kernel's fixed time plus its time per key (FLOPs and bytes both proportional to the
        keys, as :func:`~accelsim.engine.inference.decode_steps` sums them)."""
        if sequences < 1:
            return 0.0
        launch = self.system.chip.kernel_launch_s
        return self.model.layers * (launch + keys * self._per_key_s(queries))

    def decode_attention_work(self, sequences: int, keys: int, queries: int = 1) -> Work:
        """The FLOPs and bytes of :meth:`decode_attention_s`."""
        if sequences < 1:
            return Work()
        memo = self._per_key_work
        if queries not in memo:
            one = cached_attention(self.model, self.plan, 1, 1)  # per attended key
            k = self.model.layers * self.plan.tp
            memo[queries] = (k * one.flops * queries, k * one.bytes)
        f, b = memo[queries]
        return Work(0.0, keys * f, keys * b)

    def _per_key_s(self, queries: int) -> float:
        """Seconds per attended key and layer (memoized per ``queries``)."""
        memo = self._per_key
        if queries not in memo:
            one = cached_attention(self.model, self.plan, 1, 1)  # per attended key
            ap = attention_precision(self.gp, self.system.chip.core)
            memo[queries] = kernel_s(self.system, one.flops * queries, one.bytes, ap)[0] \
                - self.system.chip.kernel_launch_s
        return memo[queries]


def kv_transfer_s(model: Decoder, fabric: Fabric, sender: InferencePlan, receiver: InferencePlan,
                  tokens: int, across_nodes: bool) -> float:
    """Seconds to move one sequence's KV cache of ``tokens`` tokens from the GPUs of a prefill
    replica (``sender``) to those of a decode replica (``receiver``): every GPU sends its
    shard and receives its own at once, so the larger per-GPU share over one point-to-point
    link sets the time (the fabric's :meth:`p2p_s`, within a node or across nodes)."""
    share = max(kv_cache_bytes_per_gpu(model, sender, 1, tokens),
                kv_cache_bytes_per_gpu(model, receiver, 1, tokens))
    return fabric.p2p_s(share, across_nodes)


def kv_swap_s_per_token(model: Decoder, plan: InferencePlan, host_Bps: float) -> float:
    """Seconds per cached token to copy a sequence's KV cache between GPU and host memory,
    every GPU its own shard over its own host link of ``host_Bps`` bytes/s."""
    return kv_cache_bytes_per_gpu(model, plan, 1, 1) / host_Bps
