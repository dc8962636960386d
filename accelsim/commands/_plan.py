"""The plan flags every training front-end takes (``predict``, ``llm``): one definition of the
parallel plan (:class:`accelsim.engine.Plan`), the optimizer and the software stack's memory
reserve, so the two front-ends answer the same question with the same words."""

from __future__ import annotations

import argparse

from accelsim.commands._common import (chip_count, memory_reserve_GiB, nonnegative_int,
                                       positive_int)


def add_arguments(parser: argparse.ArgumentParser, *, global_batch_required: bool,
                  optimizer_default: str, reserve_help: str, stack_default: str | None,
                  stack_help: str) -> None:
    from accelsim.arch.schemes import OPTIMIZERS
    from accelsim.engine.plan import CP_ALGOS, FSDP_PARAM_DTYPES, RECOMPUTE
    from accelsim.engine.attention_kernels import FlashImpl
    from accelsim.engine.stack import STACKS

    p = parser.add_argument_group("plan")
    for flag, meta, what in (("--tp", "T", "tensor-parallel GPUs (inside one node; default 1)"),
                             ("--pp", "P", "pipeline stages (default 1)"),
                             ("--dp", "D", "data-parallel replicas (llm: or --gpus N)"),
                             ("--micro-batch", "b", "samples per micro-batch per replica "
                                                    "(llm default 1)")):
        p.add_argument(flag, type=positive_int if flag == "--micro-batch" else chip_count,
                       default=None, metavar=meta, help=what)
    p.add_argument("--global-batch", type=positive_int, required=global_batch_required,
                   default=None, metavar="B", help="samples per iteration over all replicas")
    p.add_argument("--ep", type=chip_count, default=1, metavar="E",
                   help="expert-parallel GPUs of a mixture-of-experts model, carved out of the "
                        "data-parallel ranks (default 1); tokens move by all-to-all")
    p.add_argument("--overlap-moe-comm", action="store_true",
                   help="hide each MoE layer's all-to-alls behind another micro-batch's "
                        "computation (DeepSeek-V3's DualPipe; Megatron-Core's "
                        "--overlap-moe-expert-parallel-comm)")
    p.add_argument("--cp", type=chip_count, default=1, metavar="C",
                   help="context-parallel GPUs: every sequence split over C ranks (after tp "
                        "inside a node; gpus = tp x pp x dp x cp; default 1)")
    p.add_argument("--cp-algo", choices=CP_ALGOS, default="ring",
                   help="how context-parallel ranks exchange keys and values: ring (KV blocks "
                        "peer to peer under the attention), allgather (the full KV per layer), "
                        "ulysses (all-to-alls over heads; heads divisible by tp x cp); default "
                        "ring")
    p.add_argument("--interleave", type=positive_int, default=1, metavar="v",
                   help="model chunks per pipeline stage (default 1: plain 1F1B)")
    _split_arguments(p)
    p.add_argument("--recompute", choices=RECOMPUTE, default="none",
                   help="activation recomputation (default none)")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0,
                   help="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also "
                        "weights (default 0)")
    p.add_argument("--overlap-grad-reduce", action="store_true",
                   help="reduce gradients during the last backward pass (PyTorch DDP buckets)")
    p.add_argument("--fsdp", action="store_true",
                   help="PyTorch FSDP (FULL_SHARD) over the data-parallel ranks: each layer's "
                        "parameters all-gathered one layer ahead of its forward and "
                        "backward pass, its gradients reduce-scattered as its backward ends, "
                        "every micro-batch (default stack: pytorch)")
    p.add_argument("--hsdp", type=chip_count, default=None, metavar="N",
                   help="HSDP: FSDP sharded within groups of N ranks, gradients all-reduced "
                        "across the dp / N replicas (implies --fsdp)")
    p.add_argument("--no-reshard-after-forward", action="store_true",
                   help="FSDP keeps each layer's gathered parameters from its forward to its "
                        "backward pass (no second gather; more memory)")
    p.add_argument("--fsdp-reduce-dtype", choices=("fp32", "bf16"), default="fp32",
                   help="FSDP's gradient reduction format (MixedPrecisionPolicy reduce_dtype; "
                        "default fp32)")
    p.add_argument("--fsdp-param-dtype", choices=tuple(FSDP_PARAM_DTYPES), default=None,
                   help="FSDP's gathered-parameter and compute format (MixedPrecisionPolicy "
                        "param_dtype; the sharded fp32 parameters stay the optimizer's); "
                        "default the scheme's compute format (bf16 for bf16 and 8-bit "
                        "schemes, fp32 for 32-bit ones)")
    p.add_argument("--autocast", choices=("on", "off"), default=None,
                   help="whether torch.autocast wraps the forward pass on the pytorch stacks "
                        "(on: fp32 weights cast per op, fp32 residual stream and norms; off "
                        "with --fsdp: the whole step in the 16-bit param dtype, as torchtitan "
                        "runs FSDP2); default off under --fsdp/--hsdp with a 16-bit param "
                        "dtype, on otherwise (docs/llm.md, FSDP)")
    _overlap_arguments(p)
    p.add_argument("--no-grad-accumulation-fusion", action="store_true",
                   help="accumulate weight gradients in a separate kernel per micro-batch "
                        "(Megatron's --no-gradient-accumulation-fusion, as FP8-LM ran)")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default=optimizer_default,
                   help="optimizer, and with the scheme every state's format "
                        f"(default {optimizer_default})")
    p.add_argument("--memory-reserve", type=memory_reserve_GiB, default=None, metavar="GIB",
                   help=reserve_help)
    p.add_argument("--stack", choices=tuple(STACKS), default=stack_default,
                   help="software stack preset (accelsim/engine/stack.py): megatron = "
                        "Megatron-LM's fused kernels as fitted (element-wise at 45 %% of HBM, "
                        "11.3 GiB reserve); pytorch = eager PyTorch (fp32 master weights under "
                        "bf16 autocast or, with --fsdp, FSDP's bf16 param dtype; fused AdamW, SDPA flash attention, one kernel per element-wise "
                        "op with a per-call floor, 0.4 GiB CUDA context; one GPU, DDP or "
                        "FSDP); pytorch-compile = pytorch under torch.compile (Inductor's fused "
                        "element-wise groups and norms). "
                        + stack_help)
    p.add_argument("--attention-kernel", choices=tuple(FlashImpl), default=None,
                   help="the fused attention kernel the stack runs (published bars: "
                        "accelsim/data/attention_kernels.csv): fa2, fa3, cudnn, triton; "
                        "default the stack's, cudnn (what SDPA and Transformer Engine prefer on "
                        "Hopper; FA2 on an A100)")
    p.add_argument("--fuse-casts", choices=("on", "off"), default=None,
                   help="casts to a GEMM input narrower than 16 bits (8-bit, 4-bit, "
                        "block-scaled) inside the kernel that produces the tensor (a GEMM's "
                        "epilogue, a LayerNorm or activation: no HBM round trip, only block "
                        "scales written) or each its own pass (read 16 bits, write the format); "
                        "default the stack's: off for megatron (Transformer Engine's cast "
                        "kernels, as FP8-LM was fitted) and pytorch")


def _split_arguments(p) -> None:
    """The uneven pipeline split's flags (:mod:`accelsim.engine.stages`)."""
    p.add_argument("--first-stage-layers", type=nonnegative_int, default=None, metavar="N",
                   help="decoder layers of the first pipeline stage, the rest split evenly "
                        "over the others (Megatron's --decoder-first-pipeline-num-layers; 0: "
                        "the embedding alone)")
    p.add_argument("--last-stage-layers", type=nonnegative_int, default=None, metavar="N",
                   help="decoder layers of the last pipeline stage (Megatron's "
                        "--decoder-last-pipeline-num-layers; 0: the output layer alone)")
    p.add_argument("--account-for-embedding", action="store_true",
                   help="count the embedding as a layer of the pipeline split: the first "
                        "stage one layer fewer (Megatron's "
                        "--account-for-embedding-in-pipeline-split)")
    p.add_argument("--account-for-loss", action="store_true",
                   help="count the output layer and loss as a layer of the split: the last "
                        "stage one layer fewer (Megatron's --account-for-loss-in-pipeline-split)")


def split_flags(args: argparse.Namespace) -> tuple[tuple[str, bool], ...]:
    """(flag, given) of the uneven split's flags."""
    return (("--first-stage-layers", args.first_stage_layers is not None),
            ("--last-stage-layers", args.last_stage_layers is not None),
            ("--account-for-embedding", args.account_for_embedding),
            ("--account-for-loss", args.account_for_loss))


def _overlap_arguments(p) -> None:
    """The communication-overlap flags (:mod:`accelsim.engine.tp_overlap`)."""
    p.add_argument("--tp-overlap", action="store_true",
                   help="tensor-parallel communication overlap (Megatron-core's "
                        "--tp-comm-overlap, Transformer Engine's userbuffers): the sequence-"
                        "parallel all-gathers and reduce-scatters in tp chunks beside their "
                        "GEMMs; needs --sequence-parallel and --tp > 1")
    p.add_argument("--pp-comm-overlap", action="store_true",
                   help="pipeline sends and receives on their own stream beside the next pass "
                        "(Megatron-core's overlap_p2p_comm; interleaved schedules only: needs "
                        "--pp > 1 and --interleave > 1)")


def params(args: argparse.Namespace, *, reserve_default: float | None = None,
           fsdp_stack: str | None = None):
    """The :class:`accelsim.engine.LlmParams` of ``--stack``, ``--attention-kernel``,
    ``--fuse-casts`` and ``--memory-reserve``.

    Without ``fsdp_stack`` (no FSDP plan): the stack megatron when not given, the reserve
    ``reserve_default`` when neither flag is given (None: the stack's). With it (an FSDP
    plan): that stack when ``--stack`` is not given, and the pytorch stack's reserve unless
    ``--memory-reserve`` is -- FSDP runs in PyTorch, whatever kernels time its layers, so
    it never gets Megatron-LM's fitted reserve."""
    from dataclasses import replace

    from accelsim.engine.plan import LlmParams
    from accelsim.engine.stack import PYTORCH, FlashKernel, get_stack
    from accelsim.errors import UserError

    reserve = args.memory_reserve
    if reserve is None and args.stack is None:
        reserve = reserve_default
    if reserve is None and fsdp_stack is not None:
        reserve = PYTORCH.memory_reserve_GiB
    stack = get_stack(args.stack or fsdp_stack or "megatron")
    if args.attention_kernel is not None:
        stack = replace(stack, flash=FlashKernel(args.attention_kernel))
    if args.fuse_casts is not None:
        stack = replace(stack, fuse_casts=args.fuse_casts == "on")
    try:
        return LlmParams(stack=stack, memory_reserve_GiB=reserve)
    except ValueError as exc:
        raise UserError(f"--memory-reserve {args.memory_reserve:g}: {exc}") from None


#: plan flags a data-parallel layer workload cannot use (name -> value that means "not used")
TRANSFORMER_ONLY = {"tp": None, "pp": None, "ep": 1, "cp": 1, "cp_algo": "ring",
                    "overlap_moe_comm": False, "interleave": 1, "recompute": "none",
                    "sequence_parallel": False, "zero": 0, "overlap_grad_reduce": False,
                    "no_grad_accumulation_fusion": False, "fsdp": False, "hsdp": None,
                    "no_reshard_after_forward": False, "fsdp_reduce_dtype": "fp32",
                    "fsdp_param_dtype": None, "autocast": None,
                    "tp_overlap": False, "pp_comm_overlap": False,
                    "first_stage_layers": None, "last_stage_layers": None,
                    "account_for_embedding": False, "account_for_loss": False,
                    "fuse_casts": None}  # a layer list's element-wise ops price no casts


def transformer_only_flags(args: argparse.Namespace) -> list[str]:
    """The plan flags given that only a transformer workload's plan understands."""
    return [f"--{k.replace('_', '-')}" for k, unused in TRANSFORMER_ONLY.items()
            if getattr(args, k) not in (unused, 1 if k in ("tp", "pp") else unused)]


def refuse_overlap_with(args: argparse.Namespace, flag: str, why: str) -> None:
    """One line when ``flag`` is given with --tp-overlap or --pp-comm-overlap (``why``: what
    that output does not model)."""
    from accelsim.errors import UserError

    given = [f for f, on in (("--tp-overlap", args.tp_overlap),
                             ("--pp-comm-overlap", args.pp_comm_overlap)) if on]
    if given:
        raise UserError(f"{flag} with {', '.join(given)}: {why}; drop one")


def build_plan(args: argparse.Namespace, *, tp: int, pp: int, dp: int, micro_batch: int,
               global_batch: int):
    """The :class:`accelsim.engine.Plan` of the flags (sizes already defaulted by the caller);
    an impossible plan is a one-line user error naming the flags."""
    from accelsim.errors import UserError
    from accelsim.engine.plan import Plan

    try:
        return Plan(tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, global_batch=global_batch,
                    interleave=args.interleave, recompute=args.recompute,
                    sequence_parallel=args.sequence_parallel, zero=args.zero,
                    overlap_grad_reduce=args.overlap_grad_reduce,
                    grad_accumulation_fusion=not args.no_grad_accumulation_fusion,
                    optimizer=args.optimizer, ep=args.ep,
                    overlap_moe_comm=args.overlap_moe_comm,
                    fsdp=args.fsdp or args.hsdp is not None, hsdp=args.hsdp or 0,
                    reshard_after_forward=not args.no_reshard_after_forward,
                    fsdp_reduce_dtype=args.fsdp_reduce_dtype,
                    fsdp_param_dtype=args.fsdp_param_dtype,
                    autocast=None if args.autocast is None else args.autocast == "on",
                    cp=args.cp,
                    cp_algo=args.cp_algo, tp_comm_overlap=args.tp_overlap,
                    pp_comm_overlap=args.pp_comm_overlap,
                    first_stage_layers=args.first_stage_layers,
                    last_stage_layers=args.last_stage_layers,
                    account_for_embedding=args.account_for_embedding,
                    account_for_loss=args.account_for_loss)
    except ValueError as exc:
        cp = f"--cp {args.cp} --cp-algo {args.cp_algo} " if args.cp > 1 else ""
        raise UserError(f"plan (--tp {tp} --pp {pp} --dp {dp} --ep {args.ep} {cp}"
                        f"--micro-batch {micro_batch} "
                        f"--global-batch {global_batch}): {exc}") from None
