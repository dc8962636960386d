"""Structural tests of the topology generators and ring finding (degrees, link counts,
connectivity, diameter), against facts stated independently of this code: NVIDIA's DGX-1
hybrid cube-mesh link list and graph-theory results (ring/torus/complete-graph diameters,
Walecki's (p-1)/2 Hamiltonian decomposition of K_p for odd p)."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from accelsim.netsim import topology as T
from accelsim.netsim.rings import find_rings
from accelsim.netsim.schedule import directional_rings

DGX1_DOUBLE = {(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)}
DGX1_SINGLE = {(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)}


def weighted_degree(g, n):
    return sum(d["multiplicity"] for _, _, d in g.edges(n, data=True))


def test_dgx1_exact_link_list():
    g = T.dgx1()
    edges = {tuple(sorted(e)): m for *e, m in g.edges(data="multiplicity")}
    assert edges == {**{e: 2 for e in DGX1_DOUBLE}, **{e: 1 for e in DGX1_SINGLE}}
    assert T.link_count(g) == 24
    assert all(weighted_degree(g, n) == 6 for n in g)
    assert nx.diameter(g) == 2
    assert all(d["bandwidth_Bps"] == 25e9 for *_, d in g.edges(data=True))


@pytest.mark.parametrize("p", [2, 3, 8, 17])
def test_ring_structure(p):
    g = T.ring(p, 1e9)
    assert T.link_count(g) == (1 if p == 2 else p)
    assert nx.diameter(g) == p // 2
    assert all(g.degree(n) == (1 if p == 2 else 2) for n in g)


@pytest.mark.parametrize("r,c", [(3, 3), (4, 4), (4, 6), (5, 3)])
def test_torus_structure(r, c):
    g = T.torus2d(r, c, 1e9)
    assert g.number_of_nodes() == r * c and T.link_count(g) == 2 * r * c
    assert all(g.degree(n) == 4 for n in g)
    assert nx.diameter(g) == r // 2 + c // 2


@pytest.mark.parametrize("p", [2, 5, 8])
def test_fully_connected_and_switch(p):
    fc = T.fully_connected(p, 1e9)
    assert T.link_count(fc) == p * (p - 1) // 2 and nx.diameter(fc) == 1
    sw = T.switch(p, 1e9)
    assert T.link_count(sw) == p and sw.degree("switch") == p
    assert nx.diameter(sw) == 2 and sw.nodes["switch"]["kind"] == "switch"


@pytest.mark.parametrize("boards", [2, 8])
def test_multi_board_rail_aligned(boards):
    g = T.multi_board(boards, 25e9, inter_board_Bps=12.5e9)
    inter = [(u, v) for u, v, t in g.edges(data="tier") if t == "inter"]
    rails = 8 * (boards if boards > 2 else 1)
    assert len(inter) == rails
    # rail-aligned: inter-board links join equal local indices on neighbouring boards
    for u, v in inter:
        assert g.nodes[u]["local"] == g.nodes[v]["local"]
        assert (g.nodes[u]["board"] - g.nodes[v]["board"]) % boards in (1, boards - 1)
        assert g.edges[u, v]["bandwidth_Bps"] == 12.5e9
    assert T.link_count(g) == 24 * boards + rails
    deg = 6 + (2 if boards > 2 else 1)
    assert all(weighted_degree(g, n) == deg for n in g)
    assert nx.is_connected(g)


def test_hfp8_64_diameter_and_size():
    g = T.hfp8_64()
    assert len(T.chips(g)) == 64 and T.link_count(g) == 8 * 24 + 64
    # board diameter 2 + ring of 8 boards diameter 4
    assert nx.diameter(g) == 6


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_bad_bandwidth_rejected(bad):
    with pytest.raises(ValueError, match="bandwidth"):
        T.ring(4, bad)
    with pytest.raises(ValueError, match="bandwidth"):
        T.dgx1(bad)
    with pytest.raises(ValueError, match="bandwidth"):
        T.with_bandwidth(T.ring(4, 1e9), bad)


def test_disconnected_and_malformed_rejected():
    g = nx.union(T.ring(3, 1e9), nx.relabel_nodes(T.ring(3, 1e9), {0: 3, 1: 4, 2: 5}))
    with pytest.raises(ValueError, match="disconnected"):
        T.validate(g)
    h = T.ring(4, 1e9)
    h.edges[0, 1]["bandwidth_Bps"] = -5
    with pytest.raises(ValueError, match="bandwidth_Bps=-5"):
        T.validate(h)
    with pytest.raises(ValueError, match="unknown topology"):
        T.build("hypercube", 8, bandwidth_Bps=1e9)
    with pytest.raises(ValueError, match="exactly 8 chips"):
        T.build("dgx1", 16)


def _ring_ok(g, ring):
    order = ring.order
    assert sorted(order) == sorted(T.chips(g))
    for u, v, lane in ring.hops():
        assert g.has_edge(u, v) and lane < g.edges[u, v]["multiplicity"]


def test_dgx1_three_disjoint_rings_cover_all_24_links():
    g = T.dgx1()
    rings = find_rings(g)
    assert len(rings) == 3
    use = Counter()
    for r in rings:
        _ring_ok(g, r)
        for u, v, lane in r.hops():
            use[(min(u, v), max(u, v), lane)] += 1
    assert sum(use.values()) == 24 and max(use.values()) == 1  # every link copy once
    assert len(directional_rings(g)) == 6


@pytest.mark.parametrize("p", [3, 5, 7, 9])
def test_complete_graph_walecki_bound(p):
    # K_p (p odd) decomposes into (p-1)/2 edge-disjoint Hamiltonian cycles (Walecki)
    g = T.fully_connected(p, 1e9)
    rings = find_rings(g)
    assert len(rings) == (p - 1) // 2
    for r in rings:
        _ring_ok(g, r)


@pytest.mark.parametrize("r,c", [(4, 4), (3, 4), (8, 8), (16, 16),
                                 # both sides odd: every 2-D torus is Hamiltonian
                                 (3, 5), (5, 3), (3, 9), (5, 7), (7, 7), (9, 9), (13, 15)])
def test_torus_ring_found(r, c):
    g = T.torus2d(r, c, 1e9)
    rings = find_rings(g)
    assert rings
    for ring in rings:
        _ring_ok(g, ring)


def test_switch_uses_logical_ring_through_switch():
    g = T.switch(4, 1e9)
    (dr,) = directional_rings(g)
    assert all(len(h) == 2 and h[0][1] == "switch" for h in dr.hop_routes)
