"""Uneven pipeline stages (issue 34, item 6): Megatron-core's split rules re-derived here from
their statement (megatron/core/transformer/transformer_block.py ``get_num_layers_to_build``,
NVIDIA/Megatron-LM d98e8a64), each stage timed on its own work, memory per stage, and the
refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelsim.arch import build_system
from accelsim.arch.schemes import get_scheme
from accelsim.cli import main
from accelsim.engine import Plan, predict
from accelsim.engine.decoder import Decoder
from accelsim.engine.memory import activation_bytes_per_layer, in_flight_layers, memory
from accelsim.engine.stages import StageSplit
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.workload.gpt import GptConfig

# the preset's fixed clock: every plan timed at one clock (the power limiter picks its own per
# plan, which would move the per-layer times between the plans compared)
H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml").with_boost_clock()
BF16 = get_scheme("bf16").formats("adamw")


def _gpt(layers: int) -> GptConfig:
    return GptConfig(layers=layers, hidden=1024, heads=16, seq=1024, vocab=8192)


def _plan(pp: int, global_batch: int = 64, **kw) -> Plan:
    return Plan(tp=1, pp=pp, dp=1, micro_batch=1, global_batch=global_batch, **kw)


def _counts(model, plan) -> list[int]:
    return [sum(s) for s in Decoder.of(model).stage_layers(plan.pp, plan.interleave,
                                                           plan.stage_split)]


def megatron_account_rule(layers, pp, embedding, loss):
    """get_num_layers_to_build without uneven first/last counts, plain 1F1B: the embedding
    and the loss each count as a layer, ``(L + e + l) / pp`` per stage, the first (last)
    stage building one fewer."""
    per = (layers + embedding + loss) // pp
    return [per - (embedding if s == 0 else 0) - (loss if s == pp - 1 else 0)
            for s in range(pp)]


def test_126_layers_over_16_stages_with_embedding_and_loss_counted():
    """Llama 3 405B's split: 128 slots, 8 per stage; the first and last stages hold 7 layers
    beside the embedding / the output layer; the same as Megatron's first/last counts 7."""
    plan = _plan(16, account_for_embedding=True, account_for_loss=True)
    want = megatron_account_rule(126, 16, 1, 1)
    assert want == [7] + [8] * 14 + [7]
    assert _counts(_gpt(126), plan) == want
    assert _counts(_gpt(126), _plan(16, first_stage_layers=7, last_stage_layers=7)) == want
    r = predict(_gpt(126), plan, "bf16", H100)
    assert r.as_dict()["stage_layers"] == want
    # the slowest stage: a middle one (8 layers outweigh 7 layers + this small head)
    assert 1 <= r.critical_stage <= 14 and not r.head_on_critical


def test_interleaved_chunks_follow_the_rule_chunk_major():
    """v 2: (30 + 2) / (4 x 2) = 4 slots per chunk; chunk 0 of stage 0 builds one fewer, so
    does the last chunk of the last stage; layers numbered chunk 0 of every stage first."""
    chunks = Decoder.of(_gpt(30)).chunk_layers(4, 2, StageSplit(embedding=True, loss=True))
    sizes = [[len(r) for r in s] for s in chunks]
    assert sizes == [[3, 4], [4, 4], [4, 4], [4, 3]]
    assert [i for c in range(2) for s in range(4) for i in chunks[s][c]] == list(range(30))
    # first/last counts with v 2: each chunk of the first stage first / v layers
    sizes = [[len(r) for r in s]
             for s in Decoder.of(_gpt(28)).chunk_layers(4, 2, StageSplit(first=4, last=4))]
    assert sizes == [[2, 2], [5, 5], [5, 5], [2, 2]]


def test_an_uneven_plan_of_equal_stages_is_the_even_plan():
    even = predict(_gpt(24), _plan(4), "bf16", H100)
    same = predict(_gpt(24), _plan(4, first_stage_layers=6, last_stage_layers=6), "bf16", H100)
    assert _counts(_gpt(24), same.plan) == [6, 6, 6, 6]
    for k in ("iteration_time_s", "pipeline_s", "bubble_s", "forward_s", "backward_s"):
        assert getattr(same, k) == getattr(even, k), k
    assert same.memory.total_bytes == pytest.approx(even.memory.total_bytes, rel=1e-12)


def test_a_heavier_first_stage_is_slower_by_its_extra_layers():
    """24 layers over 4 stages: even, every stage 6 layers and the last the head (the slowest);
    a first stage of 9 leaves 5 to each other stage, and 9 layers outweigh 5 + the head. With
    one layer's forward + backward ``l``, the head's ``H`` and a send ``c`` each way, the
    1F1B pipeline of m micro-batches takes ``(m + p - 1)`` slots of the slowest stage:
    ``(m + 3)(6 l + H + 2c)`` against ``(m + 3)(9 l + 2c)``."""
    even = predict(_gpt(24), _plan(4), "bf16", H100)
    heavy = predict(_gpt(24), _plan(4, first_stage_layers=9), "bf16", H100)
    assert _counts(_gpt(24), heavy.plan) == [9, 5, 5, 5]
    layer = sum(o.time_s for o in even.layer_ops)  # tp 1, no recompute: the layer's ops
    head = sum(o.time_s for o in even.head_ops)
    send = even.comm.pp_p2p_s
    m = even.plan.n_micro
    assert 9 * layer > 5 * layer + head
    assert even.pipeline_s == pytest.approx((m + 3) * (6 * layer + head + 2 * send), rel=1e-12)
    assert heavy.pipeline_s == pytest.approx((m + 3) * (9 * layer + 2 * send), rel=1e-12)
    assert heavy.critical_stage == 0 and not heavy.head_on_critical
    assert heavy.iteration_time_s > even.iteration_time_s


def test_memory_per_stage_first_stage_holds_pp_micro_batches():
    """1F1B's stage s holds min(p - s, m) micro-batches: with 126 layers over 16 the second
    stage (8 layers x 15) outweighs the first (7 x 16); the even split's account (the largest
    stage's layers at the first stage's count: 8 x 16) is what an uneven plan no longer
    over-counts."""
    model = GptConfig(layers=126, hidden=1024, heads=16, seq=1024, vocab=1024)
    plan = _plan(16, account_for_embedding=True, account_for_loss=True)
    counts = megatron_account_rule(126, 16, 1, 1)
    for s in range(16):
        assert in_flight_layers(model, plan, s) == counts[s] * min(16 - s, plan.n_micro)
    assert in_flight_layers(model, plan) == 8 * 16  # the conservative even-split rule
    mem = memory(model, plan, BF16)
    assert mem.stage == 1
    assert mem.activations_bytes == pytest.approx(
        activation_bytes_per_layer(model, plan, BF16) * 8 * 15, rel=1e-12)
    few = dataclasses.replace(plan, global_batch=4)  # 4 micro-batches: every stage holds <= 4
    assert in_flight_layers(model, few, 0) == 7 * 4 and in_flight_layers(model, few, 15) == 7


def test_interleaved_in_flight_per_stage():
    """Interleaved 1F1B: stage s runs 2 (p - s - 1) + (v - 1) p warm-up chunk passes and one
    more forward before its first backward; the first stage of an even split holds the
    closed form's L (1 + (p - 1) / (p v)) layers."""
    model = _gpt(32)
    plan = _plan(4, global_batch=16, interleave=2, account_for_embedding=True,
                 account_for_loss=True)  # 34 slots: not divisible by 8: refused
    with pytest.raises(InputError, match="not divisible by pp x interleave"):
        plan.check_model(model)
    model = _gpt(30)
    for s, layers in enumerate([7, 8, 8, 7]):
        passes = min(2 * (4 - s - 1) + (2 - 1) * 4 + 1, plan.n_micro * 2)
        assert in_flight_layers(model, plan, s) == pytest.approx(layers / 2 * passes)
    even = _plan(4, global_batch=16, interleave=2)
    assert in_flight_layers(_gpt(32), even, 0) == pytest.approx(
        in_flight_layers(_gpt(32), even)) == pytest.approx(8 * 4 * (1 + 3 / 8))


def test_interleaved_with_as_many_micro_batches_as_stages_runs_every_forward_first():
    """Megatron's interleaved schedule with m = p (``num_microbatches ==
    pipeline_parallel_size``) puts every chunk pass in the warm-up: each stage holds all m
    micro-batches of all its v chunks, its whole L / p layers x m (not the 1F1B count)."""
    model = _gpt(32)
    plan = _plan(4, global_batch=4, interleave=2)  # m = 4 = p
    for s in range(4):
        assert in_flight_layers(model, plan, s) == pytest.approx(8 * 4)
    assert in_flight_layers(model, plan) == pytest.approx(8 * 4)
    uneven = _plan(4, global_batch=4, interleave=2, account_for_embedding=True,
                   account_for_loss=True)
    model = _gpt(30)
    for s, layers in enumerate([7, 8, 8, 7]):
        assert in_flight_layers(model, uneven, s) == pytest.approx(layers * 4)


@pytest.mark.parametrize("model_layers, kw, fragment", [
    (96, dict(pp=8, first_stage_layers=18), "do not split evenly over the 7 other stages"),
    (12, dict(pp=3, first_stage_layers=6, last_stage_layers=6), "a stage with no work"),
    (12, dict(pp=2, first_stage_layers=13), "more than the model.s 12 layers"),
    (24, dict(pp=4, first_stage_layers=3, interleave=2, global_batch=64),
     "not divisible by interleave 2"),
    (24, dict(pp=4, first_stage_layers=0, interleave=2, global_batch=64),
     "would hold no work"),
    (24, dict(pp=4, account_for_embedding=True), "not divisible by pp x interleave = 4 x 1"),
])
def test_bad_splits_are_refused(model_layers, kw, fragment):
    plan = _plan(**kw)
    with pytest.raises(InputError, match=fragment):
        predict(_gpt(model_layers), plan, "bf16", H100)


@pytest.mark.parametrize("kw, fragment", [
    (dict(pp=4, first_stage_layers=5, account_for_loss=True), "one kind of uneven split"),
    (dict(pp=1, account_for_embedding=True), "needs pipeline parallelism"),
    (dict(pp=2, last_stage_layers=-1), "last_stage_layers"),
    (dict(pp=2, account_for_loss="yes"), "account_for_loss"),
])
def test_bad_split_fields_are_refused(kw, fragment):
    with pytest.raises(InputError, match=fragment):
        _plan(**kw)


def test_last_stage_holds_a_tied_heads_copy():
    """Megatron-core's GPTModel allocates the output layer's weight on the last stage unless
    that stage also holds the embedding it shares: a tied model's last stage (pp > 1) keeps
    a vocab x h copy beside its layers and final LayerNorm (2h)."""
    model = _gpt(24)
    plan = _plan(4, global_batch=1, last_stage_layers=9)  # one micro-batch: the last is worst
    mem = memory(model, plan, BF16)
    assert mem.stage == 3
    assert mem.params == 9 * model.params_per_layer + 8192 * 1024 + 2 * 1024
    one = memory(model, Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1), BF16)
    assert one.params == model.n_params  # one stage: the shared matrix once


def test_embedding_only_first_stage():
    """A first stage of 0 layers holds the embedding alone (Megatron's layout ``E|...``): no
    layer time, its embedding's parameters in the memory account."""
    r = predict(_gpt(24), _plan(4, first_stage_layers=0), "bf16", H100)
    assert r.as_dict()["stage_layers"] == [0, 8, 8, 8]
    assert r.critical_stage == 3 and r.head_on_critical


def test_cli_uneven_split_and_one_line_refusal(capsys):
    base = ["llm", "--system", "dgx-h100", "--layers", "30", "--hidden", "1024", "--heads",
            "16", "--seq", "1024", "--vocab", "8192", "--scheme", "bf16", "--tp", "1",
            "--pp", "4", "--dp", "1", "--global-batch", "8", "--clock", "boost"]
    assert main(base + ["--account-for-embedding", "--account-for-loss", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stage_layers"] == [7, 8, 8, 7]
    assert main(base + ["--first-stage-layers", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--first-stage-layers 8" in err[0]
