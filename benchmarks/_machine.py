"""What machine a benchmark ran on, printed beside its numbers."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def timed(fn, repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` calls of ``fn`` (every run kept: report the spread)."""
    import time

    out = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def spread(values, fmt: str = "{:.3f}") -> str:
    """``min / median / max`` of the runs: what every benchmark prints (a shared machine's load
    moves single numbers; the spread shows how much)."""
    import statistics

    v = sorted(values)
    return " / ".join(fmt.format(x) for x in (v[0], statistics.median(v), v[-1]))


def ratios(ref, ours) -> list[float]:
    """Per-run speed ratios ref/ours of runs measured alternately (same load for both)."""
    return [r / o for r, o in zip(ref, ours)]


@contextlib.contextmanager
def jit_off():
    """The numpy datapaths inside the block, as without the ``jit`` extra (accelsim reads
    ACCELSIM_JIT per call)."""
    old = os.environ.get("ACCELSIM_JIT")
    os.environ["ACCELSIM_JIT"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["ACCELSIM_JIT"]
        else:
            os.environ["ACCELSIM_JIT"] = old


def no_jit(fn):
    """``fn`` run under :func:`jit_off`."""
    def run():
        with jit_off():
            return fn()
    return run

