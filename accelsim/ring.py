"""The one ring-collective time formula of accelsim, shared by the per-layer compute model
(:mod:`accelsim.perf`, collectives among the cores and chips of a model-parallel layer) and the
network simulator's closed forms (:mod:`accelsim.netsim`, re-exported there). A pure numpy
function with no other accelsim import, so every room may use it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

RING_KINDS = {"reduce-scatter": 1.0, "all-gather": 1.0, "all-reduce": 2.0}
#: nccl-tests bus-bandwidth factors f (PERFORMANCE.md): bus bandwidth = algbw x f (p-1)/p; the
#: ring collectives' f, and all-to-all's (every rank keeps 1/p of its buffer and sends the rest;
#: all-to-all-v: of its mean buffer)
BUS_KINDS = {**RING_KINDS, "all-to-all": 1.0, "all-to-all-v": 1.0}

#: fraction of a link's wire rate an all-to-all reaches (pairwise sends without a ring's
#: reduction steps; not fitted): DeepEP's README (github.com/deepseek-ai/DeepEP, "Normal kernels
#: with NVLink and RDMA forwarding", H800 + CX7 400 Gb/s, DeepSeek-V3's pretraining setting):
#: dispatch and combine reach 43-51 GB/s of the ~50 GB/s NIC at EP 16-64 and 153-158 GB/s of the
#: ~160 GB/s NVLink at EP 8
ALL_TO_ALL_EFFICIENCY = 0.9


def bus_factor(kind: str, ranks):
    """THE (p-1)/p factor: ``f (p-1)/p`` with ``f = 2`` for all-reduce, else 1 (``kind`` one of
    :data:`BUS_KINDS`).  Bytes one rank sends in a ring collective (or an all-to-all) of a
    ``size`` buffer are ``bus_factor x size``; nccl-tests' bus bandwidth is ``algbw x
    bus_factor``.  Numpy arrays broadcast; 0 for one rank (or none); scalars give a float."""
    key = str(kind).replace("_", "-")
    if key not in BUS_KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(BUS_KINDS)}")
    p = np.asarray(ranks, dtype=np.float64)
    if np.any(p < 0):
        raise ValueError(f"bus_factor needs ranks >= 0, got {ranks!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(p > 1, BUS_KINDS[key] * (p - 1) / p, 0.0)
    return float(f) if f.ndim == 0 else f


def ring_collective_time(kind: str, ranks: npt.ArrayLike, size_bytes: npt.ArrayLike,
                         bandwidth_Bps: npt.ArrayLike, latency_s: npt.ArrayLike = 0.0
                         ) -> float | np.ndarray:
    """Time of a ring collective among ``ranks`` chips: THE ring term of accelsim.

    ``size_bytes`` is the whole vector each rank holds (nccl-tests "size"), ``bandwidth_Bps``
    what one rank sends per second along the ring (the sum over its directional rings) and
    ``latency_s`` the fixed cost of one ring step.  Reduce-scatter and all-gather take p-1
    steps of ``latency_s + size / (p x bandwidth)``; all-reduce is the two in sequence, so

        T = f (p - 1) (latency_s + size / (p bandwidth)),   f = 2 for all-reduce, else 1,

    whose bandwidth term is the lower bound f (p-1)/p size/bandwidth.  ``kind`` is
    ``reduce-scatter``, ``all-gather`` or ``all-reduce`` (underscores accepted).  Numpy arrays
    broadcast (a rank count of 1, or 0, costs nothing); scalars give a float.
    """
    key = str(kind).replace("_", "-")
    if key not in RING_KINDS:
        raise ValueError(f"unknown ring collective {kind!r}; known: {', '.join(RING_KINDS)}")
    p = np.asarray(ranks, dtype=np.float64)
    size = np.asarray(size_bytes, dtype=np.float64)
    bw = np.asarray(bandwidth_Bps, dtype=np.float64)
    lat = np.asarray(latency_s, dtype=np.float64)
    if np.any(p < 0) or np.any(size < 0) or np.any(lat < 0) or not np.all(bw > 0):
        raise ValueError("ring collective needs ranks >= 0, size_bytes >= 0, latency_s >= 0 "
                         f"and bandwidth_Bps > 0; got ranks={ranks!r}, size_bytes={size_bytes!r}, "
                         f"bandwidth_Bps={bandwidth_Bps!r}, latency_s={latency_s!r}")
    f = RING_KINDS[key]
    with np.errstate(divide="ignore", invalid="ignore"):
        # bandwidth term first, in the order f (p-1)/p size/bw, so that a caller holding only
        # that term (latency 0) gets it bit for bit
        t = np.where(p > 1, bus_factor(key, p) * size / bw + f * (p - 1) * lat, 0.0)
    return float(t) if t.ndim == 0 else t
