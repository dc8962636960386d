"""Training-emulation speed: steps/s of `accelsim train` per recipe and GEMM level, side by side
with the same MLP in plain numpy float32.

Targets (issue 26): on the digits mlp (64-64-64-10, batch 32, SGD momentum), the fp32 recipe
with ``--gemm blas`` at >= 0.2x and hfp8 with ``--gemm engine`` at >= 0.03x the steps/s of the
plain numpy float32 MLP, measured in the same run.
Usage: python benchmarks/bench_train.py [--steps 300] [--repeats 3]
       [--runs fp32:blas,hfp8:engine,...] [--models mlp,gpt-char] [--model-steps 5]
Each rate is the best of ``--repeats`` timed runs (the machine is shared: the best run is the one
least disturbed); the numpy baseline is timed before and after the recipes and its best taken.
Everything runs with BLAS on one thread, as ``accelsim train`` does (trainer.one_blas_thread), so
the baseline gets the same BLAS. Training steps only (no evaluation inside the timed loop).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _machine import cpu_model, spread  # noqa: E402

from accelsim.train import GemmLevel, Trainer, build_model, get_recipe, load_dataset  # noqa: E402
from accelsim.train.trainer import default_lr, one_blas_thread  # noqa: E402

DEFAULT_RUNS = "fp32:blas,fp32:engine,hfp8:engine,hfp8:blas,bf16-amp:engine,bf16-amp:blas"
TARGETS = {("fp32", "blas"): 0.2, ("hfp8", "engine"): 0.03}
BATCH = 32


def numpy_mlp_steps_per_s(x: np.ndarray, y: np.ndarray, steps: int) -> float:
    """The same MLP (64-64-64-10, ReLU, softmax cross-entropy, SGD momentum 0.9, lr 0.05) in plain
    numpy float32: the baseline the ratios are taken against."""
    rng = np.random.default_rng(1)
    x = x.reshape(len(x), -1).astype(np.float32)
    sizes = [(x.shape[1], 64), (64, 64), (64, 10)]
    W = [(rng.standard_normal(s) * np.sqrt(2.0 / s[0])).astype(np.float32) for s in sizes]
    b = [np.zeros(s[1], np.float32) for s in sizes]
    params = W + b
    vel = [np.zeros_like(p) for p in params]
    lr, mom = np.float32(0.05), np.float32(0.9)
    order = np.random.default_rng(3).permutation(len(y))
    rows = np.arange(BATCH)
    t0 = time.perf_counter()
    for s in range(steps):
        i = (s * BATCH) % (len(order) - BATCH)
        idx = order[i:i + BATCH]
        xb, yb = x[idx], y[idx]
        h1 = xb @ W[0] + b[0]
        a1 = np.maximum(h1, 0)
        h2 = a1 @ W[1] + b[1]
        a2 = np.maximum(h2, 0)
        z = a2 @ W[2] + b[2]
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = p
        g[rows, yb] -= 1
        g /= BATCH
        d2 = (g @ W[2].T) * (h2 > 0)
        d1 = (d2 @ W[1].T) * (h1 > 0)
        grads = [xb.T @ d1, a1.T @ d2, a2.T @ g, d1.sum(axis=0), d2.sum(axis=0), g.sum(axis=0)]
        for prm, v, gr in zip(params, vel, grads):
            v *= mom
            v += gr
            prm -= lr * v
    return steps / (time.perf_counter() - t0)


def accelsim_steps_per_s(recipe_name: str, gemm: GemmLevel, model_name: str, steps: int) -> float:
    data = load_dataset("digits" if model_name in ("mlp", "cnn") else
                        "pydoc" if model_name == "gpt-char" else "seq", np.random.default_rng(0))
    recipe = get_recipe(recipe_name)
    model = build_model(model_name, data, np.random.default_rng(1))
    tr = Trainer(model, recipe, default_lr(recipe.optimizer, model_name), np.random.default_rng(2), gemm=gemm)
    rng = np.random.default_rng(3)
    order = rng.permutation(len(data.y_train))
    batch = BATCH if model_name != "gpt-char" else 16
    tr.step(data.x_train[order[:batch]], data.y_train[order[:batch]])  # compile / warm up
    t0 = time.perf_counter()
    for s in range(steps):
        i = (s * batch) % (len(order) - batch)
        idx = order[i:i + batch]
        tr.step(data.x_train[idx], data.y_train[idx])
    return steps / (time.perf_counter() - t0)


def main(argv=None) -> int:
    with one_blas_thread():
        return _main(argv)


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="mlp steps per timed run (default 300)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per row, best kept (default 3)")
    ap.add_argument("--runs", default=DEFAULT_RUNS, help=f"recipe:gemm pairs (default {DEFAULT_RUNS})")
    ap.add_argument("--models", default="mlp", help="comma-separated models (default: mlp)")
    ap.add_argument("--model-steps", type=int, default=5, help="steps for models other than mlp")
    args = ap.parse_args(argv)
    data = load_dataset("digits", np.random.default_rng(0))
    base = [numpy_mlp_steps_per_s(data.x_train, data.y_train, 20 * args.steps) for _ in range(args.repeats)]
    print(f"machine: {cpu_model()}, Python {sys.version.split()[0]}; batch {BATCH}; best of {args.repeats}")
    print(f"{'recipe':10s} {'gemm':7s} {'model':9s} {'steps/s':>9s} {'x numpy':>8s} {'target':>7s}")
    rows = []
    for model in args.models.split(","):
        steps = args.steps if model == "mlp" else args.model_steps
        for pair in args.runs.split(","):
            r, g = pair.split(":")
            rate = max(accelsim_steps_per_s(r, GemmLevel(g), model, steps) for _ in range(args.repeats))
            rows.append((r, g, model, rate))
    base += [numpy_mlp_steps_per_s(data.x_train, data.y_train, 20 * args.steps) for _ in range(args.repeats)]
    np_rate = max(base)
    print(f"{'numpy f32':10s} {'-':7s} {'mlp':9s} {np_rate:9.0f} {1.0:8.3f}")
    for r, g, model, rate in rows:
        target = TARGETS.get((r, g)) if model == "mlp" else None
        mark = "" if target is None else f">={target:g} {'ok' if rate / np_rate >= target else 'MISSED'}"
        ratio = f"{rate / np_rate:8.3f}" if model == "mlp" else f"{'':8s}"
        print(f"{r:10s} {g:7s} {model:9s} {rate:9.1f} {ratio} {mark}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
