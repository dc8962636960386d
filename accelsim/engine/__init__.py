"""The one execution model: every workload and every front-end (``predict``, ``llm``,
``explore``, ``sweep``, the HFP8 study) through one schedule, one memory account and one
communication model; compute from :mod:`accelsim.perf`, collectives from :mod:`accelsim.netsim`.
"""

from accelsim.arch.schemes import get_scheme
from accelsim.arch.states import ParamCounts, StateFormats, param_bytes
from accelsim.engine.comm import Comm, Fabric, comm
from accelsim.engine.memory import Memory, memory
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.run import data_parallel_step, predict_step
from accelsim.engine.transformer import Prediction, predict

__all__ = ["Comm", "Fabric", "LlmParams", "Memory", "ParamCounts", "Plan",
           "Prediction", "StateFormats", "comm", "data_parallel_step", "get_scheme", "memory",
           "param_bytes", "predict", "predict_step"]
