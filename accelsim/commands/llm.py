"""``accelsim llm``: one 3-D parallel GPT training plan on a node file (iteration time,
throughput, TFLOPS, MFU, memory and communication per GPU), or ``--search`` to rank plans."""

from __future__ import annotations

import argparse
import json

from accelsim.commands._common import (chip_count, dimension, model_layers, nonnegative_float,
                                       positive_int)

NAME = "llm"
HELP = ("Large-model training: predict a tensor x pipeline x data parallel GPT run on nodes like "
        "--system (time, samples/s, TFLOPS, MFU, memory and comm per GPU), or --search plans.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.llm.plan import RECOMPUTE, LlmParams
    from accelsim.llm.schemes import SCHEMES

    parser.add_argument("--system", required=True, metavar="FILE",
                        help="node file (e.g. arch_configs/dgx-h100.toml) or shipped name")
    m = parser.add_argument_group("model")
    m.add_argument("--layers", type=model_layers, required=True, metavar="L")
    for flag, meta in (("--hidden", "H"), ("--heads", "A"), ("--seq", "S"), ("--vocab", "V")):
        m.add_argument(flag, type=dimension, required=True, metavar=meta)
    m.add_argument("--ffn", type=dimension, default=None, metavar="F",
                   help="FFN size (default 4 x H)")
    m.add_argument("--untied-embeddings", action="store_true",
                   help="a separate LM-head matrix (default: tied to the word embedding)")
    m.add_argument("--flash-attention", action="store_true",
                   help="attention kernel that keeps no score matrix (causal half skipped)")
    p = parser.add_argument_group("plan")
    for flag, meta in (("--tp", "T"), ("--pp", "P"), ("--dp", "D")):
        p.add_argument(flag, type=chip_count, default=None, metavar=meta)
    p.add_argument("--micro-batch", type=positive_int, default=None, metavar="b")
    p.add_argument("--global-batch", type=positive_int, required=True, metavar="B")
    p.add_argument("--interleave", type=positive_int, default=1, metavar="v",
                   help="model chunks per pipeline stage (default 1: plain 1F1B)")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0)
    p.add_argument("--overlap-grad-reduce", action="store_true",
                   help="reduce gradients during the last backward pass (PyTorch DDP buckets)")
    p.add_argument("--no-grad-accumulation-fusion", action="store_true",
                   help="accumulate weight gradients in a separate kernel per micro-batch "
                        "(Megatron's --no-gradient-accumulation-fusion, as FP8-LM ran)")
    parser.add_argument("--scheme", choices=tuple(SCHEMES), required=True)
    parser.add_argument("--engine", choices=("analytic", "des"), default="analytic",
                        help="collective timing: closed form (default) or netsim's DES")
    parser.add_argument("--memory-reserve", type=nonnegative_float, default=None, metavar="GIB",
                        help="GiB per GPU counted on top of the training tensors (weights, "
                             "gradients, optimizer states, activations): the CUDA context, NCCL "
                             "communicator buffers and the caching allocator's reserve of a "
                             "Megatron-LM / MS-AMP run. Default "
                             f"{LlmParams().memory_reserve_GiB:g}, fitted by scripts/llm_fit.py "
                             "on FP8-LM's H100 runs and applied to every system and model as is "
                             "(also in --search's fit check); 0 for a bare tensor count. "
                             "Reported as memory_reserve_GiB, included in memory_GiB_per_gpu")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object; every key names its unit (_s seconds, "
                             "_GiB 2^30 bytes, _GB 1e9 bytes; docs/llm.md has the table)")
    s = parser.add_argument_group("search")
    s.add_argument("--search", action="store_true",
                   help="rank every plan for --gpus GPUs (or T x P x D) instead of one plan")
    s.add_argument("--gpus", type=chip_count, default=None, metavar="N")
    s.add_argument("--top", type=positive_int, default=10, metavar="K",
                   help="plans shown (default 10)")
    s.add_argument("--executor", choices=("serial", "process"), default="serial")
    s.add_argument("--workers", type=positive_int, default=None, metavar="W")
    s.add_argument("--out", default=None, metavar="OUT.csv", help="write the whole search table")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import build_system
    from accelsim.errors import UserError
    from accelsim.commands._common import system_path
    from accelsim.llm import Plan, predict
    from accelsim.workload.gpt import GptConfig

    path = system_path(args.system)
    model = GptConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, seq=args.seq,
                      vocab=args.vocab, ffn=args.ffn or 0,
                      tied_embeddings=not args.untied_embeddings,
                      flash_attention=args.flash_attention)
    # a scheme the chip has no datapath for is refused here, naming the flag (as gemm does)
    from accelsim.commands._common import require_precisions
    from accelsim.llm.schemes import get_scheme as llm_scheme

    require_precisions(build_system(path), path, [llm_scheme(args.scheme).gemm_precision],
                       f"--scheme {args.scheme}")
    if args.search:
        return _search(args, model, path, _params(args))
    missing = [f"--{n.replace('_', '-')}" for n in ("tp", "pp", "dp", "micro_batch")
               if getattr(args, n) is None]
    if missing:
        raise UserError(f"{', '.join(missing)} required for one prediction (or use --search)")
    if args.out is not None:
        raise UserError("--out is for --search tables")
    try:  # the plan's own checks (tp divides heads, ...): invalid flags, not a bug
        plan = Plan(tp=args.tp, pp=args.pp, dp=args.dp, micro_batch=args.micro_batch,
                    global_batch=args.global_batch, interleave=args.interleave,
                    recompute=args.recompute, sequence_parallel=args.sequence_parallel,
                    zero=args.zero, overlap_grad_reduce=args.overlap_grad_reduce,
                    grad_accumulation_fusion=not args.no_grad_accumulation_fusion)
        plan.check_model(model)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    system = build_system(path)
    r = predict(model, plan, args.scheme, system, _params(args), engine=args.engine)
    d = r.as_dict()
    if args.json:
        print(json.dumps(d, indent=None, sort_keys=False))
        return 0
    print(f"{model.n_params / 1e9:.2f} B parameters on {plan.gpus} GPUs "
          f"(tp {plan.tp} x pp {plan.pp} x dp {plan.dp}), {args.scheme}, {system.name}")
    for k in ("iteration_time_s", "samples_per_s", "tflops_per_gpu", "mfu", "memory_GiB_per_gpu",
              "memory_reserve_GiB", "weight_comm_GB", "activation_comm_GB", "bubble_s", "dp_comm_s"):
        print(f"  {k:<22} {d[k]:.4g}")
    cap = system.chip.memory_capacity_bytes / 2 ** 30
    if d["memory_GiB_per_gpu"] > cap:
        print(f"  warning: needs {d['memory_GiB_per_gpu']:.1f} GiB per GPU > {cap:.0f} GiB")
    return 0


def _params(args: argparse.Namespace):
    """The global parameters with the command line's overrides (the one place they are set)."""
    from accelsim.errors import UserError
    from accelsim.llm import LlmParams

    if args.memory_reserve is None:
        return LlmParams()
    try:
        return LlmParams(memory_reserve_GiB=args.memory_reserve)
    except ValueError as exc:
        raise UserError(f"--memory-reserve {args.memory_reserve:g}: {exc}") from None


def _search(args, model, path, params) -> int:
    import pandas as pd

    from accelsim.commands._common import check_output_path
    from accelsim.errors import UserError
    from accelsim.llm.search import search

    gpus = args.gpus
    if gpus is None:
        if None in (args.tp, args.pp, args.dp):
            raise UserError("--search needs --gpus N (or --tp, --pp and --dp to count them)")
        gpus = args.tp * args.pp * args.dp
    if args.out is not None:
        check_output_path(args.out, "--out")
    try:
        table = search(model, str(path), gpus, args.global_batch, args.scheme, params,
                       executor=args.executor, workers=args.workers, out=args.out)
    except KeyboardInterrupt:
        if args.out is None:
            raise
        from accelsim.commands._common import exit_interrupted, journal_rows

        exit_interrupted("llm", f"{journal_rows(args.out)} plans", args.out)
    ok = table[table["status"] == "ok"]
    bad = table[table["status"] != "ok"]["reason"]
    if ok.empty:
        first = bad.value_counts().index[0] if len(bad) else "no plan could be formed"
        raise UserError(f"none of {len(table)} plans for {gpus} GPUs fits or can be formed "
                        f"(most common reason: {first})")
    if args.json:
        print(ok.head(args.top).to_json(orient="records"))
        return 0
    print(f"{len(table)} plans, {len(ok)} fit (memory incl. a {params.memory_reserve_GiB:g} GiB "
          f"reserve per GPU, --memory-reserve); best {min(args.top, len(ok))}:")
    cols = ["tp", "pp", "dp", "micro_batch", "interleave", "recompute", "sequence_parallel",
            "zero", "samples_per_s", "tflops_per_gpu", "mfu", "memory_GiB_per_gpu"]
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(ok[cols].head(args.top).to_string(index=False))
    if len(bad):
        # grouped by the shape of the reason, each shown with one real example
        shape = bad.str.replace(r"[\d.]+", "#", regex=True)
        groups = bad.groupby(shape).agg(["size", "first"]).sort_values("size", ascending=False)
        print("not run:", "; ".join(f"{n} like '{r}'" for n, r in
                                     groups.head(5).itertuples(index=False)))
    return 0
