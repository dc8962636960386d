"""The time of one GPU-style kernel from its overlapped streams (the owner of that formula).

A kernel streams its work through several units at once (array or vector units, every memory
level, chip memory), double-buffered so the streams overlap; it also pays a fixed per-kernel
cost (launch, pipeline fill, epilogue: ``chip.kernel_launch_s``). Roofline with a launch term:

    time = max(terms) + launch,   bound = the largest term, "latency" when launch exceeds them all.

Used for element-wise kernels (:mod:`accelsim.perf.layer_model`) and the Winograd transform and
fused kernels (:mod:`accelsim.perf.winograd`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def kernel_time(terms: Mapping[str, object], launch_s) -> tuple[np.ndarray, np.ndarray]:
    """``(time_s, bound)`` of kernels whose overlapped streams take ``terms`` (name -> seconds,
    scalars or arrays that broadcast together) and that pay ``launch_s`` each.

    ``bound`` names the largest term (the first named on a tie), or ``"latency"`` where
    ``launch_s`` exceeds every term. Both come back as arrays of the broadcast shape."""
    if not terms:
        raise ValueError("kernel_time needs at least one term")
    names = np.array(list(terms), dtype=object)
    vals = np.stack(np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                          for v in terms.values())))
    launch = np.asarray(launch_s, dtype=np.float64)
    roof = vals.max(axis=0)
    bound = names[np.argmax(vals, axis=0)]
    bound = np.where(launch > roof, "latency", bound).astype(object)
    return roof + launch, bound
