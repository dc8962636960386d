"""Compute time per layer: systolic-array cycles (ws/os/is dataflows, SCALE-Sim compatible),
and a roofline per layer x training phase (compute, scratchpad, memory, SFU, split collectives)
for a mapping of the layer onto a system's chips and cores (HFP8 paper, appendix D); with a
memory hierarchy in the config, GEMMs tiled over all cores of a chip through shared levels
(:mod:`accelsim.perf.gemm`, public :func:`gemm_time`), kernel fusion and launch costs."""

from accelsim.perf.gemm import FITTED, Efficiency, GemmTime, chip_gemm_time, gemm_time

from accelsim.perf.core_gemm import core_gemm_time
from accelsim.perf.layer_model import (
    BOUNDS,
    Mapping,
    data_parallel,
    evaluate_layer,
    layer_table,
)
from accelsim.perf.precision import layer_precision, layer_precisions
from accelsim.perf.step import PhaseSums, phase_sums
from accelsim.perf.systolic import (
    DATAFLOWS,
    SystolicResult,
    conv_gemm_dims,
    conv_output_size,
    gemm_cycles,
    gemm_cycles_array,
    systolic_gemm,
    workload_cycles,
)

__all__ = [
    "FITTED", "Efficiency", "GemmTime", "PhaseSums", "chip_gemm_time", "gemm_time", "phase_sums",
    "BOUNDS", "DATAFLOWS", "Mapping", "SystolicResult", "conv_gemm_dims", "conv_output_size",
    "core_gemm_time", "data_parallel", "evaluate_layer", "gemm_cycles", "gemm_cycles_array",
    "layer_precision", "layer_precisions", "layer_table", "systolic_gemm", "workload_cycles",
]
