"""Compute cycles of a GEMM (or a convolution lowered to one) on an R x C systolic array.

One parametrized model for the three classic dataflows (SCALE-Sim, Samajdar et al., ISPASS 2020;
the HFP8 paper's cores are such arrays, appendix D). A GEMM ``out[M, N] = A[M, K] @ B[K, N]``
(conv: M = batch * output pixels, N = filters, K = filter_h * filter_w * channels) is mapped as

=========  ============  ============  ==========  ==================
dataflow   array rows    array cols    streamed    stationary operand
=========  ============  ============  ==========  ==================
ws         K             N             M           weights B (preloaded)
os         M             N             K           outputs (accumulate in place)
is         K             M             N           inputs A (preloaded)
=========  ============  ============  ==========  ==================

The two spatial dimensions are cut into ``ceil(S_r / R) * ceil(S_c / C)`` folds, each run to
completion before the next (partial folds leave PEs idle but take as long as full ones). A fold:

* ``preload`` = R cycles to shift the stationary operand in, one array row per cycle (ws, is;
  0 for os, whose stationary operand is the output itself);
* then ``T`` operand wavefronts (T = the streamed dimension) enter with the systolic skew: the
  last wavefront enters PE(0, 0) at cycle T - 1 and reaches PE(R-1, C-1) after R - 1 + C - 1 more
  cycles, so the fold's array activity spans ``T + R + C - 2`` cycles.

    cycles = folds * (preload + T + R + C - 2)

SCALE-Sim v3 reports the index of the last cycle, counted from 0, i.e. ``cycles - 1``;
``scalesim_compat=True`` applies that convention (and :func:`conv_gemm_dims` its shape rules), so
the two agree exactly (see ``scripts/scalesim_crosscheck.py``).

:func:`gemm_cycles` is the slow, obvious reference (an explicit loop over folds);
:func:`gemm_cycles_array` is its vectorized twin for whole layer tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd

    from accelsim.workload import Workload

from accelsim.errors import InputError, SizeError, check_int, choose
from accelsim.workload.model import Phase


class Dataflow(StrEnum):
    """What stays in the array: the weights, the outputs or the inputs (SCALE-Sim's names; a
    member prints and compares as its string, so tables and flags keep "ws"/"os"/"is")."""

    WS = "ws"
    OS = "os"
    IS = "is"


DATAFLOWS: tuple[Dataflow, ...] = tuple(Dataflow)


@dataclass(frozen=True)
class DataflowMapping:
    """Which GEMM dimension goes where for one dataflow."""

    name: str
    spatial_rows: str  # GEMM dimension ("M", "N" or "K") laid along the array rows
    spatial_cols: str  # ... along the array columns
    streamed: str  # ... streamed through the array in time
    preload_rows: bool  # the stationary operand is shifted in, one array row per cycle

    def dims(self, M, N, K):
        """(S_rows, S_cols, T) for a GEMM of shape (M, N, K)."""
        d = {"M": M, "N": N, "K": K}
        return d[self.spatial_rows], d[self.spatial_cols], d[self.streamed]


MAPPINGS: dict[Dataflow, DataflowMapping] = {
    Dataflow.WS: DataflowMapping("ws", "K", "N", "M", True),
    Dataflow.OS: DataflowMapping("os", "M", "N", "K", False),
    Dataflow.IS: DataflowMapping("is", "K", "M", "N", True),
}


def _mapping(dataflow: Dataflow | str) -> DataflowMapping:
    return MAPPINGS[choose(Dataflow, dataflow, "dataflow")]


def _check_positive_int(**kw) -> None:
    for name, v in kw.items():
        check_int(name, v)


@dataclass(frozen=True)
class SystolicResult:
    """Cycle count of one GEMM on one array, with how well the array was used."""

    cycles: int
    spatial_rows: int  # extent of the GEMM dimension laid along the rows (before folding)
    spatial_cols: int
    streamed: int
    rows: int
    cols: int
    dataflow: str
    macs: int
    macs_per_pe: int = 1

    @property
    def row_folds(self) -> int:
        return -(-self.spatial_rows // self.rows)

    @property
    def col_folds(self) -> int:
        return -(-self.spatial_cols // self.cols)

    @property
    def folds(self) -> int:
        return self.row_folds * self.col_folds

    @property
    def mapping_efficiency(self) -> float:
        """Mean fraction of PEs holding work over the folds (SCALE-Sim's 'mapping efficiency')."""
        return (self.spatial_rows * self.spatial_cols) / (self.folds * self.rows * self.cols)

    @property
    def utilization(self) -> float:
        """Useful MACs / peak MACs over the run: fill, drain, preload, partial folds all count."""
        return self.macs / (self.rows * self.cols * self.macs_per_pe * self.cycles)


#: most folds :func:`gemm_cycles` loops over (10^7: about a second; 10^12 x 10^12 on a 1 x 1
#: array would loop 10^24 times)
MAX_REFERENCE_FOLDS = 10**7


def gemm_cycles(M: int, N: int, K: int, rows: int, cols: int,
                dataflow: Dataflow | str = Dataflow.WS, *, macs_per_pe: int = 1,
                scalesim_compat: bool = False) -> int:
    """Cycles of ``A[M,K] @ B[K,N]`` on a ``rows x cols`` array (slow reference: loops folds,
    at most :data:`MAX_REFERENCE_FOLDS` of them; a SizeError beyond).

    ``macs_per_pe`` > 1 models a PE that reduces that many consecutive K elements per cycle
    (e.g. two FP8 MACs in an FP16 FMA's area), so K shrinks to ``ceil(K / macs_per_pe)``.
    """
    _check_positive_int(M=M, N=N, K=K, rows=rows, cols=cols, macs_per_pe=macs_per_pe)
    mp = _mapping(dataflow)
    k_eff = -(-K // macs_per_pe)
    s_r, s_c, t = mp.dims(M, N, k_eff)
    folds = -(-s_r // rows) * -(-s_c // cols)
    if folds > MAX_REFERENCE_FOLDS:
        raise SizeError(f"gemm_cycles: M={M:,}, N={N:,}, K={K:,} on {rows} x {cols} makes "
                        f"{folds:,} folds, more than the {MAX_REFERENCE_FOLDS:,} this reference "
                        "loops over; gemm_cycles_array gives the same count at any size")
    preload = rows if mp.preload_rows else 0
    total = 0
    for r0 in range(0, s_r, rows):
        for c0 in range(0, s_c, cols):
            # A partial fold (fewer than rows x cols busy PEs) takes as long as a full one:
            # the operands and partial sums still cross the whole array.
            total += preload + t + rows + cols - 2
    return total - 1 if scalesim_compat else total


def gemm_cycles_array(M: npt.ArrayLike, N: npt.ArrayLike, K: npt.ArrayLike, rows: int, cols: int,
                      dataflow: Dataflow | str = Dataflow.WS, *,
                      macs_per_pe: int = 1, scalesim_compat: bool = False) -> np.ndarray:
    """Vectorized twin of :func:`gemm_cycles` over arrays of M, N, K (int64 result)."""
    _check_positive_int(rows=rows, cols=cols, macs_per_pe=macs_per_pe)
    mp = _mapping(dataflow)
    M, N, K = (np.asarray(x, dtype=np.int64) for x in (M, N, K))
    if (M < 1).any() or (N < 1).any() or (K < 1).any():
        raise ValueError("GEMM dimensions M, N, K must all be >= 1")
    k_eff = -(-K // macs_per_pe)
    s_r, s_c, t = mp.dims(M, N, k_eff)
    preload = rows if mp.preload_rows else 0
    # the same product in float64 first: an int64 overflow would wrap to a wrong (even negative)
    # cycle count without a word
    estimate = (np.ceil(np.asarray(s_r, dtype=np.float64) / rows)
                * np.ceil(np.asarray(s_c, dtype=np.float64) / cols)
                * (preload + np.asarray(t, dtype=np.float64) + rows + cols - 2))
    if np.any(estimate >= 2.0**62):
        raise SizeError(f"cycle count {float(np.max(estimate)):.3g} does not fit 64-bit "
                        "integers: the GEMM is too large for this array")
    folds = (-(-s_r // rows)) * (-(-s_c // cols))
    cycles = folds * (preload + t + rows + cols - 2)
    return cycles - 1 if scalesim_compat else cycles


def systolic_gemm(M: int, N: int, K: int, rows: int, cols: int, dataflow: str = "ws", *,
                  macs_per_pe: int = 1) -> SystolicResult:
    """Cycles plus fold counts and utilization of one GEMM (not in SCALE-Sim's convention)."""
    cycles = gemm_cycles_array(M, N, K, rows, cols, dataflow, macs_per_pe=macs_per_pe)
    s_r, s_c, t = _mapping(dataflow).dims(M, N, -(-K // macs_per_pe))
    return SystolicResult(cycles=int(cycles), spatial_rows=s_r, spatial_cols=s_c, streamed=t,
                          rows=rows, cols=cols, dataflow=dataflow, macs=M * N * K,
                          macs_per_pe=macs_per_pe)


def conv_output_size(size: int, kernel: int, stride: int, padding: int = 0, *,
                     scalesim_compat: bool = False) -> int:
    """Output height/width of a convolution (one owner: :func:`accelsim.workload.conv_out`).

    Standard (PyTorch) rule: ``floor((size + 2*padding - kernel) / stride) + 1``. SCALE-Sim applies
    no padding and rounds up: ``ceil((size - kernel + stride) / stride)``.
    """
    from accelsim.workload.model import conv_out

    if scalesim_compat:
        return conv_out(size, kernel, stride, 0, "scalesim")
    return conv_out(size, kernel, stride, padding, "torch")


def conv_gemm_dims(ifmap_h: int, ifmap_w: int, filter_h: int, filter_w: int, channels: int,
                   filters: int, stride: int = 1, *, batch: int = 1, padding: int = 0,
                   scalesim_compat: bool = False) -> tuple[int, int, int]:
    """Forward-pass GEMM (M, N, K) of a convolution (im2col lowering)."""
    _check_positive_int(ifmap_h=ifmap_h, ifmap_w=ifmap_w, filter_h=filter_h, filter_w=filter_w,
                        channels=channels, filters=filters, stride=stride, batch=batch)
    oh = conv_output_size(ifmap_h, filter_h, stride, padding, scalesim_compat=scalesim_compat)
    ow = conv_output_size(ifmap_w, filter_w, stride, padding, scalesim_compat=scalesim_compat)
    if oh < 1 or ow < 1:
        raise ValueError(f"convolution output is empty: {ifmap_h}x{ifmap_w} input, "
                         f"{filter_h}x{filter_w} filter, stride {stride}, padding {padding}")
    return batch * oh * ow, filters, filter_h * filter_w * channels


def workload_cycles(workload: Workload, rows: int, cols: int,
                    dataflow: Dataflow | str = Dataflow.WS, *, batch: int = 1,
                    phase: Phase | str = Phase.FWD, macs_per_pe: int = 1,
                    scalesim_compat: bool = False) -> pd.DataFrame:
    """Per-layer array cycles of one phase of every GEMM layer (tidy pandas DataFrame).

    ``scalesim_compat`` lowers convolutions with SCALE-Sim's shape rules (no padding, output
    size rounded up) and reports cycles in its convention (last cycle's 0-based index), so a
    SCALE-Sim topology gives SCALE-Sim's "Total Cycles". Columns: layer, M, N, K, count,
    compute_cycles, folds, mapping_efficiency, utilization (``count`` independent GEMMs, e.g.
    groups, run one after the other).
    """
    import pandas as pd
    from dataclasses import replace

    phase = choose(Phase, phase, "phase")
    dataflow = choose(Dataflow, dataflow, "dataflow")
    rows_out = []
    for layer in workload.layers:
        if not layer.is_gemm:
            continue
        if scalesim_compat and layer.kind == "conv" and layer.shape_mode != "scalesim":
            layer = replace(layer, shape_mode="scalesim", pad_h=0, pad_w=0)
        g = layer.gemms(batch).get(phase)
        if g is None:  # e.g. no bwd_data for the first layer
            continue
        rows_out.append((layer.name, g.M, g.N, g.K, g.count))
    if not rows_out:
        raise InputError(f"workload {workload.name!r} has no GEMM layers with a "
                         f"{phase.value!r} phase")
    df = pd.DataFrame(rows_out, columns=["layer", "M", "N", "K", "count"])
    mp = _mapping(dataflow)
    cyc = gemm_cycles_array(df.M, df.N, df.K, rows, cols, dataflow, macs_per_pe=macs_per_pe)
    s_r, s_c, _ = mp.dims(df.M.to_numpy(), df.N.to_numpy(), -(-df.K.to_numpy() // macs_per_pe))
    folds = (-(-s_r // rows)) * (-(-s_c // cols))
    count = df["count"].to_numpy()
    # each layer's cycles x count, and their sum, must fit int64 too (a batch of 2^53 wrapped
    # the total and printed a negative utilization)
    per_layer = cyc.astype(np.float64) * count
    if per_layer.sum() >= 2.0**62:
        worst = df.layer.iloc[int(np.argmax(per_layer))]
        raise SizeError(f"{workload.name}: {per_layer.sum():.3g} cycles in all (layer {worst!r}: "
                        f"{per_layer.max():.3g}) do not fit 64-bit integers: lower the batch")
    df["compute_cycles"] = cyc * count - (1 if scalesim_compat else 0)
    df["folds"] = folds * count
    df["mapping_efficiency"] = (s_r.astype(np.float64) * s_c
                                / (folds.astype(np.float64) * rows * cols))
    df["utilization"] = (df.M.astype(np.float64) * df.N * df.K * df["count"]
                         / (float(rows * cols * macs_per_pe) * cyc.astype(np.float64)
                            * df["count"]))
    return df
