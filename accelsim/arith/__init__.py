"""Bit-exact golden model of dot-product / GEMM hardware with narrow, chunked accumulators.

from accelsim.arith import get_engine, matmul, dot, partial_sums, fma, systolic_matmul
Presets: hfp8 (IBM HFP8, NeurIPS 2019), fp16-fma, fp32-fma, h100-fp8 (pinned on H100 bits), exact.
The K-step loop and its datapaths (float64 reference, fast native twins): accelsim.arith.datapath.
"""

from .blockscaled import BLOCK_PRESETS, BlockScaledEngine, block_scaled_matmul, block_scaled_matmul_q  # noqa: F401
from .engine import PRESET_NAMES, PRESETS, EngineConfig
from .engines import get_engine
from .gemm import dot, fma, matmul, partial_sums, round_finite
from .reference import dot_reference
from .systolic import DATAFLOWS, systolic_matmul

__all__ = ["DATAFLOWS", "PRESETS", "PRESET_NAMES", "EngineConfig", "dot", "dot_reference", "fma", "get_engine",
           "matmul", "partial_sums", "round_finite", "systolic_matmul"]
