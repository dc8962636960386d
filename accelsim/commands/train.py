"""``accelsim train``: train a small network through a recipe's datapath (accelsim.train).

``--json`` prints one JSON object (recipe, model, dataset, steps, final_train_loss,
test_accuracy, skipped_steps, loss_scale_final, ...); ``--compare R1,R2,...`` trains each recipe
with the same seed and writes convergence curves (PNG) and the tidy history (CSV).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accelsim.commands._common import (nonnegative_int, output_path, positive_float,
                                       positive_int, seed, train_steps)

NAME = "train"
HELP = ("Train mlp/cnn/transformer on digits (or a synthetic sequence task), or gpt-char on pydoc, "
        "with every GEMM quantized to a recipe's formats and summed on an arith engine (or float32 "
        "BLAS); --compare plots recipes.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.train import DATASET_NAMES, GEMM_LEVELS, MODEL_NAMES, RECIPE_NAMES

    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--recipe", choices=RECIPE_NAMES, help="one recipe to train with")
    what.add_argument("--compare", metavar="R1,R2,...",
                      help=f"comma-separated recipes to train and plot ({', '.join(RECIPE_NAMES)})")
    parser.add_argument("--model", choices=MODEL_NAMES, default="mlp", help="default: mlp")
    parser.add_argument("--dataset", choices=DATASET_NAMES, default="digits", help="default: digits")
    parser.add_argument("--gemm", choices=GEMM_LEVELS, default="engine",
                        help="engine: every GEMM on the recipe's bit-exact arith engine (default); "
                             "blas: operands and outputs quantized, products and sums in float32 BLAS")
    parser.add_argument("--steps", type=train_steps, default=1000,
                        help="training steps (default: 1000; at most 1,000,000, about half an hour "
                             "of the cheapest run)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of split, init, batches, rounding")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="minibatch size (default: 32)")
    parser.add_argument("--lr", type=positive_float, default=None,
                        help="learning rate (default: 0.05 for SGD recipes, 0.2 with gpt-char; 3e-3 for AdamW)")
    parser.add_argument("--eval-every", type=nonnegative_int, default=None, metavar="N",
                        help="test accuracy every N steps; 0: only at the end (default: steps/20 with "
                             "--compare, else only at the end)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--out", type=output_path, default=Path("reports/train"),
                        help="--compare output folder (default: reports/train)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from accelsim.errors import UserError
    from accelsim.train import RECIPE_NAMES, TrainConfig, train

    if args.compare is not None:
        listed = [r.strip() for r in args.compare.split(",") if r.strip()]
        if not listed:
            raise UserError("--compare needs at least one recipe")
        recipes = list(dict.fromkeys(listed))  # each recipe once, first-listed order
        if len(recipes) < len(listed):
            dup = sorted({r for r in listed if listed.count(r) > 1})
            print(f"--compare: {', '.join(dup)} listed more than once; training each recipe once")
        for r in recipes:
            if r not in RECIPE_NAMES:
                raise UserError(f"--compare: unknown recipe {r!r}; choose from {', '.join(RECIPE_NAMES)}")
        eval_every = args.eval_every if args.eval_every is not None else max(1, args.steps // 20)
    else:
        recipes = [args.recipe]
        eval_every = args.eval_every or 0
    summaries, tables = [], []
    settings = {"model": args.model, "dataset": args.dataset, "steps": args.steps,
                "seed": args.seed, "batch_size": args.batch_size, "lr": args.lr,
                "eval_every": eval_every, "gemm": args.gemm}
    stem = f"train_{args.model}_{args.dataset}"
    if args.compare is not None:
        from accelsim.commands._common import check_output_path

        check_output_path(args.out, "--out", directory=True)
    done = 0
    try:
        for r in recipes:
            # --compare: each recipe's run is saved as it finishes and reused by a rerun with the
            # same settings (a long comparison survives Ctrl-C)
            part = args.out / f"{stem}.{r}.json" if args.compare is not None else None
            saved = _load_part(part, settings)
            if saved is None:
                cfg = TrainConfig(recipe=r, seed=args.seed, eval_every=eval_every,
                                  **{k: settings[k] for k in ("model", "dataset", "steps",
                                                              "batch_size", "lr", "gemm")})
                res = train(cfg, np.random.default_rng(args.seed),
                            progress=not (args.no_progress or args.json))
                summary, history = res.summary, res.history
                if part is not None:
                    _save_part(part, settings, summary, history)
            else:
                summary, history = saved
            done += 1
            summaries.append(summary)
            h = history.copy()
            h.insert(0, "recipe", r)
            h.insert(1, "model", args.model)
            h.insert(2, "dataset", args.dataset)
            h.insert(3, "seed", args.seed)
            tables.append(h)
    except KeyboardInterrupt:
        if args.compare is None:
            raise
        from accelsim.commands._common import exit_interrupted

        exit_interrupted("train", f"{done} of {len(recipes)} recipes", args.out)
    if args.compare is not None:
        from accelsim.report.train import plot_convergence

        history = pd.concat(tables, ignore_index=True)
        csv = args.out / f"{stem}.csv"
        history.to_csv(csv, index=False)
        png = plot_convergence(history, args.out / f"{stem}.png")
        if not args.json:
            # "-" where a recipe has no loss scaler (null in the JSON), not pandas' NaN
            table = pd.DataFrame(summaries)
            print(table.astype(object).where(table.notna(), "-").to_string(index=False))
            print(f"wrote {csv} and {png}")
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries))
    elif args.compare is None:
        for k, v in summaries[0].items():
            print(f"{k:18s} {'-' if v is None else v}")
    return 0


def _load_part(path, settings):
    """(summary, history) of a recipe saved by an earlier run with the same settings, or None."""
    import pandas as pd

    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("settings") != settings:
            return None
        return data["summary"], pd.DataFrame(data["history"])
    except (ValueError, KeyError, TypeError, OSError, RecursionError):
        return None  # a damaged part is recomputed


def _save_part(path, settings, summary, history) -> None:
    """Write one recipe's result atomically (a rename: never a half-written file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"settings": settings, "summary": summary,
                               "history": history.to_dict("records")}, default=_plain))
    tmp.replace(path)


def _plain(value):
    """numpy scalars as Python numbers in the saved JSON (ints stay ints)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot save {type(value).__name__} in a training result")
