"""The front door of request-level serving (``accelsim.serve`` and ``accelsim serve``): the
deployment (model, system, parallel plan, scheme, engine limits, overheads) is resolved and
checked once into a :class:`Deployment`, the request stream is made, the simulation runs and the
metrics are read from its event log. A sweep over request rates reuses one deployment (and its
memoized iteration times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from accelsim.arch import System
from accelsim.arch.schemes import get_scheme
from accelsim.bounds import MAX_SEED, PLAUSIBLE, check_number
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import InferencePlan, kv_cache_bytes_per_gpu
from accelsim.engine.comm import fabric_of
from accelsim.engine.energy import StepEnergy, Work, work_energy
from accelsim.engine.iteration import IterationCost, kv_swap_s_per_token, kv_transfer_s
from accelsim.engine.limiter import at_power_limit
from accelsim.engine.memory import GIB
from accelsim.engine.plan import LlmParams
from accelsim.errors import InputError, check_int
from accelsim.serving import arrivals as arr
from accelsim.serving.costs import SpecDecode, StepTimer
from accelsim.serving.metrics import request_table, summary, window_energy
from accelsim.serving.policy import BLOCK_TOKENS, REQUEST_OVERHEAD_S, kv_capacity_tokens
from accelsim.errors import choose
from accelsim.serving.scheduler import BatchLimits, HostOffload, Preemption, PrefixCache
from accelsim.serving.sim import EventLog, Pool, simulate
from accelsim.workload.transformer import TransformerConfig

#: largest per-iteration or per-request host overhead (seconds)
MAX_OVERHEAD_S = 10.0
#: most host memory per GPU for offloaded KV blocks (GiB)
MAX_HOST_KV_GIB = 1e6
MAX_REPLICAS = 4096


def _seconds(name: str, v: float | None, *, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            and 0 <= v <= MAX_OVERHEAD_S):
        raise InputError(f"{name} must be seconds in [0, {MAX_OVERHEAD_S:g}], got {v!r}")
    return float(v)


def draft_model(model: Decoder, draft: str | Path) -> Decoder:
    """The draft of speculative decoding: ``mtp`` (one more decoder layer of the target and its
    LM head, DeepSeek-V3's multi-token-prediction module) or a model as ``infer`` takes it."""
    from accelsim.llm.inference import inference_model

    if str(draft) == "mtp":
        cfg = model.config
        moe = None if cfg.moe is None else replace(cfg.moe, first_dense_layers=0)
        one = replace(cfg, name=f"{cfg.name}-mtp", layers=1, moe=moe)
        return Decoder(one, cfg.seq, causal=True, flash_attention=True)
    return inference_model(draft)


@dataclass(frozen=True)
class PrefillPool:
    """Disaggregated serving's prefill side: ``replicas`` replicas on ``plan`` GPUs each that
    only prefill, then move each request's KV cache to the decode replicas."""

    plan: InferencePlan
    replicas: int

    def __post_init__(self) -> None:
        check_int("prefill replicas", self.replicas, 1, MAX_REPLICAS)


@dataclass(frozen=True)
class Deployment:
    """One serving deployment: ``replicas`` copies of ``model`` on ``plan`` GPUs each (with
    ``prefill``: the decode replicas, the prompts prefilled on the prefill pool's)."""

    system: System
    model: Decoder
    plan: InferencePlan
    scheme: str
    limits: BatchLimits = BatchLimits()
    replicas: int = 1
    host_overhead_s: float = 0.0  # per iteration
    request_overhead_s: float = REQUEST_OVERHEAD_S  # per request, before it is queued (fitted)
    spec: SpecDecode | None = None
    draft: Decoder | None = None
    expert_skew: float = 1.0
    memory_reserve_GiB: float = 0.0
    prefill: PrefillPool | None = None
    prefix_cache: PrefixCache | None = None
    kv_offload: bool = False  # preemption by swap to host memory (False: recompute)
    host_kv_GiB: float | None = None  # host memory per GPU for it (None: no limit)
    #: the stream runs at the clock its average power allows (the chip's power table, the
    #: default); False: every iteration at the preset's fixed clock (``--clock boost``)
    power_limited: bool = False

    def __post_init__(self) -> None:
        check_int("replicas", self.replicas, 1, MAX_REPLICAS)
        if self.kv_offload and self.system.chip.host_link_Bps is None:
            raise InputError(f"KV offload (swap preemption) copies over the chip's host link: "
                             f"{self.system.name} sets no [chip] host_link_GBps (add it to "
                             "the system file, or give host_link_GBps / --host-link-GBps)")
        if self.host_kv_GiB is not None:
            if not self.kv_offload:
                raise InputError("host_kv_GiB is for KV offload (preemption='swap', "
                                 "--kv-offload)")
            check_number("host_kv_GiB", self.host_kv_GiB, 0.0, MAX_HOST_KV_GIB, lo_open=True)
        for p in (self.plan, self.prefill.plan if self.prefill else None):
            if p is not None and p.cp > 1:  # a long-prompt prefill's split (accelsim infer)
                raise InputError(f"serving with context parallelism (cp {p.cp}) is not "
                                 "modelled: use tp / pp, or accelsim infer --cp for one prefill")
        _seconds("host_overhead_s", self.host_overhead_s)
        _seconds("request_overhead_s", self.request_overhead_s)

    @property
    def gp(self) -> str:
        return get_scheme(self.scheme).compute_precision

    @property
    def gpus(self) -> int:
        return self.plan.gpus * self.replicas + (
            0 if self.prefill is None else self.prefill.plan.gpus * self.prefill.replicas)

    def kv_tokens(self, plan: InferencePlan | None = None) -> int:
        """KV-cache tokens of one replica on ``plan`` (default: the decode plan)."""
        return kv_capacity_tokens(self.model, self.system, plan or self.plan, self.gp,
                                  self.memory_reserve_GiB)

    @property
    def params(self) -> LlmParams:
        return LlmParams(memory_reserve_GiB=self.memory_reserve_GiB)

    def timer(self, plan: InferencePlan | None = None, decode: bool = True) -> StepTimer:
        """Iteration times on ``plan`` (default the decode plan); the draft only where
        sequences decode."""
        plan = plan or self.plan
        cost = IterationCost(self.model, self.system, plan, self.gp, self.params,
                             skew=self.expert_skew)
        spec = self.spec if decode else None
        # the draft runs on one stage (an MTP module sits on the last)
        draft = None if self.draft is None or not decode else IterationCost(
            self.draft, self.system, replace(plan, pp=1), self.gp, self.params)
        return StepTimer(cost, self.host_overhead_s, spec, draft)

    def pools(self, timers: tuple[StepTimer, ...] | None = None) -> tuple[Pool, ...]:
        """The lanes the simulation runs: one pool, or the prefill pool and the decode pool
        (a replica of ``pp`` stages: ``pp`` lanes, each a ``1/pp`` share of its KV cache)."""
        sides = [(self.plan, self.replicas, False)]
        if self.prefill is not None:
            sides.insert(0, (self.prefill.plan, self.prefill.replicas, True))
        timers = timers or tuple(self.timer(p, decode=not only) for p, _, only in sides)
        out = []
        for (plan, n, only), timer in zip(sides, timers):
            lane_kv = self.kv_tokens(plan) // plan.pp // BLOCK_TOKENS * BLOCK_TOKENS
            off = self.host_offload(plan) if self.kv_offload else None
            out.append(Pool(timer, self.limits, lane_kv, n, plan.pp, only, self.prefix_cache,
                            off))
        return tuple(out)

    def host_offload(self, plan: InferencePlan) -> HostOffload:
        """KV offload on ``plan``'s GPUs: each copies its shard of a token over its own host
        link; ``host_kv_GiB`` per GPU holds that many tokens' shards, split among the replica's
        ``pp`` lanes."""
        per_gpu = kv_cache_bytes_per_gpu(self.model, plan, 1, 1)
        cap = None if self.host_kv_GiB is None else \
            int(self.host_kv_GiB * GIB // per_gpu) // plan.pp
        return HostOffload(kv_swap_s_per_token(self.model, plan,
                                               self.system.chip.host_link_Bps),
                           per_gpu * plan.gpus, cap)

    def energy(self, time_s: float, work: Work) -> StepEnergy | None:
        """Energy of ``time_s`` of every GPU of the deployment doing ``work`` (the power
        model's, at the clock the iterations are timed at; None without one)."""
        return work_energy(self.system, self.gp, time_s, self.gpus, work)

    def transfer(self):
        """Seconds to move a sequence's KV cache of n tokens, prefill to decode (None:
        aggregated serving)."""
        if self.prefill is None:
            return None
        fabric = fabric_of(self.system, self.params)
        across = self.gpus > fabric.gpus_per_node
        sender, receiver = self.prefill.plan, self.plan
        cache: dict[int, float] = {}

        def seconds(tokens: int) -> float:
            if tokens not in cache:
                cache[tokens] = kv_transfer_s(self.model, fabric, sender, receiver, tokens,
                                              across)
            return cache[tokens]

        return seconds


@dataclass(frozen=True)
class ServeResult:
    """A run: the summary (``as_dict()``: the ``--json`` keys), one row per request and the
    event log (iterations)."""

    deployment: Deployment
    metrics: dict
    requests: pd.DataFrame
    log: EventLog

    def as_dict(self) -> dict:
        d = self.deployment
        pre = d.prefill
        return {"model": d.model.name, "scheme": d.scheme, "tp": d.plan.tp, "pp": d.plan.pp,
                "ep": d.plan.ep, "replicas": d.replicas, "gpus": d.gpus,
                "disagg": None if pre is None else f"{pre.replicas}x{d.replicas}",
                "prefill_tp": None if pre is None else pre.plan.tp,
                "kv_dtype": d.plan.kv_dtype, "kv_cache_tokens_per_replica": d.kv_tokens(),
                "max_batch": d.limits.max_batch,
                "max_batched_tokens": d.limits.max_batched_tokens,
                "chunked_prefill": d.limits.chunked_prefill,
                "host_overhead_s": d.host_overhead_s + d.request_overhead_s,
                "host_overhead_s_per_iteration": d.host_overhead_s,
                "host_overhead_s_per_request": d.request_overhead_s,
                "spec_decode_tokens": 0 if d.spec is None else d.spec.k,
                "accept_rate": None if d.spec is None else d.spec.accept_rate,
                "expert_skew": d.expert_skew,
                "prefix_cache": d.prefix_cache is not None,
                "preemption": "swap" if d.kv_offload else "recompute",
                "host_link_GBps": d.system.chip.host_link_Bps / 1e9 if d.kv_offload else None,
                "host_kv_GiB": d.host_kv_GiB,
                "prefix_hit_rate": None if d.prefix_cache is None else d.prefix_cache.hit_rate,
                **self.metrics}


def run(dep: Deployment, requests: tuple[arr.Request, ...], seed: int = 0,
        slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
        pools: tuple[Pool, ...] | None = None) -> ServeResult:
    """Simulate ``requests`` on ``dep`` (``pools``: ``dep.pools()`` to reuse, with their
    memoized iteration times)."""
    check_int("seed", seed, 0, MAX_SEED)
    slo_ttft_s = _positive("slo_ttft_s", slo_ttft_s)
    slo_tpot_s = _positive("slo_tpot_s", slo_tpot_s)
    for plan in (dep.plan,) if dep.prefill is None else (dep.prefill.plan, dep.plan):
        if dep.kv_tokens(plan) // plan.pp < BLOCK_TOKENS:
            raise InputError(f"{dep.model.name} on {dep.system.name} (tp {plan.tp}, pp "
                             f"{plan.pp}): the weights leave no GPU memory for a KV cache")

    def once(d: Deployment, reuse: tuple[Pool, ...] | None = None):
        rng = np.random.default_rng([seed, 1])  # the acceptance draws; the stream has its own
        log = simulate(requests, reuse or d.pools(), rng, d.request_overhead_s, d.transfer())
        table = request_table(log)
        m = summary(log, table, d.gpus, slo_ttft_s, slo_tpot_s, d.energy)
        return ServeResult(d, m, table, log), window_energy(log, table, d.energy)

    if dep.power_limited:
        # the limiter's window (~1 s) holds many iterations: the stream's measured window is
        # what the limit applies to, every iteration at the one clock found (the top clock
        # when the window's average is within the limit: one run). ``pools`` were timed at
        # the preset's clock, so every trial builds its own.
        result, _ = at_power_limit(dep.system, lambda s: once(replace(dep, system=s)))
    else:
        result, _ = once(dep, pools)
    clock = result.deployment.system.chip.core.frequency_Hz
    return replace(result, metrics={**result.metrics, "clock_MHz": clock / 1e6})


def _positive(name: str, v: float | None) -> float | None:
    if v is None:
        return None
    if not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            and v > 0):
        raise InputError(f"{name} must be a positive number of seconds, got {v!r}")
    return float(v)


def stream(rate: float, requests: int, lengths: arr.Lengths, seed: int = 0,
           burstiness: float = 1.0) -> tuple[arr.Request, ...]:
    """The synthetic request stream of ``seed``."""
    check_int("seed", seed, 0, MAX_SEED)
    return arr.generate(rate, requests, lengths, np.random.default_rng([seed, 0]), burstiness)


def sweep(dep: Deployment, rates: tuple[float, ...], requests: int, lengths: arr.Lengths,
          seed: int = 0, burstiness: float = 1.0, slo_ttft_s: float | None = None,
          slo_tpot_s: float | None = None, progress: bool = False,
          out: str | Path | None = None) -> pd.DataFrame:
    """One row of metrics per request rate (the same seed at each), one deployment. ``out``
    (a CSV) is a journal: each rate's row is appended as it finishes, and a rerun with the same
    settings skips the rates already there (a journal of other settings is refused)."""
    import hashlib

    from tqdm import tqdm

    key = hashlib.sha256(repr((dep, requests, lengths, seed, burstiness, slo_ttft_s,
                               slo_tpot_s)).encode()).hexdigest()[:16]
    done = _journal(out, key)
    pools = dep.pools()
    rows = []
    for rate in tqdm(rates, desc="serve rates", unit="rate", disable=not progress):
        if rate in done:
            rows.append(done[rate])
            continue
        r = run(dep, stream(rate, requests, lengths, seed, burstiness), seed, slo_ttft_s,
                slo_tpot_s, pools)
        rows.append({"rate_requests_per_s": rate, **r.as_dict(), "settings": key})
        if out is not None:
            pd.DataFrame(rows[-1:]).to_csv(out, mode="a", index=False, float_format="%.10g",
                                           header=not Path(out).exists())
    return pd.DataFrame(rows)


def _journal(out: str | Path | None, key: str) -> dict[float, dict]:
    """The rows of a rate sweep's journal ``out`` written with the settings ``key``, by rate."""
    if out is None or not Path(out).exists():
        return {}
    try:
        old = pd.read_csv(out)
    except (OSError, ValueError) as exc:
        raise InputError(f"{out}: not a serve --rates table ({exc})") from None
    if "settings" not in old or "rate_requests_per_s" not in old:
        raise InputError(f"{out}: not a serve --rates table (no settings / rate columns)")
    if (old["settings"].astype(str) != key).any():
        raise InputError(f"{out} holds a sweep of other settings: delete it or choose another "
                         "--out to start this one")
    old = old.astype(object).where(old.notna(), None)
    return {float(r["rate_requests_per_s"]): r for r in old.to_dict("records")}


def serve(system: System, model: str | Path | TransformerConfig | Decoder, scheme: str, *,
          rate: float | None = None, requests: int = 1000, input_tokens: int | None = None,
          output_tokens: int | None = None, lengths: str | Path | None = None,
          arrivals: str | Path | None = None, burstiness: float = 1.0, seed: int = 0,
          tp: int = 1, pp: int = 1, ep: int = 1, replicas: int = 1, kv_cache: str = "bf16",
          max_batch: int = 256, max_batched_tokens: int = 8192, chunked_prefill: bool = False,
          host_overhead_s: float = 0.0, request_overhead_s: float = REQUEST_OVERHEAD_S,
          spec_decode: int = 0, accept_rate: float | None = None, draft: str = "mtp",
          expert_skew: float = 1.0, slo_ttft_s: float | None = None,
          slo_tpot_s: float | None = None, memory_reserve_GiB: float = 0.0,
          disagg: tuple[int, int] | None = None, prefill_tp: int | None = None,
          prefix_cache: bool = False, prefix_hit_rate: float | None = None,
          preemption: str = "recompute", host_link_GBps: float | None = None,
          host_kv_GiB: float | None = None) -> ServeResult:
    """Request-level serving simulation, as ``accelsim serve`` runs it (docs/serve.md): a
    stream of ``requests`` at ``rate`` requests/s (gamma inter-arrivals of shape
    ``burstiness``; 1: Poisson) of fixed ``input_tokens`` / ``output_tokens`` or lengths drawn
    from ``lengths`` (a CSV/JSONL file or ``conversation``), or a recorded stream
    (``arrivals``); ``replicas`` copies of ``model`` on ``tp`` x ``pp`` GPUs each, continuous
    batching within ``max_batch`` sequences and ``max_batched_tokens`` tokens per iteration
    (``chunked_prefill``: mixed batches), a paged KV cache from the memory account with
    preemption, ``host_overhead_s`` per iteration and ``request_overhead_s`` per request (default
    the fitted :data:`~accelsim.serving.policy.REQUEST_OVERHEAD_S`; 0 turns it off);
    ``spec_decode`` K draft tokens accepted with probability ``accept_rate`` each (``draft``:
    ``mtp`` or a model); ``expert_skew`` the MoE routing imbalance; ``disagg`` ``(P, D)``:
    P prefill replicas on ``prefill_tp`` GPUs (default ``tp``) and D decode replicas on
    ``tp``, the KV cache moved between them over the system's fabric; ``prefix_cache``: prompts
    start from their cached prefix (the arrivals' ``prefix`` ids, or ``prefix_hit_rate`` of
    every prompt); ``preemption`` ``recompute`` or ``swap`` (KV offload: the KV cache to host
    memory over the chip's host link, ``host_link_GBps`` per direction to override it, into
    ``host_kv_GiB`` of host memory per GPU, default unlimited)."""
    dep = deployment(system, model, scheme, tp=tp, pp=pp, ep=ep, replicas=replicas,
                     kv_cache=kv_cache, max_batch=max_batch,
                     max_batched_tokens=max_batched_tokens, chunked_prefill=chunked_prefill,
                     host_overhead_s=host_overhead_s, request_overhead_s=request_overhead_s,
                     spec_decode=spec_decode, accept_rate=accept_rate, draft=draft,
                     expert_skew=expert_skew, memory_reserve_GiB=memory_reserve_GiB,
                     disagg=disagg, prefill_tp=prefill_tp, prefix_cache=prefix_cache,
                     prefix_hit_rate=prefix_hit_rate, preemption=preemption,
                     host_link_GBps=host_link_GBps, host_kv_GiB=host_kv_GiB)
    reqs = request_stream(rate=rate, requests=requests, input_tokens=input_tokens,
                          output_tokens=output_tokens, lengths=lengths, arrivals=arrivals,
                          burstiness=burstiness, seed=seed)
    return run(dep, reqs, seed, slo_ttft_s, slo_tpot_s)


def request_lengths(input_tokens: int | None, output_tokens: int | None,
                    lengths: str | Path | None) -> arr.Lengths:
    """Fixed lengths or a length table (one of the two)."""
    if lengths is not None:
        if input_tokens is not None or output_tokens is not None:
            raise InputError("give fixed input/output tokens or a lengths table, not both")
        return arr.read_lengths(lengths)
    if input_tokens is None or output_tokens is None:
        raise InputError("give input_tokens and output_tokens (fixed lengths), a lengths "
                         "table or an arrivals file")
    return arr.Lengths.fixed(input_tokens, output_tokens)


def request_stream(*, rate: float | None, requests: int, input_tokens: int | None,
                   output_tokens: int | None, lengths: str | Path | None,
                   arrivals: str | Path | None, burstiness: float, seed: int
                   ) -> tuple[arr.Request, ...]:
    """The requests: a recorded stream, or ``requests`` synthetic ones at ``rate``."""
    if arrivals is not None:
        if rate is not None or lengths is not None or input_tokens is not None \
                or output_tokens is not None:
            raise InputError("an arrivals file sets times and lengths: no rate, lengths or "
                             "input/output tokens with it")
        return arr.read_arrivals(arrivals)
    if rate is None:
        raise InputError("give a request rate (requests/s) or an arrivals file")
    return stream(rate, requests, request_lengths(input_tokens, output_tokens, lengths), seed,
                  burstiness)


def deployment(system: System, model: str | Path | TransformerConfig | Decoder, scheme: str,
               *, tp: int = 1, pp: int = 1, ep: int = 1,
               replicas: int = 1, kv_cache: str = "bf16", max_batch: int = 256,
               max_batched_tokens: int = 8192, chunked_prefill: bool = False,
               host_overhead_s: float = 0.0, request_overhead_s: float = REQUEST_OVERHEAD_S,
               spec_decode: int = 0, accept_rate: float | None = None, draft: str = "mtp",
               expert_skew: float = 1.0, memory_reserve_GiB: float = 0.0,
               disagg: tuple[int, int] | None = None, prefill_tp: int | None = None,
               prefix_cache: bool = False, prefix_hit_rate: float | None = None,
               preemption: str = "recompute", host_link_GBps: float | None = None,
               host_kv_GiB: float | None = None) -> Deployment:
    """The deployment, every setting checked once (see :func:`serve`)."""
    from accelsim.llm.inference import checked_scheme, inference_model, inference_plan

    sc = checked_scheme(system, scheme)
    # a power-limited system (the default) runs the stream at the clock its average power
    # allows (:func:`run`); its iterations are timed on the free-running copy at that clock
    power_limited = system.chip.power_limited
    system = system.with_boost_clock()
    LlmParams(memory_reserve_GiB=memory_reserve_GiB)  # the reserve's one bound
    dec = inference_model(model)
    plan = inference_plan(system, dec, tp=tp, pp=pp, ep=ep, kv_cache=kv_cache)
    if not isinstance(chunked_prefill, bool):
        raise InputError(f"chunked_prefill must be True or False, got {chunked_prefill!r}")
    limits = BatchLimits(max_batch, max_batched_tokens, chunked_prefill)
    check_int("spec_decode", spec_decode, 0, 16)
    spec = dft = None
    if spec_decode:
        if accept_rate is None:
            raise InputError("speculative decoding needs accept_rate (per-token acceptance "
                             "probability)")
        spec = SpecDecode(spec_decode, accept_rate)
        dft = draft_model(dec, draft)
        inference_plan(system, dft, tp=tp, pp=1, ep=ep, kv_cache=kv_cache)
    elif accept_rate is not None:
        raise InputError("accept_rate is for speculative decoding (spec_decode K >= 1)")
    if dec.config.moe is None and expert_skew != 1.0:
        raise InputError(f"expert_skew is for MoE models; {dec.name} is dense")
    prefill = None
    if disagg is not None:
        if not (isinstance(disagg, tuple) and len(disagg) == 2):
            raise InputError(f"disagg must be (prefill replicas, decode replicas), got "
                             f"{disagg!r}")
        if replicas != 1:
            raise InputError("disaggregated serving sets its replicas: (P, D), not replicas")
        p_plan = inference_plan(system, dec, tp=tp if prefill_tp is None else prefill_tp,
                                pp=pp, ep=ep if ep == 1 else (prefill_tp or tp),
                                kv_cache=kv_cache)
        prefill = PrefillPool(p_plan, disagg[0])
        check_int("decode replicas", disagg[1], 1, MAX_REPLICAS)
        replicas = disagg[1]
    elif prefill_tp is not None:
        raise InputError("prefill_tp is for disaggregated serving (disagg=(P, D))")
    if not isinstance(prefix_cache, bool):
        raise InputError(f"prefix_cache must be True or False, got {prefix_cache!r}")
    if prefix_hit_rate is not None and not prefix_cache:
        raise InputError("prefix_hit_rate is for the prefix cache (prefix_cache=True)")
    pc = PrefixCache(prefix_hit_rate) if prefix_cache else None
    offload = choose(Preemption, preemption, "preemption") is Preemption.SWAP
    if host_link_GBps is not None:  # the chip's [chip] host_link_GBps, overridden
        if not offload:
            raise InputError("host_link_GBps is for KV offload (preemption='swap', "
                             "--kv-offload)")
        lo, hi = PLAUSIBLE["host_link_GBps"]
        system = system.with_host_link_bandwidth(
            check_number("host_link_GBps (GB/s per direction)", host_link_GBps, lo, hi) * 1e9)
    return Deployment(system, dec, plan, sc.name, limits, replicas, host_overhead_s,
                      request_overhead_s, spec, dft, expert_skew, memory_reserve_GiB, prefill,
                      pc, offload, host_kv_GiB, power_limited)
