"""``accelsim op KIND``: time one op of the engine's op graph on a system -- ``gemm`` (the same
as ``accelsim gemm``) or ``attention`` -- with the formulas every front-end uses
(:mod:`accelsim.engine.graph`)."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands import gemm as gemm_command
from accelsim.commands._common import dimension, scheme_choices

NAME = "op"
HELP = ("Time one op of the op graph on one chip of a system: gemm (as `accelsim gemm`) or "
        "attention (forward, backward, FLOPs, bytes, bound).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True,
                                  parser_class=type(parser))
    g = kinds.add_parser("gemm", help=gemm_command.HELP, description=gemm_command.HELP)
    gemm_command.add_arguments(g)
    g.set_defaults(_op_run=gemm_command.run)
    a = kinds.add_parser("attention", help=_ATTENTION_HELP, description=_ATTENTION_HELP)
    a.add_argument("--system", required=True, metavar="FILE",
                   help="arch_configs/*.toml file or shipped name (e.g. h100-sxm)")
    a.add_argument("--batch", type=dimension, required=True, metavar="B", help="sequences")
    a.add_argument("--heads", type=dimension, required=True, metavar="A",
                   help="query heads")
    a.add_argument("--seq", type=dimension, required=True, metavar="L",
                   help="sequence length (queries = keys)")
    a.add_argument("--head-dim", type=dimension, required=True, metavar="D")
    a.add_argument("--kv-heads", type=dimension, default=None, metavar="K",
                   help="key/value heads (GQA; default: as many as --heads)")
    a.add_argument("--no-causal", action="store_true", help="bidirectional attention")
    a.add_argument("--flash-attention", action="store_true",
                   help="a kernel that keeps no score matrix (causal half skipped)")
    a.add_argument("--attention-kernel", choices=("fa2", "fa3", "cudnn", "triton"),
                   default="cudnn",
                   help="the fused kernel --flash-attention runs, at its published bars "
                        "(accelsim/data/attention_kernels.csv; default cudnn, FA2 on an A100)")
    from accelsim.commands._common import add_attention_variant_arguments

    add_attention_variant_arguments(a)
    a.add_argument("--scheme", choices=scheme_choices(), default="bf16",
                   help="training scheme: attention runs at its precision when 16 or 32 bits, "
                        "bf16 under 8-bit schemes (default bf16)")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    from accelsim.commands._common import add_power_arguments
    from accelsim.commands._hardware import add_hardware_arguments

    add_power_arguments(a)
    add_hardware_arguments(a)
    a.set_defaults(_op_run=_attention)


_ATTENTION_HELP = ("Forward and backward time of scaled dot-product attention: unfused, the "
                   "score and P.V matmuls on the GEMM model and the softmax pass over the "
                   "scores at the megatron stack's element-wise bandwidth; --flash-attention, "
                   "one fused kernel (no score matrix, causal half skipped, backward recompute) "
                   "at the --attention-kernel's share of tensor-core peak by its published "
                   "bars (accelsim/engine/attention_kernels.py)")


#: one attention op larger than this is a typo, not a model (GPT-3 175B's whole training run
#: was 3.1e23 FLOPs: Brown et al. 2020, Table D.1)
MAX_ATTENTION_FLOPS = 1e24


def run(args: argparse.Namespace) -> int:
    return args._op_run(args)


def _attention(args: argparse.Namespace) -> int:
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.errors import UserError
    from accelsim.commands._common import require_precisions
    from accelsim.engine.graph import AttentionOp, attention_precision
    from accelsim.engine.stack import FlashKernel
    from accelsim.paths import resolve_input

    from accelsim.commands._hardware import hardware_note, hardware_system

    spath = resolve_input(args.system, "system")
    system = hardware_system(load_system(spath), args)
    if hardware_note(system, args):
        print(hardware_note(system, args), file=sys.stderr)
    precision = attention_precision(get_scheme(args.scheme).compute_precision,
                                    system.chip.core)
    require_precisions(system, spath, [precision], f"--scheme {args.scheme}")
    try:
        op = AttentionOp(batch=args.batch, heads=args.heads, seq=args.seq,
                         head_dim=args.head_dim, kv_heads=args.kv_heads or 0,
                         causal=not args.no_causal, flash=args.flash_attention,
                         precision=precision, window=args.window or 0, alibi=args.alibi)
    except ValueError as exc:
        raise UserError(f"--heads {args.heads} --kv-heads {args.kv_heads}: {exc}") from None
    if op.flops > MAX_ATTENTION_FLOPS:
        raise UserError(f"--batch {args.batch} --heads {args.heads} --seq {args.seq} --head-dim "
                        f"{args.head_dim}: {op.flops:.3g} FLOPs in one attention op, beyond any "
                        f"model (limit {MAX_ATTENTION_FLOPS:.0e}; GPT-3's whole training run was "
                        "3e23)")
    from accelsim.commands._common import power_system
    from accelsim.engine.op_attention import attention_time

    system, _ = power_system(system, spath, args, precision)
    at = attention_time(system, op, FlashKernel(args.attention_kernel))
    fwd, bwd, bound = at.fwd_s, at.bwd_s, at.bound
    d = {"system": system.name, "scheme": args.scheme, "precision": precision,
         "batch": args.batch, "heads": args.heads, "kv_heads": args.kv_heads or args.heads,
         "seq": args.seq, "head_dim": args.head_dim, "causal": op.causal, "flash": op.flash,
         "attention_kernel": args.attention_kernel if op.flash else None,
         "window": op.window, "alibi": op.alibi,
         "fwd_s": fwd, "bwd_s": bwd, "fwd_bwd_s": fwd + bwd, "flops": op.flops,
         "bytes": op.bytes, "bound": bound, "tflops": op.flops / fwd / 1e12,
         "power_model": at.clock_MHz is not None, "clock_MHz": at.clock_MHz,
         "power_W": at.power_W}
    if args.json:
        print(json.dumps(d))
    else:
        print(f"{system.name}: attention b={args.batch} heads={args.heads}/{d['kv_heads']} "
              f"s={args.seq} d={args.head_dim} {precision} "
              f"({'causal' if op.causal else 'bidirectional'}, "
              f"{'flash' if op.flash else 'unfused'}): forward {fwd * 1e6:.1f} us "
              f"({d['tflops']:.1f} TFLOP/s, {bound}-bound), backward {bwd * 1e6:.1f} us"
              + (f"; {at.clock_MHz:.0f} MHz, {at.power_W:.0f} W" if at.clock_MHz else ""))
    return 0
