"""``accelsim workload gpt``: write a GPT workload TOML generated from a few numbers."""

from __future__ import annotations

import argparse

from accelsim.commands._common import add_flash_argument, dimension, model_layers

NAME = "workload"
HELP = ("Generate workloads: 'workload gpt --layers L --hidden H --heads A --seq S --vocab V "
        "--out FILE' writes a GPT decoder (exact parameter count) as an explicit layer list.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="generator", metavar="GENERATOR", required=True)
    g = sub.add_parser("gpt", help="GPT-2/GPT-3 style decoder-only Transformer")
    g.add_argument("--preset", choices=("gpt2-small", "gpt3-175b"), default=None,
                   help="start from a published model; explicit flags override its numbers")
    g.add_argument("--layers", type=model_layers, default=None, metavar="L")
    for flag, meta in (("--hidden", "H"), ("--heads", "A"), ("--seq", "S"), ("--vocab", "V"),
                       ("--ffn", "F"), ("--positions", "P")):
        g.add_argument(flag, type=dimension, default=None, metavar=meta)
    g.add_argument("--untied-embeddings", action="store_true")
    g.add_argument("--no-causal", action="store_true", help="bidirectional attention")
    add_flash_argument(g)
    g.add_argument("--name", default=None)
    g.add_argument("--out", required=True, metavar="FILE.toml")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from accelsim.commands._common import check_output_path
    from accelsim.errors import UserError
    from accelsim.workload.gpt import PRESETS, GptConfig, workload_toml

    out = check_output_path(args.out, "--out", suffixes=(".toml",))
    fields = {k: getattr(args, k) for k in ("layers", "hidden", "heads", "seq", "vocab", "ffn",
                                            "positions", "name") if getattr(args, k) is not None}
    fields.update(tied_embeddings=not args.untied_embeddings, causal=not args.no_causal,
                  flash_attention=args.flash_attention)
    if args.preset is not None:
        cfg = replace(PRESETS[args.preset], **fields)
    else:
        missing = [f"--{k}" for k in ("layers", "hidden", "heads", "seq", "vocab")
                   if k not in fields]
        if missing:
            raise UserError(f"{', '.join(missing)} required (or --preset)")
        cfg = GptConfig(**fields)
    out.write_text(workload_toml(cfg))
    print(f"wrote {out}: {cfg.n_params:,} parameters, {cfg.layers} layers")
    return 0
