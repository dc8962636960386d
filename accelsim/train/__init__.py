"""Training under a datapath: a functional golden model of low-precision training.

Layers with explicit forward/backward whose fwd, bwd-data and wgrad GEMMs quantize their
operands to a recipe's formats (accelsim.numerics) and run on an arith engine (accelsim.arith);
recipes (fp32, AMP, HFP8, S2FP8, HiF8, FP8-LM, 4-bit) as frozen dataclasses; loss-scale and
tensor-scale controllers (scaling); FP8-LM's FP8 all-reduce (allreduce); HiF8 post-training
quantization (ptq); HFP8 app. C BatchNorm-statistics Monte-Carlo (bnstats).

from accelsim.train import TrainConfig, train, get_recipe, RECIPE_NAMES
"""

from .allreduce import METHODS as ALLREDUCE_METHODS
from .allreduce import AllReduceResult, FP8AllReducer, GradientModel, allreduce_rates, allreduce_sweep, fp8_allreduce, shared_scale
from .bnstats import MCResult, bn_error_table, monte_carlo, preserved_error, retuned_error
from .data import DATASET_NAMES, Dataset, load_dataset
from .datapath import GEMM_KINDS, GEMM_LEVELS, Datapath, GemmLevel, GemmRecord
from .models import MODEL_NAMES, build_model
from .ptq import LinearPTQ, calibrate_linear, calibrate_sequential, direct_cast_linear, quantized_linear
from .recipes import PRESET_NAMES as RECIPE_NAMES
from .recipes import PRESETS as RECIPES
from .recipes import Precision, Recipe, UpdatePrecision, get_recipe
from .loss_scaling import (ALS_WINDOWS, AdaptiveLossScaler, DynamicLossScaler, LossScaler,
                           StaticLossScaler, hif8_bls)
from .scaling import (AutoScaleMu, DelayedScaler, PerTensorScaler, amax, has_inf_or_nan, pow2_scale,
                      saturation_fraction, scaled_quantize)
from .trainer import TrainConfig, Trainer, TrainResult, evaluate, train

__all__ = [
    "ALLREDUCE_METHODS", "AllReduceResult", "FP8AllReducer", "GradientModel", "LinearPTQ", "MCResult", "allreduce_rates",
    "allreduce_sweep", "bn_error_table", "calibrate_linear", "calibrate_sequential", "direct_cast_linear",
    "fp8_allreduce", "monte_carlo", "preserved_error", "quantized_linear", "retuned_error", "shared_scale",
    "ALS_WINDOWS", "AdaptiveLossScaler", "AutoScaleMu", "DATASET_NAMES", "Dataset", "Datapath",
    "DelayedScaler", "DynamicLossScaler", "GEMM_KINDS", "GEMM_LEVELS", "GemmLevel", "GemmRecord", "LossScaler", "MODEL_NAMES",
    "PerTensorScaler", "Precision", "RECIPES", "RECIPE_NAMES", "Recipe", "StaticLossScaler",
    "TrainConfig", "TrainResult", "Trainer", "UpdatePrecision", "amax", "build_model", "evaluate",
    "get_recipe", "has_inf_or_nan", "hif8_bls", "load_dataset", "pow2_scale", "saturation_fraction",
    "scaled_quantize", "train",
]
