"""Iteration time, FLOPs, pipeline bubble, schemes, the llm command's JSON contract and the plan
search."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.llm import LlmParams, Plan, predict
from accelsim.llm.search import search
from accelsim.paths import REPO_ROOT
from accelsim.workload.gpt import GptConfig, narayanan_flops

H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
A100 = build_system(REPO_ROOT / "arch_configs" / "dgx-a100.toml")
M = GptConfig(layers=48, hidden=8192, heads=64, seq=2048, vocab=51200)
PLAN = dict(tp=8, pp=2, dp=4, micro_batch=2, global_batch=256)
KEYS = ("iteration_time_s", "samples_per_s", "tflops_per_gpu", "mfu", "memory_GiB_per_gpu",
        "weight_comm_GB", "activation_comm_GB")


def test_full_recompute_flops_are_narayanan_eq3():
    r = predict(M, Plan(**PLAN, recompute="full"), "bf16", A100)
    assert r.hardware_flops == pytest.approx(narayanan_flops(256, 48, 8192, 2048, 51200),
                                             rel=1e-12)
    assert r.tflops_per_gpu * 1e12 < A100.peak_flops("bf16") / A100.chips
    assert r.mfu == pytest.approx(r.tflops_per_gpu * 0.75 * 1e12 / 312e12, rel=0.01)


def test_bubble_is_p_minus_1_slots_and_interleave_divides_it():
    r = predict(M, Plan(**PLAN), "bf16", H100)
    slot = r.forward_s + r.backward_s
    assert r.bubble_s == pytest.approx((2 - 1) * slot)
    assert r.pipeline_s == pytest.approx((r.plan.n_micro + 1) * slot)
    ri = predict(M, Plan(**PLAN, interleave=2), "bf16", H100)
    assert ri.bubble_s == pytest.approx(0.5 * (ri.forward_s + ri.backward_s))
    assert ri.bubble_s < r.bubble_s


def test_recompute_costs_time_and_saves_memory():
    t = {rc: predict(M, Plan(**PLAN, recompute=rc), "bf16", H100) for rc in
         ("none", "selective", "full")}
    assert t["none"].iteration_time_s < t["selective"].iteration_time_s \
        < t["full"].iteration_time_s
    assert t["none"].memory.total_bytes > t["selective"].memory.total_bytes \
        > t["full"].memory.total_bytes


def test_fp8_schemes_on_h100():
    r = {s: predict(M, Plan(**PLAN, zero=1), s, H100) for s in ("bf16", "te-fp8", "fp8-lm")}
    assert r["te-fp8"].iteration_time_s < r["bf16"].iteration_time_s
    assert r["fp8-lm"].iteration_time_s <= r["te-fp8"].iteration_time_s
    assert r["fp8-lm"].memory.total_bytes < r["te-fp8"].memory.total_bytes
    # A100 has no FP8 datapath (rate = fp16): no GEMM speed-up there
    a = predict(M, Plan(**PLAN), "te-fp8", A100).forward_s
    assert a >= 0.95 * predict(M, Plan(**PLAN), "bf16", A100).forward_s


def test_llm_command_json_contract(capsys):
    argv = ["llm", "--system", "dgx-h100", "--layers", "48", "--hidden", "8192", "--heads", "64",
            "--seq", "2048", "--vocab", "51200", "--tp", "8", "--pp", "2", "--dp", "4",
            "--micro-batch", "2", "--global-batch", "256", "--interleave", "2", "--recompute",
            "selective", "--sequence-parallel", "--zero", "1", "--scheme", "fp8-lm", "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert all(isinstance(d[k], float) and d[k] > 0 for k in KEYS)
    assert d["samples_per_s"] == pytest.approx(256 / d["iteration_time_s"])
    assert d["grad_accumulation_fusion"] is True and d["tp_input_comm_GiB_per_microbatch"] > 0
    assert main([*argv, "--no-grad-accumulation-fusion"]) == 0
    unfused = json.loads(capsys.readouterr().out)
    assert unfused["grad_accumulation_fusion"] is False
    assert unfused["iteration_time_s"] > d["iteration_time_s"]


def test_unfused_gradient_accumulation_costs_the_schemes_bytes():
    # per micro-batch: bf16 12 B per parameter (16-bit gradient written, read with the fp32
    # main gradient, which is written back); FP8-LM's FP8 hook 18 B on the linear weights
    plan = Plan(**PLAN)
    slow = dataclasses.replace(plan, grad_accumulation_fusion=False)
    hbm = H100.chip.memory_bandwidth_Bps * LlmParams().memory_efficiency
    for scheme, lin_bytes in (("bf16", 12), ("fp8-lm", 18)):
        fused, unfused = predict(M, plan, scheme, H100), predict(M, slow, scheme, H100)
        mem = fused.memory
        extra = (mem.linear_params * lin_bytes + (mem.params - mem.linear_params) * 12) / hbm
        assert unfused.backward_s - fused.backward_s == pytest.approx(extra, rel=1e-9)


@pytest.mark.parametrize("extra,msg", [
    (["--tp", "3", "--pp", "1", "--dp", "1", "--micro-batch", "1"], "not divisible by tp 3"),
    (["--pp", "1", "--dp", "1", "--micro-batch", "1"], "--tp required"),
    (["--search"], "--search needs --gpus"),
])
def test_llm_command_errors(capsys, extra, msg):
    argv = ["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "256", "--heads", "4",
            "--seq", "128", "--vocab", "1000", "--global-batch", "8", "--scheme", "bf16", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_search_ranks_and_explains():
    m = GptConfig(layers=8, hidden=1024, heads=16, seq=1024, vocab=32000)
    t = search(m, str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), 16, 64, "bf16",
               micro_batches=(1, 4), interleaves=(1, 2))
    ok = t[t.status == "ok"]
    assert len(ok) > 10
    assert list(ok.samples_per_s) == sorted(ok.samples_per_s, reverse=True)
    assert (ok.tp * ok.pp * ok.dp == 16).all()
    bad = t[t.status != "ok"]
    assert (bad.reason.str.len() > 0).all()
    assert bad.reason.str.contains("does not divide").any()
    # the best plan is exactly what predict says for it
    b = ok.iloc[0]
    r = predict(m, Plan(tp=int(b.tp), pp=int(b.pp), dp=int(b.dp), micro_batch=int(b.micro_batch),
                        global_batch=64, interleave=int(b.interleave), recompute=b.recompute,
                        sequence_parallel=bool(b.sequence_parallel), zero=int(b.zero)),
                "bf16", H100)
    assert r.samples_per_s == pytest.approx(b.samples_per_s)


def test_search_drops_what_does_not_fit():
    big = GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
    t = search(big, str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), 64, 64, "bf16",
               micro_batches=(1,), interleaves=(1,))
    fit = t[t.reason.str.contains("GiB per GPU", na=False)]
    assert len(fit) > 0
    assert (t[t.status == "ok"].memory_GiB_per_gpu <= 80).all()


@pytest.mark.parametrize("scheme", ["hfp8", "hif8"])
def test_8bit_paper_schemes_run_the_same_plans(scheme):
    bf = predict(M, Plan(**PLAN), "bf16", H100)
    r = predict(M, Plan(**PLAN), scheme, H100)
    assert r.forward_s < bf.forward_s  # 8-bit GEMMs at twice the bf16 rate on H100
    # the same states as bf16, but HFP8 (Sun et al. 2019) keeps FP16 gradients (2 B, not fp32)
    grad_saving = (4 - 2) * r.memory.params if scheme == "hfp8" else 0.0
    assert r.memory.model_states_bytes == pytest.approx(bf.memory.model_states_bytes - grad_saving)
    with pytest.raises(ValueError, match="unknown LLM scheme"):
        predict(M, Plan(**PLAN), "fp4-lm", H100)
