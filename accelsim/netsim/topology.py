"""Interconnect topologies as networkx graphs, built by pure generator functions.

Every generator returns an undirected :class:`networkx.Graph` whose nodes carry ``kind``
(``"chip"`` or ``"switch"``) and, for multi-board systems, ``board`` and ``local``; whose edges
carry ``bandwidth_Bps`` (one physical link, ONE direction), ``latency_s`` and ``multiplicity``
(parallel physical links between the pair, e.g. DGX-1's doubled NVLinks).  Links are full
duplex: each edge is two directional links per lane.  Chips are numbered ``0..P-1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from accelsim.errors import InputError
from accelsim.netsim.limits import MAX_GRAPH_LINKS, check_limit

# NVIDIA DGX-1 (V100) hybrid cube-mesh: 8 GPUs, 6 NVLink2 ports each, 24 links.
# Source: NVIDIA DGX-1 with Tesla V100 System Architecture white paper (2017), Fig. 4.
DGX1_DOUBLE_LINKS = ((0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7))
DGX1_SINGLE_LINKS = ((0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7))
NVLINK2_GBPS = 25.0  # one NVLink2 link, one direction (GB/s, 1e9 bytes/s)
NVLINK2_LATENCY_S = 1e-6  # order of magnitude of a GPU-to-GPU NVLink hop incl. protocol


def check_link(bandwidth_Bps: float, latency_s: float) -> None:
    """A link's one-direction bandwidth must be positive and finite, its latency finite >= 0."""
    if not (isinstance(bandwidth_Bps, (int, float)) and not isinstance(bandwidth_Bps, bool)
            and math.isfinite(bandwidth_Bps) and bandwidth_Bps > 0):
        raise InputError(f"link bandwidth must be a positive finite number of bytes/s, "
                         f"got {bandwidth_Bps!r}")
    if not (isinstance(latency_s, (int, float)) and not isinstance(latency_s, bool)
            and math.isfinite(latency_s) and latency_s >= 0):
        raise InputError(f"link latency must be a finite number of seconds >= 0, got {latency_s!r}")


def check_count(name: str, n: int, minimum: int) -> None:
    """``n`` must be a Python/numpy integer >= ``minimum``."""
    import numbers
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {n!r}")


def _check_size(name: str, links: int, max_links: int | None) -> None:
    check_limit(f"the {name} graph", links, max_links, "links", "max_links",
                "accelsim.netsim.symmetric.plan times ring, switch, multi-board and torus "
                "systems of any size without a graph")


_check_link, _check_count = check_link, check_count


def _add_chips(g: nx.Graph, n: int) -> None:
    g.add_nodes_from(range(n), kind="chip")


def _link(g: nx.Graph, u, v, bandwidth_Bps, latency_s, multiplicity=1, tier="intra") -> None:
    g.add_edge(u, v, bandwidth_Bps=float(bandwidth_Bps), latency_s=float(latency_s),
               multiplicity=int(multiplicity), tier=tier)


def ring(p: int, bandwidth_Bps: float, latency_s: float = 0.0, *,
         max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """Bidirectional ring of ``p >= 2`` chips (p = 2 is one link between the two)."""
    _check_count("ring size", p, 2)
    _check_link(bandwidth_Bps, latency_s)
    _check_size(f"ring-{p}", p if p > 2 else 1, max_links)
    g = nx.Graph(name=f"ring-{p}", topology="ring")
    _add_chips(g, p)
    for i in range(p):
        if p > 2 or i == 0:
            _link(g, i, (i + 1) % p, bandwidth_Bps, latency_s)
    return g


def torus2d(rows: int, cols: int, bandwidth_Bps: float, latency_s: float = 0.0, *,
            max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """``rows x cols`` 2-D torus (wrap-around in both dimensions); each side >= 3."""
    _check_count("torus rows", rows, 3)
    _check_count("torus cols", cols, 3)
    _check_link(bandwidth_Bps, latency_s)
    _check_size(f"torus-{rows}x{cols}", 2 * rows * cols, max_links)
    g = nx.Graph(name=f"torus-{rows}x{cols}", topology="torus2d", rows=rows, cols=cols)
    _add_chips(g, rows * cols)
    for r in range(rows):
        for c in range(cols):
            n = r * cols + c
            _link(g, n, r * cols + (c + 1) % cols, bandwidth_Bps, latency_s)
            _link(g, n, ((r + 1) % rows) * cols + c, bandwidth_Bps, latency_s)
    return g


def fully_connected(p: int, bandwidth_Bps: float, latency_s: float = 0.0, *,
                    max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """Every pair of the ``p >= 2`` chips joined by one link."""
    _check_count("chip count", p, 2)
    _check_link(bandwidth_Bps, latency_s)
    _check_size(f"fully-connected-{p}", p * (p - 1) // 2, max_links)
    g = nx.Graph(name=f"fully-connected-{p}", topology="fully-connected")
    _add_chips(g, p)
    for u in range(p):
        for v in range(u + 1, p):
            _link(g, u, v, bandwidth_Bps, latency_s)
    return g


def switch(p: int, bandwidth_Bps: float, latency_s: float = 0.0, *,
           max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """``p`` chips each with one link to a single non-blocking switch (node ``"switch"``)."""
    _check_count("chip count", p, 2)
    _check_link(bandwidth_Bps, latency_s)
    _check_size(f"switch-{p}", p, max_links)
    g = nx.Graph(name=f"switch-{p}", topology="switch")
    _add_chips(g, p)
    g.add_node("switch", kind="switch")
    for u in range(p):
        _link(g, u, "switch", bandwidth_Bps, latency_s)
    return g


def dgx1(bandwidth_Bps: float = NVLINK2_GBPS * 1e9,
         latency_s: float = NVLINK2_LATENCY_S) -> nx.Graph:
    """The 8-GPU hybrid cube-mesh of an NVIDIA DGX-1 (V100): 24 NVLinks, 6 per GPU.

    Eight GPU pairs are joined by two links (``multiplicity=2``), eight by one.
    """
    _check_link(bandwidth_Bps, latency_s)
    g = nx.Graph(name="dgx1", topology="dgx1")
    _add_chips(g, 8)
    for u, v in DGX1_DOUBLE_LINKS:
        _link(g, u, v, bandwidth_Bps, latency_s, multiplicity=2)
    for u, v in DGX1_SINGLE_LINKS:
        _link(g, u, v, bandwidth_Bps, latency_s, multiplicity=1)
    return g


def multi_board(n_boards: int, bandwidth_Bps: float, inter_board_Bps: float | None = None,
                latency_s: float = NVLINK2_LATENCY_S,
                inter_board_latency_s: float | None = None, *,
                max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """``n_boards`` DGX-1-like hybrid cube-mesh boards joined rail-aligned (``n_boards >= 2``).

    Chip ``local`` of board ``b`` is node ``8*b + local``.  Rail-aligned scheme: the chips with
    the same local index on every board form one *rail*, a bidirectional ring over the boards
    ``b -> b+1 (mod n_boards)`` (two boards: one link).  Each chip thus has its 6 intra-board
    links plus 2 inter-board links (1 for two boards); there are 8 rails.  Inter-board links have
    their own bandwidth (default: the intra-board one) and latency.  With 8 boards this is the
    64-chip system of the HFP8 paper's appendix D (``hfp8_64``).
    """
    _check_count("board count", n_boards, 2)
    inter_board_Bps = bandwidth_Bps if inter_board_Bps is None else inter_board_Bps
    inter_board_latency_s = latency_s if inter_board_latency_s is None else inter_board_latency_s
    _check_link(bandwidth_Bps, latency_s)
    _check_link(inter_board_Bps, inter_board_latency_s)
    _check_size(f"{n_boards}x-dgx1-rail", 32 * n_boards if n_boards > 2 else 56, max_links)
    g = nx.Graph(name=f"{n_boards}x-dgx1-rail", topology="multi-board", boards=n_boards,
                 chips_per_board=8)
    board = dgx1(bandwidth_Bps, latency_s)
    for b in range(n_boards):
        for local in range(8):
            g.add_node(8 * b + local, kind="chip", board=b, local=local)
        for u, v, d in board.edges(data=True):
            _link(g, 8 * b + u, 8 * b + v, d["bandwidth_Bps"], d["latency_s"],
                  d["multiplicity"], tier="intra")
    for local in range(8):
        for b in range(n_boards if n_boards > 2 else 1):
            _link(g, 8 * b + local, 8 * ((b + 1) % n_boards) + local, inter_board_Bps,
                  inter_board_latency_s, 1, tier="inter")
    return g


def hfp8_64(bandwidth_Bps: float = NVLINK2_GBPS * 1e9, inter_board_Bps: float | None = None,
            latency_s: float = NVLINK2_LATENCY_S) -> nx.Graph:
    """The 64-chip system: 8 hybrid cube-mesh boards, rail-aligned (see :func:`multi_board`)."""
    g = multi_board(8, bandwidth_Bps, inter_board_Bps, latency_s)
    g.graph["name"] = "hfp8-64"
    return g


# ----------------------------------------------------------------------------------- checks

def chips(g: nx.Graph) -> list:
    """The chip nodes of ``g`` in sorted order."""
    return sorted(n for n, k in g.nodes(data="kind") if k == "chip")


def link_count(g: nx.Graph) -> int:
    """Physical (bidirectional) links, counting multiplicity."""
    return sum(m for _, _, m in g.edges(data="multiplicity", default=1))


#: what a custom topology graph must carry (generators set them all); documented in docs/netsim.md
NODE_ATTRIBUTES = {"kind": "'chip' or 'switch' on every node"}
EDGE_ATTRIBUTES = {
    "bandwidth_GBps": "one physical link, one direction, GB/s (1e9 bytes/s), as in configs and "
                      "the CLI; or bandwidth_Bps in bytes/s",
    "latency_s": "optional, seconds, default 0",
    "multiplicity": "optional, parallel physical links, default 1",
}


def validate(g: nx.Graph) -> nx.Graph:
    """Raise ValueError unless ``g`` is a usable topology; returns ``g``.

    Checks: at least two chips, connected, every node typed chip or switch (``kind``), every
    edge with a positive bandwidth, latency >= 0, integer multiplicity >= 1. An edge may give
    its bandwidth as ``bandwidth_GBps`` (the unit of configs and the CLI); it is converted once,
    here, into the ``bandwidth_Bps`` the engines read (the graph is updated in place).
    """
    if not isinstance(g, nx.Graph):
        raise TypeError(f"topology must be a networkx Graph or a RingPlan, got {type(g).__name__}")
    name = g.graph.get("name", "topology")
    for n, d in g.nodes(data=True):
        if "kind" not in d:
            raise InputError(f"{name}: node {n!r} has no 'kind' attribute; every node needs "
                             "kind='chip' or kind='switch' (g.add_node(n, kind='chip'))")
        if d["kind"] not in ("chip", "switch"):
            raise InputError(f"{name}: node {n!r} has kind {d['kind']!r}, expected 'chip' or "
                             "'switch'")
    if len(chips(g)) < 2:
        raise InputError(f"{name}: needs at least 2 chips, has {len(chips(g))}")
    for u, v, d in g.edges(data=True):
        if "bandwidth_GBps" in d:
            gb = d["bandwidth_GBps"]
            if not (isinstance(gb, (int, float)) and not isinstance(gb, bool)
                    and math.isfinite(gb) and gb > 0):
                raise InputError(f"{name}: link {u}-{v} has bandwidth_GBps={gb!r}; must be > 0")
            if "bandwidth_Bps" in d and not math.isclose(d["bandwidth_Bps"], gb * 1e9,
                                                         rel_tol=1e-12):
                raise InputError(f"{name}: link {u}-{v} has bandwidth_GBps={gb!r} and "
                                 f"bandwidth_Bps={d['bandwidth_Bps']!r}, which disagree; give one")
            d["bandwidth_Bps"] = float(gb) * 1e9
        if "bandwidth_Bps" not in d:
            raise InputError(f"{name}: link {u}-{v} has no bandwidth attribute; every edge needs "
                             "bandwidth_GBps (one link, one direction, GB/s) or bandwidth_Bps "
                             "(bytes/s)")
        bw, lat, m = d["bandwidth_Bps"], d.get("latency_s", 0.0), d.get("multiplicity", 1)
        if not (isinstance(bw, (int, float)) and math.isfinite(bw) and bw > 0):
            raise InputError(f"{name}: link {u}-{v} has bandwidth_Bps={bw!r}; must be > 0")
        if not (isinstance(lat, (int, float)) and math.isfinite(lat) and lat >= 0):
            raise InputError(f"{name}: link {u}-{v} has latency_s={lat!r}; must be >= 0")
        if not isinstance(m, int) or m < 1:
            raise InputError(f"{name}: link {u}-{v} has multiplicity={m!r}; must be an int >= 1")
    if not nx.is_connected(g):
        parts = sorted((sorted(c, key=str) for c in nx.connected_components(g)), key=len)
        raise InputError(f"{name}: topology is disconnected ({len(parts)} components; "
                         f"e.g. {parts[0][:8]} cannot reach {parts[-1][:8]})")
    return g


def with_bandwidth(g: nx.Graph, bandwidth_Bps: float | None = None,
                   inter_board_Bps: float | None = None) -> nx.Graph:
    """A copy of ``g`` with every intra (and/or inter-board) link's bandwidth replaced."""
    h = g.copy()
    for u, v, d in h.edges(data=True):
        if d.get("tier", "intra") == "inter":
            new = inter_board_Bps if inter_board_Bps is not None else bandwidth_Bps
        else:
            new = bandwidth_Bps
        if new is not None:
            _check_link(new, d.get("latency_s", 0.0))
            d["bandwidth_Bps"] = float(new)
    return h


TOPOLOGY_NAMES = ("ring", "torus2d", "torus-2d", "fully-connected", "switch", "dgx1", "hfp8-64",
                  "hybrid-cube-mesh-64", "multi-board")


@dataclass(frozen=True)
class TopologySpec:
    """A named topology with its sizes and link parameters resolved (defaults applied and
    validated) but no graph built: :func:`generate` builds the graph, the symmetric engine
    (:func:`accelsim.netsim.symmetric.plan_for`) times ring, switch, multi-board and torus
    systems from the spec alone.  ``kind`` is one of ``ring, torus2d, fully-connected, switch, dgx1,
    multi-board``; ``boards`` is set for multi-board (hfp8-64 is 8 boards), ``rows``/``cols``
    for torus2d."""

    kind: str
    name: str
    chips: int
    bandwidth_Bps: float
    latency_s: float
    inter_board_Bps: float | None = None
    inter_board_latency_s: float | None = None
    boards: int = 0
    rows: int = 0
    cols: int = 0


#: topologies of several boards joined by board-to-board links (the others have none)
BOARD_KINDS = ("hfp8-64", "multi-board", "hybrid-cube-mesh-64")


def resolve(name: str, chips: int | None = None, *, bandwidth_Bps: float | None = None,
            inter_board_Bps: float | None = None, latency_s: float | None = None,
            inter_board_latency_s: float | None = None) -> TopologySpec:
    """Topology by name, resolved into a :class:`TopologySpec` (see :func:`build`)."""
    key = str(name).lower().replace("_", "-")
    key = {"torus-2d": "torus2d", "fully-connected": "fully-connected"}.get(key, key)
    if key in TOPOLOGY_NAMES and key not in BOARD_KINDS and (
            inter_board_Bps is not None or inter_board_latency_s is not None):
        raise InputError(f"topology {name!r} has no board-to-board links: an inter-board "
                         "bandwidth or latency would change nothing")
    if chips is not None:
        check_count("chip count", chips, 2)
        chips = int(chips)
    lat = NVLINK2_LATENCY_S if latency_s is None else latency_s
    if key in ("dgx1", "hfp8-64", "multi-board", "hybrid-cube-mesh-64"):
        bw = NVLINK2_GBPS * 1e9 if bandwidth_Bps is None else bandwidth_Bps
        need = {"dgx1": 8, "hfp8-64": 64, "hybrid-cube-mesh-64": 64}.get(key)
        if need is not None and chips is not None and chips != need:
            raise InputError(f"topology {name!r} has exactly {need} chips, got --chips {chips}")
        check_link(bw, lat)
        if key == "dgx1":
            return TopologySpec("dgx1", "dgx1", 8, float(bw), float(lat))
        if key in ("hfp8-64", "hybrid-cube-mesh-64"):
            nb, label = 8, "hfp8-64"
        else:
            if chips is None or chips % 8 or chips < 16:
                raise InputError(f"multi-board needs chips a multiple of 8 and >= 16, got {chips}")
            nb, label = chips // 8, f"{chips // 8}x-dgx1-rail"
        ibw = bw if inter_board_Bps is None else inter_board_Bps
        ilat = lat if inter_board_latency_s is None else inter_board_latency_s
        check_link(ibw, ilat)
        return TopologySpec("multi-board", label, 8 * nb, float(bw), float(lat), float(ibw),
                            float(ilat), boards=nb)
    if key not in TOPOLOGY_NAMES:
        raise InputError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGY_NAMES)}")
    if chips is None:
        raise InputError(f"topology {name!r} needs a chip count")
    if bandwidth_Bps is None:
        raise InputError(f"topology {name!r} needs a link bandwidth")
    lat = 0.0 if latency_s is None else latency_s
    check_link(bandwidth_Bps, lat)
    if key != "torus2d":
        return TopologySpec(key, f"{key}-{chips}", chips, float(bandwidth_Bps), float(lat))
    # torus2d: most square factorisation with both sides >= 3
    check_count("chip count", chips, 9)
    for r in range(math.isqrt(chips), 2, -1):
        if chips % r == 0 and chips // r >= 3:
            return TopologySpec("torus2d", f"torus-{r}x{chips // r}", chips,
                                float(bandwidth_Bps), float(lat), rows=r, cols=chips // r)
    raise InputError(f"torus2d: {chips} chips has no r x c factorisation with r, c >= 3")


def generate(spec: TopologySpec, *, max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """The graph of a resolved topology (refused past ``max_links`` links)."""
    bw, lat = spec.bandwidth_Bps, spec.latency_s
    if spec.kind == "dgx1":
        return dgx1(bw, lat)
    if spec.kind == "multi-board":
        g = multi_board(spec.boards, bw, spec.inter_board_Bps, lat, spec.inter_board_latency_s,
                        max_links=max_links)
        g.graph["name"] = spec.name
        return g
    if spec.kind == "torus2d":
        return torus2d(spec.rows, spec.cols, bw, lat, max_links=max_links)
    gen = {"ring": ring, "fully-connected": fully_connected, "switch": switch}[spec.kind]
    return gen(spec.chips, bw, lat, max_links=max_links)


def build_topology(name: str, chips: int | None = None, *, link_GBps: float | None = None,
                   inter_board_GBps: float | None = None, latency_s: float | None = None,
                   inter_board_latency_s: float | None = None,
                   max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """:func:`build` with bandwidths in GB/s (1e9 bytes/s, one link, one direction): the unit of
    configs, sweeps and the CLI (``--link-GBps``), converted once here."""
    return build(name, chips, bandwidth_Bps=None if link_GBps is None else link_GBps * 1e9,
                 inter_board_Bps=None if inter_board_GBps is None else inter_board_GBps * 1e9,
                 latency_s=latency_s, inter_board_latency_s=inter_board_latency_s,
                 max_links=max_links)


def build(name: str, chips: int | None = None, *, bandwidth_Bps: float | None = None,
          inter_board_Bps: float | None = None, latency_s: float | None = None,
          inter_board_latency_s: float | None = None,
          max_links: int | None = MAX_GRAPH_LINKS) -> nx.Graph:
    """Topology by name: the CLI's and the System adapter's single entry point.

    ``chips`` is required for ring / fully-connected / switch / torus2d (a square or
    ``r x c`` with r, c >= 3 chosen as the most square factorisation) and must be 8 for
    ``dgx1``, 64 for ``hfp8-64`` and a multiple of 8 (>= 16) for ``multi-board``.
    ``bandwidth_Bps`` defaults to NVLink2's 25 GB/s for dgx1-based topologies and is required
    otherwise.
    """
    return generate(resolve(name, chips, bandwidth_Bps=bandwidth_Bps,
                            inter_board_Bps=inter_board_Bps, latency_s=latency_s,
                            inter_board_latency_s=inter_board_latency_s), max_links=max_links)
