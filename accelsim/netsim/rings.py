"""Edge-disjoint Hamiltonian rings on a topology (the substrate of ring collectives).

A ring is a cyclic order of all chips in which consecutive chips share a physical link; rings
are *edge-disjoint* when no physical link (counting multiplicity: a doubled link can carry two
rings) is used twice.  Each undirected ring gives two directional rings (one per link
direction), so ``k`` disjoint rings let every chip send on ``2k`` directional links at once.

Small graphs (<= 12 chips with <= 50,000 Hamiltonian cycles, e.g. DGX-1) are solved exactly:
every Hamiltonian cycle is enumerated and the largest disjoint packing found by backtracking.
Larger graphs use a greedy Warnsdorff-ordered depth-first search with a step budget (and a
constructive boustrophedon ring for tori); it may find fewer rings than exist.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from accelsim.netsim.topology import chips as chip_nodes

EXACT_MAX_CHIPS = 12
EXACT_MAX_CYCLES = 50_000  # enumeration cap (K_10 already has 181,440 Hamiltonian cycles)


class _TooMany(Exception):
    pass


@dataclass(frozen=True)
class Ring:
    """A cyclic chip order and, per hop ``order[i] -> order[i+1]``, the lane of the link used."""

    order: tuple
    lanes: tuple[int, ...]

    def hops(self, reverse: bool = False):
        """``(u, v, lane)`` per hop, in ring order (``reverse`` walks the other direction)."""
        n = len(self.order)
        fwd = [(self.order[i], self.order[(i + 1) % n], self.lanes[i]) for i in range(n)]
        if not reverse:
            return fwd
        return [(v, u, lane) for (u, v, lane) in reversed(fwd)]


def _key(u, v):
    return (u, v) if str(u) <= str(v) else (v, u)


def _capacity(g: nx.Graph) -> dict:
    return {_key(u, v): int(m) for u, v, m in g.edges(data="multiplicity", default=1)}


def _cycle_edges(cycle) -> list:
    n = len(cycle)
    if n == 2:  # a 2-chip "ring" is one link used in both directions
        return [_key(cycle[0], cycle[1])]
    return [_key(cycle[i], cycle[(i + 1) % n]) for i in range(n)]


def _all_hamiltonian_cycles(g: nx.Graph, nodes: list) -> list[tuple]:
    """Every Hamiltonian cycle of the simple graph on ``nodes``, each once (fixed start, one
    orientation)."""
    start = nodes[0]
    nset = set(nodes)
    adj = {n: sorted((m for m in g[n] if m in nset), key=str) for n in nodes}
    out: list[tuple] = []
    path = [start]
    seen = {start}

    def dfs():
        u = path[-1]
        if len(path) == len(nodes):
            if start in adj[u] and str(path[1]) < str(path[-1]):  # one orientation only
                out.append(tuple(path))
                if len(out) > EXACT_MAX_CYCLES:
                    raise _TooMany
            return
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                path.append(v)
                dfs()
                path.pop()
                seen.discard(v)

    if len(nodes) == 2:
        return [tuple(nodes)] if nodes[1] in adj[start] else []
    dfs()
    return out


def _exact_packing(cycles: list[tuple], cap: dict, limit: int | None) -> list[tuple]:
    best: list[tuple] = []
    chosen: list[tuple] = []
    left = dict(cap)
    total = sum(cap.values())
    n_edges = len(_cycle_edges(cycles[0])) if cycles else 1
    upper = total // n_edges
    if limit is not None:
        upper = min(upper, limit)

    calls = [0]

    def rec(i: int):
        nonlocal best
        calls[0] += 1
        if calls[0] > 500_000:  # search budget: keep the best packing found so far
            return
        if len(chosen) > len(best):
            best = list(chosen)
        if len(best) >= upper or i >= len(cycles):
            return
        if len(chosen) + (len(cycles) - i) <= len(best):
            return
        for j in range(i, len(cycles)):
            es = _cycle_edges(cycles[j])
            need: dict = {}
            for e in es:
                need[e] = need.get(e, 0) + 1
            if all(left[e] >= c for e, c in need.items()):
                for e, c in need.items():
                    left[e] -= c
                chosen.append(cycles[j])
                rec(j)  # same cycle may repeat on multi-links
                chosen.pop()
                for e, c in need.items():
                    left[e] += c
                if len(best) >= upper:
                    return

    rec(0)
    return best


def _greedy_cycle(g: nx.Graph, nodes: list, left: dict, budget: int):
    start = nodes[0]
    nset = set(nodes)
    path = [start]
    seen = {start}
    steps = [0]

    def nbrs(u):
        return [v for v in g[u] if v in nset and left[_key(u, v)] > 0]

    def dfs():
        steps[0] += 1
        if steps[0] > budget:
            return False
        u = path[-1]
        if len(path) == len(nodes):
            return start in nbrs(u)
        cand = [v for v in nbrs(u) if v not in seen]
        cand.sort(key=lambda v: (sum(1 for w in nbrs(v) if w not in seen), str(v)))
        for v in cand:
            seen.add(v)
            path.append(v)
            if dfs():
                return True
            path.pop()
            seen.discard(v)
        return False

    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * len(nodes) + 100))
    try:
        return tuple(path) if dfs() else None
    finally:
        sys.setrecursionlimit(old)


def _torus_snake(g: nx.Graph, nodes: list):
    """A constructive Hamiltonian cycle of an r x c torus (boustrophedon down the rows, back up
    column 0; with both sides odd, the first r-1 rows so and the last row spliced in between
    two neighbours of row r-2, round its wrap-around link), or None when it does not apply."""
    if g.graph.get("topology") != "torus2d" or len(nodes) != len(g):
        return None
    r, c = g.graph["rows"], g.graph["cols"]
    transpose = r % 2 == 1 and c % 2 == 0
    if transpose:
        r, c = c, r
    odd = r % 2 == 1  # both sides odd
    rr = r - 1 if odd else r
    cells = [(0, j) for j in range(c)]
    for i in range(1, rr):
        cols = range(c - 1, 0, -1) if i % 2 == 1 else range(1, c)
        cells += [(i, j) for j in cols]
    cells += [(i, 0) for i in range(rr - 1, 0, -1)]
    if odd:  # row rr-1 runs c-1 .. 2, 1: detour through row r-1 between columns 2 and 1
        k = cells.index((rr - 1, 1))
        cells = cells[:k] + [(r - 1, (2 + t) % c) for t in range(c)] + cells[k:]
    cols = g.graph["cols"]
    order = tuple((j * cols + i) if transpose else (i * cols + j) for i, j in cells)
    if len(set(order)) != len(nodes):  # pragma: no cover - construction bug guard
        return None
    for k in range(len(order)):
        if not g.has_edge(order[k], order[(k + 1) % len(order)]):
            return None
    return order


def _assign_lanes(cycles: list[tuple]) -> list[Ring]:
    used: dict = {}
    rings = []
    for c in cycles:
        lanes = []
        for e in _cycle_edges(c):
            lanes.append(used.get(e, 0))
            used[e] = used.get(e, 0) + 1
        if len(c) == 2:  # one link, both directions, same lane
            lanes = lanes * 2
        rings.append(Ring(order=tuple(c), lanes=tuple(lanes)))
    return rings


def find_rings(g: nx.Graph, nodes: list | None = None, *, max_rings: int | None = None,
               budget: int = 20_000) -> list[Ring]:
    """Edge-disjoint Hamiltonian rings over ``nodes`` (default: all chips) using only direct
    chip-to-chip links of ``g``.  Returns ``[]`` when there is none (e.g. a switch topology)."""
    nodes = list(chip_nodes(g) if nodes is None else nodes)
    cap = _capacity(g)
    if len(nodes) < 2:
        return []
    if len(nodes) <= EXACT_MAX_CHIPS:
        try:
            cycles = _all_hamiltonian_cycles(g, nodes)
            return _assign_lanes(_exact_packing(cycles, cap, max_rings))
        except _TooMany:
            pass  # dense graph: fall through to the greedy search
    left = dict(cap)
    found = []
    snake = _torus_snake(g, nodes)
    if snake is not None:
        for e in _cycle_edges(snake):
            left[e] -= 1
        found.append(snake)
    while max_rings is None or len(found) < max_rings:
        c = _greedy_cycle(g, nodes, left, budget)
        if c is None:
            break
        for e in _cycle_edges(c):
            left[e] -= 1
        found.append(c)
    return _assign_lanes(found)
