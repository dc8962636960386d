"""The one execution model: every workload and every front-end (``predict``, ``llm``,
``explore``, ``sweep``, the HFP8 study) through one op graph (:mod:`~accelsim.engine.graph`),
one schedule, one memory account and one communication model; compute from
:mod:`accelsim.perf`, collectives from :mod:`accelsim.netsim`.

Rooms: ``graph`` (typed ops, timed in one place), ``plan`` (parallel plans, placement rules),
``memory`` (the one memory account), ``comm`` (tensor/pipeline/data-parallel traffic),
``schedule`` (overlap, pipeline and step composition), ``layers`` (layer workloads' compute),
``transformer`` (transformers under 3-D parallelism), ``run`` (entry points), ``trace``
(breakdown table and Chrome trace).
"""

from __future__ import annotations

import importlib

#: public name -> submodule, imported on first use (PEP 562): building a command's flags stays
#: free of netsim, pandas and simpy. The functions named like their modules stay there
#: (``accelsim.engine.memory.memory``, ``accelsim.engine.comm.comm``).
_EXPORTS = {
    **dict.fromkeys(("ParamCounts", "StateFormats", "param_bytes"), "accelsim.arch.states"),
    "get_scheme": "accelsim.arch.schemes",
    "Comm": "accelsim.engine.comm",
    "Fabric": "accelsim.netsim.fabric",
    "Memory": "accelsim.engine.memory",
    **dict.fromkeys(("LlmParams", "Plan"), "accelsim.engine.plan"),
    **dict.fromkeys(("Options", "WorkloadPrediction", "data_parallel_step", "predict_step",
                     "predict_workload", "simulate"), "accelsim.engine.run"),
    **dict.fromkeys(("Prediction", "predict"), "accelsim.engine.transformer"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_EXPORTS])
