"""Check, at digits / synthetic-sequence scale, the qualitative training claims of the papers
accelsim.train models (issue 14), and write one tidy table.

1. HFP8 (Sun et al., NeurIPS 2019, Table 2): HFP8 training lands within about 1 % of FP32.
2. HFP8 sec. 4 / app. D: without chunk accumulation, DLFloat16 accumulation of long-K GEMMs
   (the weight gradient, K = batch size) swamps and hurts training; chunks of 64 fix it.
3. FP8-LM sec. 2.3 ablation: the Adam second moment in FP8 degrades training (FP16 is needed),
   and FP8 master weights degrade too.

Usage: python scripts/train_claims.py [--steps 600] [--seeds 0,1,2] [--out reports/train_claims.csv]
Deterministic for a given argument list; prints the table and a verdict per claim.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from accelsim.train import TrainConfig, get_recipe, train


def run(recipe, model, dataset, steps, seed, batch):
    cfg = TrainConfig(recipe=recipe.name, model=model, dataset=dataset, steps=steps, seed=seed,
                      batch_size=batch)
    s = train(cfg, np.random.default_rng(seed), recipe=recipe).summary
    return {"recipe": recipe.name, "model": model, "dataset": dataset, "steps": steps, "seed": seed,
            "batch_size": batch, "final_train_loss": s["final_train_loss"],
            "test_accuracy": s["test_accuracy"], "skipped_steps": s["skipped_steps"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=Path("reports/train_claims.csv"))
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    hfp8 = get_recipe("hfp8")
    nochunk = dataclasses.replace(
        hfp8, name="hfp8-nochunk",
        body=dataclasses.replace(hfp8.body, engine_overrides=(("chunk", None),)),
        edge=dataclasses.replace(hfp8.edge, engine_overrides=(("chunk", None),)))
    rows = []
    for seed in seeds:
        for r in (get_recipe("fp32"), hfp8):
            rows.append({"claim": "hfp8_vs_fp32", **run(r, "mlp", "digits", args.steps, seed, 32)})
            print(rows[-1], flush=True)
        for r in (hfp8, nochunk):
            rows.append({"claim": "chunking_long_k", **run(r, "mlp", "digits", args.steps // 2, seed, 256)})
            print(rows[-1], flush=True)
        for name in ("fp8-lm", "fp8-lm-v8", "fp8-lm-w8"):
            rows.append({"claim": "fp8lm_optimizer_precision",
                         **run(get_recipe(name), "mlp", "digits", args.steps, seed, 32)})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    summary = df.groupby(["claim", "recipe"], sort=False)[["test_accuracy", "final_train_loss"]].agg(["mean", "std"])
    with pd.option_context("display.width", 200):
        print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
