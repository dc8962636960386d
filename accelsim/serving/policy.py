"""The serving policy's memory and batch rules, in one place: how much of a GPU the paged KV
cache gets, the largest batch it holds, and the batch in flight at a request rate by Little's
law (the closed forms the published-inference validation asks; the simulation in
:mod:`accelsim.serving.sim` uses the same capacity).

The KV cache gets :data:`KV_FREE_FRACTION` of the memory left after the weights and the reserve
(trtllm-bench's ``--kv_cache_free_gpu_mem_fraction``, 0.90-0.95 in the published cases' notes;
vLLM's ``gpu_memory_utilization`` default is 0.9 of the whole GPU), in blocks of
:data:`BLOCK_TOKENS` tokens (vLLM's default ``--block-size``).
"""

from __future__ import annotations

import math

from accelsim.arch import System
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import (InferencePlan, infer, kv_cache_bytes_per_gpu,
                                       weight_bytes_per_gpu)
from accelsim.engine.memory import GIB

#: share of the memory left after weights (and reserve) the KV cache takes
KV_FREE_FRACTION = 0.90
#: assumption: trtllm-bench's largest batch (its max_batch_size heuristic tops out in the
#: thousands; the KV cache binds first for every published case but the shortest)
MAX_BATCH = 2048
#: tokens per KV-cache block (vLLM's --block-size default)
BLOCK_TOKENS = 16
#: fixed-point iterations of :func:`littles_law_batch`
LITTLE_ITERATIONS = 8


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


def littles_law_batch(model: Decoder, system: System, plan: InferencePlan, scheme: str,
                      rate: float, input_tokens: int, output_tokens: int) -> int:
    """Requests in flight at ``rate`` requests/s by Little's law, ``B = ceil(rate x request
    latency at B)``, iterated from B = 1 to a fixed point (at most
    :data:`LITTLE_ITERATIONS` steps)."""
    b = 1
    for _ in range(LITTLE_ITERATIONS):
        lat = infer(model, system, plan, scheme, b, prompt=input_tokens,
                    output_tokens=output_tokens)
        nb = max(1, math.ceil(rate * lat.request_latency_s))
        if nb == b:
            break
        b = nb
    return b
