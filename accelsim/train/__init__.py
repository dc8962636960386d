"""Training under a datapath: a functional golden model of low-precision training.

Layers with explicit forward/backward whose fwd, bwd-data and wgrad GEMMs quantize their
operands to a recipe's formats (accelsim.numerics) and run on an arith engine (accelsim.arith);
recipes (fp32, AMP, HFP8, S2FP8, HiF8, FP8-LM, 4-bit) as frozen dataclasses; loss-scale and
tensor-scale controllers (scaling).

from accelsim.train import TrainConfig, train, get_recipe, RECIPE_NAMES
"""

from .data import DATASET_NAMES, Dataset, load_dataset
from .datapath import GEMM_KINDS, Datapath, GemmRecord
from .models import MODEL_NAMES, build_model
from .recipes import PRESET_NAMES as RECIPE_NAMES
from .recipes import PRESETS as RECIPES
from .recipes import Precision, Recipe, UpdatePrecision, get_recipe
from .scaling import (ALS_WINDOWS, AdaptiveLossScaler, AutoScaleMu, DelayedScaler, DynamicLossScaler,
                      LossScaler, PerTensorScaler, StaticLossScaler, amax, has_inf_or_nan, hif8_bls,
                      pow2_scale, saturation_fraction, scaled_quantize)
from .trainer import TrainConfig, Trainer, TrainResult, evaluate, train

__all__ = [
    "ALS_WINDOWS", "AdaptiveLossScaler", "AutoScaleMu", "DATASET_NAMES", "Dataset", "Datapath",
    "DelayedScaler", "DynamicLossScaler", "GEMM_KINDS", "GemmRecord", "LossScaler", "MODEL_NAMES",
    "PerTensorScaler", "Precision", "RECIPES", "RECIPE_NAMES", "Recipe", "StaticLossScaler",
    "TrainConfig", "TrainResult", "Trainer", "UpdatePrecision", "amax", "build_model", "evaluate",
    "get_recipe", "has_inf_or_nan", "hif8_bls", "load_dataset", "pow2_scale", "saturation_fraction",
    "scaled_quantize", "train",
]
