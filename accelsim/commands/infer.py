"""``accelsim infer``: LLM inference -- prefill, decode steps over a KV cache, whole requests,
and a batch x context throughput-latency sweep (``--serve``)."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands import _chakra, _report
from accelsim.commands._common import MAX_DIM, chip_count, dimension, memory_reserve_GiB

NAME = "infer"
HELP = "LLM inference: prefill, decode and request latency, KV cache and memory per GPU"

#: --serve's default grid
SERVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SERVE_CONTEXTS = (1024, 4096, 16384)
#: most --serve points (batches x contexts): each is a prefill and decode prediction of ~30 ms,
#: so 1,000 take about half a minute (with a progress bar on a terminal)
MAX_SERVE_POINTS = 1_000


def _int_list(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1 or max(vals) > MAX_DIM:
        raise argparse.ArgumentTypeError(f"expected integers in [1, {MAX_DIM:,}], got "
                                         f"{text[:80]!r}")
    if len(vals) > MAX_SERVE_POINTS:
        raise argparse.ArgumentTypeError(f"{len(vals):,} values, more than the "
                                         f"{MAX_SERVE_POINTS:,} --serve points in all")
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
    from accelsim.commands._common import add_attention_variant_arguments

    add_attention_variant_arguments(parser)
    r = parser.add_argument_group("request")
    r.add_argument("--batch", type=dimension, default=None, metavar="B",
                   help="sequences served together (required for one prediction; --serve "
                   "takes --batches)")
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
    from accelsim.engine.plan import CP_ALGOS

    p.add_argument("--cp", type=chip_count, default=1, metavar="C",
                   help="context parallelism for a long prompt: its prefill split over C ranks "
                        "(after tp; gpus = tp x pp x cp), each keeping 1/C of the KV cache "
                        "(default 1)")
    p.add_argument("--cp-algo", choices=CP_ALGOS, default="ring",
                   help="how context-parallel ranks exchange keys and values in the prefill: "
                        "ring, allgather or ulysses (as llm's; default ring)")
    from accelsim.commands._common import add_power_arguments

    add_power_arguments(parser)
    from accelsim.commands._hardware import add_hardware_arguments

    add_hardware_arguments(parser)
    parser.add_argument("--memory-reserve", type=memory_reserve_GiB, default=0.0, metavar="GIB",
                        help="GPU memory per GPU outside weights and KV cache (default 0)")
    s = parser.add_argument_group("serving sweep")
    s.add_argument("--serve", action="store_true",
                   help="sweep batch x context: decode throughput vs per-user speed, with "
                        "memory per GPU (table; --out CSV, --plot PNG)")
    s.add_argument("--batches", type=_int_list, default=SERVE_BATCHES, metavar="B1,B2,...",
                   help="--serve batches (default 1,2,4,...,256; at most "
                        f"{MAX_SERVE_POINTS:,} batches x contexts)")
    s.add_argument("--contexts", type=_int_list, default=SERVE_CONTEXTS, metavar="L1,L2,...",
                   help="--serve contexts (default 1024,4096,16384)")
    s.add_argument("--out", default=None, metavar="OUT.csv", help="--serve: write the table")
    s.add_argument("--plot", default=None, metavar="OUT.png",
                   help="--serve: draw throughput vs per-user tokens/s, one line per context")
    _report.add_arguments(parser)
    _chakra.add_arguments(parser)
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
    from accelsim.commands._common import (attention_variant, datapath_note, power_system,
                                           require_precisions, system_path)
    from accelsim.errors import UserError
    from accelsim.llm.inference import inference_model, inference_plan
    from accelsim.workload.hf_config import resolve_model

    from accelsim.commands._hardware import hardware_system

    path = system_path(args.system)
    system = hardware_system(build_system(path), args)
    scheme = get_scheme(args.scheme)
    require_precisions(system, path, [scheme.compute_precision], f"--scheme {args.scheme}")
    datapath_note(system, scheme)
    system, _ = power_system(system, path, args, scheme.compute_precision)
    model = inference_model(attention_variant(resolve_model(args.model), args))
    try:
        plan = inference_plan(system, model, tp=args.tp, pp=args.pp, ep=args.ep,
                              kv_cache=args.kv_cache, cp=args.cp, cp_algo=args.cp_algo)
    except ValueError as exc:
        hint = (" (a node file, e.g. dgx-h100, has several)"
                if "GPUs of a node" in str(exc) and system.chips == 1 else "")
        cp = f" --cp {args.cp}" if args.cp > 1 else ""
        raise UserError(f"--model {args.model} --tp {args.tp} --pp {args.pp} --ep {args.ep}"
                        f"{cp}: {exc}{hint}") from None
    return system, model, plan


def run(args: argparse.Namespace) -> int:
    from accelsim.arch.schemes import get_scheme
    from accelsim.llm.inference import infer
    from accelsim.errors import UserError

    if args.serve:
        _chakra.refuse_with(args, "--serve")
        if args.cp != 1 or args.cp_algo != "ring":
            raise UserError("--serve sweeps decode steps; context parallelism (--cp, --cp-algo) "
                            "is for one long-prompt prediction")
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
    _chakra.check(args)
    system, model, plan = _setup(args)
    _context_note(model, max(args.context or 0, (args.prompt or 0) + (args.output_tokens or 0)))
    r = infer(system, model, args.scheme, args.batch, prompt=args.prompt, context=args.context,
              output_tokens=args.output_tokens, tp=plan.tp, pp=plan.pp, ep=plan.ep,
              kv_cache=plan.kv_dtype, cp=plan.cp, cp_algo=plan.cp_algo,
              memory_reserve_GiB=args.memory_reserve)
    _report.write(args, r.rows(), r.timeline, f"accelsim infer: {model.name}, batch "
                  f"{args.batch}, tp {plan.tp} x pp {plan.pp}{_cp_text(plan)}, {args.scheme}")
    _chakra.export(args, r)
    from accelsim.commands._common import clock_text, not_fit_line
    from accelsim.commands._hardware import hardware_overrides

    d = r.as_dict()
    from accelsim.engine.energy import power_note
    from accelsim.engine.uncertainty import Phase, inference_band

    phase = (Phase.REQUEST if args.output_tokens is not None else
             Phase.PREFILL if args.context is None else Phase.DECODE)
    band = inference_band(system, phase=phase, gpus=plan.gpus,
                          precision=get_scheme(args.scheme).compute_precision,
                          seq={Phase.REQUEST: (args.prompt or 0) + (args.output_tokens or 0),
                               Phase.PREFILL: args.prompt, Phase.DECODE: args.context}[phase],
                          params=model.n_params)
    d.update(band.as_dict())
    for e, what in ((r.prefill_energy, "the prefill"), (r.decode_energy, "a decode step")):
        note = power_note(e, what)
        if note:
            print(note, file=sys.stderr)
    if args.json:
        print(json.dumps(d))
        return 0
    if not d["fits_memory"]:
        print(not_fit_line(d["memory_GiB_per_gpu"], d["memory_capacity_GiB"], "GPU",
                           "a smaller --batch or context, more --tp / --pp, --kv-cache fp8 or "
                           "a narrower --scheme"))
    print(f"{model.name}: {model.n_params / 1e9:.2f} B parameters ({model.n_active_params / 1e9:.2f}"
          f" B active) on {plan.gpus} GPU(s) of {system.name} (tp {plan.tp} x pp {plan.pp}"
          f"{_cp_text(plan)}), "
          f"{args.scheme}, batch {args.batch}")
    print(f"  settings: KV cache {plan.kv_dtype}, ep {plan.ep}, flash attention on (prefill), "
          f"memory reserve {d['memory_reserve_GiB']:g} GiB, {clock_text(system)}"
          + (f"; overridden: {hardware_overrides(args)}" if hardware_overrides(args) else ""))
    for k in ("prefill_s", "time_to_first_token_s", "decode_step_s", "decode_tokens_per_s",
              "request_latency_s", "end_to_end_tokens_per_s", "kv_cache_GiB", "weights_GiB",
              "memory_reserve_GiB", "memory_GiB_per_gpu", "prefill_power_W_per_gpu",
              "decode_step_power_W_per_gpu", "energy_J_per_output_token", "prefill_clock_MHz",
              "decode_clock_MHz"):
        if d.get(k) is not None:
            print(f"  {k:<26} {d[k]:.4g}")
    print(band.line())
    return 0


def _cp_text(plan) -> str:
    return f" x cp {plan.cp} ({plan.cp_algo})" if plan.cp > 1 else ""


def _serve(args: argparse.Namespace) -> int:
    import pandas as pd

    from accelsim.commands._common import check_figure_path, check_outputs
    from accelsim.llm.inference import infer
    from accelsim.errors import UserError

    if args.breakdown or args.trace:
        raise UserError("--breakdown and --trace are for one prediction, not --serve")
    for flag in ("batch", "context", "output_tokens"):
        if getattr(args, flag) is not None:
            raise UserError(f"--serve sweeps --batches and --contexts; drop --"
                            f"{flag.replace('_', '-')}")
    check_outputs([("--out", args.out, (".csv",)), ("--plot", args.plot, ())])
    if args.plot is not None:
        check_figure_path(args.plot, "--plot")  # any case: .png or .PNG
    n_points = len(args.batches) * len(args.contexts)
    if n_points > MAX_SERVE_POINTS:
        raise UserError(f"--serve: {len(args.batches):,} --batches x {len(args.contexts):,} "
                        f"--contexts = {n_points:,} points, more than the {MAX_SERVE_POINTS:,} "
                        "a serving sweep runs; split the grid over several runs")
    system, model, plan = _setup(args)
    from accelsim.commands._hardware import hardware_note

    if hardware_note(system, args):  # the table has no settings line to say it
        print(hardware_note(system, args), file=sys.stderr)
    _context_note(model, max(args.contexts) + (args.prompt or 0))
    rows = []
    from tqdm.auto import tqdm

    grid = [(ctx, b) for ctx in args.contexts for b in args.batches]
    # a bar on a terminal only (disable=None), gone when done: the table is the output
    for ctx, b in tqdm(grid, desc="infer --serve", unit="pt", disable=None, leave=False):
        r = infer(system, model, args.scheme, b, context=ctx, prompt=args.prompt,
                  tp=plan.tp, pp=plan.pp, ep=plan.ep, kv_cache=plan.kv_dtype,
                  memory_reserve_GiB=args.memory_reserve)
        d = r.as_dict()
        rows.append({"batch": b, "context_tokens": ctx,
                     "decode_step_s": d["decode_step_s"],
                     "decode_tokens_per_s": d["decode_tokens_per_s"],
                     "tokens_per_s_per_user": 1.0 / d["decode_step_s"],
                     "time_to_first_token_s": d.get("time_to_first_token_s"),
                     "kv_cache_GiB": d["kv_cache_GiB"],
                     "memory_GiB_per_gpu": d["memory_GiB_per_gpu"],
                     "fits_memory": d["fits_memory"]})
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
