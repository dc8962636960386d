"""accelsim: bit-exact number formats, arithmetic golden models and a performance model for
low-precision deep-learning training on multi-chip accelerators (IBM HFP8, NeurIPS 2019).

The top-level API (each name is imported from its room on first use, so ``import accelsim``
stays fast; the rooms hold the rest, see docs/api.md)::

    import accelsim
    accelsim.quantize(x, "e4m3fn")                 # or ml_dtypes.float8_e4m3fn; float32 stays float32
    accelsim.block_quantize(x, "nvfp4").dequantize()  # block-scaled: BLOCK_FORMAT_NAMES
    eng = accelsim.get_engine("h100-fp8")           # an arithmetic datapath
    accelsim.matmul(a, b, eng); accelsim.dot(a[0], b[:, 0], eng)
    h100 = accelsim.build_system("h100-sxm")        # a shipped config name or a file
    accelsim.gemm_time(h100, 4096, 4096, 4096, "bf16").tflops
    accelsim.predict(accelsim.build_system("a100-sxm"), accelsim.load_workload("resnet50"), 64,
                     "fp16", fusion=False).as_dict()["samples_per_s"]
    gpt = accelsim.load_workload("gpt2-small")  # a generated transformer: any 3-D plan
    accelsim.simulate(accelsim.build_system("dgx-h100"), gpt,
                      accelsim.Plan(tp=2, pp=1, dp=4, micro_batch=4, global_batch=16),
                      "bf16").rows()                # the per-op breakdown
    accelsim.training_step(accelsim.build_system("hfp8-64chip"), accelsim.load_workload("resnet50"),
                           "hfp8", accelsim.TrainingParams(minibatch=384)).samples_per_s
    accelsim.infer(accelsim.build_system("h100-sxm"), "llama3-8b", "bf16", 32, prompt=1024,
                   output_tokens=256).as_dict()["request_latency_s"]   # = accelsim infer --json
    accelsim.serve(accelsim.build_system("h100-sxm"), "llama3-8b", "bf16", rate=4.0,
                   requests=500, input_tokens=512, output_tokens=128
                   ).as_dict()["time_to_first_token_s_p99"]             # = accelsim serve --json
    g = accelsim.build_topology("ring", 8, link_GBps=50)
    accelsim.collective_time(g, "all-reduce", 10**8, bytes_per_elem=2.0).time_s
    accelsim.training_sweep(["scheme=fp16,fp8", "chip_GBps=32,64"], out="s.csv")

Units at this boundary are those of configs and the CLI: bandwidths in GB/s (``*_GBps``), times
in seconds (``*_s``); sizes in elements or bytes as named.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> module that defines it, or ``module:name`` where it is defined under another
#: name (imported on first use, PEP 562)
_EXPORTS = {
    # numerics: formats and rounding
    "quantize": "accelsim.numerics",
    "encode": "accelsim.numerics",
    "decode": "accelsim.numerics",
    "get_format": "accelsim.numerics",
    "FloatFormat": "accelsim.numerics",
    "FORMAT_NAMES": "accelsim.numerics",
    "ROUNDING_MODES": "accelsim.numerics",
    # numerics: block-scaled formats (OCP MX, NVFP4, DeepSeek-V3 FP8 tiles)
    "block_quantize": "accelsim.numerics",
    "get_block_format": "accelsim.numerics",
    "BlockFormat": "accelsim.numerics",
    "BlockQuantized": "accelsim.numerics",
    "BLOCK_FORMAT_NAMES": "accelsim.numerics",
    # arith: datapaths (FMA, dot, GEMM)
    "get_engine": "accelsim.arith",
    "EngineConfig": "accelsim.arith",
    "matmul": "accelsim.arith",
    "dot": "accelsim.arith",
    # hardware and workloads (shipped names or files)
    "build_system": "accelsim.arch",
    "System": "accelsim.arch",
    "ConfigError": "accelsim.arch",
    "load_workload": "accelsim.workload",
    "Workload": "accelsim.workload",
    "shipped_names": "accelsim.paths",
    # performance: one GEMM, one training iteration (predict: a layer workload on a chip or GPU
    # per batch; training_step: the data-parallel study step), a sweep of them
    "gemm_time": "accelsim.perf.power",  # the preset's clock, or the power-limited one
    "GemmTime": "accelsim.perf.gemm",
    "predict": "accelsim.engine.run:predict_workload",
    "simulate": "accelsim.engine.run",  # the engine's one call: any workload under any plan
    "Plan": "accelsim.engine.plan",
    "Options": "accelsim.engine.run",
    "training_step": "accelsim.dse.training",
    "TrainingParams": "accelsim.engine.schedule",
    "training_sweep": "accelsim.dse.scenario",
    # LLM inference: prefill, decode over a KV cache, requests (what ``accelsim infer`` runs)
    "infer": "accelsim.llm.inference",
    # LLM serving: a request stream, continuous batching, percentiles (``accelsim serve``)
    "serve": "accelsim.serving.run",
    # collectives on topologies
    "build_topology": "accelsim.netsim.topology",
    "collective_time": "accelsim.netsim",
    "CollectiveTime": "accelsim.netsim",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accelsim' has no attribute {name!r}")
    module, _, attr = module.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # static checkers and IDEs see the names without the lazy import
    from accelsim.arch import ConfigError, System, build_system
    from accelsim.arith import EngineConfig, dot, get_engine, matmul
    from accelsim.dse.scenario import training_sweep
    from accelsim.dse.training import training_step
    from accelsim.engine.run import predict_workload as predict
    from accelsim.engine.schedule import TrainingParams
    from accelsim.llm.inference import infer
    from accelsim.serving.run import serve
    from accelsim.netsim import CollectiveTime, collective_time
    from accelsim.netsim.topology import build_topology
    from accelsim.numerics import (BLOCK_FORMAT_NAMES, FORMAT_NAMES, ROUNDING_MODES,
                                   BlockFormat, BlockQuantized, FloatFormat, block_quantize,
                                   decode, encode, get_block_format, get_format, quantize)
    from accelsim.paths import shipped_names
    from accelsim.perf.gemm import GemmTime
    from accelsim.perf.power import gemm_time
    from accelsim.workload import Workload, load_workload
