"""Training-emulation speed: steps/s of `accelsim train` per recipe and model.

Target (issue 14): 1,000 steps of the digits mlp per recipe in under 60 s on 2 cores.
Usage: python benchmarks/bench_train.py [--steps 1000] [--recipes fp32,hfp8,...]
       [--models mlp,cnn,transformer] [--model-steps 20]
Prints one row per (recipe, model): steps, seconds, steps/s, and for the mlp the projected time
of 1,000 steps. Training only (no evaluation inside the timed loop).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _machine import cpu_model, spread  # noqa: E402

from accelsim.train import RECIPE_NAMES, Trainer, build_model, get_recipe, load_dataset  # noqa: E402
from accelsim.train.trainer import DEFAULT_LR  # noqa: E402


def time_steps(recipe_name: str, model_name: str, steps: int, batch: int = 32) -> float:
    rng = np.random.default_rng(0)
    data = load_dataset("digits" if model_name != "transformer" else "seq", rng)
    recipe = get_recipe(recipe_name)
    model = build_model(model_name, data, np.random.default_rng(1))
    tr = Trainer(model, recipe, DEFAULT_LR[recipe.optimizer], np.random.default_rng(2))
    order = np.random.default_rng(3).permutation(len(data.y_train))
    t0 = time.perf_counter()
    for s in range(steps):
        i = (s * batch) % (len(order) - batch)
        idx = order[i:i + batch]
        tr.step(data.x_train[idx], data.y_train[idx])
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000, help="mlp steps per recipe (default 1000)")
    ap.add_argument("--recipes", default=",".join(RECIPE_NAMES))
    ap.add_argument("--models", default="mlp", help="comma-separated models (default: mlp)")
    ap.add_argument("--model-steps", type=int, default=20, help="steps for cnn / transformer")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each recipe")
    args = ap.parse_args(argv)
    rep = max(1, args.repeat)
    print(f"machine: {cpu_model()}; batch 32; min / median / max over {rep} runs")
    print(f"{'recipe':10s} {'model':12s} {'steps':>6s} {'seconds':>20s} {'1000 mlp steps (s)':>20s}")
    for model in args.models.split(","):
        steps = args.steps if model == "mlp" else args.model_steps
        for r in args.recipes.split(","):
            secs = [time_steps(r, model, steps) for _ in range(rep)]
            proj = spread([1000 * t / steps for t in secs], "{:.1f}") if model == "mlp" else ""
            print(f"{r:10s} {model:12s} {steps:6d} {spread(secs, '{:.2f}'):>20s} {proj:>20s}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
