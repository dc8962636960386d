"""Fused (flash) attention kernels' sustained efficiency, from their published benchmark bars.

One owner, :func:`kernel_efficiency`: the fraction of a GPU's dense 16-bit tensor-core peak a
kernel (:class:`FlashImpl`) reaches on one pass (forward or backward) at a head dim and a
sequence length, read from ``accelsim/data/attention_kernels.csv`` (each row with its source:
FlashAttention-3, Shah et al. 2024, arXiv:2407.08608, Figs. 5-6 on H100 SXM5 for FA2, FA3, cuDNN
and Triton; FlashAttention-2, Dao 2023, arXiv:2307.08691, Fig. 4(c) on A100 SXM4 for FA2 and the
Triton kernel) and interpolated in log2 of the sequence and of the head dim, clamped to the bars
(512-16k tokens, head dim 64-128). The rules, each stated where it is applied:

* the table of the chip's class (:func:`gpu_class`): Hopper-class tensor cores (at least 2048
  dense 16-bit MACs per SM and clock) read the H100 bars, the others the A100 bars;
* a kernel without bars on a GPU runs what a stack runs there instead (:data:`FALLBACK`);
* causal attention: the non-causal curve times the kernel's causal / non-causal forward ratio at
  its plateau (16k, head dim 128), on both passes -- what our H100 measurements of cuDNN agree
  with (reports/device_validation.md, "attention kernels": -10.6 % to +6.5 %);
* a pass without bars of its own: forward + backward bars stand for both passes (the time of a
  training step's forward + backward is then the published one); a backward without either runs
  at its forward curve times FA2's backward / forward ratio on that GPU.
"""

from __future__ import annotations

import csv
import functools
import math
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from accelsim.errors import InputError

if TYPE_CHECKING:
    from accelsim.arch import Chip

DATA = Path(__file__).resolve().parents[1] / "data" / "attention_kernels.csv"


class FlashImpl(StrEnum):
    """A fused attention kernel."""

    #: FlashAttention-2 (Dao-AILab flash-attn 2.x; Megatron-LM's --use-flash-attn)
    FA2 = "fa2"
    #: FlashAttention-3 (Hopper only; no ALiBi: Dao-AILab/flash-attention#1666)
    FA3 = "fa3"
    #: cuDNN's fused attention (PyTorch SDPA's first choice on sm90, Transformer Engine's
    #: FusedAttention)
    CUDNN = "cudnn"
    #: a Triton flash kernel (llm-foundry's ``attn_impl: triton``, its ALiBi path before
    #: flash-attn 2.4: mosaicml/llm-foundry#820)
    TRITON = "triton"


class GpuClass(StrEnum):
    """Whose bars a chip reads (the ``gpu`` column of the data file)."""

    AMPERE = "a100"
    HOPPER = "h100"


#: dense 16-bit tensor-core MACs per SM and clock from which a chip reads the Hopper bars
#: (H100: 2048; A100: 1024; V100: 512)
HOPPER_MACS_PER_SM = 2048

#: what runs on a GPU where a kernel has no bars: FlashAttention-3 is Hopper-only (flash-attn
#: runs FA2 elsewhere) and PyTorch SDPA on sm80 runs its FA2 backend, not cuDNN
FALLBACK: dict[tuple[FlashImpl, GpuClass], FlashImpl] = {
    (FlashImpl.FA3, GpuClass.AMPERE): FlashImpl.FA2,
    (FlashImpl.CUDNN, GpuClass.AMPERE): FlashImpl.FA2,
}


def gpu_class(chip: Chip) -> GpuClass:
    """The bars a chip reads: Hopper's for a chip whose SMs (cores) each run at least
    :data:`HOPPER_MACS_PER_SM` dense fp16 MACs per clock (H100, H200, B200), else the A100's
    (A100, A40, V100)."""
    if chip.core.supports("fp16") and chip.core.macs_per_cycle("fp16") >= HOPPER_MACS_PER_SM:
        return GpuClass.HOPPER
    return GpuClass.AMPERE


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict, dict]:
    """({(gpu, kernel, pass, causal, head_dim): ((seq, tflops), ...)}, {gpu: peak TFLOPS})."""
    curves: dict[tuple, list] = {}
    peaks: dict[str, float] = {}
    with DATA.open() as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            key = (GpuClass(r["gpu"]), FlashImpl(r["kernel"]), r["pass"], r["causal"] == "1",
                   int(r["head_dim"]))
            curves.setdefault(key, []).append((int(r["seq"]), float(r["tflops"])))
            peaks[r["gpu"]] = float(r["peak_tflops"])
    return {k: tuple(sorted(v)) for k, v in curves.items()}, peaks


def _at_seq(points: tuple[tuple[int, float], ...], seq: int) -> float:
    """Linear in log2(seq) between the bars, the nearest bar outside them."""
    x = math.log2(seq)
    xs = [math.log2(s) for s, _ in points]
    if x <= xs[0]:
        return points[0][1]
    if x >= xs[-1]:
        return points[-1][1]
    i = next(j for j in range(1, len(xs)) if x <= xs[j])
    (_, a), (_, b) = points[i - 1], points[i]
    return a + (b - a) * (x - xs[i - 1]) / (xs[i] - xs[i - 1])


def _curve(gpu: GpuClass, impl: FlashImpl, pas: str, causal: bool, head_dim: int,
           seq: int) -> float | None:
    """TFLOPS of one pass and mask, linear in log2(head dim) between the head dims with bars
    (the nearest outside them); None without bars."""
    curves, _ = _table()
    dims = sorted(d for (g, k, p, c, d) in curves if (g, k, p, c) == (gpu, impl, pas, causal))
    if not dims:
        return None
    x = min(max(math.log2(head_dim), math.log2(dims[0])), math.log2(dims[-1]))
    lo = max(d for d in dims if math.log2(d) <= x)
    hi = min(d for d in dims if math.log2(d) >= x)
    a = _at_seq(curves[gpu, impl, pas, causal, lo], seq)
    if hi == lo:
        return a
    b = _at_seq(curves[gpu, impl, pas, causal, hi], seq)
    return a + (b - a) * (x - math.log2(lo)) / (math.log2(hi) - math.log2(lo))


def _pass_tflops(gpu: GpuClass, impl: FlashImpl, pas: str, head_dim: int, seq: int
                 ) -> tuple[float, bool] | None:
    """(TFLOPS, whether the bars are causal) of one pass: the non-causal bars where the kernel
    has them, else its causal ones; a forward + backward bar stands for either pass."""
    for p in (pas, "fwd_bwd"):
        for causal in (False, True):
            v = _curve(gpu, impl, p, causal, head_dim, seq)
            if v is not None:
                return v, causal
    return None


def kernel_efficiency(impl: FlashImpl, gpu: GpuClass, backward: bool, causal: bool,
                      head_dim: int, seq: int) -> float:
    """The fraction of the GPU's dense 16-bit peak that ``impl`` sustains on one pass over
    ``seq`` keys per query at ``head_dim`` (the FLOPs counted as the papers count them: the
    causal half skipped, the backward pass 2.5 x the forward's)."""
    for name, v in (("head_dim", head_dim), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"kernel_efficiency: {name} must be an integer >= 1, got {v!r}")
    impl, gpu = resolved(impl, gpu), GpuClass(gpu)
    _, peaks = _table()
    got = _pass_tflops(gpu, impl, "bwd" if backward else "fwd", head_dim, seq)
    if got is None:  # a backward without bars: its forward at FA2's backward / forward ratio
        fwd = _pass_tflops(gpu, impl, "fwd", head_dim, seq)
        f2, b2 = (_pass_tflops(gpu, FlashImpl.FA2, p, head_dim, seq) for p in ("fwd", "bwd"))
        if fwd is None or f2 is None or b2 is None:
            raise InputError(f"no published bars for {impl} on {gpu} ({DATA.name})")
        got = (fwd[0] * b2[0] / f2[0], fwd[1])
    tflops, bars_causal = got
    if causal and not bars_causal:
        tflops *= causal_ratio(impl, gpu)
    return tflops / peaks[gpu]


def resolved(impl: FlashImpl, gpu: GpuClass) -> FlashImpl:
    """The kernel that runs for ``impl`` on ``gpu`` (:data:`FALLBACK`)."""
    impl = FlashImpl(impl)
    return FALLBACK.get((impl, GpuClass(gpu)), impl)


def causal_ratio(impl: FlashImpl, gpu: GpuClass) -> float:
    """A kernel's causal over non-causal forward TFLOPS at its plateau (its longest sequence,
    head dim 128): its loss to the diagonal blocks and their load imbalance; 1 where it has no
    bars of both kinds."""
    impl, gpu = FlashImpl(impl), GpuClass(gpu)
    curves, _ = _table()
    pair = [curves.get((gpu, impl, "fwd", c, 128)) for c in (True, False)]
    if None in pair:
        return 1.0
    return pair[0][-1][1] / pair[1][-1][1]


__all__ = ["DATA", "FALLBACK", "FlashImpl", "GpuClass", "HOPPER_MACS_PER_SM", "causal_ratio",
           "gpu_class", "kernel_efficiency", "resolved"]
