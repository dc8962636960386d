"""One network model (accelsim.netsim.fabric): a collective on a node file's fabric takes the same
time from ``accelsim collective --system``, from the gradient row of a ``predict`` breakdown and
from the data-parallel row of an ``llm`` breakdown carrying the same bytes, and that time is the
ring term by hand at the preset's network efficiency."""

from __future__ import annotations

import json

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine import Plan, predict
from accelsim.engine.run import predict_workload
from accelsim.netsim.fabric import Fabric, collective_time_s
from accelsim.paths import REPO_ROOT
from accelsim.ring import bus_factor
from accelsim.workload import load_workload
from accelsim.workload.gpt import GptConfig

NODE = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")


def by_hand_reduce_scatter_s(size_bytes: float, ranks: int = 8) -> float:
    """p - 1 ring steps of one GPU-to-GPU latency plus size / p bytes at the NVSwitch port's
    wire rate times the fabric's efficiency (dgx-h100.toml: 450 GB/s, 1 us, 0.52)."""
    port = 450e9 * NODE.network_efficiency
    return (ranks - 1) * (1e-6 + size_bytes / ranks / port)


def test_the_preset_carries_the_fitted_efficiency():
    assert NODE.network_efficiency == 0.52
    # a preset without the key is the wire rate (the HFP8 paper's network model)
    assert build_system(REPO_ROOT / "arch_configs" / "hfp8-64chip.toml").network_efficiency == 1


def test_collective_system_cli_is_the_ring_by_hand(capsys):
    assert main(["collective", "--system", "dgx-h100", "--op", "reduce-scatter",
                 "--bytes", str(10**9), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] == pytest.approx(by_hand_reduce_scatter_s(1e9), rel=1e-12)
    assert out["time_s"] == pytest.approx(3.746e-3, rel=1e-3)  # the Fabric number
    assert out["network_efficiency"] == 0.52 and out["nodes"] == 1


def test_predict_gradient_row_is_the_collective():
    resnet = load_workload(REPO_ROOT / "workloads" / "resnet50.toml")
    rows = predict_workload(NODE, resnet, 32, "fp16", fusion=True).rows()
    (rs,) = [r for r in rows if r.op == "reduce_scatter"]
    size = rs.bytes / bus_factor("reduce-scatter", 8)
    assert size == pytest.approx(2 * resnet.n_params)  # fp16 gradients: the row's bytes
    assert rs.time_s == pytest.approx(collective_time_s(NODE, "reduce-scatter", size), rel=1e-9)
    assert rs.time_s == pytest.approx(by_hand_reduce_scatter_s(size), rel=1e-9)


def test_llm_data_parallel_row_is_the_collective():
    gpt = GptConfig(layers=4, hidden=4096, heads=32, seq=1024, vocab=32000,
                    flash_attention=True)
    r = predict(gpt, Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, zero=1), "bf16",
                NODE)
    dp = [row for row in r.rows() if row.layer == "grads"]
    assert {row.op for row in dp} == {"dp_reduce", "dp_gather"}
    for row in dp:  # every communication row carries the bytes it moves
        assert row.bytes > 0
    (red,) = [row for row in dp if row.op == "dp_reduce"]
    size = red.bytes / bus_factor("reduce-scatter", 8)
    assert red.time_s == pytest.approx(collective_time_s(NODE, "reduce-scatter", size),
                                       rel=1e-9)
    assert red.time_s == pytest.approx(by_hand_reduce_scatter_s(size), rel=1e-9)


def test_across_nodes_uses_the_nic_at_the_same_efficiency():
    # one rank per node: the ring on the NICs (50 GB/s) at the preset's efficiency, with
    # NCCL's latency (accelsim.netsim.nccl: 8.4 us base + 14 us per network step)
    t = collective_time_s(NODE, "all-gather", 1e9, 4, stride=8)
    assert t == pytest.approx(3 * 1e9 / 4 / (50e9 * 0.52) + 8.4e-6 + 3 * 14e-6, rel=1e-12)
    assert Fabric.of(NODE).split(64, 1) == (8, 8)


def test_a_board_topology_is_its_graph_as_predict_times_it(capsys):
    """--system on the HFP8 system (8 hybrid cube-mesh boards): the reduce-scatter predict's
    gradient reduction takes (netsim on the system's graph), 50M fp16 gradients = 1e8 B."""
    from accelsim.netsim import gradient_reduction_times

    hfp8 = build_system(REPO_ROOT / "arch_configs" / "hfp8-64chip.toml")
    assert main(["collective", "--system", "hfp8-64chip", "--op", "reduce-scatter", "--bytes",
                 str(10**8), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    from accelsim.netsim import collective_time
    from accelsim.netsim.system import system_graph

    same = collective_time(system_graph(hfp8), "reduce-scatter", 10**8, bytes_per_elem=1.0)
    assert out["time_s"] == pytest.approx(same.time_s, rel=1e-12) and out["chips"] == 64
    # predict's 50M 2-byte gradients: the same bytes, padded to rings x chips in 2-byte
    # elements instead of bytes (a few bytes more: 4e-6 of the time)
    want = gradient_reduction_times(hfp8, 50_000_000, "fp16").reduce_scatter_s
    assert out["time_s"] == pytest.approx(want, rel=1e-5)


def test_all_to_all_is_the_one_llm_uses():
    """collective --system's all-to-all at the fabric's all-to-all efficiency, the one llm's
    and infer's expert-parallel traffic use (it ran at the ring's 0.52: 381 us, not 223)."""
    from accelsim.engine import LlmParams
    from accelsim.engine.comm import fabric_of

    t = collective_time_s(NODE, "all-to-all", 1e8)
    assert t == pytest.approx(fabric_of(NODE, LlmParams()).all_to_all_s(1e8, 8, 1), rel=1e-12)
    assert t == pytest.approx(223.05e-6, rel=1e-3)


@pytest.mark.parametrize("argv, fragment", [
    ("--system dgx-h100 --op all-reduce --bytes 8 --chips 1", "at least 2 ranks"),
    ("--system v100-sxm2 --op all-reduce --bytes 8", "one GPU per node"),
    ("--system dgx-h100 --op all-reduce --bytes 8 --chips 3 --stride 3", "do not tile"),
    ("--system dgx-h100 --op all-to-all --bytes 8 --engine des", "closed form only"),
    ("--system dgx-h100 --op all-reduce --bytes 8 --max-packets 9", "--max-packets is a"),
    ("--system dgx-h100 --op all-reduce --bytes 8 --link-GBps 10", "--link-GBps is a --topology"),
    ("--system dgx-h100 --op all-reduce --bytes 8 --engine both", "--engine both"),
    ("--system hfp8-64chip --op all-to-all --bytes 8", "give --topology"),
    ("--system hfp8-64chip --op all-reduce --bytes 8 --chips 8", "span all 64 chips"),
    ("--topology ring --chips 4 --link-GBps 1 --op all-reduce --bytes 8 --stride 2",
     "--stride is a --system option"),
])
def test_collective_system_bad_input(argv, fragment, capsys):
    assert main(["collective", *argv.split()]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
