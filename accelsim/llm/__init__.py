"""Large-model training at scale: GPT workloads under 3-D parallelism (tensor, pipeline, data
with ZeRO), activation recomputation and LLM precision schemes -- memory per GPU, communication
volumes and times on a node file, iteration time, TFLOPS and MFU, and a plan search
(Narayanan et al. SC'21; Korthikanti et al. 2022; Peng et al. 2023, FP8-LM)."""

from accelsim.llm.comm import Comm, Fabric, comm
from accelsim.llm.memory import Memory, memory
from accelsim.llm.plan import LlmParams, Plan
from accelsim.llm.predict import Prediction, predict
from accelsim.llm.schemes import SCHEMES, LlmScheme, ParamCounts, get_scheme, param_bytes

__all__ = ["Comm", "Fabric", "LlmParams", "LlmScheme", "Memory", "ParamCounts", "Plan",
           "Prediction", "SCHEMES", "comm", "get_scheme", "memory", "param_bytes", "predict"]
