"""The inference plan and what it puts on one GPU beside the GEMMs: the split of a model over
GPUs, the KV cache each GPU holds and the decode step's attention over it (flash-decoding: one
pass over the cache, its FLOPs at the tensor-core rate or its bytes at perf's fitted streaming
efficiency, plus one kernel's fixed time). :mod:`accelsim.engine.inference` composes passes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelsim.arch import System
from accelsim.bounds import MAX_CHIPS
from accelsim.engine.decoder import Decoder
from accelsim.engine.plan import CP_ALGOS, Plan, check_split, check_tp_in_node
from accelsim.errors import InputError, check_int
from accelsim.perf.gemm import FITTED

#: bytes per cached element by KV-cache dtype
KV_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class InferencePlan:
    """``tp`` tensor-parallel GPUs per stage x ``pp`` stages; ``ep``: 1, or the ``tp`` GPUs
    of a stage hold whole experts instead of slices of every expert (vLLM's
    ``--enable-expert-parallel``); ``kv_dtype`` the KV-cache element type. ``cp``: context
    parallelism for long prompts, ``cp`` ranks placed after the tensor-parallel ones (as
    training's :class:`~accelsim.engine.plan.Plan`): the prefill runs every GEMM and element-wise
    op on ``prompt / cp`` tokens and 1 / cp of the causal attention, the keys and values meeting
    the queries by ``cp_algo`` (:mod:`accelsim.engine.context`, forward only); each rank keeps
    its tokens' KV cache (1 / cp of it), so a decode step runs its GEMMs on every cp rank, its
    attention over each rank's 1 / cp of the cache, and all-gathers the partial outputs."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    kv_dtype: str = "bf16"
    cp: int = 1
    cp_algo: str = "ring"

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "ep", "cp"):
            check_int(f"inference plan {f}", getattr(self, f), 1, MAX_CHIPS)
        if self.cp_algo not in CP_ALGOS:
            raise InputError(f"inference plan cp_algo must be one of {', '.join(CP_ALGOS)}, "
                             f"got {self.cp_algo!r}")
        if self.cp > 1 and self.ep > 1:
            raise InputError(f"cp {self.cp} with ep {self.ep}: context parallelism is modelled "
                             "for tensor / pipeline plans (drop ep)")
        if self.ep not in (1, self.tp):
            raise InputError(f"ep {self.ep} must be 1 or tp ({self.tp}): experts are spread "
                             "over a stage's tensor-parallel GPUs")
        if self.kv_dtype not in KV_BYTES:
            raise InputError(f"kv dtype must be one of {', '.join(KV_BYTES)}, "
                             f"got {self.kv_dtype!r}")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp

    def cp_plan(self, batch: int) -> Plan:
        """Training's plan of one forward pass (a prefill of ``batch`` prompts) with this
        split: what :mod:`accelsim.engine.context` times the KV exchange of."""
        return Plan(tp=self.tp, pp=self.pp, dp=1, micro_batch=batch, global_batch=batch,
                    cp=self.cp, cp_algo=self.cp_algo)

    def check_prompt(self, model: Decoder, prompt: int, batch: int) -> None:
        """Context parallelism's split rules for a prefill of ``prompt`` tokens (training's,
        :meth:`accelsim.engine.plan.Plan.check_model`: two load-balanced chunks per rank,
        Ulysses' heads divisible by cp)."""
        if self.cp == 1:
            return
        if prompt % (2 * self.cp):
            raise InputError(f"cp {self.cp}: prompt {prompt} must be divisible by 2 x cp = "
                             f"{2 * self.cp} (two load-balanced chunks per rank)")
        self.cp_plan(batch).check_model(replace(model, seq=prompt))

    def check(self, model: Decoder, gpus_per_node: int) -> None:
        """The split rules training uses (:func:`accelsim.engine.plan.check_split`,
        :func:`~accelsim.engine.plan.check_tp_in_node`), experts whole under ep = tp."""
        check_split(model, self.tp, self.pp)
        check_tp_in_node(self.tp, gpus_per_node)
        model.check_split(1 if self.ep > 1 else self.tp, self.ep)


@dataclass(frozen=True)
class CachedAttention:
    """One decode step's attention of ``batch`` sequences over a cache of ``context`` tokens:
    ``heads`` query heads, ``kv_heads`` cached heads of ``head_dim`` (``latent``: MLA's
    compressed cache of that many elements per token, shared by all heads)."""

    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    context: int
    kv_bytes: float
    latent: int = 0
    v_dim: int = 0

    @property
    def flops(self) -> float:
        if self.latent:  # absorbed MLA: scores over the latent + rope, values over the latent
            return 2.0 * self.batch * self.heads * self.context * (self.latent + self.v_dim)
        return 4.0 * self.batch * self.heads * self.context * self.head_dim

    @property
    def bytes(self) -> float:
        per_token = self.latent if self.latent else 2 * self.kv_heads * self.head_dim
        return self.batch * self.context * per_token * self.kv_bytes


def cached_attention(model: Decoder, plan: InferencePlan, batch: int, context: int
                     ) -> CachedAttention:
    """The decode attention of one GPU: its ``heads / tp`` query heads over the cache of
    ``context`` tokens (a sliding window keeps at most that many; with context parallelism the
    rank's share, the largest: ``ceil(context / cp)``)."""
    c, t = model.config, plan.tp
    w = c.sliding_window
    ctx = -(-(context if w is None else min(context, w)) // plan.cp)
    kvb = KV_BYTES[plan.kv_dtype]
    if c.mla is not None:
        return CachedAttention(batch, model.heads // t, 1, model.head_dim, ctx, kvb,
                               latent=c.mla.kv_lora_rank + c.mla.qk_rope_head_dim,
                               v_dim=c.mla.kv_lora_rank)
    return CachedAttention(batch, model.heads // t, max(1, model.kv_heads // t), c.head_dim,
                           ctx, kvb)


def kernel_s(system: System, flops: float, nbytes: float, precision: str) -> tuple[float, str]:
    """A fused kernel: its FLOPs at the chip's peak for ``precision`` or its bytes at perf's
    fitted streaming efficiency, whichever is longer, plus the per-kernel fixed time."""
    c = flops / (system.chip.peak_flops(precision) * FITTED.array_efficiency)
    m = nbytes / (system.chip.memory_bandwidth_Bps * FITTED.memory_efficiency)
    return system.chip.kernel_launch_s + max(c, m), "compute" if c > m else "memory"


def kv_cache_bytes_per_gpu(model: Decoder, plan: InferencePlan, batch: int, context: int
                           ) -> float:
    """KV cache of ``batch`` sequences of ``context`` tokens on one GPU of the largest stage
    (with context parallelism its tokens' share, the largest: ``ceil(context / cp)``)."""
    c = model.config
    w = c.sliding_window
    ctx = -(-(context if w is None else min(context, w)) // plan.cp)
    layers = max(sum(s) for s in model.stage_layers(plan.pp))
    if c.mla is not None:
        per_layer = c.mla.kv_lora_rank + c.mla.qk_rope_head_dim
    else:
        per_layer = 2 * max(1, model.kv_heads // plan.tp) * c.head_dim
    return batch * ctx * layers * per_layer * KV_BYTES[plan.kv_dtype]


__all__ = ["KV_BYTES", "InferencePlan", "CachedAttention", "cached_attention", "kernel_s",
           "kv_cache_bytes_per_gpu"]
