"""Tensor-parallel communication overlap (``Plan.tp_comm_overlap``, ``--tp-overlap``) and the
pipeline's sends on their own stream (``Plan.pp_comm_overlap``, ``--pp-comm-overlap``): the
chunked schedules against slow step-by-step references, their bounds, and the refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine import Plan, predict
from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import CommKind, CommOp, Phase, Stream
from accelsim.engine.pipeline import overlapped_pipeline_s
from accelsim.engine.schedule import pipeline_s
from accelsim.engine.tp_overlap import Method, Overlap, exposed_s, pass_schedule
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.workload.gpt import GptConfig
from accelsim.workload.transformer import PRESETS

H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml").with_clock("boost")
GPT = GptConfig(layers=8, hidden=4096, heads=32, seq=2048, vocab=51200, flash_attention=True)


def _pair(method: Method, gemm_s: float, comm_s: float, phase=Phase.FWD) -> Overlap:
    kind = CommKind.REDUCE_SCATTER if method is not Method.RING else CommKind.ALL_GATHER
    op = CommOp("attn.tp_x", kind, 1e6, 8, 1, Stream.TP, phase)
    return Overlap("qkv", gemm_s, op, comm_s, method)


def _exposed(method: Method, g: float, c: float, tp: int, contention: float = 0.0) -> float:
    pairs = [_pair(method, g, c)]
    return exposed_s(pass_schedule(pairs, tp, Phase.FWD, contention), pairs, tp)[0]


def _ring_reference(g: float, c: float, tp: int) -> float:
    """Step by step: chunk 0 on the local shard; step k arrives at k c / (tp - 1); chunk k
    starts once it has and chunk k - 1 is done."""
    end = g / tp
    for k in range(1, tp):
        end = max(end, k * c / (tp - 1)) + g / tp
    return end - g


def _pipeline_reference(g: float, c: float, tp: int) -> float:
    """Step by step: chunk k's GEMM ends at (k + 1) g / tp; its reduce-scatter follows it and
    the one before."""
    comm_end = 0.0
    for k in range(tp):
        comm_end = max(comm_end, (k + 1) * g / tp) + c / tp
    return comm_end - g


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_chunked_schedules_match_step_by_step_references(tp):
    rng = np.random.default_rng(7)
    for g, c in rng.uniform(0.0, 2e-3, size=(20, 2)):
        assert _exposed(Method.RING, g, c, tp) == pytest.approx(_ring_reference(g, c, tp),
                                                                rel=1e-9, abs=1e-15)
        assert _exposed(Method.PIPELINE, g, c, tp) == pytest.approx(
            _pipeline_reference(g, c, tp), rel=1e-9, abs=1e-15)
        assert _exposed(Method.BULK, g, c, tp) == pytest.approx(max(0.0, c - g), abs=1e-15)


def test_long_gemms_hide_the_collectives_and_short_ones_expose_them():
    c, tp = 1e-4, 8
    # long: the ring and the bulk hide it all; the pipeline leaves its last chunk
    assert _exposed(Method.RING, 100 * c, c, tp) == 0.0
    assert _exposed(Method.BULK, 100 * c, c, tp) == 0.0
    assert _exposed(Method.PIPELINE, 100 * c, c, tp) == pytest.approx(c / tp, rel=1e-12)
    # no GEMM time to hide behind: every second of it exposed
    for m in Method:
        assert _exposed(m, 0.0, c, tp) == pytest.approx(c, rel=1e-12)


def test_contention_costs_its_factor_of_the_hidden_time():
    # a fully hidden ring exchange: every step beside a GEMM chunk, each chunk slowed by
    # contention x the step: the pass ends contention x c late
    c, tp = 1e-4, 4
    for f in (0.15, 0.5, 1.0):
        assert _exposed(Method.RING, 100 * c, c, tp, f) == pytest.approx(f * c, rel=1e-9)


def test_exposed_is_never_negative_nor_above_the_collective():
    rng = np.random.default_rng(11)
    for _ in range(200):
        g, c = rng.uniform(0.0, 1e-3, size=2)
        tp = int(rng.choice([2, 4, 8]))
        for m in Method:
            for f in (0.0, 0.15, 1.0):
                e = _exposed(m, g, c, tp, f)
                assert 0.0 <= e <= c * (1 + 1e-12), (m, g, c, tp, f, e)


def _plan(**kw) -> Plan:
    base = dict(tp=8, pp=1, dp=1, micro_batch=1, global_batch=4, sequence_parallel=True)
    return Plan(**{**base, **kw})


def test_off_is_the_plan_as_before():
    r = predict(GPT, _plan(), "bf16", H100)
    cm = r.comm
    assert cm.tp_exposed == () and not r.as_dict()["tp_comm_overlap"]
    fwd = sum(s for o, s in cm.tp_ops if o.phase == Phase.FWD)
    assert cm.tp_layer_pass_s == fwd  # every collective exposed, as timed
    for row in r.rows():
        if row.op.startswith(("attn.tp", "mlp.tp")):
            assert row.exposed_s == row.time_s


def test_on_hides_tp_comm_keeps_its_bytes_and_rows_sum_to_the_layer():
    off = predict(GPT, _plan(), "bf16", H100)
    on = predict(GPT, _plan(tp_comm_overlap=True), "bf16", H100)
    assert on.iteration_time_s < off.iteration_time_s
    assert 0.0 < on.tp_comm_exposed_s < off.tp_comm_exposed_s
    assert on.comm.tp_bytes == off.comm.tp_bytes  # the same traffic, hidden
    assert on.comm.tp_layer_pass_s + on.comm.tp_layer_bwd_s == pytest.approx(
        sum(on.comm.tp_exposed), rel=1e-12)
    tp_rows = lambda r: [x for x in r.rows() if x.op.startswith(("attn.tp", "mlp.tp"))]  # noqa
    assert [(x.op, x.phase, x.bytes, x.time_s) for x in tp_rows(on)] == \
        [(x.op, x.phase, x.bytes, x.time_s) for x in tp_rows(off)]
    for a, b in zip(tp_rows(on), tp_rows(off)):  # each collective: at most as exposed
        assert 0.0 <= a.exposed_s <= b.exposed_s * (1 + 1e-12)
    assert sum(x.exposed_s for x in tp_rows(on)) < sum(x.exposed_s for x in tp_rows(off))
    # the breakdown still accounts for the whole iteration
    assert sum(x.exposed_s for x in on.rows()) == pytest.approx(on.iteration_time_s, rel=1e-9)


def test_refusals():
    with pytest.raises(InputError, match="sequence_parallel"):
        _plan(sequence_parallel=False, tp_comm_overlap=True)
    with pytest.raises(InputError, match="tp > 1"):
        _plan(tp=1, tp_comm_overlap=True)
    with pytest.raises(InputError, match="interleave > 1"):
        _plan(pp=2, global_batch=8, pp_comm_overlap=True)
    moe = Decoder(PRESETS["mixtral-8x7b"], 2048, flash_attention=True)
    with pytest.raises(InputError, match="dense layers"):
        predict(moe, _plan(tp_comm_overlap=True), "bf16", H100)


@pytest.mark.parametrize("extra, says", [
    (["--tp-overlap"], "sequence_parallel"),
    (["--tp-overlap", "--sequence-parallel", "--search", "--gpus", "8"], "--tp-overlap"),
    (["--pp-comm-overlap", "--tp", "8", "--pp", "2"], "interleave"),
])
def test_cli_refuses_in_one_line(extra, says, capsys):
    base = ["llm", "--system", str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), "--layers",
            "8", "--hidden", "4096", "--heads", "32", "--seq", "2048", "--vocab", "51200",
            "--scheme", "bf16", "--global-batch", "8"]
    if "--search" not in extra:
        base += ["--dp", "1"]
    assert main(base + (["--tp", "8"] if "--tp" not in extra else []) + extra) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_cli_chakra_export_refuses_the_overlap(tmp_path, capsys):
    assert main(["llm", "--system", "dgx-h100", "--layers", "8", "--hidden", "4096", "--heads",
                 "32", "--seq", "2048", "--vocab", "51200", "--scheme", "bf16", "--tp", "8",
                 "--dp", "1", "--global-batch", "8", "--sequence-parallel", "--tp-overlap",
                 "--chakra", str(tmp_path / "et")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--chakra with --tp-overlap" in err and len(err.splitlines()) == 1


def test_pp_overlap_lies_between_free_and_serialized_sends():
    f, b, m, p, v, send = 1e-2, 2e-2, 16, 4, 2, 1e-3
    plan = Plan(tp=1, pp=p, dp=1, micro_batch=1, global_batch=m, interleave=v,
                pp_comm_overlap=True)
    free = pipeline_s(f + b, m, p, v)
    assert overlapped_pipeline_s(f, b, plan, 0.0) == pytest.approx(free, rel=1e-12)
    serial = pipeline_s(f + b + 2 * v * send, m, p, v)[0]
    over = overlapped_pipeline_s(f, b, plan, send)[0]
    assert free[0] < over < serial


def test_pp_overlap_off_is_unchanged_and_on_is_faster():
    plan = dict(tp=8, pp=4, dp=1, micro_batch=1, global_batch=16, interleave=2)
    gpt = dataclasses.replace(GPT, layers=16)
    off = predict(gpt, Plan(**plan), "bf16", H100)
    on = predict(gpt, Plan(**plan, pp_comm_overlap=True), "bf16", H100)
    assert on.iteration_time_s < off.iteration_time_s
    assert on.comm.pp_bytes == off.comm.pp_bytes
    assert sum(x.exposed_s for x in on.rows()) == pytest.approx(on.iteration_time_s, rel=1e-9)
