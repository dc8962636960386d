"""``accelsim llm``: one 3-D parallel GPT training plan on a node file (iteration time,
throughput, TFLOPS, MFU, memory and communication per GPU), or ``--search`` to rank plans."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands import _chakra, _plan, _report
from accelsim.commands._common import (add_attention_variant_arguments, add_flash_argument,
                                       attention_variant, chip_count, dimension, float_type,
                                       model_layers, positive_int)

NAME = "llm"
HELP = ("Large-model training: predict a tensor x pipeline x data (x expert) parallel run of a "
        "GPT, Llama or MoE model on nodes like --system (time, samples/s, TFLOPS, MFU, memory, "
        "comm and energy per GPU), or --search plans.")

#: tokens per sample when ``--model`` is given without ``--seq`` (a model's positions are its
#: longest context, often 32k-160k after long-context extension, not the length it trains at);
#: a model with fewer positions runs at all of them
DEFAULT_SEQ = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.arch.schemes import SCHEME_NAMES
    from accelsim.engine.plan import LlmParams

    parser.add_argument("--system", required=True, metavar="FILE",
                        help="node file (e.g. arch_configs/dgx-h100.toml) or shipped name")
    m = parser.add_argument_group("model (--model, or every dimension flag; flags override)")
    m.add_argument("--model", default=None, metavar="NAME_OR_CONFIG",
                   help="a shipped preset (gpt2-small, gpt3-175b, llama3-8b, llama3-70b, "
                        "mixtral-8x7b, deepseek-v3) or a Hugging Face config.json: GPT, "
                        "GQA/MQA, SwiGLU/GeGLU, RMSNorm, rotary, MoE (with --ep) and MLA models")
    m.add_argument("--layers", type=model_layers, default=None, metavar="L",
                   help="decoder layers (with --model: overrides the model's)")
    for flag, meta, what in (("--hidden", "H", "hidden size"), ("--heads", "A", "attention heads"),
                             ("--seq", "S", f"tokens per sample (with --model default: "
                                            f"{DEFAULT_SEQ}, or the model's positions when "
                                            "fewer, e.g. gpt2-small 1024; a note says so)"),
                             ("--vocab", "V", "vocabulary size")):
        m.add_argument(flag, type=dimension, default=None, metavar=meta,
                       help=what + ("" if flag == "--seq" else " (with --model: an override)"))
    m.add_argument("--ffn", type=dimension, default=None, metavar="F",
                   help="FFN size (default 4 x H)")
    m.add_argument("--untied-embeddings", action="store_true",
                   help="a separate LM-head matrix (default: tied to the word embedding)")
    m.add_argument("--dropout", type=float_type(0.0, 1.0), default=None, metavar="P",
                   help="training dropout probability on the residual branches, the embedding "
                        "and the attention probabilities, in [0, 1); 0 keeps no dropout "
                        "masks (default: the model's: 0.1 for GPT, as Megatron-LM's defaults; "
                        "a config.json's own, e.g. 0 for Llama)")
    add_flash_argument(m)
    add_attention_variant_arguments(m)
    parser.add_argument("--scheme", choices=SCHEME_NAMES, required=True,
                        help="training scheme (one registry with predict's); with "
                             "--optimizer it fixes every state format")
    from accelsim.commands._common import add_power_arguments

    add_power_arguments(parser)
    from accelsim.commands._hardware import add_hardware_arguments

    add_hardware_arguments(parser)
    parser.add_argument("--engine", choices=("analytic", "des"), default="analytic",
                        help="collective timing: closed form (default) or netsim's DES")
    parser.add_argument("--fusion", choices=("on",), default="on",
                        help="kept for scripts: fusion is the stack's (--stack megatron: "
                             "Megatron-LM's fused kernels; --stack pytorch: eager, one kernel "
                             "per element-wise op)")
    _plan.add_arguments(
        parser, global_batch_required=True, optimizer_default="adamw",
        reserve_help="GiB per GPU counted on top of the training tensors (weights, "
        "gradients, optimizer states, activations): the CUDA context, NCCL communicator "
        "buffers and the caching allocator's reserve of a Megatron-LM / MS-AMP run. Default "
        f"{LlmParams().memory_reserve_GiB:g}, fitted by scripts/llm_fit.py on FP8-LM's H100 "
        "runs and applied to every system and model as is (also in --search's fit check); "
        "0 for a bare tensor count. Reported as memory_reserve_GiB, included in "
        "memory_GiB_per_gpu; --stack pytorch: 0.4",
        stack_default=None,
        stack_help="Default megatron (as llm has always timed); pytorch with --fsdp/--hsdp.")
    _report.add_arguments(parser)
    _chakra.add_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object; every key names its unit (_s seconds, "
                             "_GiB 2^30 bytes, _GB 1e9 bytes; docs/llm.md has the table)")
    s = parser.add_argument_group("search")
    s.add_argument("--search", action="store_true",
                   help="rank every plan for --gpus GPUs (or T x P x D) instead of one plan")
    s.add_argument("--gpus", type=chip_count, default=None, metavar="N",
                   help="GPUs of the run: with --search the count to plan for; for one plan "
                        "dp = N / (tp x pp)")
    s.add_argument("--top", type=positive_int, default=10, metavar="K",
                   help="plans shown (default 10)")
    s.add_argument("--executor", choices=("serial", "process"), default="serial")
    s.add_argument("--workers", type=positive_int, default=None, metavar="W")
    s.add_argument("--out", default=None, metavar="OUT.csv", help="write the whole search table")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch import build_system
    from accelsim.errors import UserError
    from accelsim.commands._common import system_path
    from accelsim.engine import Options, simulate
    from accelsim.workload.gpt import GptConfig

    path = system_path(args.system)
    model, seq_note = _model(args)
    if args.search and (args.breakdown or args.trace):
        raise UserError("--breakdown and --trace are for one prediction, not --search")
    # a scheme the chip has no datapath for is refused here, naming the flag (as gemm does);
    # one it computes no faster than its high precision gets predict's note
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands._common import (check_scheme_optimizer, datapath_note,
                                           require_precisions)

    from accelsim.commands._hardware import hardware_overrides, hardware_system

    system = hardware_system(build_system(path), args)
    scheme = get_scheme(args.scheme)
    require_precisions(system, path, [scheme.compute_precision], f"--scheme {args.scheme}")
    check_scheme_optimizer([args.scheme], args.optimizer)
    datapath = datapath_note(system, scheme)
    from accelsim.commands._common import power_system

    system, _ = power_system(system, path, args, scheme.compute_precision)
    if args.search:
        _chakra.refuse_with(args, "--search")
        if args.stack not in (None, "megatron"):
            raise UserError(f"--search --stack {args.stack}: the plan search ranks Megatron-LM "
                            "3-D parallel plans (--stack megatron)")
        return _search(args, model, path, _params(args), seq_note)
    tp, pp = args.tp or 1, args.pp or 1
    dp = args.dp
    if args.gpus is not None:
        cp = f" x --cp {args.cp}" if args.cp > 1 else ""
        if args.gpus % (tp * pp * args.cp):
            raise UserError(f"--gpus {args.gpus} is not a multiple of --tp {tp} x --pp {pp}{cp}")
        if dp is not None and dp * tp * pp * args.cp != args.gpus:
            raise UserError(f"--gpus {args.gpus} != --tp {tp} x --pp {pp} x --dp {dp}{cp}")
        dp = args.gpus // (tp * pp * args.cp)
    if dp is None:
        raise UserError("--dp D or --gpus N required for one prediction (or use --search)")
    if args.out is not None:
        raise UserError("--out is for --search tables")
    plan = _plan.build_plan(args, tp=tp, pp=pp, dp=dp, micro_batch=args.micro_batch or 1,
                            global_batch=args.global_batch)
    try:  # the plan's own checks (tp divides heads, a TP group in a node): invalid flags
        plan.check_model(model)
        plan.check_placement(system.chips)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _report.check(args)
    _chakra.check(args)
    if args.chakra is not None:
        _plan.refuse_overlap_with(args, "--chakra", "the export runs each collective whole, "
                                  "in line")
    if seq_note:  # after every check, so that an error stays one line
        print(seq_note, file=sys.stderr)
    r = simulate(system, model, plan, args.scheme,
                 Options(stack=_params(args, model), collective_engine=args.engine))
    _report.write(args, r.rows(), r.timeline, f"accelsim llm: {model.n_params / 1e9:.3g} B "
                  f"parameters, tp {plan.tp} x pp {plan.pp} x dp {plan.dp} (ep {plan.ep}), "
                  f"{args.scheme}")
    _chakra.export(args, r)
    from accelsim.commands._common import clock_text, not_fit_line

    d = r.as_dict()
    d["datapath"] = datapath  # the rate key its GEMMs ran at (the note says when not its own)
    d["fuse_casts"] = _params(args, model).stack.fuse_casts
    from accelsim.engine.energy import power_note
    from accelsim.engine.uncertainty import training_band

    band = training_band(system, gpus=plan.gpus, precision=scheme.compute_precision,
                         stack=_params(args).stack.name, seq=d["seq"], params=d["params"])
    d.update(band.as_dict())
    note = power_note(r.energy, "the iteration")
    if note:
        print(note, file=sys.stderr)
    if args.json:
        print(json.dumps(d, indent=None, sort_keys=False))
        return 0
    if not d["fits_memory"]:
        print(not_fit_line(d["memory_GiB_per_gpu"], d["memory_capacity_GiB"], "GPU",
                           f"--memory-reserve {d['memory_reserve_GiB']:g} included; more "
                           "--tp / --pp, --zero, --recompute, a smaller --micro-batch or --seq"))
    active = "" if d["active_params"] == d["params"] else \
        f" ({d['active_params'] / 1e9:.2f} B active)"
    print(f"{d['model']}: {model.n_params / 1e9:.2f} B parameters{active}, seq {d['seq']}, on "
          f"{plan.gpus} GPUs (tp {plan.tp} x pp {plan.pp} x dp {plan.dp}"
          + (f", ep {plan.ep}" if plan.ep > 1 else "")
          + (f" x cp {plan.cp} {plan.cp_algo}" if plan.cp > 1 else "")
          + f"), {args.scheme}, {system.name}")
    params = _params(args, model)
    from accelsim.engine.attention_kernels import gpu_class, resolved
    from accelsim.engine.decoder import Decoder

    kernel = resolved(params.stack.flash.impl, gpu_class(system.chip))
    dm = Decoder.of(model)
    variant = "".join([", ALiBi" if dm.alibi else "", f", window {dm.window}" if dm.window else ""])
    from accelsim.arch.model import OPERAND_BYTES

    casts = "" if OPERAND_BYTES[scheme.compute_precision] >= 2 else \
        f" (casts {'fused' if params.stack.fuse_casts else 'unfused'})"
    casts += f", autocast {'on' if d['autocast'] else 'off'}" if params.stack.autocast else ""
    print(f"  settings: optimizer {plan.optimizer}, stack {params.stack.name}{casts}, flash "
          f"attention {f'on ({kernel})' if model.flash_attention else 'off'}{variant}, micro-batch "
          f"{plan.micro_batch}, global "
          f"batch {plan.global_batch}, recompute {plan.recompute}, "
          + (f"fsdp (shard group {plan.shard_group}, reshard after forward "
             f"{'on' if plan.reshard_after_forward else 'off'}, param "
             f"{d['fsdp_param_dtype']}, reduce "
             f"{plan.fsdp_reduce_dtype}), " if plan.fsdp else "") + f"zero {plan.zero}, sequence "
          f"parallel {'on' if plan.sequence_parallel else 'off'}, interleave {plan.interleave}, "
          + ("" if plan.stage_split.even else _split_text(model, plan))
          + ("tp overlap on, " if plan.tp_comm_overlap else "")
          + ("pp comm overlap on, " if plan.pp_comm_overlap else "") +
          f"network efficiency {system.network_efficiency:g} ({args.engine}), memory reserve "
          f"{d['memory_reserve_GiB']:g} GiB, {clock_text(system)}"
          + (f"; overridden: {hardware_overrides(args)}" if hardware_overrides(args) else ""))
    for k in ("iteration_time_s", "samples_per_s", "tflops_per_gpu", "mfu", "memory_GiB_per_gpu",
              "memory_reserve_GiB", "weight_comm_GB", "activation_comm_GB", "bubble_s", "dp_comm_s",
              "power_W_per_gpu", "clock_MHz"):
        if d[k] is not None:
            print(f"  {k:<22} {d[k]:.4g}")
    if plan.tp_comm_overlap:  # the part of the TP collectives their GEMMs leave exposed
        print(f"  {'tp_comm_exposed_s':<22} {d['tp_comm_exposed_s']:.4g}")
    print(band.line())
    return 0


def _split_text(model, plan) -> str:
    """The uneven split and the layers of each stage it gives, for the settings line."""
    from accelsim.engine.decoder import Decoder

    counts = [sum(s) for s in Decoder.of(model).stage_layers(plan.pp, plan.interleave,
                                                              plan.stage_split)]
    return f"stages {plan.stage_split.describe()} (layers {counts}), "


def _model(args: argparse.Namespace):
    """(the GPT to time, the note on its sequence length or None): ``--model`` (a preset or a
    config.json, each dimension flag overriding it) or the dimension flags alone (all of
    them)."""
    from dataclasses import replace

    from accelsim.errors import UserError
    from accelsim.workload.gpt import GptConfig

    dims = {k: getattr(args, k) for k in ("layers", "hidden", "heads", "seq", "vocab")}
    if args.model is None:
        missing = [f"--{k}" for k, v in dims.items() if v is None]
        if missing:
            raise UserError(f"{', '.join(missing)} required (or --model NAME_OR_CONFIG)")
        try:
            gpt = GptConfig(**dims, ffn=args.ffn or 0, tied_embeddings=not args.untied_embeddings,
                            flash_attention=args.flash_attention, **_dropout(args))
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if not (args.alibi or args.window is not None):
            return gpt, None
        from accelsim.engine.decoder import Decoder
        from accelsim.workload.transformer import TransformerConfig

        tc = attention_variant(TransformerConfig.from_gpt(gpt), args)
        return Decoder(tc, gpt.seq, flash_attention=args.flash_attention), None
    from accelsim.workload.hf_config import resolve_model

    tc = attention_variant(resolve_model(args.model), args)
    seq, note = (args.seq, None) if args.seq is not None else default_seq(tc.name, tc.seq)
    over = {k: v for k, v in dims.items() if v is not None and k != "seq"}
    if args.ffn is not None:
        over["ffn"] = args.ffn
    if args.untied_embeddings:
        over["tied_embeddings"] = False
    over.update(_dropout(args))
    try:
        gpt = tc.as_gpt(seq=seq, flash_attention=args.flash_attention)
    except ValueError:
        gpt = None  # GQA, SwiGLU, MoE, MLA, ...: the decoder the engine lowers
    try:
        if gpt is not None:
            return (replace(gpt, **over) if over else gpt), note
        from accelsim.engine.decoder import Decoder

        if "ffn" in over:
            over["ffn_size"] = over.pop("ffn")
        if "hidden" in over or "heads" in over:
            over["head_dim"] = None  # re-derived from the new hidden / heads
        return Decoder(replace(tc, **over) if over else tc, seq,
                       flash_attention=args.flash_attention), note
    except ValueError as exc:
        raise UserError(f"--model {args.model}: {exc}") from None


def _dropout(args: argparse.Namespace) -> dict[str, float]:
    """The model fields ``--dropout`` sets (none without it)."""
    if args.dropout is None:
        return {}
    return {"hidden_dropout": args.dropout, "attention_dropout": args.dropout}


def default_seq(name: str, positions: int) -> tuple[int, str]:
    """(sequence length, a one-line note naming ``--seq``) of ``--model`` without ``--seq``:
    :data:`DEFAULT_SEQ`, or all of the model's ``positions`` when it has fewer."""
    if positions > DEFAULT_SEQ:
        return DEFAULT_SEQ, (f"note: sequence length {DEFAULT_SEQ} (the default; {name} allows "
                             f"{positions} positions; set --seq)")
    return positions, (f"note: sequence length {positions} ({name}'s positions, "
                       f"{'the same as' if positions == DEFAULT_SEQ else 'fewer than'} the "
                       f"{DEFAULT_SEQ} default; set --seq)")


def _params(args: argparse.Namespace, model=None):
    """The global parameters with the command line's overrides (the one place they are set).
    An FSDP plan without ``--stack`` runs on the pytorch stack where its eager kernels express
    ``model`` and the scheme (dense decoders, 16- or 32-bit GEMMs), else on megatron's kernels;
    either way with PyTorch's memory reserve."""
    if not (args.fsdp or args.hsdp is not None):
        return _plan.params(args)
    from accelsim.arch.model import OPERAND_BYTES
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.pytorch_kernels import check_model
    from accelsim.errors import InputError

    stack = "pytorch"
    try:
        if model is not None:
            check_model(model)
    except InputError:
        stack = "megatron"
    from accelsim.engine.float8 import RECIPES

    if OPERAND_BYTES[get_scheme(args.scheme).formats(args.optimizer).gemm_precision] < 2 \
            and args.scheme not in RECIPES:
        stack = "megatron"  # 8-bit GEMMs other than torchao's: Transformer Engine's path
    return _plan.params(args, fsdp_stack=stack)


def _search(args, model, path, params, seq_note: str | None) -> int:
    import pandas as pd

    from accelsim.commands._common import TABLE_SUFFIXES, check_output_path
    from accelsim.errors import UserError
    from accelsim.llm.search import REFINE_PLANS, search

    gpus = args.gpus
    if gpus is None:
        if None in (args.tp, args.pp, args.dp):
            raise UserError("--search needs --gpus N (or --tp, --pp and --dp to count them)")
        gpus = args.tp * args.pp * args.dp
    if args.out is not None:
        check_output_path(args.out, "--out", suffixes=TABLE_SUFFIXES)
    # the plan flags the search does not explore (it would silently drop them)
    fixed = [flag for flag, on in (
        ("--overlap-grad-reduce", args.overlap_grad_reduce),
        ("--no-grad-accumulation-fusion", args.no_grad_accumulation_fusion),
        ("--overlap-moe-comm", args.overlap_moe_comm), ("--engine des", args.engine != "analytic"),
        ("--cp", args.cp != 1), ("--cp-algo", args.cp_algo != "ring"),
        ("--fsdp", args.fsdp or args.hsdp is not None), ("--tp-overlap", args.tp_overlap),
        ("--fsdp-param-dtype", args.fsdp_param_dtype is not None),
        ("--autocast", args.autocast is not None),
        ("--pp-comm-overlap", args.pp_comm_overlap),
        *_plan.split_flags(args),
        ("--sequence-parallel", args.sequence_parallel), ("--zero", args.zero != 0),
        ("--recompute", args.recompute != "none"), ("--interleave", args.interleave != 1),
        ("--micro-batch", args.micro_batch is not None), ("--ep", args.ep != 1),
        ("--power-limit-W", args.power_limit_W is not None),
        ("--memory-capacity-GiB", args.memory_capacity_GiB is not None),
        ("--memory-bandwidth-GBps", args.memory_bandwidth_GBps is not None),
        ("--frequency-GHz", args.frequency_GHz is not None)) if on]
    if fixed:
        raise UserError(f"--search explores tp, pp, micro-batch, interleave, recompute, sequence "
                        f"parallelism, ZeRO (and ep for MoE) with the default collective engine; "
                        f"drop {', '.join(fixed)} (or time that one plan without --search)")
    from accelsim.engine.decoder import Decoder

    variants = [f for f, on in (("--alibi", args.alibi), ("--window", args.window is not None))
                if on]
    if variants:  # the search's workers rebuild the model from --model: they would drop them
        raise UserError(f"--search takes the model as --model gives it: drop "
                        f"{', '.join(variants)} (or time that one plan without --search)")
    source = None
    if isinstance(model, Decoder):
        over = [f"--{k}" for k in ("layers", "hidden", "heads", "vocab", "ffn")
                if getattr(args, k) is not None]
        if over or args.untied_embeddings:
            raise UserError(f"--search takes --model {args.model} as it is: drop "
                            f"{', '.join(over or ['--untied-embeddings'])}")
        source = args.model
    if seq_note:
        print(seq_note, file=sys.stderr)
    try:
        table = search(model, str(path), gpus, args.global_batch, args.scheme, params,
                       optimizer=args.optimizer, executor=args.executor, model_source=source,
                       workers=args.workers, out=args.out, progress=True, clock=args.clock,
                       refine=max(args.top, REFINE_PLANS))
    except KeyboardInterrupt:
        if args.out is None:
            raise
        from accelsim.commands._common import exit_interrupted, journal_rows

        exit_interrupted("llm", f"{journal_rows(args.out)} plans", args.out)
    if args.out is not None:
        print(f"wrote {args.out}: {len(table)} plans (status, reason and outputs per plan)",
              file=sys.stderr)
    ok = table[table["status"] == "ok"]
    bad = table[table["status"] != "ok"]["reason"]
    if ok.empty:
        # the commonest reasons by shape (numbers aside), each with one real example
        shape = bad.str.replace(r"[\d.]+", "#", regex=True)
        groups = bad.groupby(shape).agg(["size", "first"]).sort_values("size", ascending=False)
        why = "; ".join(f"{n} like '{r}'" for n, r in groups.head(3).itertuples(index=False)) \
            if len(bad) else "no plan could be formed"
        raise UserError(f"none of {len(table)} plans for {gpus} GPUs fits or can be formed: "
                        f"{why}")
    if args.json:
        print(ok.head(args.top).to_json(orient="records"))
        return 0
    print(f"{len(table)} plans, {len(ok)} fit (memory incl. a {params.memory_reserve_GiB:g} GiB "
          f"reserve per GPU, --memory-reserve); best {min(args.top, len(ok))}"
          + (f" (ranked at the preset's clock, the best {max(args.top, REFINE_PLANS)} re-timed "
             "at their power-limited one)" if args.clock == "power"
             and ok["clock_MHz"].notna().any() else "") + ":")
    cols = ["tp", "pp", "dp", "micro_batch", "interleave", "recompute", "sequence_parallel",
            "zero", "samples_per_s", "tflops_per_gpu", "mfu", "memory_GiB_per_gpu", "clock_MHz"]
    if "ep" in ok.columns:
        cols.insert(3, "ep")
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(ok[cols].head(args.top).to_string(index=False))
    if len(bad):
        # grouped by the shape of the reason, each shown with one real example
        shape = bad.str.replace(r"[\d.]+", "#", regex=True)
        groups = bad.groupby(shape).agg(["size", "first"]).sort_values("size", ascending=False)
        print("not run:", "; ".join(f"{n} like '{r}'" for n, r in
                                     groups.head(5).itertuples(index=False)))
    return 0
