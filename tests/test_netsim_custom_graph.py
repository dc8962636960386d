"""A user's own networkx topology (issue 21, item 13): missing node/edge attributes are named in
one ValueError, and bandwidths can be given in GB/s, the unit of configs and the CLI."""

from __future__ import annotations

import networkx as nx
import pytest

from accelsim.netsim import collective_time
from accelsim.netsim.topology import EDGE_ATTRIBUTES, NODE_ATTRIBUTES, build, build_topology


def _cycle(n: int = 4) -> nx.Graph:
    return nx.cycle_graph(n)


def test_a_node_without_kind_is_named():
    with pytest.raises(ValueError, match=r"node 0 has no 'kind' attribute.*kind='chip'"):
        collective_time(_cycle(), "all-reduce", 1000)


def test_an_edge_without_bandwidth_is_named():
    g = _cycle()
    nx.set_node_attributes(g, "chip", "kind")
    with pytest.raises(ValueError, match=r"link 0-1 has no bandwidth attribute.*bandwidth_GBps"):
        collective_time(g, "all-reduce", 1000)


def test_bandwidth_in_GBps_equals_the_generator_and_bytes_per_second():
    g = _cycle(8)
    nx.set_node_attributes(g, "chip", "kind")
    nx.set_edge_attributes(g, 50.0, "bandwidth_GBps")
    ref = build("ring", 8, bandwidth_Bps=50e9, latency_s=0.0)
    for op in ("reduce-scatter", "all-gather", "all-reduce"):
        got = collective_time(g, op, 10**6, 2.0).time_s
        assert got == collective_time(ref, op, 10**6, 2.0).time_s
        assert got == collective_time(build_topology("ring", 8, link_GBps=50.0), op, 10**6,
                                      2.0).time_s
    # ring all-reduce: 2 (p-1)/p of the payload over k = 2 directional rings (both directions
    # of the cycle) of 50 GB/s links
    assert collective_time(g, "all-reduce", 8 * 10**6, 1.0).time_s == pytest.approx(
        2 * 7 / 8 * 8e6 / (2 * 50e9))


def test_disagreeing_units_and_bad_values_are_refused():
    g = _cycle()
    nx.set_node_attributes(g, "chip", "kind")
    nx.set_edge_attributes(g, 50.0, "bandwidth_GBps")
    g.edges[0, 1]["bandwidth_Bps"] = 1e9
    with pytest.raises(ValueError, match="disagree"):
        collective_time(g, "all-reduce", 1000)
    g.edges[0, 1].pop("bandwidth_Bps")
    g.edges[0, 1]["bandwidth_GBps"] = -1
    with pytest.raises(ValueError, match="bandwidth_GBps=-1"):
        collective_time(g, "all-reduce", 1000)


def test_the_documented_attributes_are_the_checked_ones():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "netsim.md").read_text()
    for attr in (*NODE_ATTRIBUTES, *EDGE_ATTRIBUTES, "bandwidth_Bps"):
        assert f"`{attr}`" in text, attr
