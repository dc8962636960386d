"""The engine's K-step / promotion loop, written once, and the operand layout it steps over.

``k_loop`` is the only place that walks K in steps of ``block_width`` and promotes the inner sum
every ``chunk`` products (and after the last step); matmul, dot, partial_sums, both systolic
dataflows and the swamping study all run it. A *datapath* (``accelsim.arith.datapath``) supplies
``step`` and ``promote`` for one tile of outputs; ``run_tiles`` runs the loop over a datapath's
tiles, on threads (outputs are independent, so the thread count never changes a bit).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from accelsim.errors import check_int


def k_loop(path, tile, K: int, chunk: int | None, on_step=None):
    """Run the engine's steps over K for one tile of outputs; the accumulator (working dtype).

    ``on_step(k_end, inner, outer, promoted)`` (optional) sees the state after every step; it
    must not modify it. A promotion happens every ``chunk`` products and after the last step.
    """
    scratch = path.start(tile)
    inner = path.zeros(tile)
    outer = path.zeros(tile) if chunk is not None else None
    W = path.width
    for k0 in range(0, K, W):
        k1 = min(K, k0 + W)
        inner = path.step(inner, tile, k0, k1, scratch)
        promoted = chunk is not None and (k1 % chunk == 0 or k1 == K)
        if promoted:
            outer = path.promote(outer, inner)
            inner[...] = 0
        if on_step is not None:
            on_step(k1, inner, outer, promoted)
    return outer if chunk is not None else inner


def run_tiles(path, K: int, chunk: int | None, threads: int | None = None) -> np.ndarray:
    """The (M, N) float64 accumulator values: ``k_loop`` over the path's tiles, on threads."""
    out = np.empty((path.ops.M, path.ops.N))
    tiles = path.tiles()

    def one(tile):
        out[tile] = k_loop(path, tile, K, chunk)

    n = default_threads() if threads is None else threads
    if n > 1 and len(tiles) > 1:
        with ThreadPoolExecutor(min(n, len(tiles))) as ex:
            list(ex.map(one, tiles))  # numpy releases the GIL inside each pass
    else:
        for t in tiles:
            one(t)
    return out


def check_threads(threads) -> None:
    """InputError unless ``threads`` is None (the usable cores) or an integer >= 1 (a bad count
    was silently ignored: 0 or -3 ran on one thread, 2.5 on the default)."""
    if threads is not None:
        check_int("threads", threads)  # None: the usable cores


def default_threads() -> int:
    """Cores this process may use (outputs are independent: the thread count never changes a bit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# ---- operands laid out for steps -------------------------------------------------------------------

class Operands:
    """A (M, K) with B (K, N) -- or B (M, K) when ``paired`` (row i of A dots row i of B) -- in
    one dtype; ``block`` combines them over a K slice into (rows, width, cols) with ``op``."""

    def __init__(self, A, B, paired: bool, dtype, by_column: bool = False):
        self.paired = paired
        self.M, self.K = A.shape
        self.N = 1 if paired else B.shape[1]
        if by_column:  # K-major copies: one step reads contiguous rows of both
            self.A = np.ascontiguousarray(A.T, dtype=dtype)
            self.B = np.ascontiguousarray(B.T if paired else B, dtype=dtype)
        else:
            self.A = np.asarray(A, dtype=dtype)
            self.B = np.asarray(B, dtype=dtype)

    def column(self, rs, ns, k, out):
        """(rows, cols) products A[:, k] * B[k, :] into ``out`` (``by_column`` layout)."""
        if self.paired:
            np.multiply(self.A[k, rs], self.B[k, rs], out=out[:, 0])
        else:
            np.multiply(self.A[k, rs, None], self.B[k, None, ns], out=out)
        return out

    def block(self, rs, ns, k0, k1, op=np.multiply, out=None):
        """(rows, k1 - k0, cols) of A[:, k] op B[k, :] (row-major layout)."""
        if self.paired:
            r = op(self.A[rs, k0:k1], self.B[rs, k0:k1])[:, :, None]
            if out is None:
                return r
            out[...] = r
            return out
        return op(self.A[rs, k0:k1, None], self.B[None, k0:k1, ns], out=out)


def tiles_of(M: int, N: int, rows: int, cols: int):
    """(row slice, column slice) tiles covering an M x N output."""
    return [(slice(r, min(M, r + rows)), slice(c, min(N, c + cols)))
            for r in range(0, M, rows) for c in range(0, N, cols)]


def tile_shape(tile):
    """(rows, cols) of a tile."""
    rs, ns = tile
    return rs.stop - rs.start, ns.stop - ns.start
