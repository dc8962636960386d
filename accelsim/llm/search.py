"""Plan search: for a model, a GPU count and a global batch, every (TP, PP, micro-batch,
interleave, recompute, sequence parallelism, ZeRO stage) with DP = GPUs / (TP x PP), evaluated
with the sweep machinery (:func:`accelsim.dse.sweep.run_sweep`) into one tidy table; a plan that
cannot be formed or does not fit the GPU's memory is a row with ``status="infeasible"`` and its
reason, the rest are ranked by throughput (ties: less memory first)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from accelsim.arch import System, build_system
from accelsim.dse.sweep import Infeasible, SweepSpec, run_sweep
from accelsim.dse.sweep_spec import point_id
from accelsim.engine.decoder import Decoder
from accelsim.engine.plan import RECOMPUTE, ZERO_STAGES, LlmParams, Plan
from accelsim.engine.transformer import predict
from accelsim.workload.gpt import GptConfig

OUTPUT_COLUMNS = ("dp", "iteration_time_s", "samples_per_s", "tflops_per_gpu", "mfu",
                  "memory_GiB_per_gpu", "weight_comm_GB", "activation_comm_GB", "bubble_s",
                  "dp_comm_s", "clock_MHz")
MODEL_KEYS = ("layers", "hidden", "heads", "seq", "vocab", "ffn", "flash_attention")


def _pow2_upto(n: int) -> tuple[int, ...]:
    out, x = [], 1
    while x <= n:
        out.append(x)
        x *= 2
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _system(path: str) -> System:
    return build_system(path)


@functools.lru_cache(maxsize=8)
def _decoder(source: str, seq: int, flash_attention: bool) -> Decoder:
    from accelsim.workload.hf_config import resolve_model

    return Decoder(resolve_model(source), seq, flash_attention=flash_attention)


def evaluate_plan(point: Mapping[str, Any]) -> dict[str, Any]:
    """Sweep evaluator (top level, picklable): one plan -> its outputs, or Infeasible."""
    if point.get("model_source"):
        model = _decoder(point["model_source"], point["seq"], point["flash_attention"])
    else:
        model = GptConfig(**{k: point[k] for k in MODEL_KEYS})
    system = _system(point["system"]).with_clock(point.get("clock", "power"))
    gpus, tp, pp = point["gpus"], point["tp"], point["pp"]
    if point["sequence_parallel"] and tp == 1:
        raise Infeasible("sequence parallelism is the same plan as none with tp 1")
    if gpus % (tp * pp):
        raise Infeasible(f"tp x pp = {tp * pp} does not divide {gpus} GPUs")
    try:
        plan = Plan(tp=tp, pp=pp, dp=gpus // (tp * pp), micro_batch=point["micro_batch"],
                    global_batch=point["global_batch"], interleave=point["interleave"],
                    recompute=point["recompute"], sequence_parallel=point["sequence_parallel"],
                    zero=point["zero"], optimizer=point["optimizer"], ep=point.get("ep", 1))
        plan.check_model(model)
        plan.check_placement(system.chips)
    except ValueError as exc:
        raise Infeasible(str(exc)) from None
    params = LlmParams(network_efficiency=point["network_efficiency"],
                       memory_efficiency=point["memory_efficiency"],
                       memory_reserve_GiB=point["memory_reserve_GiB"])
    r = predict(model, plan, point["scheme"], system, params)
    cap = system.chip.memory_capacity_bytes
    if r.memory.total_bytes > cap:
        raise Infeasible(f"needs {r.memory.total_GiB:.1f} GiB per GPU (reserve "
                         f"{params.memory_reserve_GiB:g} included) > {cap / 2**30:.0f} GiB")
    d = r.as_dict()
    return {k: d[k] for k in OUTPUT_COLUMNS}


evaluate_plan.columns = OUTPUT_COLUMNS


def search_spec(model: GptConfig | Decoder, system_path: str, gpus: int, global_batch: int,
                scheme: str, params: LlmParams = LlmParams(), *, optimizer: str = "adamw",
                max_tp: int = 8, micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                interleaves: tuple[int, ...] = (1, 2, 4), model_source: str | None = None,
                clock: str = "power") -> SweepSpec:
    """The search space as a sweep: TP and PP powers of two (PP also any divisor of the layer
    count), micro-batches, interleave, recompute, sequence parallelism and ZeRO as axes; for a
    mixture-of-experts model also EP (powers of two up to the experts). A :class:`Decoder`
    needs ``model_source``: the preset name or config.json it came from (the sweep's points
    are plain values, resolved again in each worker). ``clock``: every plan at its
    power-limited clock (``"power"``, the default) or the preset's (``"boost"``)."""
    if gpus < 1 or global_batch < 1:
        raise ValueError(f"gpus and global batch must be >= 1, got {gpus}, {global_batch}")
    pps = sorted({p for p in range(1, model.layers + 1) if model.layers % p == 0 and p <= gpus})
    base = dict(system=str(system_path), gpus=gpus, global_batch=global_batch, scheme=scheme,
                optimizer=optimizer, clock=clock,
                network_efficiency=params.network_efficiency,
                memory_efficiency=params.memory_efficiency,
                memory_reserve_GiB=params.memory_reserve_GiB, seq=model.seq,
                flash_attention=model.flash_attention)
    eps: tuple[int, ...] = ()
    if isinstance(model, Decoder):
        if model_source is None:
            raise ValueError("a Decoder's plan search needs model_source (its preset or file)")
        base["model_source"] = model_source
        if model.is_moe:
            eps = _pow2_upto(min(model.config.moe.n_experts, gpus))
    else:
        base.update(layers=model.layers, hidden=model.hidden, heads=model.heads,
                    vocab=model.vocab, ffn=model.ffn)
    axes = (("tp", _pow2_upto(min(max_tp, gpus))), ("pp", tuple(pps)),
            ("micro_batch", micro_batches), ("interleave", interleaves),
            ("recompute", RECOMPUTE), ("sequence_parallel", (False, True)),
            ("zero", ZERO_STAGES)) + ((("ep", eps),) if eps else ())
    return SweepSpec(base=tuple(base.items()), axes=axes)


#: plans re-timed at their power-limited clock after the sweep ranks every plan at the preset's
#: (the limiter re-times a plan at a few trial clocks, each with a cold GEMM cache: ~30x one
#: plan, too slow for 13,824; the clock moves a plan's time by a few per cent, so the best
#: plans at the preset's clock hold the best at the limited one)
REFINE_PLANS = 16


def _sorted(table):
    table = table.assign(_ok=table["status"] != "ok").sort_values(
        ["_ok", "samples_per_s", "memory_GiB_per_gpu"], ascending=[True, False, True],
        kind="stable")
    return table.drop(columns="_ok").reset_index(drop=True)


def search(model: GptConfig | Decoder, system_path: str, gpus: int, global_batch: int, scheme: str,
           params: LlmParams = LlmParams(), *, executor: str = "serial",
           workers: int | None = None, out=None, progress: bool = False,
           clock: str = "power", refine: int = REFINE_PLANS, **space):
    """Run the plan search; returns the tidy table, feasible plans first, fastest first.

    Every plan is ranked at the preset's clock (the sweep ``out`` journals); with ``clock``
    ``"power"`` (the default) the best ``refine`` feasible plans are then re-timed at their
    power-limited clock and the table re-sorted (their ``clock`` column ``power`` and ``clock_MHz`` set; the others' ``boost``,
    empty)."""
    if clock not in ("power", "boost"):
        raise ValueError(f"clock {clock!r}: expected 'power' or 'boost'")
    spec = search_spec(model, system_path, gpus, global_batch, scheme, params, clock="boost",
                       **space)
    table = _sorted(run_sweep(spec, evaluate_plan, out, executor=executor, workers=workers,
                              progress=progress))
    if clock == "power" and build_system(system_path).chip.power_limited:
        best = set(table.loc[table["status"] == "ok", "point_id"][:refine])
        points = {point_id(p): p for p in spec.iter_points()}
        for i in table.index[table["point_id"].isin(best)]:
            for k, v in evaluate_plan({**points[table.at[i, "point_id"]],
                                       "clock": "power"}).items():
                table.at[i, k] = v
            table.at[i, "clock"] = "power"
        table = _sorted(table)
    return table.astype({"dp": "Int64"})
