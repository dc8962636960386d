"""FP8-LM Fig. 7 trend on synthetic gradients: underflow/overflow rates and SNR of pre-scaling,
post-scaling, auto-scaling (and MS-AMP's fixed 1/sqrt(N)) for an FP8 all-reduce over N workers.

Run: ``python scripts/fp8lm_allreduce.py [--quick]`` (about 2 min on a 2-core container; --quick
stops at N = 128). Prints the table and writes reports/fp8lm_allreduce.csv.
Source: Peng et al., "FP8-LM: Training FP8 Large Language Models", arXiv 2310.18313, Sec. 2.1,
Sec. 3.3 and Fig. 7. The gradient model (accelsim.train.allreduce.GradientModel) is synthetic.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from accelsim.train.allreduce import GradientModel, allreduce_sweep

OUT = Path(__file__).resolve().parents[1] / "reports" / "fp8lm_allreduce.csv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 8 ... 128 only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--formats", default="e5m2,e4m3fn", help="comma-separated wire formats")
    ap.add_argument("--log2-spread", type=float, default=GradientModel.log2_spread,
                    help="std of log2 |g| across elements (sensitivity of the synthetic model)")
    args = ap.parse_args(argv)
    ns = (8, 16, 32, 64, 128) if args.quick else (8, 16, 32, 64, 128, 256, 512, 1024)
    model = GradientModel(log2_spread=args.log2_spread)
    print(f"gradient model: {model}  (seed {args.seed})", flush=True)
    t0 = time.perf_counter()
    df = allreduce_sweep(
        np.random.default_rng(args.seed), ns, tuple(args.formats.split(",")), model=model,
        progress=lambda f, n: print(f"  {f} N={n} ...", file=sys.stderr, flush=True),
    )
    wide = df.pivot_table(index=["format", "n_workers"], columns="method", values="sum")
    wide["auto_lowest"] = (wide["auto"] < wide["pre"]) & (wide["auto"] < wide["post"])
    with np.printoptions(precision=3):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        print("\nunderflow + overflow rate per method (auto_lowest: auto below pre and post):")
        print(wide.to_string(float_format=lambda v: f"{v:.3g}"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False, float_format="%.6g")
    print(f"\nwrote {args.out}  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
