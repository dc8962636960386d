"""The training loop: minibatch SGD/AdamW under a recipe's datapath, loss scaling, evaluation.

``train(config, rng)`` returns a :class:`TrainResult`: the summary the CLI prints as JSON and a
tidy history table (one row per evaluation point). All randomness (split, initialization,
batch order, stochastic rounding) comes from ``rng``; the same seed gives the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas

from accelsim.bounds import MAX_SEED, MAX_TRAIN_STEPS, check_number
from accelsim.errors import InputError, check_int

from .data import Dataset, load_dataset
from .datapath import Datapath, GemmLevel
from .layers import Layer, SoftmaxCrossEntropy, parameters
from .models import build_model
from .optim import Optimizer
from .recipes import Recipe, get_recipe
from .allreduce import FP8AllReducer
from .loss_scaling import AdaptiveLossScaler, DynamicLossScaler, StaticLossScaler

DEFAULT_LR = {"sgd": 0.05, "adamw": 3e-3}
# gpt-char with SGD-momentum: 0.2 (measured on pydoc, 300 steps, fp32 --gemm blas, seed 0: val loss
# 0.741 x the unigram entropy at 0.2, 0.749 at 0.3, 0.746 at 0.4, NaN at 0.5; 0.05 is far too slow)
MODEL_LR = {("gpt-char", "sgd"): 0.2}


def default_lr(optimizer: str, model: str) -> float:
    """The learning rate a run uses when none is given."""
    return MODEL_LR.get((model, optimizer), DEFAULT_LR[optimizer])


EVAL_BATCH = 512


@dataclass(frozen=True)
class TrainConfig:
    recipe: str
    model: str = "mlp"
    dataset: str = "digits"
    steps: int = 1000
    seed: int = 0
    batch_size: int = 32
    lr: float | None = None  # None: default_lr(the recipe's optimizer, model)
    eval_every: int = 0  # evaluate the test accuracy every N steps (0: only at the end)
    gemm: GemmLevel = GemmLevel.ENGINE  # the arith engine (bit-exact) or float32 BLAS

    def __post_init__(self):
        object.__setattr__(self, "gemm", GemmLevel.parse(self.gemm))  # "blas" -> GemmLevel.BLAS
        check_int("steps", self.steps, 1, MAX_TRAIN_STEPS)  # more would run for days
        check_int("batch_size", self.batch_size)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_int("eval_every", self.eval_every, 0)
        if self.lr is not None:
            check_number("lr", self.lr, 0.0, lo_open=True)


@dataclass(frozen=True)
class TrainResult:
    summary: dict
    history: "pandas.DataFrame"  # step, train_loss (minibatch, unscaled), test_accuracy, loss_scale, skipped_steps


def make_loss_scaler(recipe: Recipe):
    """The recipe's loss-scale controller (accelsim.train.scaling), or None."""
    if recipe.loss_scaling == "none":
        return None
    if recipe.loss_scaling == "static":
        return StaticLossScaler(recipe.init_loss_scale)
    if recipe.loss_scaling == "dynamic":
        return DynamicLossScaler(recipe.init_loss_scale, growth_interval=recipe.scale_window)
    return AdaptiveLossScaler(init_scale=recipe.init_loss_scale)


def evaluate(model: Layer, x: np.ndarray, y: np.ndarray, dp: Datapath,
             batch: int = EVAL_BATCH) -> tuple[float, float]:
    """(mean cross-entropy in nats, accuracy) of the model in inference mode under the datapath,
    over every label (every position of a language-modelling window)."""
    ce = SoftmaxCrossEntropy()
    loss, correct, n = 0.0, 0, 0
    for i in range(0, len(y), batch):
        z = model.forward(x[i:i + batch], dp, train=False)
        yy = y[i:i + batch].reshape(-1)
        loss += ce.forward(z, yy) * len(yy)
        correct += int(np.count_nonzero(z.argmax(axis=1) == yy))
        n += len(yy)
    return loss / n, correct / n


class Trainer:
    """One model, one recipe, one data set; ``step(xb, yb)`` runs one training step."""

    def __init__(self, model: Layer, recipe: Recipe, lr: float, rng: np.random.Generator, *,
                 check: bool = False, reference: bool = False, gemm: GemmLevel = GemmLevel.ENGINE):
        self.model, self.recipe = model, recipe
        self.dp = Datapath(recipe, rng, check=check, reference=reference, gemm=gemm)
        self.params = parameters(model)
        self.opt = Optimizer(model, recipe, lr, rng)
        self.scaler = make_loss_scaler(recipe)
        self.ce = SoftmaxCrossEntropy()
        self.skipped = 0
        self._reducers: dict[int, FP8AllReducer] = {}  # FP8-LM all-reduce per weight tensor

    @property
    def loss_scale(self) -> float | None:
        return None if self.scaler is None else float(self.scaler.scale)

    def step(self, xb: np.ndarray, yb: np.ndarray) -> float:
        """Forward, backward, update; returns the minibatch loss (unscaled).

        With ``recipe.workers = N > 1`` the minibatch is split into N shards, each emulated
        worker runs forward and backward on its shard, and the weight gradients are averaged by
        the recipe's all-reduce (FP8-LM auto-scaling through ``allreduce.fp8_allreduce``)."""
        scale = 1.0 if self.scaler is None else float(self.scaler.scale)
        params = self.params
        per_worker, loss = [], 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            if self.recipe.workers == 1:
                z = self.model.forward(xb, self.dp, train=True)
                loss = self.ce.forward(z, yb.reshape(-1))
                self.model.backward(self.ce.backward(scale), self.dp)
                per_worker.append([layer.grads[name] for layer, name in params])
            else:
                shards = np.array_split(np.arange(len(yb)), self.recipe.workers)
                for sh in shards:
                    z = self.model.forward(xb[sh], self.dp, train=True)
                    loss += self.ce.forward(z, yb[sh].reshape(-1)) * len(sh) / len(yb)
                    self.model.backward(self.ce.backward(scale), self.dp)
                    per_worker.append([layer.grads[name] for layer, name in params])
        found_inf = not all(np.isfinite(g).all() for grads in per_worker for g in grads)
        if not found_inf and len(per_worker) > 1:
            self._allreduce(params, per_worker)
        apply = (not found_inf) if self.scaler is None else self.scaler.update(found_inf)
        if apply and not found_inf:
            self.opt.step(1.0 / scale)
        else:
            self.skipped += 1
        self.dp.pact_step(self.opt.lr, 1.0 / scale, apply and not found_inf)
        return loss

    def _allreduce(self, params, per_worker) -> None:
        method = self.recipe.allreduce
        for i, (layer, name) in enumerate(params):
            g = np.stack([grads[i] for grads in per_worker])
            if method == "fp32" or name != "W":
                layer.grads[name] = g.mean(axis=0)
                continue
            reducer = self._reducers.get(i)
            if reducer is None:  # one per weight tensor: it holds that tensor's mu across steps
                reducer = self._reducers[i] = FP8AllReducer(method, fmt=self.recipe.update.grad)
            layer.grads[name] = reducer.reduce(g).mean


def one_blas_thread():
    """A context in which BLAS runs on one thread: training GEMMs are small (<= 2048 x 256), and
    OpenBLAS' threads spinning against each other on a busy machine made them 10-30x slower
    (measured: a 64x2048x256 float32 product 60 ms on 2 threads under load, 2 ms on one).
    Parallel runs go through ``accelsim study --executor process`` instead."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def train(config: TrainConfig, rng: np.random.Generator, *, recipe: Recipe | None = None,
          progress: bool = False, data: Dataset | None = None) -> TrainResult:
    """Train ``config.model`` on ``config.dataset`` under ``recipe`` (default: the preset named
    ``config.recipe``); BLAS on one thread (:func:`one_blas_thread`)."""
    with one_blas_thread():
        return _train(config, rng, recipe, progress, data)[0]


def train_model(config: TrainConfig, rng: np.random.Generator, *, data: Dataset | None = None,
                progress: bool = False):
    """(trained model, dataset): :func:`train` for callers that use the model afterwards
    (``accelsim ptq``)."""
    with one_blas_thread():
        _, model, data = _train(config, rng, None, progress, data)
    return model, data


def _train(config: TrainConfig, rng: np.random.Generator, recipe: Recipe | None, progress: bool,
           data: Dataset | None) -> TrainResult:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    recipe = get_recipe(config.recipe) if recipe is None else recipe
    r_data, r_init, r_batch, r_round = rng.spawn(4)
    data = load_dataset(config.dataset, r_data) if data is None else data
    model = build_model(config.model, data, r_init)
    lr = default_lr(recipe.optimizer, config.model) if config.lr is None else config.lr
    tr = Trainer(model, recipe, lr, r_round, gemm=config.gemm)
    n = len(data.y_train)
    if config.batch_size > n:
        raise InputError(f"batch_size {config.batch_size} is larger than the {n} training "
                         f"samples of {config.dataset!r}")
    order, pos = r_batch.permutation(n), 0
    rows = []
    bar = _progress(config, progress)
    losses = []
    for step in range(1, config.steps + 1):
        if pos + config.batch_size > n:
            order, pos = r_batch.permutation(n), 0
        idx = order[pos:pos + config.batch_size]
        pos += config.batch_size
        losses.append(tr.step(data.x_train[idx], data.y_train[idx]))
        if bar is not None:
            bar.update(1)
        if (config.eval_every and step % config.eval_every == 0) or step == config.steps:
            val_loss, acc = evaluate(model, data.x_test, data.y_test, tr.dp,
                                     EVAL_BATCH if data.task != "lm" else EVAL_BATCH // 8)
            rows.append({"step": step, "train_loss": float(np.mean(losses[-(config.eval_every or 1):])),
                         "val_loss": val_loss, "test_accuracy": acc, "loss_scale": tr.loss_scale,
                         "skipped_steps": tr.skipped})
            if bar is not None:
                bar.set_postfix(loss=f"{rows[-1]['train_loss']:.3f}", acc=f"{acc:.3f}")
    if bar is not None:
        bar.close()
    # final training loss: mean minibatch loss over the last tenth of the steps (a full pass
    # over the training split under an emulated datapath would cost more than the training)
    train_loss = float(np.mean(losses[-max(1, config.steps // 10):]))
    summary = {
        "recipe": recipe.name, "model": config.model, "dataset": config.dataset,
        "steps": config.steps, "seed": config.seed, "batch_size": config.batch_size, "lr": lr,
        "gemm": config.gemm.value, "final_train_loss": float(train_loss),
        "val_loss": float(rows[-1]["val_loss"]), "test_accuracy": float(rows[-1]["test_accuracy"]),
        "skipped_steps": tr.skipped, "loss_scale_final": tr.loss_scale,
        "inf_events": tr.dp.inf_events,
    }
    if data.unigram_entropy is not None:
        summary["unigram_entropy"] = data.unigram_entropy
    import pandas as pd  # only when a run finishes: light commands never pay for pandas

    return TrainResult(summary, pd.DataFrame(rows)), model, data


def _progress(config: TrainConfig, on: bool):
    if not on:
        return None
    from tqdm import tqdm

    return tqdm(total=config.steps, desc=f"{config.recipe}/{config.model}", unit="step", leave=False)
