"""The engine's decoder lowering (accelsim.engine.decoder): Llama/GQA/SwiGLU, MoE with expert
parallelism and MLA through the one training path, checked against hand counts from the
published model shapes."""

import json
import math

import pytest

from accelsim.arch import build_system
from accelsim.arch.schemes import get_scheme
from accelsim.engine import Plan
from accelsim.engine.decoder import Decoder, expert_tokens, layer_gemms
from accelsim.engine.memory import memory
from accelsim.engine.transformer import predict
from accelsim.workload.gpt import PRESETS as GPT
from accelsim.workload.transformer import PRESETS

DGX = build_system("dgx-h100")
BF16 = get_scheme("bf16").formats("adamw")


def _plan(**kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8)
    return Plan(**{**base, **kw})


def test_llama_gemms_are_the_published_shapes():
    """Llama-3-8B (h 4096, 32 heads, 8 KV heads of 128, SwiGLU ffn 14336) at tp 2: fused QKV
    (32 + 2 x 8) x 128 / 2 wide, gate and up fused 2 x 14336 / 2, down 14336 / 2 deep."""
    d = Decoder(PRESETS["llama3-8b"], 4096)
    g = {op.name: op for op in layer_gemms(d, False, 4096, 2, 1, "bf16")}
    assert (g["qkv"].n, g["qkv"].k) == ((32 + 16) * 128 // 2, 4096)
    assert (g["proj"].n, g["proj"].k) == (4096, 4096 // 2)
    assert (g["fc1"].n, g["fc2"].k) == (14336, 14336 // 2)


def test_gpt_lowering_is_megatrons_split():
    d = Decoder.from_gpt(GPT["gpt3-175b"])
    h = 12288
    g = {op.name: (op.m, op.n, op.k) for op in layer_gemms(d, False, 2048, 8, 1, "bf16")}
    assert g == {"qkv": (2048, 3 * h // 8, h), "proj": (2048, h, h // 8),
                 "fc1": (2048, 4 * h // 8, h), "fc2": (2048, h, 4 * h // 8)}


def test_moe_expert_gemms_take_their_share_of_the_tokens():
    """Mixtral (8 experts, top-2) at ep 4: each GPU holds 2 experts; each gets
    ceil(4 x T x 2 / 8) = T tokens."""
    d = Decoder(PRESETS["mixtral-8x7b"], 4096)
    T = 4096
    assert expert_tokens(d, 4 * T, 4) == (math.ceil(4 * T * 2 / 8), 2)
    # one decode token reads its top-2 experts' weights, not all 8
    assert expert_tokens(d, 1, 1) == (1, 2)
    g = {op.name: op for op in layer_gemms(d, True, T, 1, 4, "bf16")}
    assert g["experts.fc1"].count == 2 and g["experts.fc1"].n == 2 * 14336
    assert (g["router"].n, g["router"].k) == (8, 4096)


def test_mixtral_all_to_all_bytes_are_the_hand_count():
    """ep 8 on one DGX H100: per MoE layer and micro-batch, two all-to-alls forward and two
    backward of s x top_k x h bf16 elements per GPU, 7/8 of them leaving the GPU."""
    s, layers, n_micro = 4096, 32, 2
    plan = _plan(ep=8, global_batch=8 * n_micro)
    r = predict(Decoder(PRESETS["mixtral-8x7b"], s, flash_attention=True), plan, "bf16", DGX)
    per = s * 2 * 4096 * 2  # tokens x top-2 x hidden x 2 bytes
    assert r.comm.ep_bytes == pytest.approx(4 * per * 7 / 8 * layers * n_micro, rel=1e-12)
    assert r.as_dict()["all_to_all_GB"] == pytest.approx(r.comm.ep_bytes / 1e9)
    one = predict(Decoder(PRESETS["mixtral-8x7b"], s, flash_attention=True),
                  _plan(ep=1, global_batch=8 * n_micro), "bf16", DGX)
    assert one.comm.ep_bytes == 0
    # experts split over 8 GPUs: each holds 1/8 of the routed experts' weights
    assert r.memory.expert_params == pytest.approx(one.memory.expert_params / 8)


def test_moe_counts_reported_exactly():
    d = Decoder(PRESETS["mixtral-8x7b"], 4096, flash_attention=True)
    out = predict(d, _plan(ep=8), "bf16", DGX).as_dict()
    assert out["params"] == 46_702_792_704 and out["active_params"] == 12_879_925_248
    assert out["ep"] == 8 and out["model"] == "mixtral-8x7b"


def test_model_flops_follow_the_active_parameters():
    """A dense model's MFU numerator is 6 x params-in-linear per token (+ attention); an MoE
    counts only the top-k experts."""
    d = Decoder(PRESETS["mixtral-8x7b"], 4096, causal=True, flash_attention=True)
    c = PRESETS["mixtral-8x7b"]
    assert d.model_flops(1) == 3 * c.forward_flops(4096)


def test_stage_params_add_up_to_the_decoder():
    for name in ("llama3-8b", "mixtral-8x7b", "deepseek-v3"):
        d = Decoder(PRESETS[name], 4096)
        m = memory(d, Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1), BF16)
        assert m.params == d.n_params, name


def test_gqa_keeps_fewer_activations_than_mha():
    from dataclasses import replace

    from accelsim.engine.memory import activation_bytes_per_layer

    gqa = Decoder(PRESETS["llama3-8b"], 4096)
    mha = Decoder(replace(PRESETS["llama3-8b"], kv_heads=32), 4096)
    plan = _plan()
    assert activation_bytes_per_layer(gqa, plan, BF16) < activation_bytes_per_layer(mha, plan,
                                                                                      BF16)


def test_uneven_pipeline_stages_time_the_slowest():
    """DeepSeek-V3's 61 layers over 16 stages: the first 13 stages take 4, the rest 3."""
    d = Decoder(PRESETS["deepseek-v3"], 4096)
    stages = d.stage_layers(16)
    assert [sum(s) for s in stages] == [4] * 13 + [3] * 3
    assert stages[0] == (3, 1)  # the three dense layers come first


def test_llm_cli_times_llama_and_refuses_bad_ep(capsys):
    from accelsim.cli import main

    common = ["llm", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "8",
              "--scheme", "bf16", "--seq", "4096", "--flash-attention", "--json"]
    assert main([*common, "--model", "llama3-8b"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == out["active_params"] == 8_030_261_248
    assert out["all_to_all_GB"] == 0
    assert main([*common, "--model", "mixtral-8x7b", "--ep", "3"]) == 2
    err = capsys.readouterr().err
    assert "ep 3 must divide dp 8" in err and err.count("\n") == 1


@pytest.mark.parametrize("fixture,params", [("llama3-8b", 8_030_261_248),
                                            ("mixtral-8x7b", 46_702_792_704)])
def test_llm_and_infer_take_a_config_json(capsys, fixture, params):
    """--model path/to/config.json on both front-ends: the exact counts, the same prediction
    as the shipped preset (the presets and the fixtures describe the same model)."""
    from pathlib import Path

    from accelsim.cli import main

    cfg = str(Path(__file__).parent / "data" / "hf_configs" / f"{fixture}.json")
    common = ["llm", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--ep",
              "8" if "mixtral" in fixture else "1", "--scheme", "bf16", "--seq", "2048",
              "--flash-attention", "--json"]
    assert main([*common, "--model", cfg]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main([*common, "--model", fixture]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert by_file["params"] == params
    by_file.pop("model"), by_name.pop("model")
    assert by_file == by_name
    assert main(["infer", "--system", "h100-sxm", "--model", cfg, "--scheme", "fp8",
                 "--batch", "4", "--context", "512", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == params


@pytest.mark.parametrize("model,kw", [
    ("mixtral-8x7b", dict(tp=2, pp=4, dp=8, ep=8, interleave=2, sequence_parallel=True)),
    ("mixtral-8x7b", dict(tp=1, pp=2, dp=4, ep=4, overlap_moe_comm=True)),
    ("deepseek-v3", dict(tp=1, pp=16, dp=4, ep=4, overlap_moe_comm=True, zero=1)),
    ("llama3-8b", dict(tp=2, pp=3, dp=1)),  # 32 layers over 3 stages: 11, 11, 10
])
def test_breakdown_sums_to_the_iteration(model, kw):
    """Every MoE / uneven / interleaved plan: the breakdown's exposed time is the iteration."""
    d = Decoder(PRESETS[model], 4096, flash_attention=True)
    gb = kw["dp"] * 8
    plan = Plan(micro_batch=1, global_batch=gb, **kw)
    r = predict(d, plan, "bf16", DGX)
    assert sum(row.exposed_s for row in r.rows()) == pytest.approx(r.iteration_time_s,
                                                                   rel=1e-9)
    assert r.timeline().end_s == pytest.approx(r.iteration_time_s, rel=1e-9)


def test_interleaved_moe_stages_hold_moe_layers():
    """Interleaved chunks of an all-MoE model are all MoE (the time is the MoE layers')."""
    d = Decoder(PRESETS["mixtral-8x7b"], 4096)
    assert d.stage_layers(4, 2) == [(0, 8)] * 4
    ds = Decoder(PRESETS["deepseek-v3"], 4096)
    assert sum(map(sum, ds.stage_layers(16))) == 61


@pytest.mark.parametrize("sp", [False, True])
def test_tensor_parallel_split_inserts_its_comm_ops(sp):
    """The TP split puts Megatron's g / g-bar around both blocks of every layer as CommOps:
    all-reduces of the s x b x h activation (2 (t-1)/t of it sent each), or with sequence
    parallelism all-gather + reduce-scatter ((t-1)/t each); their bytes add up to the
    iteration's tp_comm_GB."""
    from accelsim.engine.graph import CommKind

    m = Decoder.from_gpt(__import__("accelsim.workload.gpt", fromlist=["PRESETS"])
                         .PRESETS["gpt3-175b"])
    plan = Plan(tp=8, pp=8, dp=1, micro_batch=1, global_batch=8, sequence_parallel=sp)
    r = predict(m, plan, "bf16", DGX)
    ops = [o for o, _ in r.comm.tp_ops]
    act = 2048 * 12288 * 2
    if sp:
        assert sorted({o.kind for o in ops}) == [CommKind.ALL_GATHER, CommKind.REDUCE_SCATTER]
    else:
        assert [o.kind for o in ops] == [CommKind.ALL_REDUCE] * 4
        assert all(o.bytes == pytest.approx(2 * 7 / 8 * act) for o in ops)
    per_layer = sum(o.bytes for o in ops)
    assert per_layer * (96 // 8) * plan.n_micro == pytest.approx(r.comm.tp_bytes, rel=1e-12)
