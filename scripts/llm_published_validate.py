"""LLM inference and MoE training against published numbers (issue 24, item 5): every case of
``accelsim/data/llm_published.toml`` (one number as its source printed it, with the quote)
that the model can be asked the same question for, predicted with ``accelsim infer`` /
``accelsim llm``'s engine and nothing fitted to it. Writes ``reports/llm_validation.md`` and
``reports/llm_published_validation.csv``.

How each kind of case is asked (the source's own methodology, from the case's ``note``):

* fixed batch with input/output lengths (TensorRT-LLM's gptSessionBenchmark, vLLM's latency
  benchmark, NIM at concurrency 1): the static batch's whole request -- prefill of B prompts,
  then ``output - 1`` decode steps with the cache growing; throughput = B x output / latency;
  time to first token = the prefill; inter-token latency = the mean decode step;
* Poisson arrivals at ``qps`` (TensorRT-LLM 0.14 serving: 500 requests, fixed lengths): the
  request-level simulation (``accelsim.serve``, docs/serve.md) of the same stream (500
  requests, seed 0) with every engine setting passed explicitly, its per-request host overhead
  the fitted :data:`~accelsim.serving.policy.REQUEST_OVERHEAD_S`; mean TTFT and mean time per
  output token against the printed means, serve's output tokens per second against the
  printed output throughput (QPS 2 to 32, H100 and H200). The three QPS-2 H100 Llama-3.1-8B
  TTFT rows are that fit's rows (``scripts/fit_host_overhead.py``, label ``fit``); the rest
  are held out;
* maximum load (trtllm-bench throughput): the largest batch whose KV cache fits
  :data:`KV_FREE_FRACTION` of the memory left after the weights (capped at
  :data:`MAX_BATCH`), run as one static batch (in-flight batching does the same work);
* training (DeepSeek-V3 on 2048 H800, NeMo / AutoModel runs): ``accelsim llm`` with the
  published plan.

Every other row is held out (``checked``): nothing is fitted to it. Cases without lengths
(MLPerf: variable-length datasets), production traffic, and models with no preset or stored
config are listed as not asked, with the reason.

    python scripts/llm_published_validate.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

#: the clock every row is timed at, passed explicitly (a changed default cannot move the
#: table): "boost", the preset's fixed clock the rows were validated and fitted at
CLOCK = "boost"
sys.path.insert(0, str(ROOT))

from accelsim.arch import build_system  # noqa: E402
from accelsim.engine import Plan  # noqa: E402
from accelsim.engine.decoder import Decoder  # noqa: E402
from accelsim.arch.schemes import get_scheme  # noqa: E402
from accelsim.engine.inference import InferencePlan, infer  # noqa: E402
from accelsim.engine.transformer import predict  # noqa: E402
from accelsim.llm.published import FIT, host_overhead_label  # noqa: E402
from accelsim.serving.arrivals import Lengths, Request  # noqa: E402
from accelsim.serving.policy import (KV_FREE_FRACTION, MAX_BATCH,  # noqa: E402
                                     REQUEST_OVERHEAD_S, kv_limited_batch)
from accelsim.serving.run import Deployment, deployment, run, stream  # noqa: E402
from accelsim.serving.scheduler import (DEFAULT_MAX_BATCH,  # noqa: E402
                                        DEFAULT_MAX_BATCHED_TOKENS)
from accelsim.workload.transformer import (PRESETS, MlpKind, NormKind,  # noqa: E402
                                           PositionKind, TransformerConfig)

DATA = ROOT / "accelsim" / "data" / "llm_published.toml"
#: held-out tolerance of every row (issue 24: DeepSeek-V3 within 25 %; the same for the rest)
TOLERANCE = 0.25
#: the scheme each training precision runs as (FP8 training: Transformer Engine's recipe)
TRAIN_SCHEME = {"fp8": "te-fp8", "bf16": "bf16"}
#: the online rows' stream as the source ran it (500 requests, Poisson at the case's qps), seed 0
SERVE_REQUESTS, SERVE_SEED = 500, 0
#: an online row's metric -> serve's ``--json`` key (the source prints means, and the whole
#: run's output tokens per second)
SERVE_METRIC = {"time_to_first_token": "time_to_first_token_s_mean",
                "inter_token_latency": "time_per_output_token_s_mean",
                "output_tokens_per_s": "output_tokens_per_s"}


def llama2(m: dict) -> TransformerConfig:
    """A Llama-2 model from the shape the source's build command states (SwiGLU, RMSNorm,
    rotary, untied, 4096 positions: Touvron et al. 2023)."""
    return TransformerConfig(name=m["name"], layers=m["layers"], hidden=m["hidden"],
                             heads=m["heads"], kv_heads=m["kv_heads"], ffn_size=m["ffn"],
                             vocab=m["vocab"], seq=4096, mlp=MlpKind.SWIGLU,
                             norm=NormKind.RMSNORM, positions=PositionKind.ROTARY,
                             tied_embeddings=False, source=m["source"])


def model_of(case: dict, extra: dict) -> TransformerConfig | None:
    if case.get("arch") in PRESETS:
        return PRESETS[case["arch"]]
    return extra.get(case.get("hf_model", "").replace("-chat", ""))


def _static(model, system, plan, scheme, b, I, O):
    r = infer(model, system, plan, scheme, b, prompt=I, output_tokens=O)
    return r


def ask_inference(case: dict, model_cfg: TransformerConfig) -> tuple[float | None, str]:
    """(predicted value in the case's unit, how it was asked) or (None, why not)."""
    I, O = case.get("input_tokens"), case.get("output_tokens")
    if not I or not O:
        return None, "no input/output lengths (variable-length data set or production mix)"
    system = build_system(case["system"]).with_clock(CLOCK)
    tp, pp = case.get("tp") or 1, case.get("pp") or 1
    if tp * pp > system.chips:
        return None, f"{tp * pp} GPUs on the one-GPU preset {case['system']}"
    if case.get("dp", 1) and (case.get("dp") or 1) > 1:
        return None, "several model copies (dp) per number"
    kv = case.get("kv_cache") if case.get("kv_cache") in ("fp8", "bf16", "fp16") else "bf16"
    plan = InferencePlan(tp=tp, pp=pp, kv_dtype=kv)
    scheme = case["scheme"]
    model = Decoder(model_cfg, model_cfg.seq, flash_attention=True)
    metric = case["metric"]
    if case.get("batch") and not case.get("batch_note"):
        b = case["batch"]
        how = f"static batch {b}, {I} in / {O} out"
    elif case.get("qps"):
        if metric not in SERVE_METRIC:
            return None, f"metric {metric} of an online row not asked"
        key = (case["system"], case["arch"], tp, pp, kv, scheme, case["qps"], I, O)
        if key not in _SERVED:
            dep, reqs = online_setup(case, model_cfg)
            _SERVED[key] = dep.request_overhead_s, run(dep, reqs, SERVE_SEED).as_dict()
        overhead_s, d = _SERVED[key]
        how = (f"serve: {SERVE_REQUESTS} requests, Poisson at qps {case['qps']:g} (seed "
               f"{SERVE_SEED}), {I} in / {O} out, host overhead "
               f"{1e3 * overhead_s:g} ms per request")
        return d[SERVE_METRIC[metric]], how
    elif "maximum load" in (case.get("batch_note") or ""):
        b = kv_limited_batch(model, system, plan, get_scheme(scheme).compute_precision, I, O)
        if b < 1:
            return None, "weights alone exceed the GPU memory"
        how = f"maximum load: batch {b} (KV cache in {KV_FREE_FRACTION:g} of free memory)"
    else:
        return None, f"batch not a fixed number ({case.get('batch_note')})"
    if metric == "time_to_first_token":
        r = infer(model, system, plan, scheme, b, prompt=I)
        return r.prefill.time_s, how
    if metric == "inter_token_latency":
        r = _static(model, system, plan, scheme, b, I, O)
        return (r.request_latency_s - r.prefill.time_s) / max(1, O - 1), how
    r = _static(model, system, plan, scheme, b, I, O)
    if metric == "request_latency":
        return r.request_latency_s, how
    tput = b * O / r.request_latency_s
    if metric == "output_tokens_per_s":
        return tput, how
    if metric == "output_tokens_per_s_per_gpu":
        return tput / plan.gpus, how
    return None, f"metric {metric} not asked"


def online_setup(case: dict, model_cfg: TransformerConfig,
                 request_overhead_s: float = REQUEST_OVERHEAD_S
                 ) -> tuple[Deployment, tuple[Request, ...]]:
    """An online (``qps``) row as ``accelsim serve`` asks it: the deployment, every engine
    setting explicit (serve's defaults: vLLM's batch limits, no chunked prefill, no
    per-iteration overhead, ``request_overhead_s`` per request), and the request stream."""
    system = build_system(case["system"]).with_clock(CLOCK)
    kv = case.get("kv_cache") if case.get("kv_cache") in ("fp8", "bf16", "fp16") else "bf16"
    dep = deployment(system, model_cfg, case["scheme"], tp=case.get("tp") or 1,
                     pp=case.get("pp") or 1, ep=1, replicas=1, kv_cache=kv,
                     max_batch=DEFAULT_MAX_BATCH, max_batched_tokens=DEFAULT_MAX_BATCHED_TOKENS,
                     chunked_prefill=False, host_overhead_s=0.0,
                     request_overhead_s=request_overhead_s, memory_reserve_GiB=0.0)
    reqs = stream(float(case["qps"]), SERVE_REQUESTS,
                  Lengths.fixed(case["input_tokens"], case["output_tokens"]), SERVE_SEED)
    return dep, reqs


#: one serve run per online setting: a TTFT row and its ITL row read the same run
_SERVED: dict[tuple, tuple[float, dict]] = {}


def ask_training(case: dict, model_cfg: TransformerConfig) -> tuple[float | None, str]:
    system = build_system(case["system"]).with_clock(CLOCK)
    if system.chips == 1:
        return None, f"no node preset for {case['system']} ({case['gpus']} GPUs)"
    tp, pp, ep = case.get("tp") or 1, case.get("pp") or 1, case.get("ep") or 1
    dp = case["gpus"] // (tp * pp)
    seq = case["seq"]
    model = Decoder(model_cfg, seq, flash_attention=True)
    dualpipe = case["id"].startswith("dsv3-")
    zero = case.get("zero", 3 if case.get("fsdp") else 1)
    vp = case.get("vp") or 1
    if vp > 1 and model_cfg.layers % (pp * vp):
        vp = 1  # an uneven interleaved split is not expressible: plain 1F1B
    plan = Plan(tp=tp, pp=pp, dp=dp, micro_batch=case.get("micro_batch") or 1,
                global_batch=case["global_batch"], ep=ep, zero=zero, interleave=vp,
                sequence_parallel=tp > 1, overlap_moe_comm=dualpipe,
                recompute="none")
    r = predict(model, plan, TRAIN_SCHEME[case["scheme"]], system)
    tok = r.tokens_per_s
    how = (f"tp {tp} pp {pp} dp {dp} ep {ep} vp {plan.interleave} zero {zero}, "
           f"{TRAIN_SCHEME[case['scheme']]}" + (", all-to-all overlapped (DualPipe)"
                                                if dualpipe else ""))
    metric = case["metric"]
    if metric == "train_tokens_per_s_per_gpu":
        return tok / case["gpus"], how
    hours_per_trillion = 1e12 / tok * case["gpus"] / 3600
    if metric == "gpu_hours_per_trillion_tokens":
        return hours_per_trillion, how
    if metric == "gpu_hours":
        return hours_per_trillion * case["tokens"] / 1e12, how
    return None, f"metric {metric} not asked"


def rows(quick: bool = False) -> list[dict]:
    data = tomllib.loads(DATA.read_text())
    extra = {m["hf_model"]: llama2(m) for m in data["model"] if m["name"].startswith("llama2")}
    out = []
    cases = data["case"]
    if quick:  # one case per (source, metric)
        seen, keep = set(), []
        for c in cases:
            k = (c["source"], c["metric"], c.get("arch"))
            if k not in seen:
                seen.add(k)
                keep.append(c)
        cases = keep
    for c in cases:
        cfg = model_of(c, extra)
        if cfg is None:
            pred, how = None, "no preset or stored config for this model"
        elif c.get("id", "").startswith("dsinfer-"):
            pred, how = None, "production traffic (prefill-decode split, MTP, cache hits)"
        elif c["kind"] == "training":
            pred, how = ask_training(c, cfg)
        else:
            pred, how = ask_inference(c, cfg)
        err = None if pred is None else pred / c["value"] - 1
        out.append({"id": c["id"], "kind": c["kind"], "model": c["model"],
                    "system": c["system"], "metric": c["metric"], "unit": c["unit"],
                    "published": c["value"], "accelsim": pred,
                    "error_pct": None if err is None else 100 * err,
                    "in_target": None if err is None else abs(err) <= TOLERANCE,
                    "asked_as": how, "source": c["source"].split("]")[0] + "]",
                    # the host-overhead fit's rows; every other row is held out
                    "label": host_overhead_label(c["id"])})
    return out


def write_report(df: pd.DataFrame) -> None:
    asked = df[df["accelsim"].notna()]
    lines = ["# LLM inference and MoE training vs published numbers",
             "",
             "Generated by `python scripts/llm_published_validate.py` from "
             "`accelsim/data/llm_published.toml` (every number with its source, URL and quote). "
             "Nothing in accelsim is fitted to these but `serve`'s per-request host overhead, "
             "fitted on the three Llama-3.1-8B online TTFT rows (`scripts/fit_host_overhead.py`; "
             "marked *fit*): every other row is **held out**. Tolerance "
             f"+-{100 * TOLERANCE:g} %. Dense GPT training (Megatron, FP8-LM) is in "
             "`reports/llm_validation.csv` (`scripts/llm_validate.py`).",
             "",
             "## Summary", "",
             "| kind | metric | asked | in target | median error % | mean abs error % |",
             "|---|---|---|---|---|---|"]
    for (kind, metric), g in asked.groupby(["kind", "metric"]):
        lines.append(f"| {kind} | {metric} | {len(g)} | {int(g['in_target'].sum())} | "
                     f"{g['error_pct'].median():+.1f} | {g['error_pct'].abs().mean():.1f} |")
    lines += ["", f"Asked {len(asked)} of {len(df)} cases; "
              f"{int(asked['in_target'].sum())} within +-{100 * TOLERANCE:g} %.", "",
              "## Every asked case", "",
              "| case | system | metric | published | accelsim | error % | asked as |",
              "|---|---|---|---|---|---|---|"]
    for r in asked.itertuples():
        fit = " *fit*" if r.label == FIT else ""
        lines.append(f"| {r.id}{fit} | {r.system} | {r.metric} | {r.published:.4g} | "
                     f"{r.accelsim:.4g} | {r.error_pct:+.1f}{'' if r.in_target else ' **out**'}"
                     f" | {r.asked_as} |")
    lines += ["", "## Notes", "",
              "- DeepSeek-V3 is asked as `accelsim llm --system dgx-h800 --model deepseek-v3 "
              "--tp 1 --pp 16 --ep 64 --gpus 2048 --zero 1 --seq 4096 --global-batch 15360 "
              "--scheme te-fp8 --overlap-moe-comm --flash-attention` (DualPipe's overlap and "
              "a fused attention kernel, as the report describes). Without the overlap the "
              "model gives +56 %. The same plan reports about 110 GiB per GPU, more than the "
              "H800's 80 GB: the memory account has no FP8 activation caching and no "
              "recomputation of the MLA up-projections / RMSNorm that the report uses "
              "(section 3.2.3), so DeepSeek-V3's memory is not validated here.",
              "- Maximum-load cases run the largest batch whose KV cache fits "
              f"{KV_FREE_FRACTION:g} of the memory left after the weights (at most {MAX_BATCH}) "
              "as one static batch; the KV-cache type is the case's when stated, else bf16."]
    left = df[df["accelsim"].isna()]
    lines += ["", "## Not asked, and why", "", "| case | reason |", "|---|---|"]
    for r in left.itertuples():
        lines.append(f"| {r.id} | {r.asked_as} |")
    (ROOT / "reports" / "llm_validation.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one case per source and metric")
    args = ap.parse_args(argv)
    df = pd.DataFrame(rows(args.quick))
    asked = df[df["accelsim"].notna()]
    with pd.option_context("display.width", 220, "display.max_colwidth", 60,
                           "display.float_format", "{:.4g}".format):
        print(asked[["id", "metric", "published", "accelsim", "error_pct"]].to_string(
            index=False))
    print(f"\nasked {len(asked)} of {len(df)}; {int(asked['in_target'].sum())} within "
          f"+-{100 * TOLERANCE:g} %")
    if not args.quick:
        df.to_csv(ROOT / "reports" / "llm_published_validation.csv", index=False,
                  float_format="%.6g")
        write_report(df)
        print("wrote reports/llm_validation.md and reports/llm_published_validation.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
