"""``accelsim swamping``: regenerate the swamping study (CSV + PNG) and the chunk-size sweep."""

from __future__ import annotations

import argparse
from pathlib import Path

from accelsim.commands._common import positive_int, seed

NAME = "swamping"
HELP = ("Relative error of long dot products (K = 64..65536, positive and zero-mean data) for "
        "sequential dlfloat16, HFP8 chunked, fp32 and H100 FP8 with/without promotion, plus the "
        "HFP8 chunk-size sweep; the block-scaled engines (MXFP8/6/4, NVFP4, DeepSeek-V3 FP8 tiles) vs K "
        "and the DeepSeek-V3 K=4096 check; writes swamping.csv, swamping_chunks.csv, swamping.png, "
        "swamping_block.csv, swamping_deepseek.csv and swamping_block.png.")


#: operand memory the study may allocate (float64 a and b, both distributions)
MAX_OPERAND_BYTES = 2 * 2**30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", default="reports",
                        help="output directory (default: reports)")
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of the numpy Generator that draws the operands (default: 0)")
    parser.add_argument("--reps", type=positive_int, default=64,
                        help="dot products per K and distribution (default: 64)")
    parser.add_argument("--max-k", type=positive_int, default=65536,
                        help="largest K of the study, a power of two >= 64 (default: 65536)")
    parser.add_argument("--sweep-k", type=positive_int, default=16384,
                        help="K of the chunk-size sweep; a multiple of 1024 (default: 16384)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm import tqdm

    from accelsim.arith.swamping import (
        BLOCK_STUDY, CHUNKS, DEEPSEEK_K, DEEPSEEK_MEANS, block_swamping_table, chunk_sweep_table, deepseek_table,
        study_engines, swamping_table)
    from accelsim.report.swamping import plot_block_swamping, plot_swamping

    from accelsim.commands._common import check_output_path
    from accelsim.errors import UserError

    out = Path(args.out)
    # operands are float64 arrays of reps x K per distribution: refuse before allocating
    need = 8 * 4 * args.reps * max(args.max_k, args.sweep_k)
    if need > MAX_OPERAND_BYTES:
        raise UserError(f"--reps {args.reps} x --max-k {args.max_k} needs about "
                        f"{need / 2**30:.1f} GiB of operands; the limit is "
                        f"{MAX_OPERAND_BYTES / 2**30:.0f} GiB (lower --reps or --max-k)")
    check_output_path(args.out, "--out", directory=True)  # the string: Path("") is "."
    if args.sweep_k % max(CHUNKS):
        raise UserError(f"--sweep-k {args.sweep_k}: must be a multiple of {max(CHUNKS)}")
    if args.max_k < 64 or args.max_k & (args.max_k - 1):
        raise UserError(f"--max-k {args.max_k}: must be a power of two >= 64")
    k_values = tuple(2**i for i in range(6, args.max_k.bit_length()))
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    total = len(study_engines()) + len(CHUNKS) + len(BLOCK_STUDY) + len(DEEPSEEK_MEANS) + 1
    with tqdm(total=total, desc="swamping", unit="pass", disable=args.no_progress) as bar:
        table = swamping_table(rng, k_values=k_values, reps=args.reps, progress=lambda: bar.update(1))
        sweep = chunk_sweep_table(rng, K=args.sweep_k, reps=args.reps, progress=lambda: bar.update(1))
        # block-scaled engines after the original study: its draws (and numbers) are unchanged
        block = block_swamping_table(rng, k_values=k_values, reps=args.reps, progress=lambda: bar.update(1))
        deepseek = deepseek_table(rng, K=min(DEEPSEEK_K, args.max_k), reps=args.reps,
                                  progress=lambda: bar.update(1))
    table.to_csv(out / "swamping.csv", index=False)
    sweep.to_csv(out / "swamping_chunks.csv", index=False)
    plot_swamping(table, sweep, out / "swamping.png")
    block.to_csv(out / "swamping_block.csv", index=False)
    deepseek.to_csv(out / "swamping_deepseek.csv", index=False)
    plot_block_swamping(block, deepseek, out / "swamping_block.png")
    wide = table.pivot_table(index="K", columns=["distribution", "engine"], values="rel_err_mean")
    print(wide.xs("positive", axis=1, level=0).to_string(float_format=lambda v: f"{v:.2e}"))
    best = sweep.loc[sweep.groupby("distribution")["rel_err_mean"].idxmin(), ["distribution", "chunk", "rel_err_mean"]]
    print("chunk sweep minimum:\n" + best.to_string(index=False))
    print("DeepSeek-V3 check (max relative error):\n" + deepseek.pivot_table(
        index="data", columns="engine", values="rel_err_max", sort=False).to_string(float_format=lambda v: f"{v:.2e}"))
    print(f"wrote {out / 'swamping.csv'}, {out / 'swamping_chunks.csv'}, {out / 'swamping.png'}, "
          f"{out / 'swamping_block.csv'}, {out / 'swamping_deepseek.csv'}, {out / 'swamping_block.png'}")
    return 0
