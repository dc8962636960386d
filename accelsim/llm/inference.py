"""The front door of LLM inference, for the library (``accelsim.infer``) and ``accelsim infer``
alike: a model named or given as a config, the parallel plan and the scheme are resolved and
checked once here, then the engine's one inference entry times them
(:func:`accelsim.engine.inference.infer`: prefill, decode steps over a KV cache, requests)."""

from __future__ import annotations

from pathlib import Path

from accelsim.arch import System
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.engine import inference as engine
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import InferencePlan, InferenceResult
from accelsim.engine.plan import LlmParams
from accelsim.errors import InputError
from accelsim.workload.hf_config import resolve_model
from accelsim.workload.transformer import TransformerConfig

__all__ = ["inference_model", "inference_plan", "infer"]


def inference_model(model: str | Path | TransformerConfig | Decoder) -> Decoder:
    """The model as inference runs it: a shipped preset name (``llama3-8b``, ...), a Hugging
    Face ``config.json`` (file or folder) or a :class:`TransformerConfig`, causal with flash
    attention at the positions it was built for; a :class:`Decoder` is taken as it is."""
    if isinstance(model, Decoder):
        return model
    cfg = model if isinstance(model, TransformerConfig) else resolve_model(model)
    return Decoder(cfg, cfg.seq, causal=True, flash_attention=True)


def inference_plan(system: System, model: Decoder, *, tp: int = 1, pp: int = 1, ep: int = 1,
                   kv_cache: str = "bf16", cp: int = 1, cp_algo: str = "ring") -> InferencePlan:
    """``tp`` x ``pp`` x ``cp`` GPUs (``ep``: 1, or ``tp`` for whole experts per GPU; ``cp``
    context-parallel ranks splitting the prompt, keys and values exchanged by ``cp_algo``)
    holding a KV cache of ``kv_cache`` elements, checked against the model's split rules and
    the system: a tensor-parallel group inside one node, several GPUs only on a node file."""
    plan = InferencePlan(tp=tp, pp=pp, ep=ep, kv_dtype=kv_cache, cp=cp, cp_algo=cp_algo)
    plan.check(model, system.chips)
    if plan.gpus > 1 and system.chips == 1:
        what = "tp x pp" + (" x cp" if plan.cp > 1 else "")
        raise InputError(f"{system.name}: one GPU; {what} = {plan.gpus} needs a node file "
                         "(e.g. dgx-h100)")
    return plan


def checked_scheme(system: System, scheme):
    """``scheme`` resolved for ``system`` (the Scheme), or InputError: ``system`` is not a
    System, the scheme is unknown, or the chip has no rate for its compute precision."""
    if not isinstance(system, System):
        raise InputError(f"system must be a System (accelsim.build_system(name_or_file)), got "
                         f"{type(system).__name__}")
    try:
        sc = get_scheme(scheme)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not system.chip.core.supports(sc.compute_precision):
        raise InputError(f"{system.name}: core.macs_per_pe_per_cycle has no "
                         f"{sc.compute_precision} rate (needed by scheme {sc.name})")
    return sc


def infer(system: System, model: str | Path | TransformerConfig | Decoder,
          scheme: str | Scheme, batch: int, *, prompt: int | None = None,
          context: int | None = None, output_tokens: int | None = None, tp: int = 1,
          pp: int = 1, ep: int = 1, kv_cache: str = "bf16", cp: int = 1, cp_algo: str = "ring",
          memory_reserve_GiB: float = 0.0) -> InferenceResult:
    """LLM inference of ``batch`` sequences, as ``accelsim infer`` computes it: the prefill of
    ``prompt`` tokens (time to first token), one decode step over a KV cache of ``context``
    tokens, and with ``prompt`` and ``output_tokens`` the whole request; at least one of
    ``prompt`` and ``context``. ``model``: see :func:`inference_model`; the plan: see
    :func:`inference_plan`; ``memory_reserve_GiB`` per GPU outside weights and KV cache. A
    system with a power table times each pass at its power-limited clock (the default;
    ``with_power_limit(W)`` for another limit, ``with_boost_clock()`` for the preset's). The result's
    ``as_dict()`` holds the numbers ``accelsim infer --json`` prints (docs/llm.md)."""
    sc = checked_scheme(system, scheme)
    # the reserve's one bound is LlmParams' (accelsim.bounds), checked there
    params = LlmParams(memory_reserve_GiB=memory_reserve_GiB)
    dec = inference_model(model)
    plan = inference_plan(system, dec, tp=tp, pp=pp, ep=ep, kv_cache=kv_cache, cp=cp,
                          cp_algo=cp_algo)
    return engine.infer(dec, system, plan, sc, batch, prompt=prompt, context=context,
                        output_tokens=output_tokens, params=params)
