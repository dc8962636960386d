"""Check, at digits / synthetic-sequence scale, the qualitative training claims of the papers
accelsim.train models (issue 14), and write one tidy table.

1. HFP8 (Sun et al., NeurIPS 2019, Table 2): HFP8 training lands within about 1 % of FP32.
2. HFP8 sec. 4 / app. D: without chunk accumulation, DLFloat16 accumulation of long-K GEMMs
   (the weight gradient, K = batch size) swamps and hurts training; chunks of 64 fix it.
3. FP8-LM sec. 2.3 ablation: the Adam second moment in FP8 degrades training (FP16 is needed),
   and FP8 master weights degrade too (run on the digits mlp with AdamW: the transformer with
   FP8-LM's 4 emulated workers costs ~0.5 s per step here).
4. The GEMM behind claim 2, directly: relative error of the CNN's long-K weight-gradient GEMMs
   (K = batch x H x W = 2048) on the HFP8 engine with and without chunking, against the exact
   sum of the same quantized operands.

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


def wgrad_error_rows():
    """Claim 4: the CNN's conv weight-gradient GEMMs at initialization, 1-4-3 x 1-5-2 operands
    (gradients loss-scaled by 2^10 as in the hfp8 recipe), on the hfp8 engine with chunk 64 and
    without chunking, error against the float64 sum of the quantized operands (its own error,
    below K 2^-53 ~ 2e-13 relative, is negligible here)."""
    from accelsim.arith import get_engine, matmul
    from accelsim.numerics import quantize
    from accelsim.train import Datapath, Trainer, build_model, load_dataset

    data = load_dataset("digits", np.random.default_rng(0))
    model = build_model("cnn", data, np.random.default_rng(1))
    tr = Trainer(model, get_recipe("fp32"), 0.05, np.random.default_rng(2), reference=True)
    captured = []
    orig = Datapath.gemm

    def spy(self, kind, a, a_role, b, b_role, tag, site=None):
        if kind == "wgrad" and tag == "body" and a.ndim == 2:
            captured.append((a, b))
        return orig(self, kind, a, a_role, b, b_role, tag, site)

    Datapath.gemm = spy
    try:
        tr.step(data.x_train[:32], data.y_train[:32])
    finally:
        Datapath.gemm = orig
    out = []
    for i, (a, b) in enumerate(captured):
        aq = quantize(a, "hfp8-143", saturate=True)
        bq = quantize(b * 2.0**10, "hfp8-152")
        exact = aq @ bq
        scale = np.abs(aq) @ np.abs(bq)
        for chunk in (64, None):
            eng = get_engine("hfp8", a_format="hfp8-143", b_format="hfp8-152", chunk=chunk)
            r = matmul(aq, bq, eng, validate=False)
            err = np.abs(r - exact)[scale > 0] / scale[scale > 0]
            out.append({"claim": "wgrad_gemm_error", "recipe": f"hfp8 chunk={chunk}", "model": "cnn",
                        "dataset": "digits", "gemm": i, "K": a.shape[1],
                        "rel_err_mean": float(err.mean()), "rel_err_max": float(err.max())})
            print(out[-1], flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=Path("reports/train_claims.csv"))
    ap.add_argument("--parts", default="hfp8,chunk,fp8lm,gemm",
                    help="claims to run: hfp8 (1), chunk (2), fp8lm (3), gemm (4)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    hfp8 = get_recipe("hfp8")
    nochunk = dataclasses.replace(
        hfp8, name="hfp8-nochunk",
        body=dataclasses.replace(hfp8.body, engine_overrides=(("chunk", None),)),
        edge=dataclasses.replace(hfp8.edge, engine_overrides=(("chunk", None),)))
    rows = []
    parts = set(args.parts.split(","))
    for seed in seeds:
        for r in (get_recipe("fp32"), hfp8) if "hfp8" in parts else ():
            rows.append({"claim": "hfp8_vs_fp32", **run(r, "mlp", "digits", args.steps, seed, 32)})
            print(rows[-1], flush=True)
        for r in (hfp8, nochunk) if "chunk" in parts else ():
            rows.append({"claim": "chunking_long_k", **run(r, "mlp", "digits", args.steps // 2, seed, 256)})
            print(rows[-1], flush=True)
        for name in ("fp8-lm", "fp8-lm-v8", "fp8-lm-w8") if "fp8lm" in parts else ():
            rows.append({"claim": "fp8lm_optimizer_precision",
                         **run(get_recipe(name), "mlp", "digits", args.steps, seed, 32)})
            print(rows[-1], flush=True)
    if "gemm" in parts:
        rows.extend(wgrad_error_rows())
    df = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    trained = df[df["claim"] != "wgrad_gemm_error"]
    summary = trained.groupby(["claim", "recipe"], sort=False)[["test_accuracy", "final_train_loss"]].agg(["mean", "std"])
    with pd.option_context("display.width", 200):
        print(summary)
        print(df[df["claim"] == "wgrad_gemm_error"][["recipe", "gemm", "K", "rel_err_mean", "rel_err_max"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
