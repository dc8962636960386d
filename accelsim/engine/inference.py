"""LLM inference on the one execution model: prefill, decode steps over a KV cache, whole
requests and a batch x context sweep (``accelsim infer``).

A forward pass is the training path's lowering (:mod:`accelsim.engine.decoder`) run once: per
layer the linear GEMMs of ``M`` = the tokens of the pass (prefill: ``B x T``; decode: ``B``),
attention, the element-wise kernels, the tensor-parallel all-reduces (two per layer), the
expert-parallel all-to-alls of MoE layers, and the LM head for each sequence's last token only
(as vLLM and TensorRT-LLM). Every GEMM is perf's one kernel formula (tiles, waves, the weight
stream of a skinny decode GEMM, the per-kernel fixed time).

* **prefill** attention is :class:`~accelsim.engine.graph.AttentionOp` over the prompt (causal),
  timed by the flash kernel model (:class:`accelsim.engine.stack.FlashKernel`);
* **decode** attention (:func:`accelsim.engine.inference_plan.cached_attention`) reads the KV cache of ``context`` tokens in
  one pass (flash-decoding) -- its FLOPs at the tensor-core rate or its bytes at perf's fitted
  streaming efficiency (:data:`accelsim.perf.gemm.FITTED`), plus one kernel's fixed time;
* a layer's element-wise work runs as :data:`ELEMENTWISE_KERNELS` kernels (vLLM's
  ``LlamaDecoderLayer``: two fused residual-add + RMSNorm kernels, the rotary embedding, the
  fused SiLU-and-mul), each its bytes at the same streaming efficiency plus a kernel's time.

Context parallelism (``InferencePlan.cp``) splits a prefill's prompt over cp ranks, the KV
exchange timed by training's forward CommOps (:mod:`accelsim.engine.context`); each rank keeps
its tokens' KV cache. Pipeline stages run one after another for one batch (no decode
micro-batching). Memory per
GPU: weights at the scheme's GEMM operand bytes (block scales included; embeddings and norms
16-bit), the KV cache at ``kv_dtype`` (split over the tensor-parallel ranks by KV head,
replicated when ``kv_heads < tp``; MLA's latent cache whole), plus the reserve (``params.memory_reserve_GiB``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from accelsim.arch import System
from accelsim.arch.model import OPERAND_BYTES
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.engine import decoder
from accelsim.engine import context as context_mod
from accelsim.engine.comm import cp_comm, fabric_of
from accelsim.engine.decoder import Decoder
from accelsim.engine.energy import StepEnergy, step_energy
from accelsim.engine.memory import GIB, memory_fit
from accelsim.engine.inference_plan import (KV_BYTES, InferencePlan, cached_attention,
                                            kernel_s, kv_cache_bytes_per_gpu)
from accelsim.engine.graph import (AttentionOp, Phase, Stream, attention_precision,
                                   flash_attention_parts, gemm_s, gemm_timed)
from accelsim.engine.plan import LlmParams
from accelsim.engine.stack import FlashKernel
from accelsim.engine.trace import Row, Timeline
from accelsim.errors import InputError, check_int
from accelsim.perf.gemm import FITTED
from accelsim.bounds import MAX_DIM
from accelsim.workload.transformer import PositionKind

if TYPE_CHECKING:
    from accelsim.netsim.fabric import Fabric

#: element-wise kernels per decoder layer outside GEMMs and attention (vLLM LlamaDecoderLayer:
#: input and post-attention fused_add_rms_norm, rotary_emb, SiluAndMul); rotary adds one
ELEMENTWISE_KERNELS = 3


@dataclass(frozen=True)
class OpCost:
    op: str
    time_s: float
    flops: float
    bytes: float
    bound: str
    stream: Stream = Stream.COMPUTE


def _layer(model: Decoder, moe: bool, system: System, fabric: Fabric, plan: InferencePlan,
           gp: str, batch: int, new_tokens: int, context: int) -> list[OpCost]:
    """One layer's ops on one GPU for ``batch`` sequences each adding ``new_tokens`` tokens
    (prefill: the prompt; decode: 1) to a cache of ``context`` tokens (decode)."""
    t, ep = plan.tp, plan.ep
    T = batch * new_tokens // plan.cp if new_tokens > 1 else batch  # a cp rank's prompt share
    out: list[OpCost] = []
    etp = 1 if ep > 1 else t
    for g in decoder.layer_gemms(model, moe, T, t, ep, gp, etp=etp, group_tokens=T):
        gt = gemm_timed(system, g.m, g.n, g.k, g.precision, g.count)
        out.append(OpCost(g.name, gemm_s(system, g), g.flops, g.bytes, gt.bound))
    ap = attention_precision(gp, system.chip.core)
    kv = model.kv_heads
    if new_tokens > 1:  # prefill: flash attention over the prompt
        attn = AttentionOp(batch=batch, heads=model.heads // t, seq=new_tokens,
                           head_dim=model.head_dim, kv_heads=max(1, kv // t), flash=True,
                           precision=ap, window=model.window, alibi=model.alibi)
        bw = system.chip.memory_bandwidth_Bps * FITTED.memory_efficiency
        attn, mul, div = context_mod.rank_attention(attn, plan.cp, plan.cp_algo)
        f, _, bound = flash_attention_parts(system, attn, FlashKernel(), bw)
        f = f * mul / div
        out.append(OpCost("attention", f, attn.flops * mul / div, attn.bytes * mul / div, bound))
        if plan.cp > 1:  # the KV exchange, forward only: training's CommOps and overlap
            ops = cp_comm(replace(model, seq=new_tokens), plan.cp_plan(batch), fabric, ap, f,
                          0.0)[0]
            fwd = [(o, sec) for o, sec in ops if o.phase == Phase.FWD]
            out.append(OpCost("cp_comm", sum(sec for _, sec in fwd), 0.0,
                              sum(o.bytes for o, _ in fwd), "comm", Stream.CP))
    else:
        ca = cached_attention(model, plan, batch, context)
        s, bound = kernel_s(system, ca.flops, ca.bytes, ap)
        out.append(OpCost("attention", s, ca.flops, ca.bytes, bound))
        if plan.cp > 1:  # partial outputs and their log-sum-exp (fp32) all-gathered over cp
            part = batch * model.heads // t * (model.v_head_dim + 1) * 4.0
            ag = fabric.collective_s("all-gather", plan.cp * part, plan.cp, t)
            out.append(OpCost("cp_comm", ag, 0.0, (plan.cp - 1) * part, "comm", Stream.CP))
    ew = decoder.elementwise_bytes(model, moe, T, t, False, (), "bf16")
    kernels = ELEMENTWISE_KERNELS + (model.config.positions is PositionKind.ROTARY)
    s = kernels * system.chip.kernel_launch_s + ew / (
        system.chip.memory_bandwidth_Bps * FITTED.memory_efficiency)
    out.append(OpCost("elementwise", s, 0.0, ew, "memory"))
    red = T * model.hidden * 2  # a 16-bit s x b x h activation
    ar = fabric.collective_s("all-reduce", red, t, 1)
    if ar:
        out.append(OpCost("tp_comm", 2 * ar, 0.0, 2 * red, "comm", Stream.TP))
    if moe and ep > 1:
        elems = decoder.a2a_elements(model, T, ep)
        a2a = 2 * fabric.all_to_all_s(2 * elems, ep, 1)
        out.append(OpCost("all_to_all", a2a, 0.0, 4 * elems, "comm", Stream.TP))
    return out


@dataclass(frozen=True)
class PassTime:
    """One forward pass (a prefill or a decode step) over every layer on the critical path."""

    kind: str  # "prefill", "decode" or "decode steps" (a request's)
    layers: tuple[tuple[int, tuple[OpCost, ...]], ...]  # (count, ops of one such layer)
    head: tuple[OpCost, ...]
    p2p_s: float
    steps: int = 1  # passes the op costs add up (a request's decode steps: their totals)
    p2p_bytes: float = 0.0  # activations sent between pipeline stages (per GPU, all steps)

    @property
    def time_s(self) -> float:
        return (sum(n * o.time_s for n, ops in self.layers for o in ops)
                + sum(o.time_s for o in self.head) + self.p2p_s)

    def rows(self) -> list[Row]:
        """One row per op of each layer kind, the head and the sends: in series, summing to
        :attr:`time_s`."""
        k = self.steps
        out = []
        for n, ops in self.layers:
            for o in ops:
                out.append(Row(f"{self.kind} x{n} layers", o.op, Phase.FWD, 0, n * k,
                               n * o.time_s, n * o.time_s, n * o.flops, n * o.bytes, o.bound,
                               o.stream))
        for o in self.head:
            out.append(Row(f"{self.kind} head", o.op, Phase.FWD, 0, k, o.time_s, o.time_s,
                           o.flops, o.bytes, o.bound, o.stream))
        if self.p2p_s:
            out.append(Row(self.kind, "p2p", Phase.FWD, 0, k, self.p2p_s, self.p2p_s, 0.0,
                           self.p2p_bytes, "comm", Stream.PP))
        return out


def forward_pass(model: Decoder, system: System, fabric: Fabric, plan: InferencePlan,
                 gp: str, batch: int, new_tokens: int, context: int = 0) -> PassTime:
    """Time of one forward pass of ``batch`` sequences adding ``new_tokens`` each."""
    n_moe = model.config.n_moe_layers
    kinds = []
    if model.layers - n_moe:
        kinds.append((model.layers - n_moe, tuple(_layer(model, False, system, fabric, plan, gp,
                                                         batch, new_tokens, context))))
    if n_moe:
        kinds.append((n_moe, tuple(_layer(model, True, system, fabric, plan, gp, batch,
                                          new_tokens, context))))
    head = decoder.head_op(model, batch, plan.tp, gp)
    ht = gemm_timed(system, head.m, head.n, head.k, head.precision, head.count)
    heads = (OpCost("lm_head", gemm_s(system, head), head.flops, head.bytes, ht.bound),)
    act = batch * (new_tokens // plan.cp if new_tokens > 1 else 1) * model.hidden * 2
    across = plan.gpus > fabric.gpus_per_node
    p2p = (plan.pp - 1) * fabric.p2p_s(act, across) if plan.pp > 1 else 0.0
    return PassTime("prefill" if new_tokens > 1 else "decode", tuple(kinds), heads, p2p,
                    p2p_bytes=(plan.pp - 1) * act if plan.pp > 1 else 0.0)


def weight_bytes_per_gpu(model: Decoder, plan: InferencePlan, gp: str) -> float:
    """Weights of the largest pipeline stage on one GPU: linear weight matrices at the GEMM
    operand bytes (block scales included), the rest (embeddings, norms, biases) 16-bit."""
    t = plan.tp
    wb = OPERAND_BYTES[gp]
    best = 0.0
    for i, (dense, moe) in enumerate(model.stage_layers(plan.pp)):
        nbytes = 0.0
        for count, is_moe in ((dense, False), (moe, True)):
            if not count:
                continue
            split, split_lin, rep_lin, expert, total = model.layer_param_split(is_moe)
            lin = split_lin / t + rep_lin + expert / t  # experts: sliced or whole, 1/t each
            other = split / t + (total - split - expert) - split_lin / t - rep_lin
            nbytes += count * (lin * wb + max(other, 0.0) * 2)
        h = model.hidden
        if i == 0:
            nbytes += (model.vocab * h / t + model.n_positions * h) * 2
        if i == plan.pp - 1:
            head = 0 if model.config.tied_embeddings else model.vocab * h / t
            nbytes += head * wb + model.config.head_ops()[0].params * 2
        best = max(best, nbytes)
    return best


@dataclass(frozen=True)
class InferenceResult:
    model: Decoder
    plan: InferencePlan
    scheme: str
    batch: int
    prefill: PassTime | None
    decode: PassTime | None  # the step at --context
    prompt: int
    context: int
    output_tokens: int
    request_latency_s: float | None
    weights_bytes: float
    kv_cache_bytes: float
    reserve_bytes: float
    prefill_energy: StepEnergy | None = None  # None: no pass, or no power model
    power_model: bool = False  # each pass timed at its power-limited clock (--power-model)
    decode_energy: StepEnergy | None = None
    prefill_clock_MHz: float | None = None  # the passes' clocks (None: the preset's fixed one)
    decode_clock_MHz: float | None = None
    request_steps: PassTime | None = None  # a request's decode steps after its prefill
    memory_capacity_bytes: float | None = None  # one GPU's (fits_memory compares with it)

    @property
    def memory_GiB_per_gpu(self) -> float:
        return (self.weights_bytes + self.kv_cache_bytes + self.reserve_bytes) / GIB

    def as_dict(self) -> dict:
        d: dict = {"model": self.model.name, "params": self.model.n_params,
                   "active_params": self.model.n_active_params, "scheme": self.scheme,
                   "batch": self.batch, "tp": self.plan.tp, "pp": self.plan.pp,
                   "ep": self.plan.ep, "cp": self.plan.cp, "cp_algo": self.plan.cp_algo,
                   "gpus": self.plan.gpus, "kv_dtype": self.plan.kv_dtype,
                   "power_model": self.power_model}
        if self.power_model:
            d.update(prefill_clock_MHz=self.prefill_clock_MHz,
                     decode_clock_MHz=self.decode_clock_MHz)
        if self.prefill is not None:
            d.update(prompt_tokens=self.prompt, prefill_s=self.prefill.time_s,
                     time_to_first_token_s=self.prefill.time_s,
                     prefill_tokens_per_s=self.batch * self.prompt / self.prefill.time_s)
        if self.decode is not None:
            d.update(context_tokens=self.context, decode_step_s=self.decode.time_s,
                     decode_tokens_per_s=self.batch / self.decode.time_s)
        # energy keys whenever the pass ran: null without a power model (as llm's)
        for name, p, e in (("prefill", self.prefill, self.prefill_energy),
                           ("decode_step", self.decode, self.decode_energy)):
            if p is not None:
                d[f"{name}_energy_J"] = None if e is None else e.energy_J  # all GPUs
                d[f"{name}_power_W_per_gpu"] = None if e is None else e.power_W
        if self.decode is not None:
            d["energy_J_per_output_token"] = None if self.decode_energy is None else \
                self.decode_energy.energy_J / self.batch
        if self.request_latency_s is not None:
            d.update(output_tokens=self.output_tokens, request_latency_s=self.request_latency_s,
                     end_to_end_tokens_per_s=self.batch * self.output_tokens
                     / self.request_latency_s)
        d.update(kv_cache_GiB=self.kv_cache_bytes / GIB, weights_GiB=self.weights_bytes / GIB,
                 memory_reserve_GiB=self.reserve_bytes / GIB,
                 memory_GiB_per_gpu=self.memory_GiB_per_gpu,
                 **memory_fit(self.memory_GiB_per_gpu * GIB, self.memory_capacity_bytes))
        return d

    def passes(self) -> list[PassTime]:
        """What the breakdown and the trace show, in order: a request's prefill and decode
        steps (they sum to its latency), else the prefill and the decode step at the context."""
        if self.request_latency_s is not None:
            return [p for p in (self.prefill, self.request_steps) if p is not None]
        return [p for p in (self.prefill, self.decode) if p is not None]

    def rows(self) -> list[Row]:
        return [r for p in self.passes() for r in p.rows()]

    def timeline(self) -> Timeline:
        """The trace: the rows one after another (the passes run in series)."""
        tl = Timeline()
        for r in self.rows():
            tl.run(f"{r.layer} {r.op}", r.time_s, r.stream)
        return tl


def infer(model: Decoder | object, system: System, plan: InferencePlan, scheme: Scheme | str,
          batch: int, *, prompt: int | None = None, context: int | None = None,
          output_tokens: int | None = None,
          params: LlmParams = LlmParams(memory_reserve_GiB=0.0)) -> InferenceResult:
    """Prefill of ``batch`` prompts of ``prompt`` tokens, one decode step over a cache of
    ``context`` tokens, and with ``prompt`` and ``output_tokens`` the whole request (the
    cache growing from ``prompt`` to ``prompt + output_tokens - 1``, each step timed). With the
    chip's power model enforced (``--power-model``), the prefill and the decode steps each run
    at the highest SM clock whose average power stays within the limit (a serving engine
    repeats each; :mod:`accelsim.engine.limiter`). ``params``: the fabric's and the stack's
    parameters; its ``memory_reserve_GiB`` is counted in the memory per GPU (default 0: weights
    and KV cache alone)."""
    model = Decoder.of(model)
    if prompt is None and context is None:
        raise InputError("give a prompt length (prefill) or a context length (decode), or both")
    for name, v in (("batch", batch), ("prompt", prompt), ("context", context),
                    ("output_tokens", output_tokens)):
        if v is not None:  # token counts are tensor dimensions (the KV length of attention)
            check_int(name, v, 1, MAX_DIM)
    if output_tokens is not None and prompt is not None and prompt + output_tokens > MAX_DIM:
        raise InputError(f"prompt {prompt:,} + output_tokens {output_tokens:,} tokens: at most "
                         f"{MAX_DIM:,} in a sequence (the KV length is a tensor dimension)")
    if output_tokens is not None and prompt is None:
        raise InputError("output tokens need a prompt length (the request starts with it)")
    if batch * (prompt or 1) > MAX_DIM:
        raise InputError(f"batch {batch:,} x {prompt or 1:,} new tokens = "
                         f"{batch * (prompt or 1):,} tokens in one pass: at most {MAX_DIM:,} "
                         "(a GEMM dimension)")
    plan.check(model, system.chips)
    if prompt is not None:
        plan.check_prompt(model, prompt, batch)
    power = system.chip.power
    if power is not None and power.enforced:
        return _power_limited(model, system, plan, scheme, batch, prompt, context,
                              output_tokens, params)
    sc = get_scheme(scheme)
    gp = sc.compute_precision
    fabric = fabric_of(system, params)
    pre = forward_pass(model, system, fabric, plan, gp, batch, prompt, prompt) if prompt \
        else None
    dec = forward_pass(model, system, fabric, plan, gp, batch, 1, context) if context else None
    latency = steps = None
    if output_tokens is not None:
        if output_tokens > 1:
            steps = decode_steps(model, system, fabric, plan, gp, batch, prompt,
                                 output_tokens - 1)
        latency = pre.time_s + (steps.time_s if steps else 0.0)
    ctx_mem = max(context or 0, (prompt or 0) + (output_tokens or 0))

    def energy(p: PassTime | None) -> StepEnergy | None:  # sends between stages: link bytes
        rows = [] if p is None else [r for r in p.rows() if r.stream != Stream.PP]
        return None if p is None else step_energy(system, rows, gp, p.time_s, plan.gpus,
                                                plan.tp * plan.cp)

    return InferenceResult(
        model=model, plan=plan, scheme=sc.name, batch=batch, prefill=pre, decode=dec,
        prompt=prompt or 0, context=context or 0, output_tokens=output_tokens or 0,
        request_latency_s=latency, weights_bytes=weight_bytes_per_gpu(model, plan, gp),
        kv_cache_bytes=kv_cache_bytes_per_gpu(model, plan, batch, ctx_mem),
        reserve_bytes=params.memory_reserve_GiB * GIB, prefill_energy=energy(pre),
        decode_energy=energy(dec), request_steps=steps,
        memory_capacity_bytes=float(system.chip.memory_capacity_bytes))


def _power_limited(model, system: System, plan: InferencePlan, scheme, batch: int,
                   prompt: int | None, context: int | None, output_tokens: int | None,
                   params: LlmParams) -> InferenceResult:
    """:func:`infer` with each pass at its own power-limited clock: the prefill at the clock its
    average power allows, the decode step at ``context`` at its own, and a request's decode
    steps at the clock of its first (the cache at ``prompt + 1``: decode steps are
    memory-bound, their clock barely moves as the cache grows). Memory and the other fields
    are the passes' own (they do not depend on the clock)."""
    from accelsim.engine.limiter import at_power_limit, free_running
    from accelsim.perf.power import system_at_clock

    def run(s: System, **kw) -> InferenceResult:
        return infer(model, s, plan, scheme, batch, params=params, **kw)

    pre = f_pre = None
    if prompt is not None:
        pre, f_pre = at_power_limit(system, lambda s: (r := run(s, prompt=prompt),
                                                       r.prefill_energy))
    dec = f_dec = None
    if context is not None:
        dec, f_dec = at_power_limit(system, lambda s: (r := run(s, context=context),
                                                       r.decode_energy))
    f_req = None
    if output_tokens is not None:  # the request's decode steps: at the clock of its own steps
        _, f_req = at_power_limit(system, lambda s: (r := run(s, context=prompt + 1),
                                                     r.decode_energy))
    clock = next(f for f in (f_req, f_dec, f_pre) if f is not None)
    whole = run(system_at_clock(free_running(system), clock), prompt=prompt, context=context,
                output_tokens=output_tokens)
    latency = None if output_tokens is None else \
        pre.prefill.time_s + whole.request_latency_s - whole.prefill.time_s
    return replace(whole, prefill=pre.prefill if pre else None,
                   prefill_energy=pre.prefill_energy if pre else None,
                   decode=dec.decode if dec else None,
                   decode_energy=dec.decode_energy if dec else None,
                   request_latency_s=latency, power_model=True,
                   prefill_clock_MHz=None if f_pre is None else f_pre / 1e6,
                   decode_clock_MHz=next((f / 1e6 for f in (f_dec, f_req) if f is not None),
                                         None))


def decode_steps(model: Decoder, system: System, fabric: Fabric, plan: InferencePlan,
                 gp: str, batch: int, prompt: int, steps: int) -> PassTime:
    """``steps`` decode steps after a prefill of ``prompt`` tokens (the first token comes from
    the prefill) as one :class:`PassTime` of their totals: step ``i`` attends ``prompt + i + 1``
    cached tokens. Only the attention depends on the context, and its FLOPs and bytes are both
    proportional to it, so its sum over the steps is closed form (the attended keys summed as
    an arithmetic series, capped by a sliding window): O(1) at any output length."""
    first = forward_pass(model, system, fabric, plan, gp, batch, 1, prompt + 1)
    one = cached_attention(model, plan, batch, 1)  # per attended key
    ap = attention_precision(gp, system.chip.core)
    per_key = kernel_s(system, one.flops, one.bytes, ap)[0] - system.chip.kernel_launch_s
    lo, hi = prompt + 1, prompt + steps  # contexts of the steps
    w = model.config.sliding_window
    if w is None or w >= hi:
        keys = (lo + hi) * steps // 2
    elif w <= lo:
        keys = w * steps
    else:
        keys = (lo + w) * (w - lo + 1) // 2 + w * (hi - w)
    if plan.cp > 1:  # each cp rank attends its share of the cache
        keys = keys / plan.cp

    def total(o: OpCost) -> OpCost:
        if o.op != "attention":
            return replace(o, time_s=steps * o.time_s, flops=steps * o.flops,
                           bytes=steps * o.bytes)
        return replace(o, time_s=steps * system.chip.kernel_launch_s + per_key * keys,
                       flops=one.flops * keys, bytes=one.bytes * keys)

    return PassTime("decode steps", tuple((n, tuple(total(o) for o in ops))
                                          for n, ops in first.layers),
                    tuple(total(o) for o in first.head), steps * first.p2p_s, steps,
                    steps * first.p2p_bytes)
