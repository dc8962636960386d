"""Communication volumes and times: Megatron's tensor-parallel collectives, pipeline p2p and the
data-parallel / ZeRO traffic; the two-tier placement on a DGX node file."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.arch import build_system
from accelsim.arch.schemes import get_scheme
from accelsim.engine import LlmParams, Plan
from accelsim.netsim.fabric import Fabric
from accelsim.engine.memory import memory
from accelsim.engine.comm import comm


def adamw_formats(name):
    """The AdamW state formats of scheme ``name`` (what an LLM plan trains with)."""
    return get_scheme(name).formats("adamw")
from accelsim.netsim.analytic import ring_collective_time
from accelsim.paths import REPO_ROOT
from accelsim.workload.gpt import GptConfig

H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
FAB = Fabric.of(H100.with_network_efficiency(1.0))
M = GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)


def _comm(scheme="bf16", **kw):
    base = dict(tp=4, pp=8, dp=4, micro_batch=1, global_batch=32)
    plan = Plan(**{**base, **kw})
    sc = adamw_formats(scheme)
    return comm(M, plan, sc, FAB, memory(M, plan, sc)), plan


def test_fabric_reads_the_node_file():
    assert FAB.gpus_per_node == 8
    assert FAB.intra_Bps == H100.link.bandwidth_Bps
    assert FAB.inter_Bps == H100.inter_board_link.bandwidth_Bps


def test_group_placement():
    assert FAB.split(8, 1) == (8, 1)  # TP 8: one node
    assert FAB.split(4, 4) == (2, 2)  # DP 4 with TP 4: two per node, two nodes
    assert FAB.split(16, 8) == (1, 16)  # DP with TP 8: one per node (rails)
    size = 1e9
    assert FAB.collective_s("all-reduce", size, 8, 1) == ring_collective_time(
        "all-reduce", 8, size, FAB.intra_Bps, FAB.intra_latency_s)
    # across nodes: the NIC ring's bandwidth term plus NCCL's latency (base + 30 network steps)
    assert FAB.collective_s("all-reduce", size, 16, 8) == pytest.approx(ring_collective_time(
        "all-reduce", 16, size, FAB.inter_Bps, 0.0) + 8.4e-6 + 30 * 14e-6, rel=1e-12)
    hier = FAB.collective_s("reduce-scatter", size, 16, 2)  # 4 per node x 4 nodes
    flat = ring_collective_time("reduce-scatter", 16, size, FAB.inter_Bps, FAB.inter_latency_s)
    assert hier < flat
    assert FAB.collective_s("all-reduce", size, 1, 1) == 0.0


def test_tensor_parallel_volume_megatron():
    # 2 all-reduces forward + 2 backward per layer and micro-batch, each 2(t-1)/t of s b h x 2 B
    c, plan = _comm()
    sbh2 = 2048 * 12288 * 2
    per_layer = 4 * 2 * 3 / 4 * sbh2
    assert c.tp_bytes == pytest.approx(per_layer * 12 * plan.n_micro, rel=1e-12)
    full, _ = _comm(recompute="full")
    assert full.tp_bytes == pytest.approx(1.5 * c.tp_bytes)
    # RS + AG: the same volume (Korthikanti 4.2.2), plus Megatron's backward re-gather of the
    # sharded QKV and FC1 inputs: 10 instead of 8 half-collectives per layer
    sp, _ = _comm(sequence_parallel=True)
    assert sp.tp_bytes == pytest.approx(1.25 * c.tp_bytes)
    assert sp.tp_layer_pass_s == pytest.approx(c.tp_layer_pass_s)  # the re-gather is overlapped
    assert sp.tp_layer_bwd_s == pytest.approx(c.tp_layer_bwd_s)


def test_activation_related_comm_fp8_lm_table7_convention():
    # FP8-LM Table 7 (GPT-175B, TP 8, PP 4, micro-batch 1): 5.9 GB BF16, 3.9 GB FP8-LM per GPU
    # and micro-batch = the input conversion's all-gather, backward re-gather and input-gradient
    # reduce-scatter: 6 x 7/8 x s b h x 2 B x 24 layers = 5.906 GiB; FP8 all-gathers: x 4/6
    bf, plan = _comm("bf16", tp=8, pp=4, sequence_parallel=True)
    f8, _ = _comm("fp8-lm", tp=8, pp=4, sequence_parallel=True)
    per_micro = 6 * 7 / 8 * 2048 * 12288 * 2 * 24
    assert bf.tp_input_bytes / plan.n_micro == pytest.approx(per_micro, rel=1e-12)
    assert bf.tp_input_bytes / plan.n_micro / 2 ** 30 == pytest.approx(5.9, abs=0.05)
    assert f8.tp_input_bytes / bf.tp_input_bytes == pytest.approx(4 / 6)
    assert f8.tp_input_bytes / plan.n_micro / 2 ** 30 == pytest.approx(3.9, abs=0.05)


def test_pipeline_p2p_scatter_gather_and_interleave():
    c, plan = _comm()
    assert c.pp_bytes == pytest.approx(2 * 2 * 2048 * 12288 / 4 * plan.n_micro)
    c2, _ = _comm(interleave=2)
    assert c2.pp_bytes == pytest.approx(2 * c.pp_bytes)
    assert _comm(pp=1)[0].pp_bytes == 0


def test_weight_comm_fp8_lm_ratio():
    # distributed optimizer: bf16 reduce-scatters fp32 gradients (4 B) and gathers bf16 weights
    # (2 B); FP8-LM moves the linear weight matrices' in FP8 (2/6 of the traffic), the rest
    # (embeddings, LayerNorms, biases) as bf16
    bf, _ = _comm("bf16", zero=1)
    f8, _ = _comm("fp8-lm", zero=1)
    mem = memory(M, Plan(tp=4, pp=8, dp=4, micro_batch=1, global_batch=32), adamw_formats("bf16"))
    lin = mem.linear_params / mem.params
    assert 0.95 < lin < 1  # the first stage also holds the vocabulary-parallel embedding
    assert f8.weight_bytes / bf.weight_bytes == pytest.approx(2 / 6 * lin + (1 - lin))
    z0, _ = _comm("bf16", zero=0)
    n = mem.params
    assert z0.weight_bytes == pytest.approx(2 * 3 / 4 * n * 4)
    z3, _ = _comm("bf16", zero=3)
    assert z3.weight_bytes == pytest.approx(bf.weight_bytes + 3 / 4 * n * 2)


def test_activation_comm_fp8_gather_is_cheaper():
    bf, _ = _comm("bf16", sequence_parallel=True)
    f8, _ = _comm("fp8-lm", sequence_parallel=True)
    # 10 half-collectives per layer, of which the 4 input all-gathers (forward, re-gather) in FP8
    assert f8.tp_bytes == pytest.approx(0.8 * bf.tp_bytes)
    assert f8.tp_layer_pass_s < bf.tp_layer_pass_s
    assert f8.tp_layer_bwd_s == pytest.approx(bf.tp_layer_bwd_s)  # gradients stay 16-bit
    nosp, _ = _comm("fp8-lm")  # no sequence parallelism: 16-bit all-reduces only
    assert nosp.tp_bytes == pytest.approx(_comm("bf16")[0].tp_bytes)


def test_faster_links_never_slower():
    slow, _ = _comm()
    fast_sys = dataclasses.replace(H100, inter_board_link=dataclasses.replace(
        H100.inter_board_link, bandwidth_Bps=2 * H100.inter_board_link.bandwidth_Bps))
    fab = Fabric.of(fast_sys.with_network_efficiency(1.0))
    plan = Plan(tp=4, pp=8, dp=4, micro_batch=1, global_batch=32)
    fast = comm(M, plan, adamw_formats("bf16"), fab, memory(M, plan, adamw_formats("bf16")))
    assert fast.dp_s < slow.dp_s and fast.tp_layer_pass_s == slow.tp_layer_pass_s


def test_multi_board_system_is_refused():
    sys64 = build_system(REPO_ROOT / "arch_configs" / "hfp8-64chip.toml")
    with pytest.raises(ValueError, match="node file"):
        Fabric.of(sys64)


def test_des_engine_agrees_with_the_closed_form():
    # netsim's DES on a switch ring (cut-through switch, half the GPU-to-GPU latency on each
    # of the two links a step crosses, 4 MiB packets) against the closed form
    des = Fabric.of(H100.with_network_efficiency(1.0), engine="des")
    for kind, ranks, size, stride in (("all-reduce", 8, 1e8, 1), ("reduce-scatter", 16, 4e9, 8),
                                      ("all-gather", 16, 1e9, 2)):
        a = FAB.collective_s(kind, size, ranks, stride)
        d = des.collective_s(kind, size, ranks, stride)
        assert d == pytest.approx(a, rel=0.01), (kind, ranks, a, d)
    with pytest.raises(ValueError, match="unknown engine"):
        Fabric.of(H100, engine="simpy")
