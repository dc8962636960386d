"""DNN training workloads: explicit layer lists (``workloads/*.toml``) and SCALE-Sim topology
CSVs, lowered per layer to forward / backward-data / weight-gradient GEMMs plus non-GEMM
element-wise work (BatchNorm, ReLU, pooling, softmax, residual adds)."""

from accelsim.workload.loader import load_workload, workload_from_dict
from accelsim.workload.model import (
    ELEMENTWISE_KINDS,
    GEMM_KINDS,
    KINDS,
    PHASES,
    Phase,
    SHAPE_MODES,
    Elementwise,
    Gemm,
    Layer,
    Workload,
    conv_out,
)
from accelsim.workload.scalesim import read_scalesim_topology

__all__ = [
    "ELEMENTWISE_KINDS",
    "GEMM_KINDS",
    "KINDS",
    "PHASES",
    "Phase",
    "SHAPE_MODES",
    "Elementwise",
    "Gemm",
    "Layer",
    "Workload",
    "conv_out",
    "load_workload",
    "read_scalesim_topology",
    "workload_from_dict",
]
