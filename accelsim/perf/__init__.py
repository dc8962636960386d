"""Compute time per layer: systolic-array cycles (ws/os/is dataflows, SCALE-Sim compatible),
and a roofline per layer x training phase (compute, scratchpad, memory, SFU, split collectives)
for a mapping of the layer onto a system's chips and cores (HFP8 paper, appendix D)."""

from accelsim.perf.layer_model import (
    BOUNDS,
    Mapping,
    core_gemm_time,
    data_parallel,
    evaluate_layer,
    layer_precision,
    layer_precisions,
    layer_table,
)
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
    "BOUNDS", "DATAFLOWS", "Mapping", "SystolicResult", "conv_gemm_dims", "conv_output_size",
    "core_gemm_time", "data_parallel", "evaluate_layer", "gemm_cycles", "gemm_cycles_array",
    "layer_precision", "layer_precisions", "layer_table", "systolic_gemm", "workload_cycles",
]
