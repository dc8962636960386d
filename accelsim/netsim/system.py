"""Thin adapter from an :class:`accelsim.arch.System` to netsim's plain-number functions."""

from __future__ import annotations

import networkx as nx

from accelsim.arch.schemes import Scheme
from accelsim.netsim import topology as topo
from accelsim.netsim.phases import PhaseTimes, phase_times, single_chip_times
from accelsim.netsim.update import UpdateParams


def _get(obj, names: tuple[str, ...], what: str):
    for n in names:
        cur = obj
        ok = True
        for part in n.split("."):
            if not hasattr(cur, part):
                ok = False
                break
            cur = getattr(cur, part)
        if ok and cur is not None:
            return cur() if callable(cur) else cur
    raise ValueError(f"system {getattr(obj, 'name', obj)!r} has no {what} "
                     f"(looked for {', '.join(names)})")


def _opt(obj, names: tuple[str, ...]):
    try:
        return _get(obj, names, "")
    except ValueError:
        return None


def _positive_GBps(name: str, x):
    if x is None:
        return None
    if not (isinstance(x, (int, float)) and x > 0):
        raise ValueError(f"{name} must be > 0 GB/s, got {x!r}")
    return float(x) * 1e9


def system_graph(system, *, link_GBps: float | None = None,
                 inter_board_GBps: float | None = None) -> nx.Graph:
    """The system's topology graph; ``link_GBps`` (one link, one direction) overrides every
    link's bandwidth, ``inter_board_GBps`` only the board-to-board links."""
    name = _get(system, ("topology", "link.topology"), "topology name")
    chips = int(_get(system, ("chips", "n_chips"), "chip count"))
    bw = _positive_GBps("link_GBps", link_GBps)
    if bw is None:
        bw = float(_get(system, ("link.bandwidth_Bps",), "link bandwidth"))
    inter = _positive_GBps("inter_board_GBps", inter_board_GBps)
    if inter is None and link_GBps is None:
        inter = _opt(system, ("inter_board_link.bandwidth_Bps",))
    lat = _opt(system, ("link.latency_s",))
    ilat = _opt(system, ("inter_board_link.latency_s",))
    return topo.build(str(name), chips, bandwidth_Bps=bw, inter_board_Bps=inter,
                      latency_s=None if lat is None else float(lat),
                      inter_board_latency_s=None if ilat is None else float(ilat))


def chip_rates(system) -> tuple[float, float]:
    """(memory bandwidth in bytes/s, elementwise vector/SFU ops per second) of one chip."""
    mem = float(_get(system, ("chip.memory_bandwidth_Bps",), "chip memory bandwidth"))
    vec = _opt(system, ("chip.vector_ops_per_s", "chip.sfu_ops_per_s"))
    if vec is None:
        per_core = _get(system, ("chip.core.sfu_ops_per_s",), "SFU/vector op rate")
        vec = float(per_core) * int(_get(system, ("chip.cores",), "core count"))
    return mem, float(vec)


def gradient_reduction_times(system, n_params: int, scheme: Scheme | str, *,
                             link_GBps: float | None = None, compression: float = 1.0,
                             engine: str = "analytic", optimizer: str = "sgd-momentum",
                             inter_board_GBps: float | None = None, n_tensors: int = 0,
                             update: UpdateParams = UpdateParams(), alpha_s: float = 0.0,
                             reduce_Bps: float | None = None) -> PhaseTimes:
    """Reduce-scatter, all-gather and weight-update time per training step on ``system``.

    See :func:`accelsim.netsim.phases.phase_times` for the model and the knobs.
    """
    mem, vec = chip_rates(system)
    if int(_get(system, ("chips", "n_chips"), "chip count")) == 1:
        return single_chip_times(n_params, scheme, memory_Bps=mem, vector_ops_per_s=vec,
                                 optimizer=optimizer, n_tensors=n_tensors, update=update,
                                 engine=engine)
    g = system_graph(system, link_GBps=link_GBps, inter_board_GBps=inter_board_GBps)
    return phase_times(g, n_params, scheme, memory_Bps=mem, vector_ops_per_s=vec,
                       compression=compression, engine=engine, optimizer=optimizer,
                       n_tensors=n_tensors, update=update, alpha_s=alpha_s,
                       reduce_Bps=reduce_Bps)
