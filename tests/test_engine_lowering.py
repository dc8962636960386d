"""Layer workloads lowered to the op graph (accelsim.engine.lower): one typed op per layer whose
FLOPs are the layer's own (the workload's GEMM lowering and perf's per-layer formula, two
derivations that must agree), the data-parallel transformation's CommOps and UpdateOp against
hand arithmetic and netsim's own numbers, and the breakdown built from that program adding up
to the iteration time."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from accelsim.arch import build_system
from accelsim.arch.schemes import get_scheme
from accelsim.engine.graph import (
    AttentionLayerOp,
    CommKind,
    CommOp,
    ConvOp,
    EmbeddingOp,
    LinearOp,
    LossOp,
    MatmulOp,
    NormOp,
    Phase,
    PointwiseOp,
    PoolOp,
    Stream,
    UpdateOp,
)
from accelsim.engine.comm import op_s
from accelsim.netsim.fabric import Fabric
from accelsim.engine.lower import (
    data_parallel_program,
    gradient_comm_ops,
    lower_workload,
    time_layer_op,
    update_op,
    zero_comm_ops,
)
from accelsim.engine.run import predict_workload
from accelsim.engine.trace import breakdown_frame
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.perf.layer_model import data_parallel, evaluate_layer
from accelsim.workload import load_workload
from accelsim.workload.gpt import GptConfig
from accelsim.workload.scalesim import read_scalesim_topology

RESNET = load_workload(REPO_ROOT / "workloads" / "resnet50.toml")
TOPOLOGY = REPO_ROOT / "tests" / "data" / "scalesim" / "resnet50_scalesim_topology.csv"


def _system(name: str):
    return build_system(REPO_ROOT / "arch_configs" / f"{name}.toml")


def _check_one_op_per_layer(workload, batch, scheme):
    ops = lower_workload(workload, batch, scheme)
    assert len(ops) == len(workload.layers)
    for op, layer in zip(ops, workload.layers, strict=True):
        assert op.layer is layer and op.name == layer.name and op.kind == layer.kind
        assert op.batch == batch
        gemms = layer.gemms(batch)
        # forward FLOPs: the op's own formula against the workload's GEMM lowering
        assert op.flops == (gemms["fwd"].flops if gemms else 0)
        assert op.training_flops == sum(g.flops for g in gemms.values())
        assert op.phases == tuple(gemms or layer.elementwise(batch))
    return ops


def test_resnet50_lowers_to_one_typed_op_per_layer():
    ops = _check_one_op_per_layer(RESNET, 32, "fp16")
    kinds = Counter(type(op).__name__ for op in ops)
    layer_kinds = Counter(layer.kind for layer in RESNET.layers)
    assert kinds["ConvOp"] == layer_kinds["conv"] == 53
    assert kinds["NormOp"] == layer_kinds["batchnorm"] == 53
    assert kinds["LinearOp"] == layer_kinds["linear"] == 1
    assert kinds["PoolOp"] == layer_kinds["maxpool"] + layer_kinds["avgpool"] == 2
    assert kinds["PointwiseOp"] == layer_kinds["relu"] + layer_kinds["add"] == 65
    # the softmax that ends the classifier is its loss
    assert isinstance(ops[-1], LossOp) and kinds["LossOp"] == 1
    assert sum(kinds.values()) == len(RESNET.layers) == 175


def test_resnet50_op_flops_are_perfs_flops():
    """perf's per-layer formula counts the same FLOPs per phase as the op does."""
    system = _system("a100-sxm")
    batch = 16
    for op in lower_workload(RESNET, batch, "fp16"):
        cols = time_layer_op(system, op, [data_parallel(system)])
        by_phase = dict(zip(cols["phase"], cols["flops"], strict=True))
        assert tuple(by_phase) == op.phases
        assert by_phase["fwd"] == op.flops
        assert sum(by_phase.values()) == op.training_flops
        # the one timing formula, called directly, gives the same columns
        ref = evaluate_layer(system, op.layer, batch, op.precision, [data_parallel(system)])
        assert list(ref["time_s"]) == list(cols["time_s"])


def test_scalesim_topology_lowers_to_convs_with_the_layers_flops():
    topo = read_scalesim_topology(TOPOLOGY)
    ops = _check_one_op_per_layer(topo, 1, "fp16")
    assert all(isinstance(op, ConvOp) for op in ops)
    # SCALE-Sim's operand view at batch 1: M = ofmap pixels, N = filters, K = window
    for op in ops:
        g = op.layer.gemms(1)["fwd"]
        assert op.flops == 2 * (op.p * op.q) * op.k * (op.c * op.r * op.s) == g.flops


def test_conv_flops_by_hand():
    """ResNet-50's stem: 64 filters of 7x7 over 3 channels, stride 2, pad 3: 224 -> 112."""
    stem = next(op for op in lower_workload(RESNET, 8, "fp16") if isinstance(op, ConvOp))
    assert (stem.n, stem.k, stem.c, stem.r, stem.s, stem.p, stem.q) == (8, 64, 3, 7, 7, 112, 112)
    assert stem.flops == 2 * 8 * 64 * 3 * 7 * 7 * 112 * 112
    # its compulsory forward bytes: input, weights and output once, 2 bytes each
    assert stem.bytes == 2 * (8 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 8 * 64 * 112 * 112)


def test_generated_gpt_lowers_to_embedding_norm_matmul_and_loss():
    """The layer list `accelsim workload gpt` writes (attention as one SDPA op)."""
    gpt = GptConfig(layers=2, hidden=64, heads=4, seq=32, vocab=100).workload()
    ops = _check_one_op_per_layer(gpt, 2, "bf16")
    by_name = {op.name: op for op in ops}
    assert isinstance(by_name["wte"], EmbeddingOp) and isinstance(by_name["wpe"], EmbeddingOp)
    assert isinstance(by_name["ln_f"], NormOp) and isinstance(by_name["h.0.ln_1"], NormOp)
    assert isinstance(by_name["h.0.attn.qkv"], LinearOp)
    assert isinstance(by_name["h.0.attn.sdpa"], AttentionLayerOp)
    assert isinstance(by_name["lm_head"], MatmulOp)  # the tied head: the embedding table
    assert isinstance(by_name["h.0.mlp.gelu"], PointwiseOp)
    assert isinstance(ops[-1], LossOp) and ops[-1].name == "loss.softmax"
    assert sum(isinstance(op, LossOp) for op in ops) == 1
    # QKV by hand: 2 x (batch x seq) x hidden x 3 hidden
    assert by_name["h.0.attn.qkv"].flops == 2 * (2 * 32) * 64 * (3 * 64)
    # scores and P V by hand: batch x heads products of (seq x head_dim) @ (head_dim x seq)
    # and (seq x seq) @ (seq x head_dim)
    assert by_name["h.0.attn.sdpa"].flops == 2 * (2 * 2 * 4 * 32 * 32 * 16)
    # an embedding lookup gathers batch x tokens rows of dim: read and written, 2 bytes each
    assert by_name["wte"].bytes == 2 * (2 * 32 * 64) * 2
    assert not any(isinstance(op, PoolOp) for op in ops)


def test_ring_all_reduce_bytes_by_hand():
    for p in (2, 3, 8, 64):
        op = CommOp("grads", "all-reduce", 1_000_000, p)
        assert op.kind is CommKind.ALL_REDUCE
        assert Fraction(op.bytes).limit_denominator(10**6) == Fraction(2 * (p - 1), p) * 10**6
        rs = CommOp("rs", CommKind.REDUCE_SCATTER, 1_000_000, p)
        ag = CommOp("ag", CommKind.ALL_GATHER, 1_000_000, p)
        assert rs.bytes + ag.bytes == pytest.approx(op.bytes, rel=1e-15)
    assert CommOp("x", "send-recv", 123.0, 2, stream=Stream.PP).bytes == 123.0
    assert CommOp("one", "all-reduce", 1e6, 1).bytes == 0.0
    with pytest.raises(InputError, match="group"):
        CommOp("bad", "all-reduce", 1e6, 0)
    with pytest.raises(InputError, match="broadcast"):
        CommOp("bad", "broadcast", 1e6, 2)
    with pytest.raises(InputError, match="batch"):
        ConvOp(RESNET.layers[0], 0, "fp16")
    with pytest.raises(InputError, match="precision"):
        ConvOp(RESNET.layers[0], 1, "fp7")


@pytest.mark.parametrize("scheme", ["fp16", "hfp8"])
def test_data_parallel_program_matches_netsim(scheme):
    """The transformation's gradient CommOps carry the buffers netsim times (its payloads), a
    data-parallel ring all-reduce sends 2 (p-1)/p of the gradient buffer, and the UpdateOp
    streams the bytes netsim's update cost charges."""
    from accelsim.netsim import gradient_reduction_times

    system = _system("hfp8-64chip")
    p, n = system.chips, RESNET.n_params
    ops = lower_workload(RESNET, 6 * p, scheme)
    prog = data_parallel_program(ops, RESNET, scheme, "sgd-momentum", p)
    assert prog[:len(ops)] == ops
    step = prog[len(ops):]
    sc = get_scheme(scheme)
    assert [op.name for op in step] == [str(ph) for ph in sc.phase_order]
    rs = next(op for op in step if isinstance(op, CommOp) and op.kind == "reduce-scatter")
    ag = next(op for op in step if isinstance(op, CommOp) and op.kind == "all-gather")
    upd = next(op for op in step if isinstance(op, UpdateOp))
    ref = gradient_reduction_times(system, n, scheme)
    assert rs.size_bytes == ref.rs_payload_bytes and ag.size_bytes == ref.ag_payload_bytes
    assert (rs.group, ag.group) == (p, p)
    if scheme == "fp16":  # reduce-scatter + all-gather of the fp16 gradients: an all-reduce
        assert rs.size_bytes == ag.size_bytes == 2 * n
        assert rs.bytes + ag.bytes == pytest.approx(2 * (p - 1) / p * 2 * n, rel=1e-15)
    assert upd.elems == ref.wu_elems_per_chip and upd.bytes == ref.wu_bytes_per_chip
    assert upd.sharded == sc.sharded_update
    # one chip: nothing to reduce, the update stays
    one = data_parallel_program(ops, RESNET, scheme, "sgd-momentum", 1)[len(ops):]
    assert len(one) == 1 and isinstance(one[0], UpdateOp) and one[0].elems == n


def test_update_and_comm_ops_follow_the_optimizer():
    adam = update_op(1000, "bf16", "adamw", 1)
    sgd = update_op(1000, "bf16", "sgd-momentum", 1)
    assert adam.bytes > sgd.bytes  # two moments instead of one momentum
    # compression shrinks the compressible reduce-scatter only, as netsim's payloads do
    from accelsim.netsim import gradient_reduction_times

    system = _system("hfp8-64chip")
    n = RESNET.n_params
    rs, ag = gradient_comm_ops(n, "fp16", "sgd-momentum", system.chips, compression=10.0)
    ref = gradient_reduction_times(system, n, "fp16", compression=10.0)
    assert rs.size_bytes == ref.rs_payload_bytes == 2 * n / 10
    assert ag.size_bytes == ref.ag_payload_bytes == 2 * n


@pytest.mark.parametrize("system,scheme,batch", [("a100-sxm", "fp16", 32),
                                                 ("hfp8-64chip", "hfp8", 6),
                                                 ("dgx1-v100", "fp16", 32)])
def test_breakdown_is_the_program_and_adds_up(system, scheme, batch):
    s = _system(system)
    r = predict_workload(s, RESNET, batch, scheme, fusion=True)
    df = breakdown_frame(r.rows())
    # the rows are the one schedule's: they sum to the step (by construction) and the trace
    # ends where the step does
    assert df["exposed_s"].sum() == pytest.approx(r.step.step_s, rel=1e-12)
    assert r.timeline().end_s == pytest.approx(r.step.step_s, rel=1e-12)
    # in execution order: every layer's forward in order, then the backward phases in reverse
    # layer order, then the step ops of the program
    n_layer_rows = sum(len(op.phases) for op in r.phases.ops)
    fwd = [op.name for op in r.phases.ops]
    assert list(df["layer"][:len(fwd)]) == fwd and set(df["phase"][:len(fwd)]) == {"fwd"}
    bwd = [op.name for op in r.phases.ops for ph in op.phases if ph != "fwd"][::-1]
    assert list(df["layer"][len(fwd):n_layer_rows]) == bwd
    assert sorted(df["op"][:n_layer_rows]) == sorted(op.kind for op in r.phases.ops
                                                     for _ in op.phases)
    step = r.program[len(r.phases.ops):]
    assert list(df["op"][n_layer_rows:]) == [op.name for op in step]
    assert list(df["bytes"][n_layer_rows:]) == [op.bytes for op in step]
    # the compute rows' FLOPs are the ops' training FLOPs (whole system, every phase)
    want = sum(op.training_flops for op in r.phases.ops)
    assert df["flops"].sum() == pytest.approx(want, rel=1e-12)
    assert r.phases.flops == pytest.approx(want, rel=1e-12)
    if s.chips > 1:
        assert {"reduce_scatter", "all_gather"} <= set(df["op"])


def test_zero_transformation_inserts_the_reduce_and_the_gathers():
    ar, = zero_comm_ops(4e9, 2e9, 0, 8, 2)
    assert (ar.kind, ar.size_bytes, ar.group, ar.stride) == (CommKind.ALL_REDUCE, 4e9, 8, 2)
    assert ar.bytes == pytest.approx(2 * 7 / 8 * 4e9, rel=1e-15)
    for zero in (1, 2):
        rs, ag = zero_comm_ops(4e9, 2e9, zero, 8)
        assert (rs.kind, ag.kind) == (CommKind.REDUCE_SCATTER, CommKind.ALL_GATHER)
        assert rs.bytes + ag.bytes == pytest.approx(7 / 8 * (4e9 + 2e9), rel=1e-15)
    rs, fwd, bwd = zero_comm_ops(4e9, 2e9, 3, 8)
    assert (fwd.phase, bwd.phase) == (Phase.FWD, Phase.BWD)
    assert fwd.size_bytes == bwd.size_bytes == 2e9
    with pytest.raises(ValueError, match="zero"):
        zero_comm_ops(1.0, 1.0, 4, 2)


def test_comm_op_time_by_hand():
    """Ring collectives: p - 1 steps of latency + size / (p x bandwidth) per reduce-scatter or
    all-gather, all-reduce both; a send-recv crosses the NIC when its ranks span nodes."""
    fab = Fabric(gpus_per_node=8, intra_Bps=100e9, intra_latency_s=1e-6, inter_Bps=25e9,
                 inter_latency_s=5e-6)
    size = 1e9
    ar = CommOp("g", CommKind.ALL_REDUCE, size, 8)
    assert op_s(fab, ar) == pytest.approx(2 * 7 * (1e-6 + size / (8 * 100e9)), rel=1e-12)
    ag = CommOp("g", CommKind.ALL_GATHER, size, 4, stride=8)  # one rank per node: the NICs
    assert op_s(fab, ag) == pytest.approx(3 * (5e-6 + size / (4 * 25e9)), rel=1e-12)
    near = CommOp("p2p", CommKind.SEND_RECV, 1e6, 2, stride=1, stream=Stream.PP)
    far = CommOp("p2p", CommKind.SEND_RECV, 1e6, 2, stride=8, stream=Stream.PP)
    assert op_s(fab, near) == pytest.approx(1e-6 + 1e6 / 100e9, rel=1e-12)
    assert op_s(fab, far) == pytest.approx(5e-6 + 1e6 / 25e9, rel=1e-12)
    assert op_s(fab, CommOp("one", CommKind.ALL_REDUCE, size, 1)) == 0.0


def test_transformer_data_parallel_traffic_is_the_zero_comm_ops():
    """The transformer path's data-parallel bytes and times (engine/comm.py) are the sums of
    the transformation's CommOps: ZeRO 3 gathers the weights twice, ZeRO 1 once."""
    from accelsim.engine import LlmParams, Plan, predict

    node = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
    gpt = GptConfig(layers=4, hidden=1024, heads=16, seq=512, vocab=50304)
    res = {z: predict(gpt, Plan(tp=2, pp=1, dp=4, micro_batch=1, global_batch=8, zero=z),
                      "bf16", node, LlmParams()).comm for z in (0, 1, 3)}
    assert res[0].dp_gather_s == 0.0
    assert res[3].dp_reduce_s == pytest.approx(res[1].dp_reduce_s, rel=1e-15)
    assert res[3].dp_gather_s == pytest.approx(2 * res[1].dp_gather_s, rel=1e-15)
    # ring bytes: an all-reduce sends what a reduce-scatter sends twice, so ZeRO 1 adds to half
    # of ZeRO 0's bytes one weight all-gather, and ZeRO 3 one more of the same
    gather = res[1].dp_bytes - res[0].dp_bytes / 2
    assert gather > 0
    assert res[3].dp_bytes - res[1].dp_bytes == pytest.approx(gather, rel=1e-12)


def test_onnx_imported_convnet_lowers_with_hand_counted_flops(tmp_path):
    """A small CNN written with onnx.helper (nothing downloaded): conv 3x3 pad 1 (3 -> 8) on
    16x16, ReLU, 2x2 max-pool, conv 3x3 (8 -> 16), ReLU, flatten, Gemm 576 -> 10."""
    from test_predict_onnx import convnet  # the same net, built once (tests/ is on sys.path)

    from accelsim.workload.onnx_import import load_onnx

    path = convnet(tmp_path)
    wl = load_onnx(path, 4)
    ops = _check_one_op_per_layer(wl, 4, "fp16")
    convs = [op for op in ops if isinstance(op, ConvOp)]
    assert [type(op) for op in ops if not isinstance(op, ConvOp)].count(LinearOp) == 1
    assert any(isinstance(op, PoolOp) for op in ops)
    assert [c.flops for c in convs] == [2 * 4 * 8 * 3 * 3 * 3 * 16 * 16,
                                        2 * 4 * 16 * 8 * 3 * 3 * 6 * 6]
    fc = next(op for op in ops if isinstance(op, LinearOp))
    assert fc.flops == 2 * 4 * 576 * 10
