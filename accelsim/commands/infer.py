"""``accelsim infer``: LLM inference -- prefill, decode steps over a KV cache, whole requests,
and a batch x context throughput-latency sweep (``--serve``)."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands import _report
from accelsim.commands._common import MAX_DIM, chip_count, dimension, memory_reserve_GiB

NAME = "infer"
HELP = "LLM inference: prefill, decode and request latency, KV cache and memory per GPU"

#: --serve's default grid
SERVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SERVE_CONTEXTS = (1024, 4096, 16384)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1 or max(vals) > MAX_DIM:
        raise argparse.ArgumentTypeError(f"expected integers in [1, {MAX_DIM:,}], got {text!r}")
    return vals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.arch.schemes import SCHEME_NAMES
    from accelsim.engine.inference import KV_BYTES

    parser.add_argument("--system", required=True, metavar="FILE",
                        help="node or chip file (e.g. arch_configs/h100-sxm.toml) or shipped name")
    parser.add_argument("--model", required=True, metavar="NAME_OR_CONFIG",
                        help="a shipped preset (gpt2-small, gpt3-175b, llama3-8b, llama3-70b, "
                             "mixtral-8x7b, deepseek-v3) or a Hugging Face config.json")
    parser.add_argument("--scheme", choices=SCHEME_NAMES, required=True,
                        help="the GEMM format of weights and activations (bf16, fp8, nvfp4, "
                             "...); embeddings and norms stay 16-bit")
    parser.add_argument("--kv-cache", choices=tuple(KV_BYTES), default="bf16",
                        help="KV-cache element type (default bf16)")
    r = parser.add_argument_group("request")
    r.add_argument("--batch", type=dimension, default=None, metavar="B",
                   help="sequences served together")
    r.add_argument("--prompt", type=dimension, default=None, metavar="T",
                   help="prefill of B prompts of T tokens: prefill_s, time_to_first_token_s")
    r.add_argument("--context", type=dimension, default=None, metavar="L",
                   help="one decode step of B sequences whose KV cache holds L tokens: "
                        "decode_step_s, decode_tokens_per_s")
    r.add_argument("--output-tokens", type=dimension, default=None, metavar="N",
                   help="with --prompt: the whole request (context growing from T to T+N): "
                        "request_latency_s, end_to_end_tokens_per_s")
    p = parser.add_argument_group("parallelism")
    p.add_argument("--tp", type=chip_count, default=1, metavar="T",
                   help="tensor-parallel GPUs (inside one node; default 1)")
    p.add_argument("--pp", type=chip_count, default=1, metavar="P",
                   help="pipeline stages (default 1)")
    p.add_argument("--ep", type=chip_count, default=1, metavar="E",
                   help="MoE: 1 (experts sliced over tp) or tp (whole experts per GPU, tokens "
                        "by all-to-all)")
    from accelsim.commands._common import add_power_arguments

    add_power_arguments(parser)
    parser.add_argument("--memory-reserve", type=memory_reserve_GiB, default=0.0, metavar="GIB",
                        help="GPU memory per GPU outside weights and KV cache (default 0)")
    s = parser.add_argument_group("serving sweep")
    s.add_argument("--serve", action="store_true",
                   help="sweep batch x context: decode throughput vs per-user speed, with "
                        "memory per GPU (table; --out CSV, --plot PNG)")
    s.add_argument("--batches", type=_int_list, default=SERVE_BATCHES, metavar="B1,B2,...",
                   help="--serve batches (default 1,2,4,...,256)")
    s.add_argument("--contexts", type=_int_list, default=SERVE_CONTEXTS, metavar="L1,L2,...",
                   help="--serve contexts (default 1024,4096,16384)")
    s.add_argument("--out", default=None, metavar="OUT.csv", help="--serve: write the table")
    s.add_argument("--plot", default=None, metavar="OUT.png",
                   help="--serve: draw throughput vs per-user tokens/s, one line per context")
    _report.add_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (units in the key names; docs/llm.md)")


def _context_note(model, tokens: int) -> None:
    """Say so when a request runs past the positions the model was built for."""
    if tokens > model.config.seq:
        print(f"note: {tokens} tokens exceed {model.name}'s {model.config.seq} positions "
              "(max_position_embeddings); the timing extrapolates", file=sys.stderr)


def _setup(args: argparse.Namespace):
    from accelsim.arch import build_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import datapath_note, require_precisions, system_path
    from accelsim.engine.decoder import Decoder
    from accelsim.engine.inference import InferencePlan
    from accelsim.errors import UserError
    from accelsim.workload.hf_config import resolve_model

    path = system_path(args.system)
    system = build_system(path)
    scheme = get_scheme(args.scheme)
    require_precisions(system, path, [scheme.compute_precision], f"--scheme {args.scheme}")
    datapath_note(system, scheme)
    from accelsim.commands._common import power_system

    system, _ = power_system(system, path, args, scheme.compute_precision)
    cfg = resolve_model(args.model)
    try:
        model = Decoder(cfg, cfg.seq, causal=True, flash_attention=True)
        plan = InferencePlan(tp=args.tp, pp=args.pp, ep=args.ep, kv_dtype=args.kv_cache)
        plan.check(model, system.chips)
    except ValueError as exc:
        hint = (" (a node file, e.g. dgx-h100, has several)"
                if "GPUs of a node" in str(exc) and system.chips == 1 else "")
        raise UserError(f"--model {args.model} --tp {args.tp} --pp {args.pp} --ep {args.ep}: "
                        f"{exc}{hint}") from None
    if plan.gpus > 1 and system.chips == 1:
        raise UserError(f"{path}: one GPU; tp x pp = {plan.gpus} needs a node file "
                        "(e.g. dgx-h100)")
    return system, model, plan


def run(args: argparse.Namespace) -> int:
    from accelsim.engine.inference import infer
    from accelsim.engine.plan import LlmParams
    from accelsim.errors import UserError

    if args.serve:
        return _serve(args)
    for flag in ("out", "plot"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag} is for --serve")
    if args.batch is None:
        raise UserError("--batch B required (or --serve)")
    if args.prompt is None and args.context is None:
        raise UserError("give --prompt T (prefill), --context L (decode), or both")
    if args.output_tokens is not None and args.prompt is None:
        raise UserError("--output-tokens needs --prompt (the request starts with it)")
    for flag, default in (("batches", SERVE_BATCHES), ("contexts", SERVE_CONTEXTS)):
        if getattr(args, flag) != default:
            raise UserError(f"--{flag} is for --serve (one prediction takes --batch / --context)")
    _report.check(args)
    system, model, plan = _setup(args)
    _context_note(model, max(args.context or 0, (args.prompt or 0) + (args.output_tokens or 0)))
    r = infer(model, system, plan, args.scheme, args.batch, prompt=args.prompt,
              context=args.context, output_tokens=args.output_tokens,
              params=LlmParams(memory_reserve_GiB=args.memory_reserve))
    _report.write(args, r.rows(), r.timeline, f"accelsim infer: {model.name}, batch "
                  f"{args.batch}, tp {plan.tp} x pp {plan.pp}, {args.scheme}")
    d = r.as_dict()
    cap = system.chip.memory_capacity_bytes / 2 ** 30
    d["fits_memory"] = d["memory_GiB_per_gpu"] <= cap
    from accelsim.engine.energy import power_note

    for e, what in ((r.prefill_energy, "the prefill"), (r.decode_energy, "a decode step")):
        note = power_note(e, what)
        if note:
            print(note, file=sys.stderr)
    if args.json:
        print(json.dumps(d))
        return 0
    print(f"{model.name}: {model.n_params / 1e9:.2f} B parameters ({model.n_active_params / 1e9:.2f}"
          f" B active) on {plan.gpus} GPU(s) of {system.name} (tp {plan.tp} x pp {plan.pp}), "
          f"{args.scheme}, batch {args.batch}")
    for k in ("prefill_s", "time_to_first_token_s", "decode_step_s", "decode_tokens_per_s",
              "request_latency_s", "end_to_end_tokens_per_s", "kv_cache_GiB", "weights_GiB",
              "memory_reserve_GiB", "memory_GiB_per_gpu", "prefill_power_W_per_gpu",
              "decode_step_power_W_per_gpu", "energy_J_per_output_token", "prefill_clock_MHz",
              "decode_clock_MHz"):
        if d.get(k) is not None:
            print(f"  {k:<26} {d[k]:.4g}")
    if not d["fits_memory"]:
        print(f"  warning: needs {d['memory_GiB_per_gpu']:.1f} GiB per GPU > {cap:.0f} GiB")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import pandas as pd

    from accelsim.commands._common import check_figure_path, check_output_path
    from accelsim.engine.inference import infer
    from accelsim.engine.plan import LlmParams
    from accelsim.errors import UserError

    if args.breakdown or args.trace:
        raise UserError("--breakdown and --trace are for one prediction, not --serve")
    for flag in ("batch", "context", "output_tokens"):
        if getattr(args, flag) is not None:
            raise UserError(f"--serve sweeps --batches and --contexts; drop --"
                            f"{flag.replace('_', '-')}")
    if args.out is not None:
        check_output_path(args.out, "--out")
    if args.plot is not None:
        check_figure_path(args.plot, "--plot")
    system, model, plan = _setup(args)
    _context_note(model, max(args.contexts) + (args.prompt or 0))
    cap = system.chip.memory_capacity_bytes / 2 ** 30
    rows = []
    for ctx in args.contexts:
        for b in args.batches:
            r = infer(model, system, plan, args.scheme, b, context=ctx,
                      prompt=args.prompt, params=LlmParams(memory_reserve_GiB=args.memory_reserve))
            d = r.as_dict()
            rows.append({"batch": b, "context_tokens": ctx,
                         "decode_step_s": d["decode_step_s"],
                         "decode_tokens_per_s": d["decode_tokens_per_s"],
                         "tokens_per_s_per_user": 1.0 / d["decode_step_s"],
                         "time_to_first_token_s": d.get("time_to_first_token_s"),
                         "kv_cache_GiB": d["kv_cache_GiB"],
                         "memory_GiB_per_gpu": d["memory_GiB_per_gpu"],
                         "fits_memory": d["memory_GiB_per_gpu"] <= cap})
    df = pd.DataFrame(rows)
    if args.prompt is None:
        df = df.drop(columns="time_to_first_token_s")
    if args.out is not None:
        df.to_csv(args.out, index=False, float_format="%.6g")
        print(f"wrote {args.out}: {len(df)} points", file=sys.stderr)
    if args.plot is not None:
        from accelsim.report.serve import plot_serve

        plot_serve(df, args.plot, f"{model.name} on {system.name}, tp {plan.tp} x pp {plan.pp}, "
                             f"{args.scheme}")
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.json:
        print(df.to_json(orient="records"))
        return 0
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(df.to_string(index=False))
    return 0
