"""Compute time per layer: systolic-array cycles (ws/os/is dataflows, SCALE-Sim compatible),
and a roofline per layer x training phase (compute, scratchpad, memory, SFU, split collectives)
for a mapping of the layer onto a system's chips and cores (HFP8 paper, appendix D); with a
memory hierarchy in the config, GEMMs tiled over all cores of a chip through shared levels
(:mod:`accelsim.perf.gemm`, public :func:`gemm_time`), kernel fusion and launch costs; the
clock a chip's power limit allows a GEMM (:mod:`accelsim.perf.power`, opt-in)."""

from __future__ import annotations

import importlib

#: public name -> submodule; imported on first use (PEP 562), so ``accelsim gemm`` loads only
#: the GEMM model, not the layer model and its dependencies.
_EXPORTS = {
    **dict.fromkeys(("FITTED", "Efficiency", "GemmTime", "chip_gemm_time", "gemm_time",
                     "gemm_kernel_time"), "gemm"),
    "core_gemm_time": "core_gemm",
    **dict.fromkeys(("BOUNDS", "Mapping", "data_parallel", "evaluate_layer", "layer_table"),
                    "layer_model"),
    **dict.fromkeys(("layer_precision", "layer_precisions"), "precision"),
    **dict.fromkeys(("PoweredGemm", "gemm_at_clock", "gemm_power_limited"), "power"),
    **dict.fromkeys(("DATAFLOWS", "Dataflow", "SystolicResult", "conv_gemm_dims", "conv_output_size",
                     "gemm_cycles", "gemm_cycles_array", "systolic_gemm", "workload_cycles"),
                    "systolic"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])
