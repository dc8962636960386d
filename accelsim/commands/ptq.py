"""``accelsim ptq``: post-training quantization of a model trained in fp32 (HiFloat8 sec. 4.2,
Tables 6-8): the held-out metric with every GEMM operand cast to a format by direct cast,
per-tensor power-of-two scaling (Algorithm 1) or SmoothQuant, against the fp32 model.
"""

from __future__ import annotations

import argparse

from accelsim.commands._common import positive_int, seed, train_steps

NAME = "ptq"
HELP = ("Train a model in fp32, then evaluate it with every GEMM operand in a narrow format (HiF8 "
        "by default): direct cast, per-tensor power-of-two scaling, SmoothQuant; with BatchNorm, "
        "also with the BN statistics re-tuned on the quantized network (HFP8 app. C).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.numerics import FORMAT_NAMES
    from accelsim.train import DATASET_NAMES, MODEL_NAMES

    parser.add_argument("--model", choices=MODEL_NAMES, default="mlp", help="default: mlp")
    parser.add_argument("--dataset", choices=DATASET_NAMES, default="digits", help="default: digits")
    parser.add_argument("--steps", type=train_steps, default=300,
                        help="fp32 training steps (default 300; at most 1,000,000)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the fp32 training run")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="minibatch (default 32)")
    parser.add_argument("--format", choices=FORMAT_NAMES, default="hif8", help="PTQ format (default hif8)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON records")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    import json

    import numpy as np
    import pandas as pd

    from accelsim.train import Datapath, GemmLevel, get_recipe
    from accelsim.train.layers import BatchNorm
    from accelsim.train.ptq_model import PTQ_METHODS, PTQDatapath
    from accelsim.train.trainer import TrainConfig, evaluate, one_blas_thread, train_model

    cfg = TrainConfig(recipe="fp32", model=args.model, dataset=args.dataset, steps=args.steps,
                      seed=args.seed, batch_size=args.batch_size, gemm="blas")
    with one_blas_thread():
        model, data = train_model(cfg, np.random.default_rng(args.seed),
                                  progress=not (args.no_progress or args.json))
        batch = 512 if data.task != "lm" else 64
        ref = Datapath(get_recipe("fp32"), np.random.default_rng(0), gemm=GemmLevel.BLAS)
        bns = [la for la in _walk(model) if isinstance(la, BatchNorm)]
        retune = np.random.default_rng(args.seed + 2).permutation(len(data.y_train))[:512]

        def measure(label, dp):
            rows.append((label, *evaluate(model, data.x_test, data.y_test, dp, batch)))
            if bns:  # HFP8 app. C: the same network with its BN statistics re-tuned under dp
                saved = [(la.running_mean, la.running_var, la.momentum) for la in bns]
                for la in bns:
                    la.momentum = 1.0  # the running statistics become the re-tuning batch's
                model.forward(data.x_train[retune], dp, train=True)
                rows.append((f"{label}+bn-retune", *evaluate(model, data.x_test, data.y_test, dp, batch)))
                for la, (m, v, mom) in zip(bns, saved):
                    la.running_mean, la.running_var, la.momentum = m, v, mom

        rows = []
        measure("fp32", ref)
        calib = np.random.default_rng(args.seed + 1).permutation(len(data.y_train))[:32]
        for method in PTQ_METHODS:
            dp = PTQDatapath(method, args.format)
            dp.calibrating = True
            model.forward(data.x_train[calib], dp, train=False)
            dp.calibrating = False
            measure(method, dp)
    table = pd.DataFrame(rows, columns=["method", "val_loss", "test_accuracy"])
    table["val_loss_delta"] = table["val_loss"] - table["val_loss"].iloc[0]
    table["accuracy_delta_pp"] = 100 * (table["test_accuracy"] - table["test_accuracy"].iloc[0])
    table.insert(1, "format", [r[0].startswith("fp32") and "fp32" or args.format for r in rows])
    if args.json:
        print(json.dumps(table.to_dict("records")))
    else:
        print(f"{args.model} on {args.dataset}, trained {args.steps} fp32 steps (seed {args.seed}); "
              f"PTQ to {args.format}, calibrated on 32 training samples:")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


def _walk(layer):
    """Every layer of a model tree."""
    yield layer
    for c in layer.children():
        yield from _walk(c)
