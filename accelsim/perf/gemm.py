"""GEMM time on a whole chip with a memory hierarchy: tiles over cores, operands shared under a
shared level, waves, per-kernel launch cost (a loop-nest / tile search in the spirit of Timeloop,
Parashar et al., ISPASS 2019, vectorized over candidate tiles).

A GEMM ``C[M, N] = A[M, K] @ B[K, N]`` (``count`` independent copies) is cut into core tiles
``tm x tn`` (multiples of the array; every core computes whole tiles over the full K, as GPU
GEMM kernels do). Per candidate tile:

* compute: ``waves = ceil(tiles / cores)`` rounds, each one tile's systolic-array cycles
  (:func:`accelsim.perf.systolic.gemm_cycles_array`, SCALE-Sim's fold formula, unchanged) at the
  precision's MAC rate per PE, over the clock and the global ``array_efficiency``;
* every level ``L`` of ``chip.levels`` (innermost first, each instance shared by ``s`` cores)
  holds a block ``bm x bn = (a tm) x (b tn)``: the tiles of ``a b <= s`` cores running together
  (their A row-panels and B column-panels are read once into the level and multicast to the
  cores), or more when whole K-panels fit its capacity (reuse across waves). The traffic into
  ``L`` from the level above is ``(M K ceil(N / bn) + K N ceil(M / bm)) b_in + M N b_out``; it
  is carried at the upper level's bandwidth (all its instances), chip memory at
  ``memory_bandwidth x memory_efficiency``. The largest block that fits minimizes traffic; when
  ``bm = M`` and ``bn = N`` fit, chip-memory traffic is the compulsory ``(MK + KN) b_in + MN b_out``.
* alignment: when a row stride of the operands (N or K elements) is not a multiple of 16 bytes,
  GPU libraries cannot use 16-byte vector or TMA loads (TMA needs 16-byte-aligned strides:
  CUDA driver API, ``cuTensorMapEncodeTiled``; cuBLAS docs, "Tensor Core Usage": leading
  dimensions multiples of 16 bytes) and fall back to slower kernels: compute runs at
  ``chip.unaligned_gemm_rate`` of its rate (1 on chips without the penalty); a stride under 16
  bytes (an MoE router's few experts) is exempt;
* time = ``max(compute, every level, memory) + kernel_launch_s`` (double-buffered streams
  overlap compute); ``bound`` names the largest term, ``"latency"`` when the launch cost exceeds
  all of them. Small GEMMs are slower per FLOP through waves (few tiles leave cores idle),
  fill/drain of the array folds, and the launch cost.

:func:`gemm_time` is the public one-GEMM entry point (returns :class:`GemmTime`);
:func:`chip_gemm_time` the vectorized twin used by the layer model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

# Bytes per element of GEMM operands / tensors in memory, per compute precision (block scales
# included): defined once in accelsim.arch.model, re-exported here for perf's callers.
from accelsim.arch.model import OPERAND_BYTES  # noqa: F401
from accelsim.errors import Infeasible, InputError, check_int, choose
from accelsim.perf.systolic import DATAFLOWS, Dataflow, gemm_cycles_array

if TYPE_CHECKING:
    from accelsim.arch import Chip, System

_TILE_FACTORS = (1, 2, 4, 8)  # core tile = array granule x factor (capped at the dimension)
_BLOCK_FACTORS = tuple(2 ** i for i in range(11))  # level block = core tile x factor
#: split-K factors tried on a chip with ``split_k`` (CUTLASS's split-K GEMMs take any slice
#: count; powers of two up to 128 span what a 132-SM GPU can use)
_SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)
#: the shortest K slice a split makes: assumption, two 128-deep main-loop stages of a Hopper
#: tile (a shorter slice would be all prologue and epilogue)
_MIN_SPLIT_K = 256
_K_SLICE = 32  # K-elements of operand panels a level double-buffers while streaming
_ALIGN_BYTES = 16  # row strides must be multiples of this for vector/TMA loads (see above)


@dataclass(frozen=True)
class Efficiency:
    """The global, physical efficiency parameters of the hierarchy model (not per case).

    array_efficiency: fraction of the array's peak MAC issue rate a GEMM kernel sustains
        (instruction issue, register-bank conflicts, clock under load).
    memory_efficiency: fraction of peak chip-memory bandwidth a framework's element-wise
        kernel (BatchNorm, ReLU, a layout transpose) reaches.
    stream_efficiency: fraction a GEMM's operand and result streams reach (bulk tile loads:
        TMA / cp.async); None: ``memory_efficiency``.
    """

    array_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    stream_efficiency: float | None = None

    def __post_init__(self) -> None:
        for f in ("array_efficiency", "memory_efficiency", "stream_efficiency"):
            v = getattr(self, f)
            if v is None:
                continue
            if not 0.0 < v <= 1.0:
                raise ValueError(f"Efficiency.{f} must be in (0, 1], got {v!r}")

    @property
    def gemm_stream(self) -> float:
        """The share of HBM bandwidth a GEMM's operand and result streams reach."""
        return self.memory_efficiency if self.stream_efficiency is None \
            else self.stream_efficiency


#: a streaming kernel's share of HBM bandwidth: fitted by ``scripts/fit_stream.py`` on the
#: device-to-device copies of ``accelsim/data/h100_power/h100_gemm_power.json`` whose working set
#: is at least ten times the 50 MB L2 (256, 1024, 4096 MiB each way), with the chip's kernel time
#: (6 us) fixed. A GEMM's operand streams reach it too: skinny (weight-streaming) GEMMs on our
#: H100 and H200 run at 0.86-0.91 of HBM (accelsim/data/h100_device, h200_device).
STREAM_EFFICIENCY = 0.911
#: Output of ``scripts/fit_compute.py`` (2026-11-26; rerun it to reproduce: it prints the fit,
#: the residual per case and the sources in :mod:`accelsim.perf.published`): array efficiency
#: from four large-GEMM measurements (V100 SGEMM, A100/H100 BF16 MAMF, H100 FP8), memory
#: efficiency from the four single-GPU ResNet-50 runs of NVIDIA DeepLearningExamples (as run:
#: unfused, NCHW for FP32/TF32, cuDNN benchmark mode, so Winograd where the model finds it
#: faster), after the per-kernel time (chip.kernel_launch_us = 6 us in the GPU presets) is fitted
#: to the published GEMM sweeps, with every GEMM's streams at STREAM_EFFICIENCY. 0.68 of peak
#: HBM bandwidth is what framework element-wise kernels (BatchNorm, ReLU, add, layout
#: transposes) reach. Before GEMMs had their own stream efficiency and split K (their
#: weight-gradient GEMMs with few output tiles ran on a few SMs) the fit gave 0.78: slow
#: convolutions pulled the element-wise layers up.
FITTED = Efficiency(array_efficiency=0.88, memory_efficiency=0.68,
                    stream_efficiency=STREAM_EFFICIENCY)


@dataclass(frozen=True)
class GemmTime:
    """Time of one GEMM (``count`` copies) on one chip, with what bounds it."""

    m: int
    n: int
    k: int
    count: int
    precision: str
    time_s: float
    flops: float
    bound: str
    compute_s: float
    memory_s: float
    level_s: tuple[tuple[str, float], ...]
    launch_s: float
    memory_bytes: float  # chip-memory traffic
    compulsory_bytes: float  # A and B read once, C written once
    tile_m: int
    tile_n: int
    waves: int
    dataflow: str
    split_k: int = 1  # K slices (1: not split; waves count the split tiles)

    @property
    def tflops(self) -> float:
        return self.flops / self.time_s / 1e12

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_s

    def as_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["level_s"] = dict(self.level_s)
        d["tflops"] = self.tflops
        return d


def strides_aligned(n: npt.ArrayLike, k: npt.ArrayLike, precision: str) -> np.ndarray:
    """Whether a GEMM's row strides (``n`` and ``k`` elements of the precision's data element;
    a block format's scales ride apart) are multiples of 16 bytes, as vector and TMA loads need.
    A stride under 16 bytes (an MoE router's 8 experts) is a skinny op that libraries run on
    other kernels: counted as aligned."""
    elem_b = np.floor(OPERAND_BYTES[precision] * 8) / 8
    nb, kb = np.asarray(n) * elem_b, np.asarray(k) * elem_b
    return (((nb % _ALIGN_BYTES == 0) | (nb < _ALIGN_BYTES))
            & ((kb % _ALIGN_BYTES == 0) | (kb < _ALIGN_BYTES)))


def mac_rate(core, precision: str) -> tuple[int, float]:
    """(K-elements a PE reduces per cycle, cycles per MAC): a rate r >= 1 must be whole (r MACs
    per PE per cycle shrink K to ceil(K / r)); a rate below 1 means one MAC every 1/r cycles."""
    rate = core.macs_per_cycle_per_pe(precision)
    if rate >= 1:
        if rate != int(rate):
            raise ValueError(f"macs_per_pe_per_cycle.{precision} = {rate!r}: a rate of 1 or more "
                             "must be a whole number of MACs per PE per cycle")
        return int(rate), 1.0
    return 1, 1.0 / rate


def _cdiv(a, b):
    return -(-a // b)


def chip_gemm_time(chip: Chip, M: npt.ArrayLike, N: npt.ArrayLike, K: npt.ArrayLike,
                   count: npt.ArrayLike, precision: str, dataflow: str = "os", *,
                   out_bytes: float | None = None, a_unique: npt.ArrayLike = 1.0,
                   c_unique: npt.ArrayLike = 1.0,
                   efficiency: Efficiency = FITTED) -> dict[str, np.ndarray]:
    """Best-tile time of ``count`` GEMMs (M, N, K) spread over all cores of ``chip``.

    Arrays broadcast to ``(n,)``; ``dataflow`` is one name. ``a_unique`` / ``c_unique``: the
    fraction of A / C that exists in memory (an implicit-GEMM convolution expands its input on
    chip). Returns arrays time_s, compute_s, memory_s, launch_s, level_<name>_s, memory_bytes,
    tile_m, tile_n, waves, split_k (K slices, 1: not split), bound (a name)."""
    dataflow = choose(Dataflow, dataflow, "dataflow")
    b_in = OPERAND_BYTES[precision]
    M, N, K, count = (np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (M, N, K, count))
    out_b = b_in if out_bytes is None else out_bytes
    M, N, K, count, out_b, a_u, c_u = np.broadcast_arrays(
        M, N, K, count, np.asarray(out_b, dtype=np.float64),
        np.asarray(a_unique, dtype=np.float64), np.asarray(c_unique, dtype=np.float64))
    args = (chip, precision, dataflow, efficiency)
    out = _best_tile(*args, M, N, K, count, out_b, a_u, c_u, (1,))
    if chip.split_k:
        # split K is searched only for the GEMMs whose largest tile leaves cores idle (no
        # other can split), so the search of every other GEMM stays as it was
        big = max(chip.core.rows, chip.core.cols) * max(_TILE_FACTORS)
        few = np.nonzero(_cdiv(M, np.minimum(M, big)) * _cdiv(N, np.minimum(N, big)) * count
                         < chip.cores)[0]
        if len(few):
            sub = _best_tile(*args, *(x[few] for x in (M, N, K, count, out_b, a_u, c_u)),
                             _SPLITS)  # its candidates include the unsplit ones
            for key, v in sub.items():
                out[key] = np.asarray(out[key]).copy()
                out[key][few] = v
    return out


def _best_tile(chip: Chip, precision: str, dataflow: Dataflow, efficiency: Efficiency,
               M: np.ndarray, N: np.ndarray, K: np.ndarray, count: np.ndarray,
               out_b: np.ndarray, a_u: np.ndarray, c_u: np.ndarray,
               splits: tuple[int, ...]) -> dict[str, np.ndarray]:
    """:func:`chip_gemm_time` over broadcast arrays, searching the K splits ``splits``."""
    core = chip.core
    b_in = OPERAND_BYTES[precision]
    b_acc = 4.0  # FP32 accumulators in the core (capacity check only)
    n = len(M)
    mpe, slow = mac_rate(core, precision)
    R, C = core.rows, core.cols
    # candidate core tiles and K splits (n, T)
    g = max(R, C)  # tile granule: the larger array side
    pairs = np.array([(a, b, sp) for a, b in itertools.product(_TILE_FACTORS, repeat=2)
                      for sp in splits])
    tm = np.minimum(M[:, None], g * pairs[None, :, 0])
    tn = np.minimum(N[:, None], g * pairs[None, :, 1])
    sk = np.minimum(pairs[None, :, 2], np.maximum(1, K[:, None] // _MIN_SPLIT_K))
    Kfull = np.broadcast_to(K[:, None], tm.shape)
    Kx = _cdiv(Kfull, sk)
    cyc = gemm_cycles_array(tm.ravel(), tn.ravel(), Kx.ravel(), R, C, dataflow,
                            macs_per_pe=mpe).reshape(tm.shape)
    tiles = _cdiv(M[:, None], tm) * _cdiv(N[:, None], tn) * count[:, None] * sk
    # libraries split K only when the output tiles leave cores idle (fewer tiles than cores)
    split_ok = (sk == 1) | (tiles // sk < chip.cores)
    waves = _cdiv(tiles, chip.cores)
    # products of sizes (cycles x waves, bytes) in float64: int64 wraps silently beyond 2^63
    # (M = N = K = 2^24 gave negative traffic), a float keeps 15 digits at any size
    aligned = strides_aligned(N, K, precision)
    rate = np.where(aligned, 1.0, chip.unaligned_gemm_rate)[:, None]
    compute_s = waves.astype(np.float64) * cyc * slow / core.frequency_Hz \
        / (efficiency.array_efficiency * rate)
    ks = np.minimum(Kx, _K_SLICE)
    fits = (tm * tn * b_acc + 2 * (tm + tn) * ks * b_in <= core.scratchpad_bytes) & split_ok
    cnt, Mx, Nx = count[:, None].astype(float), M[:, None].astype(float), N[:, None].astype(float)
    Kx = Kfull.astype(np.float64)

    def traffic(bm, bn):  # bytes into a level holding blocks bm x bn, from the level above
        return cnt * ((Mx * Kx * a_u[:, None] * _cdiv(Nx, bn) + Kx * Nx * _cdiv(Mx, bm)) * b_in
                      + Mx * Nx * (c_u * out_b)[:, None])

    levels = list(chip.levels)
    into = []  # traffic into each level (n, T), innermost first
    fa = np.array([a for a in _BLOCK_FACTORS for _ in _BLOCK_FACTORS])  # (B,) block factors
    fb = np.array([b for _ in _BLOCK_FACTORS for b in _BLOCK_FACTORS])
    bm = np.minimum(Mx[..., None], tm[..., None] * fa)  # (n, T, B)
    bn = np.minimum(Nx[..., None], tn[..., None] * fb)
    K3 = Kx[..., None]
    blk = (cnt[..., None] * ((Mx[..., None] * K3 * a_u[:, None, None] * _cdiv(Nx[..., None], bn)
                              + K3 * Nx[..., None] * _cdiv(Mx[..., None], bm)) * b_in
                             + (Mx * Nx)[..., None] * (c_u * out_b)[:, None, None]))
    for lv in levels:
        concurrent = (fa * fb <= lv.shared_by)
        stream_fit = 2 * (bm + bn) * ks[..., None] * b_in <= lv.capacity_bytes
        panel_fit = (bm + bn) * K3 * b_in <= lv.capacity_bytes
        ok = (concurrent & stream_fit) | panel_fit
        best = np.where(ok, blk, np.inf).min(axis=2)
        if lv.shared_by == 1:  # a private level also holds the core tile's slices
            fits &= 2 * (tm + tn) * ks * b_in <= lv.capacity_bytes
        into.append(np.where(np.isfinite(best), best, traffic(tm, tn)))
    # a level's bandwidth carries the traffic into the level below it; chip memory feeds the
    # outermost level (or the cores' scratchpads when there is no hierarchy)
    level_s = {}
    for i, lv in enumerate(levels):
        below = into[i - 1] if i > 0 else traffic(tm, tn)
        instances = chip.cores // lv.shared_by
        level_s[lv.name] = below / (lv.bandwidth_Bps * instances)
    dram_bytes = into[-1] if into else traffic(tm, tn)
    # split K: fp32 partial sums written and read back by a second (reduction) kernel
    dram_bytes = dram_bytes + np.where(sk > 1, 2.0 * sk * cnt * Mx * Nx * 4.0, 0.0)
    memory_s = dram_bytes / (chip.memory_bandwidth_Bps * efficiency.gemm_stream)
    roof = np.maximum(compute_s, memory_s)
    for v in level_s.values():
        roof = np.maximum(roof, v)
    roof = np.where(fits, roof, np.inf) + np.where(sk > 1, chip.kernel_launch_s, 0.0)
    # among the tiles of the shortest time, the one moving the fewest chip-memory bytes (a
    # compute-bound GEMM ties on time; its energy is that of the tile a library would pick)
    tied = roof <= roof.min(axis=1, keepdims=True) * (1 + 1e-12)
    best = np.argmin(np.where(tied, dram_bytes, np.inf), axis=1)
    rows = np.arange(n)

    def pick(x):
        return x[rows, best]

    # a split GEMM is two kernels (the partial sums' reduction the second): two fixed times
    launch = chip.kernel_launch_s * np.where(pick(sk) > 1, 2.0, 1.0)
    comp, mem = pick(compute_s), pick(memory_s)
    lev = {k: pick(v) for k, v in level_s.items()}
    terms = {"compute": comp, **lev, "memory": mem, "latency": launch}
    names = np.array(list(terms), dtype=object)
    bound = names[np.argmax(np.stack(list(terms.values())), axis=0)]
    out = {"time_s": pick(roof) + chip.kernel_launch_s,  # roof holds a split's second launch
           "compute_s": comp, "memory_s": mem,
           "launch_s": launch, "memory_bytes": pick(dram_bytes), "tile_m": pick(tm),
           "tile_n": pick(tn), "waves": pick(waves), "split_k": pick(sk), "bound": bound,
           "feasible": fits.any(axis=1)}
    out.update({f"level_{k}_s": v for k, v in lev.items()})
    return out


def gemm_time(system: System, m: int, n: int, k: int, precision: str, *, count: int = 1,
              dataflow: str | None = None, efficiency: Efficiency = FITTED) -> GemmTime:
    """Time of ``count`` GEMMs ``[m, k] @ [k, n]`` in ``precision`` on one chip of ``system``
    (operands read and the result written in ``precision``'s storage bytes). ``dataflow``
    None: the best of ws/os/is. A GEMM whose operands and result do not fit the chip's memory
    cannot run on it: :class:`~accelsim.errors.Infeasible`, naming the bytes and the capacity.
    At the system's clock: ``accelsim.gemm_time`` (:func:`accelsim.perf.power.gemm_time`) runs
    a chip whose power model is on at the clock its power allows."""
    m, n, k, count, precision = _checked(m, n, k, count, precision)
    need = count * (m * k + k * n + m * n) * OPERAND_BYTES[precision]
    cap = system.chip.memory_capacity_bytes
    if need > cap:
        raise Infeasible(f"a {m}x{n}x{k} {precision} GEMM"
                         + (f" (x{count})" if count > 1 else "")
                         + f" needs {need:,.0f} bytes for its operands and result, more than the "
                         f"{cap:,} bytes ({cap / 2**30:g} GiB) of one chip of {system.name}")
    return gemm_kernel_time(system, m, n, k, precision, count=count, dataflow=dataflow,
                            efficiency=efficiency)


def _checked(m, n, k, count, precision: str) -> tuple[int, int, int, int, str]:
    # Python ints from here on: the FLOP and byte products below are exact at any size
    m, n, k, count = (check_int(name, v) for name, v in
                      (("m", m), ("n", n), ("k", k), ("count", count)))
    if precision not in OPERAND_BYTES:
        raise InputError(f"unknown precision {precision!r}; expected one of "
                         f"{', '.join(OPERAND_BYTES)}")
    return m, n, k, count, precision


def gemm_kernel_time(system: System, m: int, n: int, k: int, precision: str, *,
                     count: int = 1, dataflow: str | None = None,
                     efficiency: Efficiency = FITTED) -> GemmTime:
    """:func:`gemm_time` without its memory check: for a caller that accounts a whole step's
    memory itself (the engine, whose per-GPU memory reports what does not fit)."""
    m, n, k, count, precision = _checked(m, n, k, count, precision)
    chip = system.chip
    flows = DATAFLOWS if dataflow is None else (choose(Dataflow, dataflow, "dataflow"),)
    res = {d: chip_gemm_time(chip, m, n, k, count, precision, d, efficiency=efficiency)
           for d in flows}
    d = min(res, key=lambda x: float(res[x]["time_s"][0]))
    r = {key: v[0] for key, v in res[d].items()}
    if not r["feasible"]:
        raise Infeasible(f"no core tile of a {m}x{n}x{k} {precision} GEMM fits the "
                         f"{chip.core.scratchpad_bytes} B scratchpad")
    b = OPERAND_BYTES[precision]
    return GemmTime(
        m=m, n=n, k=k, count=count, precision=precision, time_s=float(r["time_s"]),
        flops=2.0 * m * n * k * count, bound=str(r["bound"]), compute_s=float(r["compute_s"]),
        memory_s=float(r["memory_s"]),
        level_s=tuple((lv.name, float(r[f"level_{lv.name}_s"])) for lv in chip.levels),
        launch_s=float(r["launch_s"]), memory_bytes=float(r["memory_bytes"]),
        compulsory_bytes=float(count * ((m * k + k * n) * b + m * n * b)),
        tile_m=int(r["tile_m"]), tile_n=int(r["tile_n"]), waves=int(r["waves"]), dataflow=d,
        split_k=int(r["split_k"]))
