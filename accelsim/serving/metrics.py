"""Serving metrics read from the simulation's event log: one row per request, and the summary
``accelsim serve --json`` prints (keys named like ``infer``'s, units in the names).

The measured window starts at the arrival of the first request after the warm-up share
(:data:`WARMUP_FRACTION` of the requests) and ends at the last arrival (the drain after it is
excluded). Percentiles are over the requests that arrive in it; ``mean_running_requests`` is
the time average over the window of the requests in the system (arrived, not yet finished),
integrated from the arrival and finish events; ``requests_per_s`` is the measured requests over
the time from the window's start to the last of them finishing (vLLM's
``benchmark_serving.py``: completed requests over the benchmark's duration), the offered load
the same requests over the window (so throughput never exceeds it: the last finish comes after
the last arrival). The energy is that of the same time (window start to the last measured
finish), over every GPU: static power the whole time, busy or idle, and each iteration's
dynamic energy by the share of it inside; per output token, over the same output tokens as
``output_tokens_per_s`` (so J/token = the deployment's mean power / its token rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from accelsim.engine.energy import StepEnergy, Work
from accelsim.serving.sim import EventLog

#: share of the requests (the first to arrive) left out as warm-up
WARMUP_FRACTION = 0.1
PERCENTILES = (50, 90, 99)


def request_table(log: EventLog) -> pd.DataFrame:
    """One row per request: arrival, lengths, replica, TTFT, TPOT, latency, worst gap between
    tokens, preemptions, and whether it is in the measured window."""
    req = log.requests
    arr = np.array([r.arrival_s for r in req])
    out = np.array([r.output_tokens for r in req])
    ttft = log.first_token_s - arr
    lat = log.finish_s - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (log.finish_s - log.first_token_s) / (out - 1), np.nan)
    first = int(math.floor(WARMUP_FRACTION * len(req)))
    return pd.DataFrame({
        "request": [r.id for r in req], "arrival_s": arr,
        "input_tokens": [r.input_tokens for r in req], "output_tokens": out,
        "replica": log.replica, "time_to_first_token_s": ttft,
        "time_per_output_token_s": tpot, "request_latency_s": lat,
        "max_inter_token_latency_s": log.max_gap_s, "kv_transfer_s": log.kv_transfer_s,
        "prefix_cache_hit_tokens": log.prefix_hit_tokens,
        "preemptions": log.preempted,
        "finish_s": log.finish_s, "measured": np.arange(len(req)) >= first})


def _in_system_mean(arrival: np.ndarray, finish: np.ndarray, t0: float, t1: float) -> float:
    """Time average over [t0, t1] of the requests arrived and not finished."""
    if t1 <= t0:
        return float("nan")
    lo = np.clip(arrival, t0, t1)
    hi = np.clip(finish, t0, t1)
    return float(np.sum(hi - lo) / (t1 - t0))


def summary(log: EventLog, table: pd.DataFrame, gpus: int, slo_ttft_s: float | None = None,
            slo_tpot_s: float | None = None,
            energy: Callable[[float, Work], StepEnergy | None] | None = None) -> dict:
    """The run's metrics (the ``--json`` keys); ``energy`` prices seconds of the deployment
    doing some work (None: no power model, the energy keys null)."""
    m = table[table["measured"]]
    t0, t_last = float(m["arrival_s"].min()), float(table["arrival_s"].max())
    span = float(m["finish_s"].max()) - t0
    d: dict = {"requests": len(table), "measured_requests": len(m),
               "offered_requests_per_s": len(m) / (t_last - t0) if t_last > t0 else None}
    for key in ("time_to_first_token_s", "time_per_output_token_s", "request_latency_s"):
        vals = m[key].dropna().to_numpy()
        for p in PERCENTILES:
            d[f"{key}_p{p}"] = float(np.percentile(vals, p)) if len(vals) else None
        d[f"{key}_mean"] = float(vals.mean()) if len(vals) else None
    if log.kv_transfer_s.any():  # disaggregated: the KV cache's move, prefill to decode
        for p in PERCENTILES:
            d[f"kv_transfer_s_p{p}"] = float(np.percentile(m["kv_transfer_s"], p))
    if log.prefix_hit_tokens.any():  # prompt tokens served from a prefix cache
        d["prefix_cache_hit_rate"] = float(m["prefix_cache_hit_tokens"].sum()
                                           / m["input_tokens"].sum())
    d["max_inter_token_latency_s_p99"] = float(np.percentile(m["max_inter_token_latency_s"],
                                                             99))
    rps = len(m) / span if span > 0 else None
    tok = float(m["output_tokens"].sum()) / span if span > 0 else None
    d.update(requests_per_s=rps, output_tokens_per_s=tok,
             output_tokens_per_s_per_gpu=None if tok is None else tok / gpus)
    e = window_energy(log, table, energy)
    d.update(energy_J=None if e is None else e.energy_J,
             power_W_per_gpu=None if e is None else e.power_W,
             energy_J_per_output_token=None if e is None or not m["output_tokens"].sum()
             else e.energy_J / float(m["output_tokens"].sum()))
    if slo_ttft_s is not None or slo_tpot_s is not None:
        ok = np.ones(len(m), dtype=bool)
        if slo_ttft_s is not None:
            ok &= m["time_to_first_token_s"].to_numpy() <= slo_ttft_s
        if slo_tpot_s is not None:
            tp = m["time_per_output_token_s"].to_numpy()
            ok &= np.isnan(tp) | (tp <= slo_tpot_s)
        d["goodput_requests_per_s"] = float(ok.sum()) / span if span > 0 else None
        d["slo_attainment"] = float(ok.mean())
    else:
        d["goodput_requests_per_s"] = None
    d["mean_running_requests"] = _in_system_mean(table["arrival_s"].to_numpy(),
                                                 table["finish_s"].to_numpy(), t0, t_last)
    d["preemptions"] = int(log.preemptions)
    # the whole run's (as preemptions): what preemption cost, by recompute or over the host link
    d["recomputed_tokens"] = int(log.recomputed_tokens)
    d["kv_offloads"] = int(log.kv_offloads)
    d["kv_offloaded_bytes"] = float(log.kv_offloaded_bytes)
    d["kv_offload_s"] = float(log.kv_offload_s)
    d["kv_cache_utilization"] = _kv_utilization(log, t0, t_last)
    d["iterations"] = len(log.iterations)
    return d


def window_energy(log: EventLog, table: pd.DataFrame,
                  energy: Callable[[float, Work], StepEnergy | None] | None
                  ) -> StepEnergy | None:
    """The energy of the measured window (the first measured arrival to the last measured
    finish) and its average power per GPU (None: no power model, or an empty window)."""
    m = table[table["measured"]]
    t0 = float(m["arrival_s"].min())
    span = float(m["finish_s"].max()) - t0
    return None if energy is None or span <= 0 else energy(span, window_work(log, t0, t0 + span))


def window_work(log: EventLog, t0: float, t1: float) -> Work:
    """The iterations' work in [t0, t1], each iteration's by the share of its time inside."""
    it = log.iterations
    if not len(it) or t1 <= t0:
        return Work()
    dur = it[:, 2] - it[:, 1]
    inside = np.clip(it[:, 2], t0, t1) - np.clip(it[:, 1], t0, t1)
    share = np.divide(inside, dur, out=np.zeros_like(dur), where=dur > 0)
    f, a, b = share @ log.work
    return Work(float(f), float(a), float(b))


def _kv_utilization(log: EventLog, t0: float, t1: float) -> float | None:
    """Time-weighted mean of the KV blocks in use over the window, over every lane's blocks
    (iterations only: an idle lane holds none)."""
    it = log.iterations
    if not len(it) or log.kv_blocks == 0 or t1 <= t0:
        return None
    start, end = np.clip(it[:, 1], t0, t1), np.clip(it[:, 2], t0, t1)
    return float(np.sum((end - start) * it[:, 5]) / ((t1 - t0) * log.kv_blocks))
