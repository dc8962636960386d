"""``accelsim serve``: request-level serving simulation -- a request stream through replicas
that batch continuously over a paged KV cache; TTFT, TPOT and latency percentiles, throughput,
goodput (docs/serve.md). ``accelsim infer --serve`` stays the static batch x context sweep."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands._common import (chip_count, config_range_float, dimension, float_type,
                                       int_type, memory_reserve_GiB, positive_float, seed)

NAME = "serve"
HELP = ("LLM serving simulation: request stream, continuous batching, paged KV cache; TTFT, "
        "TPOT, latency percentiles, throughput, goodput")

#: most rates in one --rates sweep
MAX_RATES = 100
#: largest request rate (requests/s) and per-iteration / per-request overhead (ms)
MAX_RATE = 1e6
MAX_OVERHEAD_MS = 10_000.0


def _rates(text: str) -> tuple[float, ...]:
    parse = float_type(0.0, MAX_RATE, lo_open=True)
    vals = tuple(parse(v) for v in text.split(","))
    if len(vals) > MAX_RATES:
        raise argparse.ArgumentTypeError(f"{len(vals):,} rates, more than {MAX_RATES}")
    return vals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.arch.schemes import SCHEME_NAMES
    from accelsim.commands._serve_search import disagg_type
    from accelsim.engine.inference import KV_BYTES
    from accelsim.serving.arrivals import MAX_REQUESTS
    from accelsim.serving.policy import REQUEST_OVERHEAD_S
    from accelsim.serving.scheduler import DEFAULT_MAX_BATCH, DEFAULT_MAX_BATCHED_TOKENS

    parser.add_argument("--system", required=True, metavar="FILE",
                        help="node or chip file or shipped name (e.g. h100-sxm, dgx-h100)")
    parser.add_argument("--model", required=True, metavar="NAME_OR_CONFIG",
                        help="a shipped preset (llama3-8b, mixtral-8x7b, ...) or a Hugging "
                             "Face config.json")
    parser.add_argument("--scheme", choices=SCHEME_NAMES, required=True,
                        help="the GEMM format of weights and activations")
    parser.add_argument("--kv-cache", choices=tuple(KV_BYTES), default="bf16",
                        help="KV-cache element type (default bf16)")
    p = parser.add_argument_group("deployment")
    p.add_argument("--tp", type=chip_count, default=1, metavar="T",
                   help="tensor-parallel GPUs per replica (default 1)")
    p.add_argument("--pp", type=chip_count, default=1, metavar="P",
                   help="pipeline stages per replica (default 1; stages run in series)")
    p.add_argument("--ep", type=chip_count, default=1, metavar="E",
                   help="MoE: 1 or tp (whole experts per GPU)")
    p.add_argument("--replicas", type=int_type(1, 4096), default=1, metavar="R",
                   help="model copies; requests go to the least loaded (default 1)")
    p.add_argument("--disagg", type=disagg_type, default=None, metavar="PxD",
                   help="disaggregated: P prefill and D decode replicas (e.g. 2x6), the KV "
                        "cache moved over the fabric")
    p.add_argument("--prefill-tp", type=chip_count, default=None, metavar="T",
                   help="--disagg: tensor-parallel GPUs per prefill replica (default --tp)")
    p.add_argument("--decode-tp", type=chip_count, default=None, metavar="T",
                   help="--disagg: tensor-parallel GPUs per decode replica (default --tp)")
    p.add_argument("--memory-reserve", type=memory_reserve_GiB, default=0.0, metavar="GIB",
                   help="GPU memory per GPU outside weights and KV cache (default 0)")
    s = parser.add_argument_group("request stream")
    s.add_argument("--rate", type=float_type(0.0, MAX_RATE, lo_open=True), default=None,
                   metavar="QPS", help="mean requests per second (Poisson arrivals)")
    s.add_argument("--rates", type=_rates, default=None, metavar="R1,R2,...",
                   help=f"a sweep: one row per rate (at most {MAX_RATES}); --out writes it")
    s.add_argument("--requests", type=int_type(1, MAX_REQUESTS), default=1000, metavar="N",
                   help="requests to simulate (default 1000)")
    s.add_argument("--burstiness", type=float_type(0.0, 1e6, lo_open=True), default=1.0,
                   metavar="B", help="gamma inter-arrival shape: 1 Poisson (default), < 1 "
                                     "burstier")
    s.add_argument("--input-tokens", type=dimension, default=None, metavar="T",
                   help="fixed prompt length")
    s.add_argument("--output-tokens", type=dimension, default=None, metavar="O",
                   help="fixed output length")
    s.add_argument("--lengths", default=None, metavar="FILE",
                   help="(input, output) lengths drawn from a CSV/JSONL table, or "
                        "'conversation' (shipped, ShareGPT-like)")
    s.add_argument("--arrivals", default=None, metavar="FILE",
                   help="a recorded stream: CSV/JSONL of arrival_s, input_tokens, "
                        "output_tokens[, prefix]")
    s.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    e = parser.add_argument_group("engine")
    e.add_argument("--max-batch", type=int_type(1, 1 << 20), default=DEFAULT_MAX_BATCH,
                   metavar="B", help=f"sequences per iteration (default {DEFAULT_MAX_BATCH})")
    e.add_argument("--max-batched-tokens", type=int_type(1, 1 << 24),
                   default=DEFAULT_MAX_BATCHED_TOKENS, metavar="T",
                   help=f"new tokens per iteration (default {DEFAULT_MAX_BATCHED_TOKENS})")
    e.add_argument("--chunked-prefill", action="store_true",
                   help="mixed batches: decodes first, prompts cut to fill the token budget")
    e.add_argument("--host-overhead-ms", type=float_type(0.0, MAX_OVERHEAD_MS), default=0.0,
                   metavar="MS", help="host/scheduler time per iteration (default 0)")
    e.add_argument("--request-overhead-ms", type=float_type(0.0, MAX_OVERHEAD_MS),
                   default=None, metavar="MS",
                   help="host time per request before it is queued (default "
                        f"{1e3 * REQUEST_OVERHEAD_S:g}, fitted: docs/serve.md; 0 turns it off)")
    e.add_argument("--prefix-cache", action="store_true",
                   help="prompts start from their cached prefix (--arrivals prefix ids, or "
                        "--prefix-hit-rate)")
    e.add_argument("--prefix-hit-rate", type=float_type(0.0, 1.0), default=None, metavar="F",
                   help="with --prefix-cache: the share of every prompt found cached")
    e.add_argument("--kv-offload", action="store_true",
                   help="a full KV cache offloads the preempted sequence's blocks to host "
                        "memory over the chip's host link (= --preemption swap)")
    e.add_argument("--preemption", choices=("recompute", "swap"), default=None,
                   help="a full KV cache preempts by recompute (default) or swap (KV offload)")
    e.add_argument("--host-kv-GiB", type=float_type(0.0, 1e6, lo_open=True), default=None,
                   metavar="GIB", help="--kv-offload: host memory per GPU for KV blocks "
                                       "(default: no limit)")
    e.add_argument("--host-link-GBps", type=config_range_float("host_link_GBps"), default=None,
                   metavar="GBPS", help="--kv-offload: GPU-host link per direction (default: "
                                        "the chip's [chip] host_link_GBps)")
    e.add_argument("--spec-decode", type=int_type(0, 16), default=0, metavar="K",
                   help="speculative decoding: K draft tokens per step (default 0: off)")
    e.add_argument("--accept-rate", type=float_type(0.0, 1.0), default=None, metavar="P",
                   help="per-token acceptance probability of the draft (with --spec-decode)")
    e.add_argument("--draft-model", default="mtp", metavar="NAME_OR_CONFIG",
                   help="the draft: mtp (one more layer of the target, default) or a model")
    e.add_argument("--expert-skew", type=float_type(1.0, 1e6), default=1.0, metavar="S",
                   help="MoE: the hottest expert's load over the mean (default 1: balanced)")
    o = parser.add_argument_group("SLOs and outputs")
    o.add_argument("--slo-ttft-ms", type=positive_float, default=None, metavar="MS",
                   help="time-to-first-token SLO: goodput counts requests meeting both")
    o.add_argument("--slo-tpot-ms", type=positive_float, default=None, metavar="MS",
                   help="time-per-output-token SLO")
    o.add_argument("--requests-out", default=None, metavar="OUT.csv",
                   help="one row per request")
    o.add_argument("--trace", default=None, metavar="OUT.json",
                   help="requests and iterations on a timeline (Perfetto / chrome://tracing)")
    o.add_argument("--out", default=None, metavar="OUT.csv",
                   help="--rates: the sweep table; --search: the search table (.csv or a "
                        "folder)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (a list with --rates; the best "
                             "configuration with --search; docs/serve.md)")
    from accelsim.commands import _serve_search
    from accelsim.commands._common import add_power_arguments
    from accelsim.commands._hardware import add_hardware_arguments

    add_power_arguments(parser)
    add_hardware_arguments(parser)
    _serve_search.add_arguments(parser)


def _system(args: argparse.Namespace):
    from accelsim.arch import build_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import power_system, require_precisions, system_path
    from accelsim.commands._hardware import hardware_system

    path = system_path(args.system)
    system = hardware_system(build_system(path), args)
    precision = get_scheme(args.scheme).compute_precision
    require_precisions(system, path, [precision], f"--scheme {args.scheme}")
    # the stream's clock: power-limited over the measured window (the default), or fixed
    return power_system(system, path, args, precision)[0]


def _deployment(args: argparse.Namespace):
    from accelsim.errors import UserError
    from accelsim.serving.policy import REQUEST_OVERHEAD_S
    from accelsim.serving.run import deployment

    system = _system(args)
    if args.disagg is None:
        for flag in ("prefill_tp", "decode_tp"):
            if getattr(args, flag) is not None:
                raise UserError(f"--{flag.replace('_', '-')} is for --disagg PxD")
    elif args.replicas != 1:
        raise UserError("--disagg PxD sets the replicas; drop --replicas")
    elif args.decode_tp is not None and args.tp != 1:
        raise UserError("--decode-tp or --tp, not both")
    tp = args.tp if args.decode_tp is None else args.decode_tp
    if args.kv_offload and args.preemption == "recompute":
        raise UserError("--kv-offload is swap preemption: drop --preemption recompute")
    preemption = "swap" if args.kv_offload else args.preemption or "recompute"
    if preemption != "swap":
        for flag, value in (("--host-kv-GiB", args.host_kv_GiB),
                            ("--host-link-GBps", args.host_link_GBps)):
            if value is not None:
                raise UserError(f"{flag} is for --kv-offload")
    elif args.host_link_GBps is None and system.chip.host_link_Bps is None:
        from accelsim.commands._common import system_path

        raise UserError(f"--kv-offload copies over the chip's host link: "
                        f"{system_path(args.system)} sets no "
                        "[chip] host_link_GBps (add it, or give --host-link-GBps)")
    try:
        return deployment(
            system, args.model, args.scheme, tp=tp, pp=args.pp, ep=args.ep,
            replicas=args.replicas, kv_cache=args.kv_cache, max_batch=args.max_batch,
            max_batched_tokens=args.max_batched_tokens, chunked_prefill=args.chunked_prefill,
            host_overhead_s=args.host_overhead_ms / 1e3,
            request_overhead_s=(REQUEST_OVERHEAD_S if args.request_overhead_ms is None
                                else args.request_overhead_ms / 1e3),
            spec_decode=args.spec_decode,
            accept_rate=args.accept_rate, draft=args.draft_model,
            expert_skew=args.expert_skew, memory_reserve_GiB=args.memory_reserve,
            disagg=args.disagg, prefill_tp=args.prefill_tp, prefix_cache=args.prefix_cache,
            prefix_hit_rate=args.prefix_hit_rate, preemption=preemption,
            host_link_GBps=args.host_link_GBps, host_kv_GiB=args.host_kv_GiB)
    except ValueError as exc:
        raise UserError(f"--model {args.model} --tp {tp} --pp {args.pp} --ep {args.ep}: "
                        f"{exc}") from None


def _check(args: argparse.Namespace) -> None:
    from accelsim.commands import _serve_search
    from accelsim.commands._common import check_outputs
    from accelsim.errors import UserError

    _serve_search.check(args)
    if args.rate is not None and args.rates is not None:
        raise UserError("--rate or --rates, not both")
    if args.rates is not None:
        if args.arrivals is not None:
            raise UserError("--rates sweeps a synthetic stream; drop --arrivals")
        for flag in ("requests_out", "trace"):
            if getattr(args, flag) is not None:
                raise UserError(f"--{flag.replace('_', '-')} is for one run, not --rates")
    elif args.out is not None and not args.search:
        raise UserError("--out is for --rates and --search (one run: --requests-out, --json)")
    if args.arrivals is None and args.rate is None and args.rates is None:
        raise UserError("give --rate QPS (or --rates R1,R2,...) or --arrivals FILE")
    out = _serve_search.table_path(args.out) if args.search else args.out
    if args.arrivals is not None and (args.input_tokens or args.output_tokens or args.lengths
                                      or args.rate is not None):
        raise UserError("--arrivals sets times and lengths: drop --rate, --lengths, "
                        "--input-tokens and --output-tokens")
    if args.arrivals is None and args.lengths is None and (args.input_tokens is None
                                                           or args.output_tokens is None):
        raise UserError("give --input-tokens and --output-tokens, or --lengths FILE")
    if args.lengths is not None and (args.input_tokens or args.output_tokens):
        raise UserError("--lengths draws both lengths: drop --input-tokens / --output-tokens")
    if (args.accept_rate is None) != (args.spec_decode == 0):
        raise UserError("--spec-decode K and --accept-rate P go together")
    inputs = [(f, p) for f, p in (("--arrivals", args.arrivals), ("--lengths", args.lengths))
              if p is not None]
    check_outputs([("--requests-out", args.requests_out, (".csv",)),
                   ("--trace", args.trace, (".json",)), ("--out", out, (".csv",))],
                  inputs)


def run(args: argparse.Namespace) -> int:
    from accelsim.serving.run import request_lengths, request_stream, sweep
    from accelsim.serving.run import run as run_serve

    _check(args)
    if args.search:
        from accelsim.commands import _serve_search

        return _serve_search.run(args, _system(args))
    dep = _deployment(args)
    slo_ttft = None if args.slo_ttft_ms is None else args.slo_ttft_ms / 1e3
    slo_tpot = None if args.slo_tpot_ms is None else args.slo_tpot_ms / 1e3
    if args.rates is not None:
        lengths = request_lengths(args.input_tokens, args.output_tokens, args.lengths)
        try:
            df = sweep(dep, args.rates, args.requests, lengths, args.seed, args.burstiness,
                       slo_ttft, slo_tpot, progress=sys.stderr.isatty(), out=args.out)
        except KeyboardInterrupt:
            if args.out is None:
                raise
            from accelsim.commands._common import exit_interrupted, journal_rows

            exit_interrupted("serve", f"{journal_rows(args.out)} of {len(args.rates)} rates",
                             args.out)
        if args.out is not None:
            print(f"wrote {args.out}: {len(df)} rates (each as it finished; a rerun resumes)",
                  file=sys.stderr)
        if args.json:
            print(df.to_json(orient="records"))
            return 0
        import pandas as pd

        cols = ["rate_requests_per_s", "requests_per_s", "output_tokens_per_s",
                "time_to_first_token_s_p50", "time_to_first_token_s_p99",
                "time_per_output_token_s_p50", "request_latency_s_p50",
                "goodput_requests_per_s", "preemptions", "kv_cache_utilization", "energy_J",
                "energy_J_per_output_token"]
        with pd.option_context("display.width", 220, "display.float_format", "{:.4g}".format):
            print(df[cols].to_string(index=False))
        return 0
    reqs = request_stream(rate=args.rate, requests=args.requests,
                          input_tokens=args.input_tokens, output_tokens=args.output_tokens,
                          lengths=args.lengths, arrivals=args.arrivals,
                          burstiness=args.burstiness, seed=args.seed)
    r = run_serve(dep, reqs, args.seed, slo_ttft, slo_tpot)
    if args.requests_out is not None:
        r.requests.to_csv(args.requests_out, index=False, float_format="%.9g")
        print(f"wrote {args.requests_out}: {len(r.requests)} requests", file=sys.stderr)
    if args.trace is not None:
        from accelsim.serving.trace import trace_events

        with open(args.trace, "w") as f:
            json.dump(trace_events(r.log, r.requests), f)
        print(f"wrote {args.trace}", file=sys.stderr)
    d = r.as_dict()
    bands = _error_bands(dep, d, r.requests)
    for prefix, b in bands.items():
        d.update({f"{prefix}{k}": v for k, v in b.as_dict().items()
                  if not prefix or k in ("error_low_pct", "error_high_pct", "error_regime")})
    if args.json:
        print(json.dumps(d))
        return 0
    shape = (f"{d['replicas']} replica(s) x tp {d['tp']} x pp {d['pp']}" if d["disagg"] is None
             else f"{d['disagg']} prefill x decode replicas (tp {d['prefill_tp']} / {d['tp']})")
    print(f"{d['model']} on {dep.system.name}: {shape} ({d['gpus']} GPUs), {d['scheme']}, "
          f"KV cache {d['kv_dtype']} ({d['kv_cache_tokens_per_replica']:,} tokens per "
          "replica)")
    from accelsim.commands._common import clock_text

    from accelsim.commands._hardware import hardware_overrides

    clock = (f"clock power-limited over the measured window: {d['clock_MHz']:.0f} MHz "
             f"({dep.system.chip.power.power_limit_W:g} W limit)" if dep.power_limited
             else clock_text(dep.system))
    print(f"  {d['requests']} requests, {d['measured_requests']} measured "
          f"(offered {d['offered_requests_per_s']:.4g}/s); {clock}"
          + (f"; overridden: {hardware_overrides(args)}" if hardware_overrides(args) else ""))
    for k in ("requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
              "goodput_requests_per_s", "time_to_first_token_s_p50",
              "time_to_first_token_s_p90", "time_to_first_token_s_p99",
              "time_per_output_token_s_p50", "time_per_output_token_s_p90",
              "time_per_output_token_s_p99", "request_latency_s_p50", "request_latency_s_p90",
              "request_latency_s_p99", "kv_transfer_s_p50", "kv_transfer_s_p99",
              "mean_running_requests", "kv_cache_utilization", "preemptions",
              *(("recomputed_tokens", "kv_offloads", "kv_offloaded_bytes", "kv_offload_s")
                if d["preemptions"] else ()), "host_overhead_s", "energy_J_per_output_token", "power_W_per_gpu",
              "clock_MHz"):
        if d.get(k) is not None:
            print(f"  {k:<30} {d[k]:.4g}")
    for what, prefix in (("requests", ""), ("TTFT", "time_to_first_token_"),
                         ("TPOT", "time_per_output_token_")):
        print(f"  {what + ':':<9} " + bands[prefix].line().strip())
    return 0


def _error_bands(dep, d: dict, requests) -> dict:
    """The error bars of a serving run (issue 34 item 8) from the inference regimes of the
    validated tables: the whole-request band for throughput and latency (``error_low_pct``,
    ``error_high_pct``, ``in_domain``), the prefill band for TTFT and the decode band for TPOT
    (``time_to_first_token_error_low_pct`` ...), at the stream's mean prompt + output tokens
    (TTFT: its mean prompt; TPOT: its mean context)."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.uncertainty import Phase, inference_band

    prompt = float(requests["input_tokens"].mean())
    out = float(requests["output_tokens"].mean())
    kw = dict(gpus=d["gpus"], precision=get_scheme(d["scheme"]).compute_precision,
              params=dep.model.n_params)
    request = inference_band(dep.system, phase=Phase.REQUEST, seq=round(prompt + out), **kw)
    prefill = inference_band(dep.system, phase=Phase.PREFILL, seq=round(prompt), **kw)
    decode = inference_band(dep.system, phase=Phase.DECODE, seq=round(prompt + out / 2), **kw)
    return {"": request, "time_to_first_token_": prefill, "time_per_output_token_": decode}
