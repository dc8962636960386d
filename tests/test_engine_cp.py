"""Context parallelism (``Plan.cp``, ``--cp``): the sequence split over cp ranks, the ring /
all-gather / Ulysses KV exchange, memory per rank, and its refusals."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine import Plan, predict
from accelsim.engine.context import kv_block_bytes, ring_exposed_s
from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import CommKind, Phase
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.workload.transformer import PRESETS

H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
LLAMA8B = PRESETS["llama3-8b"]  # 32 heads, 8 KV heads, head dim 128


def _model(seq: int) -> Decoder:
    return Decoder(LLAMA8B, seq, flash_attention=True)


def _plan(**kw) -> Plan:
    base = dict(tp=4, pp=1, dp=1, micro_batch=1, global_batch=4, recompute="full")
    return Plan(**{**base, **kw})


def _rows(r, name: str, phase: Phase):
    return [o for o in r.layer_ops if o.op == name and o.phase == phase]


def test_cp1_is_the_plan_without_cp_whatever_the_algorithm():
    m = _model(8192)
    base = predict(m, _plan(dp=2, global_batch=8), "bf16", H100)
    for algo in ("ring", "allgather", "ulysses"):
        r = predict(m, _plan(dp=2, global_batch=8, cp_algo=algo), "bf16", H100)
        assert {**r.as_dict(), "cp_algo": "ring"} == base.as_dict()
        assert r.rows() == base.rows()
    assert base.comm.cp_bytes == 0 and base.comm.cp_ops == ()


def test_gemms_take_seq_over_cp_tokens_and_attention_one_cp_th_of_the_causal_flops():
    m, cp = _model(32768), 4
    one = predict(m, _plan(), "bf16", H100)
    four = predict(m, _plan(cp=cp), "bf16", H100)
    for name in ("qkv", "fc1", "fc2", "proj"):
        a, b = _rows(one, name, Phase.FWD), _rows(four, name, Phase.FWD)
        if not a:
            continue
        assert b[0].flops == pytest.approx(a[0].flops / cp, rel=1e-12)
        assert b[0].time_s == pytest.approx(a[0].time_s / cp, rel=0.05)
    # the full causal count of one layer and micro-batch on one tp rank: Q K^T and P V over
    # the s (s + 1) / 2 ~ s^2 / 2 pairs a flash kernel computes, 2 FLOPs per multiply-add
    s, heads, d = m.seq, m.heads // 4, m.head_dim
    causal = 2 * 2 * heads * d * s * s * 0.5
    (fa,) = _rows(one, "attention", Phase.FWD)
    (fb,) = _rows(four, "attention", Phase.FWD)
    assert fa.flops == pytest.approx(causal, rel=1e-12)
    assert fb.flops == pytest.approx(causal / cp, rel=1e-12)
    # the ring runs cp causal blocks of seq / cp: shorter kernels, no faster per FLOP
    assert fb.time_s >= fa.time_s / cp * (1 - 1e-12)
    ul = predict(m, _plan(tp=2, cp=cp, cp_algo="ulysses"), "bf16", H100)
    (fu,) = _rows(ul, "attention", Phase.FWD)
    assert fu.flops == pytest.approx(2 * causal / cp, rel=1e-12)  # tp 2: twice the heads


def test_ring_bytes_per_layer_are_cp_minus_1_kv_blocks():
    m, cp = _model(65536), 8
    r = predict(m, _plan(tp=1, cp=cp, dp=1, global_batch=2), "bf16", H100)
    # one rank's K and V: seq / cp tokens x 8 KV heads x (128 + 128) x 2 bytes
    block = m.seq // cp * 8 * (128 + 128) * 2
    assert kv_block_bytes(m, r.plan, "bf16") == block
    ops = {o.phase: o for o, _ in r.comm.cp_ops}
    assert ops[Phase.FWD].kind == CommKind.SEND_RECV and ops[Phase.FWD].group == cp
    assert ops[Phase.FWD].bytes == (cp - 1) * block  # K and V
    assert ops[Phase.BWD].bytes == (cp - 1) * 2 * block  # and their gradients
    # full recomputation exchanges the forward's again
    per_layer = 2 * (cp - 1) * block + 2 * (cp - 1) * block
    assert r.comm.cp_bytes == per_layer * m.layers * r.plan.n_micro
    rows = [x for x in r.rows() if x.op == "attn.cp_ring_kv"]
    assert len(rows) == 2 * m.layers and all(x.bytes > 0 for x in rows)


def test_ring_transfers_hide_behind_long_attention_and_show_under_short():
    for cp in (2, 4, 8):
        assert ring_exposed_s(cp, 1.0, 3.0, Phase.FWD) == 0.0
        # each block waits for its message: (cp - 1) (comm - compute) beyond the compute
        assert ring_exposed_s(cp, 3.0, 1.0, Phase.FWD) == pytest.approx((cp - 1) * 2.0)
    assert ring_exposed_s(1, 3.0, 1.0, Phase.FWD) == 0.0
    # end to end: 128K tokens on NVLink hide the ring; 4K tokens across nodes do not
    long = predict(_model(131072), _plan(tp=1, cp=8, global_batch=1), "bf16", H100)
    assert long.comm.cp_layer_pass_s == 0.0 and long.comm.cp_bytes > 0
    short = predict(_model(4096), _plan(tp=8, cp=4, global_batch=1), "bf16", H100)
    assert short.comm.cp_layer_pass_s > 0.0 and short.comm.cp_layer_bwd_s > 0.0


def test_allgather_and_ulysses_are_exposed_collectives_of_their_sizes():
    m, cp = _model(32768), 4
    ag = predict(m, _plan(tp=2, cp=cp, global_batch=2, cp_algo="allgather"), "bf16", H100)
    block = kv_block_bytes(m, ag.plan, "bf16")
    (f, fs), (b, bs) = ag.comm.cp_ops
    assert (f.kind, f.size_bytes, b.kind) == (CommKind.ALL_GATHER, cp * block,
                                               CommKind.REDUCE_SCATTER)
    assert f.bytes == (cp - 1) * block  # what one rank sends of the gathered K and V
    assert ag.comm.cp_layer_pass_s == fs > 0 and ag.comm.cp_layer_bwd_s == bs > 0
    ul = predict(m, _plan(tp=2, cp=cp, global_batch=2, cp_algo="ulysses"), "bf16", H100)
    kinds = [o.kind for o, _ in ul.comm.cp_ops]
    assert kinds == [CommKind.ALL_TO_ALL] * 8
    assert [o.phase for o, _ in ul.comm.cp_ops].count(Phase.FWD) == 4


def test_ulysses_refuses_heads_not_divisible_by_cp():
    m = _model(32768)  # 8 KV heads: 2 per rank at tp 4
    with pytest.raises(InputError, match="ulysses"):
        predict(m, _plan(tp=4, cp=4, cp_algo="ulysses"), "bf16", H100)
    predict(m, _plan(tp=2, cp=4, cp_algo="ulysses"), "bf16", H100)  # 4 KV heads per rank


@pytest.mark.parametrize("kw, match", [
    (dict(cp=3), "divisible by 2 x cp"), (dict(cp_algo="zigzag"), "cp_algo"),
    (dict(cp=2, fsdp=True, tp=1), "fsdp"), (dict(cp=0), "cp"),
    (dict(cp=1024, tp=8, sequence_parallel=True), "sequence parallelism")])
def test_bad_plans_are_refused(kw, match):
    with pytest.raises(InputError, match=match):
        predict(_model(4096), _plan(**kw), "bf16", H100)


def test_activations_drop_by_cp_and_states_shard_over_dp_x_cp():
    m = _model(32768)
    one = predict(m, _plan(recompute="selective", zero=1), "bf16", H100).memory
    for cp in (2, 4):
        r = predict(m, _plan(recompute="selective", zero=1, cp=cp), "bf16", H100).memory
        assert r.activations_bytes == pytest.approx(one.activations_bytes / cp, rel=0.02)
        assert r.optimizer_bytes == pytest.approx(one.optimizer_bytes / cp, rel=1e-12)
        assert r.weights_bytes == one.weights_bytes


def test_7b_at_32k_on_8_h100_cp2_against_dp2():
    m = _model(32768)
    dp = predict(m, _plan(tp=4, dp=2, global_batch=8), "bf16", H100)
    cp = predict(m, _plan(tp=4, cp=2, global_batch=4), "bf16", H100)
    assert cp.plan.gpus == dp.plan.gpus == 8
    # the same tokens per GPU per iteration: the same work, the cp exchange on NVLink mostly
    # hidden, so within a few per cent; half the activations per GPU
    assert cp.tokens_per_s == pytest.approx(dp.tokens_per_s, rel=0.1)
    assert 0.3 < cp.mfu < 0.7
    assert cp.memory.activations_bytes < 0.6 * dp.memory.activations_bytes
    assert sum(x.exposed_s for x in cp.rows()) == pytest.approx(cp.iteration_time_s, rel=1e-9)


def test_cli_cp_flags(capsys):
    args = ["llm", "--system", str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), "--model",
            "llama3-8b", "--seq", "8192", "--scheme", "bf16", "--global-batch", "4"]
    assert main([*args, "--gpus", "8", "--tp", "4", "--cp", "2", "--json"]) == 0
    assert '"cp": 2' in capsys.readouterr().out
    for extra, match in ((["--gpus", "12", "--tp", "4", "--cp", "8"], "--cp 8"),
                         (["--gpus", "8", "--cp", "2", "--search"], "--cp"),
                         (["--gpus", "8", "--cp", "2", "--fsdp"], "fsdp"),
                         (["--gpus", "16", "--tp", "4", "--cp", "4", "--cp-algo", "ulysses"],
                          "ulysses")):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err


def test_plan_replace_keeps_cp():
    p = dataclasses.replace(_plan(cp=2), tp=2)
    assert (p.cp, p.gpus) == (2, 4)


def test_predict_takes_cp_for_a_transformer_workload_and_chakra_refuses_it(capsys, tmp_path):
    import json

    base = ["predict", "--system", str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"),
            "--workload", str(REPO_ROOT / "workloads" / "gpt2-small.toml"), "--scheme", "bf16",
            "--batch", "1", "--tp", "2", "--json"]
    assert main([*base, "--cp", "2"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["cp"], d["dp"], d["cp_algo"]) == (2, 2, "ring") and d["cp_comm_GB"] > 0
    assert main(["llm", "--system", str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"),
                 "--model", "llama3-8b", "--seq", "8192", "--scheme", "bf16", "--gpus", "8",
                 "--tp", "4", "--cp", "2", "--global-batch", "2",
                 "--chakra", str(tmp_path / "et")]) == 2
    assert "context-parallel" in capsys.readouterr().err
