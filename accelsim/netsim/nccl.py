"""NCCL's fixed costs of a collective: the latency term its own tuner charges, which
:class:`accelsim.netsim.fabric.Fabric` charges for groups spanning nodes.

NCCL picks an algorithm per call from a cost model ``time = latency + size / bandwidth``
(``src/graph/tuning.cc``, ``ncclTopoTuneModel``; NCCL 2.2x). Its latency for the Simple protocol
(the one large messages use) is a base cost plus one hardware latency per step:

* ring reduce-scatter / all-gather: ``base + (ranks - nodes) x nvlink_step + (nodes - 1) x
  net_step`` (p - 1 steps, of which ``nodes - 1`` cross the network); all-reduce: twice the
  steps (``2 (ranks - 1)``, ``2 (nodes - 1)`` of them inter-node);
* tree all-reduce (NCCL's only other algorithm without SHARP hardware): ``2 (log2(nodes) x
  net_step + (ranks/nodes - 1) x nvlink_step)``, at about 0.9 of the ring's bus bandwidth
  (NCCL discounts tree bandwidth by ``busBw * .9`` before capping it).

The constants (microseconds) are the table NVIDIA calibrated for its tuner, copied as numbers into
``accelsim/data/nccl_scale/nccl_tuning_constants.csv`` with the source line; :data:`NCCL_SIMPLE`
holds them. accelsim's own ring (:func:`accelsim.ring.ring_collective_time`) charges the node
file's link latency per step (1 us NVSwitch, 2 us InfiniBand on dgx-h100) and no base:
``scripts/nccl_scale_validate.py`` prints what the difference is worth for data-parallel
collectives at 16 to 1,536 nodes (docs/netsim.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.errors import InputError

#: NCCL's tree all-reduce bandwidth relative to the ring's (tuning.cc: ``busBw * .9`` for tree)
TREE_BANDWIDTH_FACTOR = 0.9


@dataclass(frozen=True)
class NcclLatency:
    """NCCL's latency model for one protocol: a base cost and the per-step hardware latency
    inside a node (NVLink) and across nodes (network), seconds."""

    base_s: float
    nvlink_step_s: float
    net_step_s: float
    tree_base_s: float = 0.0
    tree_net_step_s: float = 0.0

    def __post_init__(self) -> None:
        for name, v in (("base_s", self.base_s), ("nvlink_step_s", self.nvlink_step_s),
                        ("net_step_s", self.net_step_s), ("tree_base_s", self.tree_base_s),
                        ("tree_net_step_s", self.tree_net_step_s)):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                    or v < 0:
                raise InputError(f"NcclLatency.{name} must be a finite number of seconds >= 0, "
                                 f"got {v!r}")

    def ring_s(self, kind: str, ranks: int, nodes: int) -> float:
        """Latency of a ring collective (``kind``: reduce-scatter, all-gather, all-reduce) over
        ``ranks`` GPUs on ``nodes`` nodes (0 for one rank)."""
        _check_group(ranks, nodes)
        if kind not in ("reduce-scatter", "all-gather", "all-reduce"):
            raise InputError(f"unknown ring collective {kind!r}; known: reduce-scatter, "
                             "all-gather, all-reduce")
        if ranks == 1:
            return 0.0
        f = 2 if kind == "all-reduce" else 1
        inter = f * (nodes - 1)
        return self.base_s + (f * (ranks - 1) - inter) * self.nvlink_step_s \
            + inter * self.net_step_s

    def tree_allreduce_s(self, ranks: int, nodes: int) -> float:
        """Latency of NCCL's tree all-reduce over ``ranks`` GPUs on ``nodes`` nodes."""
        _check_group(ranks, nodes)
        if ranks == 1:
            return 0.0
        log2n = int(math.log2(nodes)) if nodes > 1 else 0  # NCCL's log2i (floor)
        return self.tree_base_s + 2 * (log2n * self.tree_net_step_s
                                       + (ranks // nodes - 1) * self.nvlink_step_s)


def _check_group(ranks: int, nodes: int) -> None:
    for name, v in (("ranks", ranks), ("nodes", nodes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{name} must be an integer >= 1, got {v!r}")
    if nodes > ranks or ranks % nodes:
        raise InputError(f"{ranks} ranks do not spread evenly over {nodes} nodes")


#: NCCL 2.2x tuning.cc, Simple protocol: baseLat Ring 8.4 us (Tree 0), hwLat NVLINK Ring 3.4 us,
#: hwLat NET Ring 14.0 us, hwLat NET Tree 14 us (accelsim/data/nccl_scale/nccl_tuning_constants.csv)
NCCL_SIMPLE = NcclLatency(base_s=8.4e-6, nvlink_step_s=3.4e-6, net_step_s=14.0e-6,
                          tree_base_s=0.0, tree_net_step_s=14.0e-6)
