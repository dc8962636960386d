"""Hand-made bad Chakra traces are refused in one line naming the file and the node: a cycle, a
dangling dependency, an unknown node type, a rank mismatch, unmatched or deadlocked transfers,
a collective netsim does not time."""

from __future__ import annotations

import json

import pytest

from accelsim.arch import build_system
from accelsim.chakra.codec import Attr, GlobalMetadata, Node, NodeType, write_trace
from accelsim.chakra.export import predict_chakra
from accelsim.cli import main
from accelsim.commands._common import system_path
from accelsim.errors import InputError

COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
SEND, RECV = int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)


def _write(d, rank, nodes, meta_rank=None):
    d.mkdir(exist_ok=True)
    attrs = () if meta_rank is None else (Attr("rank", "int64", meta_rank),)
    write_trace(d / f"t.{rank}.et", GlobalMetadata("1.0.0", attrs), nodes)


def _p2p(i, kind, src, dst, deps=(), tag=0):
    return Node(i, f"{'send' if kind == SEND else 'recv'} {i}", kind, data_deps=deps,
                attrs=(Attr("comm_src", "int32", src), Attr("comm_dst", "int32", dst),
                       Attr("comm_size", "int64", 1 << 20), Attr("comm_tag", "int32", tag)))


def _comp(i, deps=(), us=10, kind=COMP):
    return Node(i, f"op{i}", kind, data_deps=deps, duration_micros=us)


CASES = {
    "cycle": ([[_comp(1, (3,)), _comp(2, (1,)), _comp(3, (2,))]], "t.0.et: node 1 ('op1'): "
              "its dependencies form a cycle"),
    "self": ([[_comp(1, (1,))]], "node 1 ('op1'): depends on itself"),
    "dangling": ([[_comp(1), _comp(2, (99,))]], "t.0.et: node 2 ('op2'): depends on node 99, "
                 "which is not in the trace"),
    "unknown type": ([[_comp(1), _comp(2, kind=42)]], "t.0.et: node 2 ('op2'): node type 42 "
                     "(unknown) is not an op"),
    "metadata node": ([[_comp(1, kind=1)]], "node type 1 (METADATA_NODE)"),
    "duplicate id": ([[_comp(1), _comp(1)]], "duplicate node id 1"),
    "send from another rank": ([[_p2p(1, SEND, 1, 0)], [_p2p(1, RECV, 1, 0)]],
                               "t.0.et: node 1 ('send 1'): rank mismatch: a send from rank 1 in "
                               "the trace of rank 0"),
    "no receive": ([[_p2p(1, SEND, 0, 1)], [_comp(1)]], "t.0.et: node 1 ('send 1'): no receive "
                   "at rank 1 matches this send"),
    "no send": ([[_comp(1)], [_p2p(1, RECV, 0, 1)]], "t.1.et: node 1 ('recv 1'): no send from "
                "rank 0 matches this receive"),
    "peer outside": ([[_p2p(1, SEND, 0, 5)]], "comm_dst 5 is not a rank 0..0"),
    "deadlock": ([[_p2p(1, RECV, 1, 0), _p2p(2, SEND, 0, 1, (1,))],
                  [_p2p(1, RECV, 0, 1), _p2p(2, SEND, 1, 0, (1,))]],
                 "ranks wait on each other"),
    "broadcast": ([[Node(1, "bc", COLL, attrs=(Attr("comm_type", "int64", 5),
                                               Attr("comm_size", "int64", 8)))]],
                  "node 1 ('bc'): comm_type 5 is not a collective netsim times"),
    "infinite duration": ([[Node(1, "op", COMP, attrs=(Attr("accelsim.duration_s", "double",
                                                            float("inf")),))]],
                          "node 1 ('op'): attribute 'accelsim.duration_s' must be a finite"),
    "bad phase": ([[Node(1, "op", COMP, attrs=(Attr("accelsim.phase", "int64", 3),))]],
                  "node 1 ('op'): accelsim.phase '3' is not one of"),
    "no comm_size": ([[Node(1, "ar", COLL, attrs=(Attr("comm_type", "int64", 0),))]],
                     "node 1 ('ar'): no 'comm_size' attribute"),
}


@pytest.fixture(scope="module")
def system():
    return build_system(system_path("dgx-h100"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_trace_is_one_line_naming_file_and_node(tmp_path, system, case):
    ranks, want = CASES[case]
    d = tmp_path / "et"
    for r, nodes in enumerate(ranks):
        _write(d, r, nodes)
    with pytest.raises(InputError) as e:
        predict_chakra(f"chakra:{d}", system)
    msg = str(e.value)
    assert want in msg and "\n" not in msg


def test_manifest_rank_mismatch(tmp_path, system):
    d = tmp_path / "et"
    _write(d, 0, [_comp(1)], meta_rank=0)
    _write(d, 1, [_comp(1)], meta_rank=0)  # written for rank 0, mapped to rank 1
    (d / "manifest.json").write_text(json.dumps({"world_size": 2, "ranks": {
        "0": {"file": "t.0.et", "offset": 0}, "1": {"file": "t.1.et", "offset": 0}}}))
    with pytest.raises(InputError, match=r"t\.1\.et: rank mismatch: written for rank 0, mapped "
                                         r"to rank 1"):
        predict_chakra(f"chakra:{d}", system)


def test_missing_rank_file(tmp_path, system):
    d = tmp_path / "et"
    _write(d, 0, [_comp(1)])
    _write(d, 2, [_comp(1)])
    with pytest.raises(InputError, match="rank 1 has no trace file"):
        predict_chakra(f"chakra:{d}", system)


def test_good_hand_made_pair_times_the_transfer(tmp_path, system):
    """Two ranks: rank 1's op waits for rank 0's 10 us op and the 1 MiB send after it (timed
    by the fabric inside the node); ops read from a file order that is not topological."""
    d = tmp_path / "et"
    _write(d, 0, [_p2p(2, SEND, 0, 1, (1,)), _comp(1)])
    _write(d, 1, [_comp(2, (1,), us=5), _p2p(1, RECV, 0, 1)])
    from accelsim.engine.comm import fabric_of
    from accelsim.engine.plan import LlmParams

    p2p = fabric_of(system, LlmParams()).p2p_s(1 << 20, False)
    run = predict_chakra(f"chakra:{d}", system)
    assert run.step_time_s == pytest.approx(10e-6 + p2p + 5e-6, rel=1e-12)


def test_cli_refuses_in_one_line(tmp_path, capsys):
    d = tmp_path / "et"
    _write(d, 0, [_comp(1), _comp(2, (7,))])
    assert main(["predict", "--system", "dgx-h100", "--workload", f"chakra:{d}",
                 "--batch", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "t.0.et: node 2 ('op2'): depends on node 7" in err and "\n" not in err
    assert main(["predict", "--system", "dgx-h100", "--workload",
                 f"chakra:{tmp_path / 'none'}", "--batch", "1"]) == 2
    assert "not a directory of Chakra traces" in capsys.readouterr().err


def test_cpu_ops_run_beside_the_gpu_stream(tmp_path, system):
    """A converted PyTorch trace: a CPU op (is_cpu_op) on the host's queue runs beside GPU
    kernels on their CUDA stream; two kernels on one stream run one after the other."""
    d = tmp_path / "et"
    cpu = Node(1, "aten::launch", COMP, duration_micros=30,
               attrs=(Attr("is_cpu_op", "bool", True),))
    k1, k2 = (Node(i, f"k{i}", COMP, duration_micros=20,
                   attrs=(Attr("is_cpu_op", "bool", False), Attr("stream", "int64", 7)))
              for i in (2, 3))
    _write(d, 0, [cpu, k1, k2])
    assert predict_chakra(f"chakra:{d}", system).step_time_s == pytest.approx(40e-6, rel=1e-12)


@pytest.mark.parametrize("manifest,want", [
    ("{", "not a readable JSON manifest"),
    ('{"ranks": {"0": {"file": "t.0.et"}}, "extra": 1}', "unknown key 'extra'"),
    ('{"ranks": {"0": {"file": "../t.0.et", "offset": 0}}}', "must name a file in the directory"),
    ('{"ranks": {"0": {"file": "t.0.et", "offset": 0}}, "world_size": 2}',
     "must be 0..world_size-1"),
    ('{"ranks": {"0": {"file": "t.0.et", "offset": 0}}, "process_groups": {"tp": [[0, 5]]}}',
     "process_groups must map a name to lists of ranks 0..0"),
    ('{"ranks": {"0": {"file": "t.0.et", "offset": 0}, "1": {"file": "t.0.et", "offset": 0}}}',
     "exactly one rank must map to it with offset 0"),
])
def test_bad_manifest_is_one_line(tmp_path, system, manifest, want):
    d = tmp_path / "et"
    _write(d, 0, [_comp(1)])
    (d / "manifest.json").write_text(manifest)
    with pytest.raises(InputError) as e:
        predict_chakra(f"chakra:{d}", system)
    msg = str(e.value)
    assert want in msg and str(d) in msg and "\n" not in msg


@pytest.mark.parametrize("flag", [["--tp", "2"], ["--fusion", "on"], ["--power-model"],
                                  ["--chakra", "out"], ["--stack", "megatron"]])
def test_flags_a_trace_does_not_use_are_refused(tmp_path, capsys, flag):
    d = tmp_path / "et"
    _write(d, 0, [_comp(1)])
    assert main(["predict", "--system", "dgx-h100", "--workload", f"chakra:{d}", "--batch", "1",
                 *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{flag[0]}: not used by --workload chakra:DIR" in err and "\n" not in err


def test_export_under_a_file_is_refused_before_computing(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["predict", "--system", "dgx-h100", "--workload", "tiny-cnn", "--batch", "1",
                 "--chakra", str(f / "et")]) == 2
    assert f"{f} is not a directory" in capsys.readouterr().err
