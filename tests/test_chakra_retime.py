"""``predict --workload chakra:DIR --retime``: GEMM nodes timed by perf's kernel formula on the
system instead of at their recorded durations -- accelsim's own (``accelsim.gemms``) and Chakra's
PyTorch-converted ``aten::mm`` family (input shapes); the oracle is perf's ``gemm_s`` and, on
the system the trace was written on, llm's own iteration time."""

from __future__ import annotations

import pytest

from accelsim.arch import build_system
from accelsim.chakra.codec import Attr, GlobalMetadata, IOInfo, Node, NodeType, write_trace
from accelsim.chakra.export import predict_chakra, write_chakra
from accelsim.cli import main
from accelsim.commands._common import system_path
from accelsim.engine import LlmParams, Options, Plan, simulate
from accelsim.engine.graph import GemmOp, Phase, gemm_s
from accelsim.errors import InputError
from accelsim.workload.gpt import PRESETS

COMP = int(NodeType.COMP_NODE)


@pytest.fixture(scope="module")
def h100():
    # retime runs perf's formula at the preset's clock: the written plan is timed there too
    return build_system(system_path("dgx-h100")).with_boost_clock()


@pytest.fixture(scope="module")
def exported(tmp_path_factory, h100):
    plan = Plan(tp=2, pp=2, dp=2, micro_batch=1, global_batch=8)
    pred = simulate(h100, PRESETS["gpt2-small"], plan, "bf16", Options(stack=LlmParams()))
    d = tmp_path_factory.mktemp("retime") / "et"
    write_chakra(d, pred)
    return pred, d


def test_retime_on_the_writing_system_is_llms_time(exported, h100):
    pred, d = exported
    run = predict_chakra(f"chakra:{d}", h100, retime="bf16")
    assert run.step_time_s == pytest.approx(pred.iteration_time_s, rel=1e-9)


def test_retimed_gemms_are_perfs_on_another_chip(exported):
    """On an A100 node each GEMM node takes perf's time for its shapes; the others keep the
    H100's recorded seconds."""
    pred, d = exported
    a100 = build_system(system_path("dgx-a100"))
    kept = predict_chakra(f"chakra:{d}", a100)
    run = predict_chakra(f"chakra:{d}", a100, retime="bf16")
    by_op = {(t.layer, t.op, t.phase): t.time_s for t in run.sched.tasks}
    recorded = {(o.op, o.phase): o.time_s for o in pred.layer_ops}
    # layer0's qkv: (T, 3h/t, h) = (1024, 1152, 768) at bf16; backward its two gradients
    qkv = GemmOp("qkv", 1024, 1152, 768, "bf16")
    assert by_op[("layer0", "qkv", Phase.FWD)] == pytest.approx(gemm_s(a100, qkv), rel=1e-12)
    assert by_op[("layer0", "qkv", Phase.BWD)] == pytest.approx(
        sum(gemm_s(a100, g) for g in qkv.backward), rel=1e-12)
    assert {(t.layer, t.op, t.phase): t.time_s for t in kept.sched.tasks}[
        ("layer0", "qkv", Phase.FWD)] == pytest.approx(recorded[("qkv", Phase.FWD)], rel=1e-12)
    assert by_op[("layer0", "attention", Phase.FWD)] == pytest.approx(
        recorded[("attention", Phase.FWD)], rel=1e-12)
    assert run.step_time_s > kept.step_time_s  # an A100's GEMMs are slower


def _one(tmp_path, node):
    d = tmp_path / "et"
    d.mkdir()
    write_trace(d / "t.0.et", GlobalMetadata("1.0.0"), [node])
    return d


@pytest.mark.parametrize("name,shapes,mnkb", [
    ("aten::mm", "[[64, 128], [128, 256]]", (64, 256, 128, 1)),
    ("aten::addmm", "[[256], [64, 128], [128, 256]]", (64, 256, 128, 1)),
    ("aten::bmm", "[[4, 64, 128], [4, 128, 256]]", (64, 256, 128, 4)),
    ("aten::linear", "[[2, 32, 128], [256, 128], [256]]", (64, 256, 128, 1)),
])
def test_pytorch_gemm_nodes_from_their_shapes(tmp_path, h100, name, shapes, mnkb):
    node = Node(1, name, COMP, duration_micros=999,
                inputs=IOInfo(shapes=shapes, types="[Tensor(c10::BFloat16),Tensor(c10::BFloat16)]"))
    run = predict_chakra(f"chakra:{_one(tmp_path, node)}", h100, retime="fp16")
    m, n, k, b = mnkb
    assert run.step_time_s == pytest.approx(gemm_s(h100, GemmOp(name, m, n, k, "bf16", b)),
                                            rel=1e-12)
    assert predict_chakra(f"chakra:{tmp_path / 'et'}", h100).step_time_s == \
        pytest.approx(999e-6)


@pytest.mark.parametrize("node,want", [
    (Node(1, "aten::mm", COMP, inputs=IOInfo(shapes="[[64, 128], [64, 256]]")),
     "node 1 ('aten::mm'): aten::mm shapes [64, 128] and [64, 256] do not multiply"),
    (Node(1, "aten::mm", COMP, inputs=IOInfo(shapes="[[64, -1], [-1, 2]]")),
     "must be a list of positive integers"),
    (Node(1, "aten::mm", COMP, inputs=IOInfo(shapes="[[64")), "is not JSON"),
    (Node(1, "g", COMP, attrs=(Attr("accelsim.gemms", "int64", (1, 2, 3), is_list=True),)),
     "accelsim.gemms must list [m, n, k, count]"),
])
def test_bad_gemm_nodes_are_one_line(tmp_path, h100, node, want):
    with pytest.raises(InputError) as e:
        predict_chakra(f"chakra:{_one(tmp_path, node)}", h100, retime="bf16")
    assert want in str(e.value) and "t.0.et" in str(e.value) and "\n" not in str(e.value)


def test_retime_needs_a_trace(capsys):
    assert main(["predict", "--system", "dgx-h100", "--workload", "tiny-cnn", "--batch", "1",
                 "--retime"]) == 2
    assert "--retime is for --workload chakra:DIR" in capsys.readouterr().err
