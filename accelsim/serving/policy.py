"""The serving policy's memory and batch rules and its one fitted constant, in one place: how
much of a GPU the paged KV cache gets, the largest batch it holds (the closed form the
published-inference validation asks for its maximum-load rows; the simulation in
:mod:`accelsim.serving.sim` uses the same capacity), and the host's per-request overhead
(:data:`REQUEST_OVERHEAD_S`). The online rows at a request rate are asked through the
simulation itself (``accelsim.serve``), not a Little's-law batch.

The KV cache gets :data:`KV_FREE_FRACTION` of the memory left after the weights and the reserve
(trtllm-bench's ``--kv_cache_free_gpu_mem_fraction``, 0.90-0.95 in the published cases' notes;
vLLM's ``gpu_memory_utilization`` default is 0.9 of the whole GPU), in blocks of
:data:`BLOCK_TOKENS` tokens (vLLM's default ``--block-size``).
"""

from __future__ import annotations

import math

from accelsim.arch import System
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import (InferencePlan, kv_cache_bytes_per_gpu,
                                       weight_bytes_per_gpu)
from accelsim.engine.memory import GIB

#: share of the memory left after weights (and reserve) the KV cache takes
KV_FREE_FRACTION = 0.90
#: assumption: trtllm-bench's largest batch (its max_batch_size heuristic tops out in the
#: thousands; the KV cache binds first for every published case but the shortest)
MAX_BATCH = 2048
#: tokens per KV-cache block (vLLM's --block-size default)
BLOCK_TOKENS = 16
#: the server's host time per request before it is queued (HTTP, tokenization, scheduling the
#: new request; the first token's detokenization and response folded in), seconds: ``serve``'s
#: default (``--request-overhead-ms``; 0 turns it off). Fitted by scripts/fit_host_overhead.py
#: on TensorRT-LLM 0.14's online-serving Llama-3.1-8B TP1 mean-TTFT rows of
#: accelsim/data/llm_published.toml at 2 requests/s (``accelsim.llm.published.HOST_OVERHEAD_FIT``,
#: three length pairs): their mean absolute error 30.0 % at 0, 5.1 % here; the nine held-out
#: online rows (their ITL, the Llama-3.1-70B TP4 rows) 11.1 % -> 7.4 %. docs/serve.md.
REQUEST_OVERHEAD_S = 0.006


def kv_free_bytes(model: Decoder, system: System, plan: InferencePlan, gp: str,
                  reserve_GiB: float = 0.0) -> float:
    """Bytes of one GPU the KV cache may take (0 when the weights do not fit)."""
    free = system.chip.memory_capacity_bytes - weight_bytes_per_gpu(model, plan, gp) \
        - reserve_GiB * GIB
    return max(0.0, KV_FREE_FRACTION * free)


def kv_capacity_tokens(model: Decoder, system: System, plan: InferencePlan, gp: str,
                       reserve_GiB: float = 0.0) -> int:
    """Tokens the paged KV cache holds (whole blocks), from the memory account."""
    per_token = kv_cache_bytes_per_gpu(model, plan, 1, 1)
    blocks = math.floor(kv_free_bytes(model, system, plan, gp, reserve_GiB)
                        / (per_token * BLOCK_TOKENS))
    return max(0, blocks) * BLOCK_TOKENS


def kv_limited_batch(model: Decoder, system: System, plan: InferencePlan, gp: str,
                     input_tokens: int, output_tokens: int) -> int:
    """The largest batch of ``input_tokens + output_tokens`` sequences whose KV cache fits
    (at most :data:`MAX_BATCH`; 0: the weights leave no room): maximum load."""
    per_seq = kv_cache_bytes_per_gpu(model, plan, 1, input_tokens + output_tokens)
    return max(0, min(MAX_BATCH, math.floor(kv_free_bytes(model, system, plan, gp)
                                            / per_seq)))
