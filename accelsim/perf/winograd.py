"""Winograd convolution algorithms for 3x3 stride-1 convolutions (Lavin & Gray, "Fast Algorithms
for Convolutional Neural Networks", CVPR 2016), timed on a chip with a memory hierarchy so the
layer model can pick, per layer and phase, the faster of implicit GEMM and Winograd, as cuDNN's
benchmark mode (``cudnnFindConvolution*Algorithm``) does.

F(m x m, 3 x 3) computes an m x m output tile from an (m + 2)^2 input tile with ``(m + 2)^2``
multiplies per (input channel, output channel) instead of ``9 m^2``: F(2x2, 3x3) 16 vs 36
(2.25x fewer), F(4x4, 3x3) 36 vs 144 (4x). The multiplies form ``(m + 2)^2`` independent GEMMs
(one per transformed-tile position) over the tiles; the transforms are additions (the
constant multiplies fold into FMAs): ``rows x (nonzeros per row - 1)`` per 1-D transform, two
1-D passes per 2-D transform (:func:`transform_ops`, exact counts from the matrices below).

Algorithms (cuDNN's ``*_ALGO_WINOGRAD`` and ``*_ALGO_WINOGRAD_NONFUSED``):

* ``nonfused`` (forward, backward-data, weight-gradient): three transform kernels on the vector
  units write the transformed operands to chip memory and read them back; the ``(m + 2)^2``
  GEMMs run on the array in the layer's precision (:func:`accelsim.perf.gemm.chip_gemm_time`).
* ``fused`` (forward and backward-data only; cuDNN's fused kernels have no weight-gradient
  variant): one kernel on the vector units transforms on chip, so chip memory sees only the
  convolution's own tensors; allowed only for precisions the core runs on its vector units
  (``core.simt_precisions``, e.g. FP32 on V100/A100 CUDA cores), its multiplies and transforms
  share those units. (On tensor cores cuDNN's forward convolutions are IMPLICIT_PRECOMP_GEMM or
  WINOGRAD_NONFUSED only: cuDNN 7 Developer Guide, "Tensor Core operations".)

Both run only in :data:`WINOGRAD_PRECISIONS` (FP32, TF32, FP16: cuDNN's support tables); 8-bit
convolutions (FP8, HFP8, HiF8, INT8) and BF16 stay on implicit GEMM.

Backward-data of a 3x3 stride-1 convolution is a 3x3 stride-1 convolution of the output
gradient (flipped filter); the weight gradient is F(3 x 3, m x m) with the same ``m + 2`` tile
(its transform counts reuse F(m x m, 3 x 3)'s matrices: an estimate, the transforms are a small
part of the time). Not modelled: the nonfused algorithms' workspace in chip memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as Fr

import numpy as np

from accelsim.perf.gemm import OPERAND_BYTES, Efficiency, chip_gemm_time
from accelsim.perf.kernel import kernel_time

#: Lavin & Gray (2016) transform matrices: ``Y = A^T [(G g G^T) * (B^T d B)] A``.
MATRICES = {
    2: {"BT": [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        "G": [[1, 0, 0], [Fr(1, 2), Fr(1, 2), Fr(1, 2)], [Fr(1, 2), Fr(-1, 2), Fr(1, 2)],
              [0, 0, 1]],
        "AT": [[1, 1, 1, 0], [0, 1, -1, -1]]},
    4: {"BT": [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        "G": [[Fr(1, 4), 0, 0], [Fr(-1, 6), Fr(-1, 6), Fr(-1, 6)], [Fr(-1, 6), Fr(1, 6), Fr(-1, 6)],
              [Fr(1, 24), Fr(1, 12), Fr(1, 6)], [Fr(1, 24), Fr(-1, 12), Fr(1, 6)], [0, 0, 1]],
        "AT": [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]]},
}
TILES = tuple(MATRICES)  # output tile sizes m of F(m x m, 3 x 3)
R = 3  # filter size


def transform_ops(matrix) -> int:
    """Operations of one 2-D transform ``X^T d X`` with ``X^T`` = ``matrix`` (p x q): ``q``
    1-D passes over the columns, then ``p`` over the rows, each 1-D pass costing
    ``sum over rows of (nonzeros - 1)`` additions/FMAs (constant factors fold into FMAs)."""
    one_d = sum(max(0, sum(1 for v in row if v != 0) - 1) for row in matrix)
    p, q = len(matrix), len(matrix[0])
    return one_d * (q + p)


#: Precisions the Winograd algorithms run in. Source: cuDNN API Reference (v7 and v8),
#: cudnnConvolutionForward / BackwardData / BackwardFilter, "supported configurations" tables:
#: *_ALGO_WINOGRAD and *_ALGO_WINOGRAD_NONFUSED are listed only for FLOAT_CONFIG (FP32 tensors)
#: and the HALF configs (FP16 tensors); the INT8 configs are implicit (precomputed) GEMM only,
#: and cuDNN has no FP8 Winograd. TF32 is not a cuDNN data type but a math mode of FP32
#: tensors (FLOAT_CONFIG), so it keeps Winograd. BF16 (cuDNN 8's BFLOAT16 configs) is left out:
#: no Winograd support for it is documented (an assumption). Numerically, the transforms need
#: more precision and range than 8-bit operands hold (FP8, HFP8, HiF8, INT8): F(4x4, 3x3) has
#: entries 1/6 and 1/24 in G, 4 and 5 in B^T, 8 in A^T; one transformed input element sums up
#: to 16 terms with coefficients up to 25, one output up to 25 terms with coefficients up to
#: 64 (F(2x2, 3x3): 1/2 in G, up to 9 terms). TVM disables Winograd for quantized tensors
#: (apache/tvm PR #5363: top-5 accuracy collapses); Lavin notes the intermediate transforms
#: overflow 8 bits (andravin/wincnn issue #16).
WINOGRAD_PRECISIONS = ("fp32", "tf32", "fp16")


def _shape_applies(layer) -> bool:
    return (layer.kind == "conv" and layer.kernel_h == R and layer.kernel_w == R
            and layer.stride_h == 1 and layer.stride_w == 1 and layer.groups == 1)


def applies(layer, precision: str) -> bool:
    """cuDNN's Winograd algorithms take 3x3 filters at stride 1 (ungrouped convolutions) in one
    of :data:`WINOGRAD_PRECISIONS`."""
    return precision in WINOGRAD_PRECISIONS and _shape_applies(layer)


@dataclass(frozen=True)
class WinogradPlan:
    """One phase of one layer under F(m x m, 3 x 3): the batched GEMM and the transforms."""

    m: int
    gemm_m: int
    gemm_n: int
    gemm_k: int
    count: int  # (m + 2)^2 GEMMs
    in_elems: tuple[float, float]  # elements of the two GEMM inputs before their transform
    in_transformed: tuple[float, float]  # after (written by the nonfused transform kernels)
    out_transformed: float  # GEMM result elements before the output transform
    out_elems: float  # result elements after it
    transform_ops: float  # all three transforms


def plan(layer, batch: int, phase: str, m: int) -> WinogradPlan:
    """The Winograd form of ``phase`` (``fwd``, ``bwd_data`` or ``wgrad``) of a 3x3 stride-1
    convolution at minibatch ``batch`` with output tiles ``m x m``."""
    if m not in MATRICES:
        raise ValueError(f"Winograd tile m={m!r} not one of {TILES}")
    if not _shape_applies(layer):
        raise ValueError(f"layer {layer.name!r}: Winograd needs an ungrouped 3x3 stride-1 conv")
    a = m + R - 1
    mats = MATRICES[m]
    op_in, op_out = transform_ops(mats["BT"]), transform_ops(mats["AT"])
    op_filter = transform_ops(mats["G"])
    c, k = layer.in_channels, layer.out_channels
    ho, wo = layer.out_h, layer.out_w

    def tiles(h, w):
        return batch * (-(-h // m)) * (-(-w // m))

    x_el = batch * layer.in_h * layer.in_w * c
    y_el = batch * ho * wo * k
    if phase == "fwd":  # x (C) -> y (K) over the output tiles
        p = tiles(ho, wo)
        return WinogradPlan(m, p, k, c, a * a, (x_el, 9 * c * k), (a * a * p * c, a * a * c * k),
                            a * a * p * k, y_el,
                            p * c * op_in + c * k * op_filter + p * k * op_out)
    if phase == "bwd_data":  # dy (K) -> dx (C), flipped filter, over the input tiles
        p = tiles(layer.in_h, layer.in_w)
        return WinogradPlan(m, p, c, k, a * a, (y_el, 9 * c * k), (a * a * p * k, a * a * c * k),
                            a * a * p * c, x_el,
                            p * k * op_in + c * k * op_filter + p * c * op_out)
    if phase == "wgrad":  # F(3x3, m x m): x tiles and dy tiles -> the 3x3 filter gradient
        p = tiles(ho, wo)
        return WinogradPlan(m, c, k, p, a * a, (x_el, y_el), (a * a * p * c, a * a * p * k),
                            a * a * c * k, 9 * c * k,
                            p * c * op_in + p * k * op_filter + c * k * op_out)
    raise ValueError(f"unknown phase {phase!r}")


def winograd_time(chip, layer, batch: int, phase: str, precision: str, dataflow: str,
                  out_bytes: float, efficiency: Efficiency) -> tuple[float, str, dict]:
    """Fastest Winograd algorithm for one phase on a hierarchy chip: (time_s, name, terms).

    ``name`` is ``winograd_f{m}_{fused|nonfused}``; ``terms`` has compute_s, sfu_s, memory_s,
    cache_s, latency_s and bound of the chosen algorithm. The nonfused algorithm is a sequence
    of kernels (the transforms, then the batched GEMM): its terms are their sums and its bound
    is the bound of the slower of the two (:func:`nonfused_time`)."""
    if precision not in WINOGRAD_PRECISIONS:
        raise ValueError(f"Winograd does not run in {precision!r}; cuDNN's Winograd algorithms "
                         f"take {', '.join(WINOGRAD_PRECISIONS)}")
    best = (np.inf, "", {})
    b = OPERAND_BYTES[precision]
    simt = precision in chip.core.simt_precisions
    for m in TILES:
        pl = plan(layer, batch, phase, m)
        g = chip_gemm_time(chip, pl.gemm_m, pl.gemm_n, pl.gemm_k, pl.count, precision, dataflow,
                           out_bytes=b, efficiency=efficiency)
        t, terms = nonfused_time(chip, pl, g, b, out_bytes, efficiency)
        if t < best[0]:
            best = (t, f"winograd_f{m}_nonfused", terms)
        if simt and phase != "wgrad":
            t, terms = fused_time(chip, pl, g, b, out_bytes, efficiency)
            if t < best[0]:
                best = (t, f"winograd_f{m}_fused", terms)
    return best


def _levels_s(chip, g) -> float:
    return max((float(g[f"level_{lv.name}_s"][0]) for lv in chip.levels), default=0.0)


def nonfused_time(chip, pl: WinogradPlan, g: dict, b: float, out_bytes: float,
                  efficiency: Efficiency) -> tuple[float, dict]:
    """The nonfused algorithm: input, filter and output transform kernels on the vector units
    (timed as one stream of their summed work and traffic, three launches; they write and read
    the transformed operands through chip memory), then the ``(m + 2)^2`` GEMMs ``g`` (one
    :func:`accelsim.perf.gemm.chip_gemm_time` result) on the array. Returns (time_s, terms)."""
    sfu_s = pl.transform_ops / chip.sfu_ops_per_s
    trans_bytes = ((sum(pl.in_elems) + sum(pl.in_transformed)) * b
                   + pl.out_transformed * b + pl.out_elems * out_bytes)
    trans_mem_s = trans_bytes / (chip.memory_bandwidth_Bps * efficiency.memory_efficiency)
    trans_s, trans_bound = kernel_time({"sfu": sfu_s, "memory": trans_mem_s},
                                       3 * chip.kernel_launch_s)
    gemm_s = float(g["time_s"][0])
    gemm_bound = str(g["bound"][0])
    if gemm_bound in {lv.name for lv in chip.levels}:
        gemm_bound = "cache"
    bound = str(trans_bound) if float(trans_s) > gemm_s else gemm_bound
    return float(trans_s) + gemm_s, {
        "compute_s": float(g["compute_s"][0]), "sfu_s": sfu_s,
        "memory_s": float(g["memory_s"][0]) + trans_mem_s, "cache_s": _levels_s(chip, g),
        "latency_s": 4 * chip.kernel_launch_s, "bound": bound}


def fused_time(chip, pl: WinogradPlan, g: dict, b: float, out_bytes: float,
               efficiency: Efficiency) -> tuple[float, dict]:
    """The fused algorithm: one kernel on the vector units, where the multiplies (``g`` timed at
    the vector-unit rate) and the transforms share the units; chip memory sees only the
    convolution's own tensors, once. Returns (time_s, terms)."""
    comp = float(g["compute_s"][0]) + pl.transform_ops / chip.sfu_ops_per_s
    mem = ((sum(pl.in_elems) * b + pl.out_elems * out_bytes)
           / (chip.memory_bandwidth_Bps * efficiency.memory_efficiency))
    levels = _levels_s(chip, g)
    t, bound = kernel_time({"compute": comp, "memory": mem, "cache": levels},
                           chip.kernel_launch_s)
    return float(t), {"compute_s": comp, "sfu_s": 0.0, "memory_s": mem, "cache_s": levels,
                      "latency_s": chip.kernel_launch_s, "bound": str(bound)}
