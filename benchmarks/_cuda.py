"""CUDA-event timing shared by the real-GPU scripts (``device_*.py``; torch needed, never run by
tests or CI)."""

from __future__ import annotations

import statistics

import torch


def timed(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds of ``fn`` over ``repeats`` CUDA-event-timed calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)
