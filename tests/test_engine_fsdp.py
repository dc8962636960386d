"""FSDP and HSDP as a schedule (accelsim.engine.fsdp): overlap hides or exposes the per-unit
gathers as the stream rules say, gradient accumulation re-gathers, the memory account, HSDP
over the whole group is FSDP, and the plan's checks."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from accelsim.arch import build_system
from accelsim.engine.fsdp import FsdpComm, fsdp_graph, fsdp_schedule, unit_params
from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import Stream
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.scheduler import schedule
from accelsim.engine.stack import MEGATRON, PYTORCH
from accelsim.engine.transformer import predict
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.workload.gpt import GptConfig

GPT = GptConfig(layers=4, hidden=512, heads=8, seq=512, vocab=1024, flash_attention=True)
A100 = build_system(REPO_ROOT / "arch_configs" / "dgx-a100.toml")


def _comm(gather: float, reduce: float, allreduce: float = 0.0) -> FsdpComm:
    return FsdpComm(gather, reduce, allreduce, 1.0, 1.0, 0.0,
                    gather, reduce, allreduce, 1.0, 1.0, 0.0)


def _plan(**kw) -> Plan:
    base = dict(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, fsdp=True)
    base.update(kw)
    return Plan(**base)


def test_long_compute_hides_every_gather_but_the_first_two():
    # compute-bound: only the root's and layer 0's first gathers (before any compute) and the
    # last two reduce-scatters (layer 0's, then the root's, after the last backward) show; the
    # last layer's backward gather runs under the head
    L, m, f, b, g, rs, opt = 3, 2, 10.0, 20.0, 1.0, 1.0, 0.5
    s = fsdp_schedule(L, m, f, b, 2.0, 3.0, _comm(g, rs), opt, contention=0.0)
    compute = m * (L * (f + b) + 2.0 + 3.0)
    assert s.makespan_s == pytest.approx(compute + 2 * g + 2 * rs + opt)
    # without a head to hide it, that gather waits for the last layer's forward (its buffer
    # freed: two gathered units at most), every micro-batch
    bare = fsdp_schedule(L, m, f, b, 0.0, 0.0, _comm(g, rs), opt, contention=0.0)
    assert bare.makespan_s == pytest.approx(m * L * (f + b) + 2 * g + 2 * rs + opt + m * g)


def test_long_comm_is_exposed():
    # comm-bound: the gather stream runs every gather back to back (root + L forward + L
    # backward per micro-batch), so the step is at least that long
    L, m, f, b, g = 3, 2, 0.1, 0.2, 5.0
    s = fsdp_schedule(L, m, f, b, 0.0, 0.0, _comm(g, 0.0), 0.0, contention=0.0)
    assert s.makespan_s >= m * (2 * L + 1) * g
    assert s.makespan_s > m * L * (f + b) + 2 * g  # more than the compute-bound answer


def test_contention_slows_only_overlapped_compute():
    L, m, f, b, g = 3, 1, 10.0, 20.0, 1.0
    base = fsdp_schedule(L, m, f, b, 2.0, 3.0, _comm(g, g), 0.0, contention=0.0)
    slow = fsdp_schedule(L, m, f, b, 2.0, 3.0, _comm(g, g), 0.0, contention=0.5)
    # seconds of compute with a collective beside it (by hand, from the stream rules): the
    # gathers of layers 1 and 2 under layers 0 and 1's forward, layer 2's backward gather
    # under the head, layer 1's under layer 2's backward, layer 0's gather and layer 2's
    # reduce-scatter together under layer 1's backward, layer 1's reduce-scatter under layer
    # 0's; the first two gathers and the last two reductions have no compute beside them
    beside = 6 * g
    assert slow.makespan_s - base.makespan_s == pytest.approx(0.5 * beside)
    none = fsdp_schedule(L, m, f, b, 0.0, 0.0, _comm(0.0, 0.0), 0.0, contention=0.5)
    assert none.makespan_s == pytest.approx(L * (f + b))


@pytest.mark.parametrize("reshard", [True, False])
def test_gradient_accumulation_regathers_every_micro_batch(reshard):
    L = 3
    for m in (1, 4):
        tasks = fsdp_graph(L, m, 1.0, 2.0, 0.0, 0.0, _comm(0.5, 0.5), 0.0, reshard)
        gathers = sum(t.op == "fsdp_all_gather" for t in tasks)
        reduces = sum(t.op == "fsdp_reduce_scatter" for t in tasks)
        assert gathers == m * ((2 * L if reshard else L) + 1)
        assert reduces == m * (L + 1)
    one = predict(GPT, _plan(global_batch=16), "bf16", A100, LlmParams(stack=PYTORCH))
    four = predict(GPT, _plan(global_batch=64), "bf16", A100, LlmParams(stack=PYTORCH))
    assert four.comm.dp_bytes == pytest.approx(4 * one.comm.dp_bytes)


def test_unit_params_and_memory_account():
    h, V, L = GPT.hidden, GPT.vocab, GPT.layers
    layer, root = unit_params(Decoder.of(GPT), _plan())
    assert layer == 12 * h * h + 13 * h  # QKV, projection, FC1, FC2 with biases, two LNs
    assert root == V * h + GPT.seq * h + 2 * h  # tied embedding, position table, final LN
    n = GPT.n_params
    assert L * layer + root == n
    plan = _plan()
    fs = predict(GPT, plan, "bf16", A100, LlmParams(stack=MEGATRON, memory_reserve_GiB=0.0))
    z3 = predict(GPT, Plan(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, zero=3), "bf16",
                 A100, LlmParams(stack=MEGATRON, memory_reserve_GiB=0.0))
    # the shards are ZeRO-3's; two gathered bf16 units and the root on top, and their
    # unsharded gradients
    assert fs.memory.weights_bytes - z3.memory.weights_bytes == pytest.approx(
        (2 * layer + root) * 2)
    assert fs.memory.grads_bytes - z3.memory.grads_bytes == pytest.approx(
        (2 * layer + root) * 2)
    assert fs.memory.optimizer_bytes == pytest.approx(z3.memory.optimizer_bytes)
    keep = predict(GPT, _plan(reshard_after_forward=False), "bf16", A100,
                   LlmParams(stack=MEGATRON, memory_reserve_GiB=0.0))
    assert keep.memory.weights_bytes - fs.memory.weights_bytes == pytest.approx(
        (L - 2) * layer * 2)


def test_fsdp_cli_runs_on_the_pytorch_stack_and_its_reserve():
    from accelsim.commands import llm

    parser = argparse.ArgumentParser()
    llm.add_arguments(parser)
    base = ["--system", "dgx-a100", "--scheme", "bf16", "--global-batch", "16"]
    assert llm._params(parser.parse_args(base)).stack is MEGATRON
    fs = llm._params(parser.parse_args(base + ["--fsdp"]))
    assert fs.stack is PYTORCH and fs.memory_reserve_GiB == PYTORCH.memory_reserve_GiB
    assert llm._params(parser.parse_args(base + ["--hsdp", "8"])).stack is PYTORCH
    # FSDP runs in PyTorch whatever kernels time it: never Megatron-LM's fitted reserve
    forced = llm._params(parser.parse_args(base + ["--fsdp", "--stack", "megatron"]))
    assert forced.stack is MEGATRON
    assert forced.memory_reserve_GiB == PYTORCH.memory_reserve_GiB
    assert llm._params(parser.parse_args(base + ["--fsdp", "--memory-reserve", "2"])
                       ).memory_reserve_GiB == 2.0
    # a dense Llama-style decoder runs on the pytorch stack's eager kernels; a model they do
    # not list (MLA), or Transformer Engine's 8-bit GEMMs: megatron's kernels, PyTorch's reserve
    from accelsim.workload.transformer import PRESETS

    llama = Decoder(PRESETS["llama3-8b"], 2048)
    assert llm._params(parser.parse_args(base + ["--fsdp"]), llama).stack is PYTORCH
    mla = Decoder(PRESETS["deepseek-v3"], 2048)
    for args, model in ((base + ["--fsdp"], mla),
                        (["--system", "dgx-h100", "--scheme", "te-fp8", "--global-batch", "16",
                          "--fsdp"], GPT)):
        p = llm._params(parser.parse_args(args), model)
        assert p.stack is MEGATRON and p.memory_reserve_GiB == PYTORCH.memory_reserve_GiB


def test_hsdp_over_the_whole_group_is_fsdp():
    params = LlmParams(stack=PYTORCH)
    a = predict(GPT, _plan(dp=8), "bf16", A100, params)
    b = predict(GPT, _plan(dp=8, hsdp=8), "bf16", A100, params)
    assert b.iteration_time_s == a.iteration_time_s
    assert b.memory.total_bytes == a.memory.total_bytes
    # two replicas of four: smaller gathers inside each group, an all-reduce across them
    c = predict(GPT, _plan(dp=8, hsdp=4), "bf16", A100, params)
    assert any(t.op == "hsdp_all_reduce" for t in c.step.tasks)
    assert c.memory.optimizer_bytes == pytest.approx(2 * a.memory.optimizer_bytes)


def test_reduce_dtype_sets_the_reduce_scatter_bytes():
    params = LlmParams(stack=PYTORCH)
    f32 = predict(GPT, _plan(fsdp_reduce_dtype="fp32"), "bf16", A100, params)
    b16 = predict(GPT, _plan(fsdp_reduce_dtype="bf16"), "bf16", A100, params)

    def rs(p):
        return sum(t.bytes for t in p.step.tasks if t.op == "fsdp_reduce_scatter")

    assert rs(f32) == pytest.approx(2 * rs(b16))
    assert sum(t.bytes for t in f32.step.tasks if t.stream == Stream.FSDP) == pytest.approx(
        sum(t.bytes for t in b16.step.tasks if t.stream == Stream.FSDP))


def test_breakdown_sums_to_the_iteration():
    p = predict(GPT, _plan(global_batch=32), "bf16", A100, LlmParams(stack=PYTORCH))
    assert sum(r.exposed_s for r in p.rows()) == pytest.approx(p.iteration_time_s, rel=1e-9)
    assert p.timeline().t == pytest.approx(p.iteration_time_s)


@pytest.mark.parametrize("kw, word", [
    (dict(zero=3), "zero 3"), (dict(pp=2, dp=4), "pp 2"), (dict(hsdp=3), "hsdp"),
    (dict(fsdp_reduce_dtype="fp16"), "fsdp_reduce_dtype"), (dict(fsdp=False, hsdp=4), "hsdp"),
    (dict(fsdp="yes"), "fsdp")])
def test_plan_refuses_what_fsdp_does_not_run(kw, word):
    with pytest.raises(InputError, match=word):
        _plan(**kw)


def test_schedule_is_the_scheduler_s():
    tasks = fsdp_graph(2, 1, 1.0, 2.0, 0.5, 0.5, _comm(0.3, 0.3), 0.1)
    s = schedule(tasks)
    assert s.makespan_s == fsdp_schedule(2, 1, 1.0, 2.0, 0.5, 0.5, _comm(0.3, 0.3), 0.1,
                                         contention=0.0).makespan_s
    assert replace(tasks[0]).stream == Stream.FSDP


def test_parameters_gather_in_bf16_unless_the_run_is_32_bit():
    params = LlmParams(stack=PYTORCH)

    def gathered(p):
        return sum(t.bytes for t in p.step.tasks if t.stream == Stream.FSDP)

    b16 = predict(GPT, _plan(), "bf16", A100, params)
    f32 = predict(GPT, _plan(), "fp32", A100, params)
    layer, root = unit_params(Decoder.of(GPT), _plan())
    # root + 2 L unit gathers per micro-batch, each rank sending 7/8 of the buffer
    n_micro = _plan().n_micro
    assert gathered(b16) == pytest.approx(n_micro * 7 / 8 * (root + 2 * GPT.layers * layer) * 2)
    assert gathered(f32) == pytest.approx(2 * gathered(b16))


def test_mpt_fit_data_keep_their_quotes_and_the_report_is_current():
    import sys

    import pandas as pd

    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import mpt_validate

    df = mpt_validate.load()
    assert len(df) == 19 and set(df.label) == {"fit"}
    for r in df.itertuples(index=False):
        cells = [c.strip() for c in r.quote.split(":", 1)[1].split("|")[1:-1]]
        assert int(cells[1]) == r.seq and int(cells[2]) == r.gpus
        assert (int(cells[7]), int(cells[8]), int(cells[9])) == (
            r.micro_batch, r.grad_accum, r.global_batch)
        assert float(cells[12]) == r.published_tokens_per_s_per_gpu
        assert cells[15] == r.mixed_precision and cells[16] == r.sharding == "FULL_SHARD"
        assert r.global_batch == r.micro_batch * r.grad_accum * r.gpus
    recorded = pd.read_csv(REPO_ROOT / "reports" / "mpt_validation.csv").set_index("id")
    row = next(df[df.id == "mpt-125m-s2048-8xa100-bf16"].itertuples(index=False))
    assert mpt_validate.tokens_per_s_per_gpu(row) == pytest.approx(
        recorded.loc[row.id, "accelsim"], abs=0.06)


def test_a_moe_model_gathers_its_experts_per_unit_and_its_exposed_comm_is_never_negative():
    """Mixtral (every layer MoE): a unit is one MoE layer with all its experts (ep 1) and the
    schedule runs the MoE layers' times, so the exposed communication is >= 0 (it ran the dense
    layers' -- none -- before, and came out negative)."""
    from accelsim.workload.transformer import PRESETS

    mix = Decoder(PRESETS["mixtral-8x7b"], 1024)
    plan = Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, fsdp=True)
    layer, root = unit_params(mix, plan)
    assert mix.layers * layer + root == pytest.approx(mix.n_params)
    p = predict(mix, plan, "bf16", build_system("dgx-h100").with_boost_clock(),
                LlmParams(stack=PYTORCH))
    assert p.dp_comm_s >= 0
    assert p.iteration_time_s >= p.pipeline_s + p.optimizer_s
