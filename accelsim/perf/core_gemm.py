"""One core's GEMM time under a dataflow and scratchpad tiles (the configs without a memory
hierarchy: every core streams its operands from chip memory), and the hierarchy path that tiles a
layer's GEMMs over all cores of a chip (:func:`accelsim.perf.gemm.chip_gemm_time`). Array cycles
are SCALE-Sim's fold formula (:func:`accelsim.perf.systolic.gemm_cycles_array`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from accelsim.perf.gemm import OPERAND_BYTES, Efficiency, chip_gemm_time, mac_rate
from accelsim.errors import choose
from accelsim.perf.systolic import DATAFLOWS, MAPPINGS, Dataflow, gemm_cycles_array

if TYPE_CHECKING:
    from accelsim.arch import Core

ACCUMULATOR_BYTES = 2  # FP16 partial sums and weight gradients
TILE_LADDER = (1, 4, 16, 64)  # tile = min(dim, array granule x factor), plus the whole dim


def ceil_div(a, b):
    return -(-a // b)


def core_gemm_time(core: Core, M: npt.ArrayLike, N: npt.ArrayLike, K: npt.ArrayLike,
                   count: npt.ArrayLike, precision: str, dataflow: str,
                   memory_Bps_per_core: float, *, out_bytes: float = ACCUMULATOR_BYTES,
                   a_unique: npt.ArrayLike = 1.0, c_unique: npt.ArrayLike = 1.0
                   ) -> dict[str, np.ndarray]:
    """Best-tile time of ``count`` GEMMs (M, N, K) on one core, vectorized over candidates.

    ``M, N, K, count``, ``dataflow`` (a name or an array of names), ``memory_Bps_per_core``,
    ``out_bytes`` (bytes per output element written to memory) and ``a_unique`` / ``c_unique``
    (fraction of the A / C matrix that exists in memory: an im2col operand of a k x k conv is
    expanded on chip from the input tensor, col2im likewise) broadcast to one shape ``(n,)``.
    Returns arrays: compute_s, scratchpad_s, memory_s, time_s, cycles, tile_m/n/k, feasible
    (a tile fits the scratchpad), bound index into ("compute", "scratchpad", "memory").
    """
    M, N, K, count = (np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (M, N, K, count))
    M, N, K, count, mem_bw, out_b, a_u, c_u, dfl = np.broadcast_arrays(
        M, N, K, count, np.asarray(memory_Bps_per_core, dtype=np.float64),
        np.asarray(out_bytes, dtype=np.float64), np.asarray(a_unique, dtype=np.float64),
        np.asarray(c_unique, dtype=np.float64), np.asarray(dataflow))
    for name in np.unique(dfl):
        choose(Dataflow, str(name), "dataflow")
    R, C = core.rows, core.cols
    mpe, slow = mac_rate(core, precision)
    b_in = OPERAND_BYTES[precision]
    b_acc = max(ACCUMULATOR_BYTES, b_in)  # partial sums: FP16, FP32 under fp32/tf32
    g = min(R, C)
    lad = np.array(TILE_LADDER, dtype=np.int64) * g

    def ladder(d):  # (n, L+1): array-sized multiples capped at d, and d itself
        return np.concatenate([np.minimum(d[:, None], lad[None, :]), d[:, None]], axis=1)

    lm, ln, lk = ladder(M), ladder(N), ladder(K)
    L = lm.shape[1]
    idx = np.array(list(itertools.product(range(L), repeat=3)))  # (T, 3)
    tm, tn, tk = lm[:, idx[:, 0]], ln[:, idx[:, 1]], lk[:, idx[:, 2]]  # (n, T)
    Mx, Nx, Kx = M[:, None], N[:, None], K[:, None]
    # per-row dataflow as one-hot weights: which GEMM dimension sits on the array rows /
    # columns / in time (from accelsim.perf.systolic.MAPPINGS), so one call mixes dataflows
    onehot = {role: {dim: np.zeros((len(M), 1), dtype=np.int64) for dim in "MNK"}
              for role in ("rows", "cols", "time")}
    for name, m in MAPPINGS.items():
        sel = dfl == name
        onehot["rows"][m.spatial_rows][sel] = 1
        onehot["cols"][m.spatial_cols][sel] = 1
        onehot["time"][m.streamed][sel] = 1

    def role(r, d):
        return sum(onehot[r][x] * d[x] for x in "MNK")

    def rereads(fr, fc, operand_dims):
        """Re-read once per fold of each spatial dimension the operand lacks."""
        rows_out = 1 - sum(onehot["rows"][x] for x in operand_dims)
        cols_out = 1 - sum(onehot["cols"][x] for x in operand_dims)
        return (1 + rows_out * (fr - 1)) * (1 + cols_out * (fc - 1))

    fits = 2 * (tm * tk + tk * tn) * b_in + tm * tn * b_acc <= core.scratchpad_bytes
    flow_rows = [(name, np.flatnonzero(dfl == name)) for name in MAPPINGS]
    flow_rows = [(name, rows) for name, rows in flow_rows if rows.size]
    nm, nn, nk = ceil_div(Mx, tm), ceil_div(Nx, tn), ceil_div(Kx, tk)
    cycles = np.zeros(tm.shape, dtype=np.int64)
    sp_bytes = np.zeros(tm.shape, dtype=np.float64)
    # Sum over full tiles and the remainder tile of each dimension (2 x 2 x 2 cases).
    for (a, ca), (b, cb), (c, cc) in itertools.product(
            ((tm, nm - 1), (Mx - (nm - 1) * tm, 1)),
            ((tn, nn - 1), (Nx - (nn - 1) * tn, 1)),
            ((tk, nk - 1), (Kx - (nk - 1) * tk, 1))):
        n_tiles = ca * cb * cc
        ce = ceil_div(c, mpe)  # reduction steps per PE at this precision
        d = {"M": a, "N": b, "K": ce}
        fr, fc = ceil_div(role("rows", d), R), ceil_div(role("cols", d), C)
        # the fold-cycle formula has one owner: accelsim.perf.systolic
        a_, b_, c_, nt = np.broadcast_arrays(a, b, c, n_tiles)
        for name, rows in flow_rows:
            cycles[rows] += nt[rows] * gemm_cycles_array(a_[rows], b_[rows], c_[rows], R, C,
                                                         name, macs_per_pe=mpe)
        # the output is read-modify-written once per fold of K when K is spatial (ws, is)
        re_a, re_b, re_o = (rereads(fr, fc, x) for x in ("MK", "KN", "MN"))
        sp_bytes += n_tiles * ((a * c * re_a + c * b * re_b) * b_in
                               + a * b * (2 * re_o - 1) * b_acc)
    mem_bytes = ((Mx * Kx * a_u[:, None] * nn + Kx * Nx * nm) * b_in
                 + Mx * Nx * (c_u * out_b)[:, None])
    cnt = count[:, None]
    compute_s = cycles * cnt * slow / core.frequency_Hz
    scratch_s = sp_bytes * cnt / core.scratchpad_bandwidth_Bps
    memory_s = mem_bytes * cnt / mem_bw[:, None]
    time_s = np.maximum(np.maximum(compute_s, scratch_s), memory_s)
    masked = np.where(fits, time_s, np.inf)
    best = np.argmin(masked, axis=1)
    rows = np.arange(len(M))
    pick = lambda x: x[rows, best]  # noqa: E731
    comp, scr, mem = pick(compute_s), pick(scratch_s), pick(memory_s)
    return {
        "compute_s": comp, "scratchpad_s": scr, "memory_s": mem, "time_s": pick(time_s),
        "cycles": pick(cycles) * count, "tile_m": pick(tm), "tile_n": pick(tn),
        "tile_k": pick(tk), "feasible": fits.any(axis=1),
        "bound": np.argmax(np.stack([comp, scr, mem]), axis=0),
        "min_tile_bytes": (2 * (lm[:, 0] * lk[:, 0] + lk[:, 0] * ln[:, 0]) * b_in
                           + lm[:, 0] * ln[:, 0] * b_acc),
    }


def hierarchy_gemms(chip, uniq, precision: str, efficiency: Efficiency) -> dict[str, np.ndarray]:
    """:func:`accelsim.perf.gemm.chip_gemm_time` over the unique GEMM keys of
    :func:`evaluate_layer` (rows M, N, K, count, -, dataflow code, out bytes, a_u, c_u), in the
    column layout of :func:`core_gemm_time`'s results."""
    m = uniq.shape[1]
    out = {k: np.zeros(m) for k in ("compute_s", "scratchpad_s", "memory_s", "time_s",
                                      "cache_s", "latency_s", "min_tile_bytes")}
    out.update({k: np.zeros(m, dtype=np.int64) for k in ("tile_m", "tile_n", "tile_k")})
    out["feasible"] = np.zeros(m, dtype=bool)
    out["bound"] = np.full(m, "", dtype=object)
    for code in np.unique(uniq[5]).astype(int):
        sel = uniq[5] == code
        u = uniq[:, sel]
        r = chip_gemm_time(chip, u[0].astype(np.int64), u[1].astype(np.int64),
                           u[2].astype(np.int64), u[3].astype(np.int64), precision,
                           DATAFLOWS[code], out_bytes=u[6], a_unique=u[7], c_unique=u[8],
                           efficiency=efficiency)
        levels = [r[f"level_{lv.name}_s"] for lv in chip.levels]
        out["compute_s"][sel] = r["compute_s"]
        out["memory_s"][sel] = r["memory_s"]
        out["cache_s"][sel] = np.max(levels, axis=0)
        out["latency_s"][sel] = r["launch_s"]
        out["time_s"][sel] = r["time_s"]
        out["tile_m"][sel], out["tile_n"][sel] = r["tile_m"], r["tile_n"]
        out["tile_k"][sel] = u[2].astype(np.int64)
        out["feasible"][sel] = r["feasible"]
        names = {lv.name for lv in chip.levels}
        out["bound"][sel] = np.array(["cache" if b in names else b for b in r["bound"]],
                                     dtype=object)
    return out
