"""NCCL's latency model (accelsim.netsim.nccl) and the ring-latency rows it is checked on."""

from __future__ import annotations

import csv
import math
import sys

import pytest

from accelsim.errors import InputError
from accelsim.netsim.nccl import NCCL_SIMPLE, NcclLatency
from accelsim.paths import REPO_ROOT

DATA = REPO_ROOT / "accelsim" / "data" / "nccl_scale"
sys.path.insert(0, str(REPO_ROOT / "scripts"))
import nccl_scale_validate as V  # noqa: E402


def test_ring_latency_by_hand():
    m = NcclLatency(base_s=8.4e-6, nvlink_step_s=3.4e-6, net_step_s=14e-6)
    # 16 nodes, one GPU each: an all-reduce is 2 x 15 network steps
    assert math.isclose(m.ring_s("all-reduce", 16, 16), 8.4e-6 + 30 * 14e-6)
    # 2 nodes x 8 GPUs: a reduce-scatter is 15 steps, one of them across the network
    assert math.isclose(m.ring_s("reduce-scatter", 16, 2), 8.4e-6 + 14 * 3.4e-6 + 14e-6)
    assert m.ring_s("all-gather", 1, 1) == 0.0


def test_tree_latency_by_hand():
    m = NcclLatency(base_s=0, nvlink_step_s=3.4e-6, net_step_s=14e-6, tree_net_step_s=14e-6)
    # 16 nodes, one GPU each: up and down a tree of depth log2(16) = 4
    assert math.isclose(m.tree_allreduce_s(16, 16), 2 * 4 * 14e-6)
    # 4 nodes x 8 GPUs: 7 NVLink steps and 2 network levels each way
    assert math.isclose(m.tree_allreduce_s(32, 4), 2 * (2 * 14e-6 + 7 * 3.4e-6))


def test_tree_beats_ring_latency_at_scale():
    """NCCL's reason for trees: ring latency grows linearly with nodes, tree latency with
    log2(nodes)."""
    assert NCCL_SIMPLE.tree_allreduce_s(1024, 1024) < NCCL_SIMPLE.ring_s("all-reduce", 1024,
                                                                           1024) / 50


@pytest.mark.parametrize("kwargs", [dict(base_s=-1e-6, nvlink_step_s=0, net_step_s=0),
                                    dict(base_s=math.nan, nvlink_step_s=0, net_step_s=0),
                                    dict(base_s=True, nvlink_step_s=0, net_step_s=0)])
def test_bad_constants(kwargs):
    with pytest.raises(InputError, match="base_s"):
        NcclLatency(**kwargs)


@pytest.mark.parametrize("ranks,nodes", [(0, 1), (8, 3), (2, 4), (4.0, 1)])
def test_bad_groups(ranks, nodes):
    with pytest.raises(InputError):
        NCCL_SIMPLE.ring_s("all-reduce", ranks, nodes)


def test_bad_kind():
    with pytest.raises(InputError, match="broadcast"):
        NCCL_SIMPLE.ring_s("broadcast", 8, 1)


def test_rows_present_with_sources():
    rows = V.ring_rows()
    assert {r["label"] for r in rows} == {"fit", "checked"}
    assert all(r["source"].startswith("https://github.com/NVIDIA/") and r["quote"] for r in rows)
    with open(DATA / "nccl_tuning_constants.csv", newline="") as f:
        consts = list(csv.DictReader(f))
    by = {(c["constant"], c["algorithm"], c["hardware"]): float(c["value_us"]) * 1e-6
          for c in consts if c["protocol"] == "simple"}
    assert math.isclose(NCCL_SIMPLE.base_s, by["base_latency", "ring", "any"])
    assert math.isclose(NCCL_SIMPLE.net_step_s, by["step_latency", "ring", "net"])
    assert math.isclose(NCCL_SIMPLE.nvlink_step_s, by["step_latency", "ring", "nvlink"])
    assert math.isclose(NCCL_SIMPLE.tree_net_step_s, by["step_latency", "tree", "net"])


def test_fitted_ring_latency_predicts_checked_rows():
    """Base + per-step latency fitted on the ``fit`` rows predicts each ``checked`` row within
    5 % (the measurement's own step-to-step scatter is ~2 %)."""
    rows = V.ring_rows()
    base, step = V.fit_ring_latency(rows)
    assert 0 < base and 0 < step
    for r in rows:
        if r["label"] == "checked":
            p = int(r["ranks"])
            pred = base + 2 * (p - 1) * step
            assert pred == pytest.approx(float(r["measured_time_us"]) * 1e-6, rel=0.05)


def test_reduce_scatter_bus_bandwidth_falls_with_nodes():
    """With NCCL's latency, a 1 GiB DP reduce-scatter (one GPU per node) loses bus bandwidth
    from 16 to 1,024 nodes: its per-step payload shrinks as 1/nodes while each network step
    costs 14 us."""
    from accelsim.arch import build_system
    from accelsim.netsim.fabric import Fabric

    fab = Fabric.of(build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), nccl=None)
    t16 = V.dp_times(fab, "reduce-scatter", 2 ** 30, 16)
    t1024 = V.dp_times(fab, "reduce-scatter", 2 ** 30, 1024)
    size, bw, m = 2 ** 30, fab.inter_Bps, NCCL_SIMPLE

    def busbw(n, t):
        return (n - 1) / n * size / t

    def closed(n):  # the ring by hand: bandwidth term, base, one network latency per step
        return (n - 1) / n * size / bw + m.base_s + (n - 1) * m.net_step_s

    ratio = busbw(1024, t1024["nccl_ring"]) / busbw(16, t16["nccl_ring"])
    assert ratio < 0.8
    assert ratio == pytest.approx(busbw(1024, closed(1024)) / busbw(16, closed(16)), rel=1e-9)


def _h100_fabric(**kw):
    from accelsim.arch import build_system
    from accelsim.netsim.fabric import Fabric

    return Fabric.of(build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), **kw)


def test_fabric_without_nccl_keeps_link_latency():
    """With ``nccl=None`` a group is timed as before: the ring term at the links' latency."""
    from accelsim.ring import ring_collective_time

    assert _h100_fabric().nccl == NCCL_SIMPLE  # the default
    fab = _h100_fabric(nccl=None)
    assert fab.collective_s("reduce-scatter", 2 ** 30, 16, 8) == ring_collective_time(
        "reduce-scatter", 16, 2 ** 30, fab.inter_Bps, fab.inter_latency_s)


def test_fabric_nccl_latency_across_nodes_only():
    from dataclasses import replace

    from accelsim.ring import ring_collective_time

    fab = _h100_fabric(nccl=NCCL_SIMPLE)
    plain = replace(fab, nccl=None)
    # inside one node: the links' latency, as without nccl
    assert fab.collective_s("all-reduce", 2 ** 26, 8, 1) == plain.collective_s(
        "all-reduce", 2 ** 26, 8, 1)
    # 16 nodes, one GPU each, 1 GiB reduce-scatter: bandwidth term + NCCL's ring latency
    bw = ring_collective_time("reduce-scatter", 16, 2 ** 30, fab.inter_Bps, 0.0)
    assert fab.collective_s("reduce-scatter", 2 ** 30, 16, 8) == pytest.approx(
        bw + 8.4e-6 + 15 * 14e-6, rel=1e-12)
    # a small all-reduce over 1,024 nodes: NCCL's tree (2 x log2(1024) network steps) wins
    bw = ring_collective_time("all-reduce", 1024, 2 ** 20, fab.inter_Bps, 0.0)
    assert fab.collective_s("all-reduce", 2 ** 20, 1024, 8) == pytest.approx(
        bw / 0.9 + 2 * 10 * 14e-6, rel=1e-12)
    # 4 nodes x 8 GPUs, hierarchical bandwidth, NCCL's flat-ring latency: 31 steps, 3 of them
    # across the network
    t_bw = replace(plain, intra_latency_s=0.0, inter_latency_s=0.0).collective_s(
        "all-gather", 2 ** 28, 32, 1)
    assert fab.collective_s("all-gather", 2 ** 28, 32, 1) == pytest.approx(
        t_bw + 8.4e-6 + 28 * 3.4e-6 + 3 * 14e-6, rel=1e-12)


def test_fabric_rejects_bad_nccl():
    with pytest.raises(InputError, match="NcclLatency"):
        _h100_fabric(nccl="nccl")


def test_llm_params_nccl_latency_is_bool():
    from accelsim.engine import LlmParams

    with pytest.raises(InputError, match="nccl_latency"):
        LlmParams(nccl_latency=1)
