"""Iteration time, FLOPs, pipeline bubble, schemes, the llm command's JSON contract and the plan
search."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine import LlmParams, Plan, predict
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
    (["--pp", "1", "--micro-batch", "1"], "--dp D or --gpus N required"),
    (["--tp", "8", "--gpus", "12"], "--gpus 12 is not a multiple of --tp 8"),
    (["--tp", "2", "--dp", "2", "--gpus", "8"], "--gpus 8 != --tp 2 x --pp 1 x --dp 2"),
    (["--search"], "--search needs --gpus"),
])
def test_llm_command_errors(capsys, extra, msg):
    """Bad or missing plan flags: one line naming them (tp and pp default to 1, the
    micro-batch to 1, dp comes from --dp or --gpus / (tp x pp))."""
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
    # ... at its power-limited clock (the default): the best REFINE_PLANS re-timed there, the
    # rest ranked at the preset's
    from accelsim.llm.search import REFINE_PLANS

    assert b.clock == "power" and b.clock_MHz == pytest.approx(r.clock_MHz)
    assert (ok.clock == "power").sum() == min(REFINE_PLANS, len(ok))
    assert ok.clock_MHz.isna().sum() == len(ok) - min(REFINE_PLANS, len(ok))


def test_search_drops_what_does_not_fit():
    big = GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
    t = search(big, str(REPO_ROOT / "arch_configs" / "dgx-h100.toml"), 64, 64, "bf16",
               micro_batches=(1,), interleaves=(1,))
    fit = t[t.reason.str.contains("GiB per GPU", na=False)]
    assert len(fit) > 0
    assert (t[t.status == "ok"].memory_GiB_per_gpu <= 80).all()


@pytest.mark.parametrize("scheme", ["hfp8-gemm", "hif8"])
def test_8bit_paper_schemes_run_the_same_plans(scheme):
    bf = predict(M, Plan(**PLAN), "bf16", H100)
    r = predict(M, Plan(**PLAN), scheme, H100)
    assert r.forward_s < bf.forward_s  # 8-bit GEMMs at twice the bf16 rate on H100
    # the same states as bf16, but HFP8 (Sun et al. 2019) keeps FP16 gradients (2 B, not fp32)
    grad_saving = (4 - 2) * r.memory.params if scheme == "hfp8-gemm" else 0.0
    assert r.memory.model_states_bytes == pytest.approx(bf.memory.model_states_bytes - grad_saving)
    with pytest.raises(ValueError, match="unknown scheme 'fp4-lm'"):
        predict(M, Plan(**PLAN), "fp4-lm", H100)


def test_one_name_one_recipe_and_the_optimizer_picks_the_formats():
    """The paper's HFP8 system scheme (8-bit weights, sharded update) has no AdamW recipe: the
    LLM papers' HFP8 GEMMs with 16-bit states are another name; FP8-LM defines AdamW only."""
    with pytest.raises(ValueError, match="hfp8-gemm"):
        predict(M, Plan(**PLAN), "hfp8", H100)
    with pytest.raises(ValueError, match="fp8-lm.*no sgd-momentum recipe"):
        predict(M, Plan(**PLAN, optimizer="sgd-momentum"), "fp8-lm", H100)
    adamw = predict(M, Plan(**PLAN), "bf16", H100).memory
    sgd = predict(M, Plan(**PLAN, optimizer="sgd-momentum"), "bf16", H100).memory
    # AdamW (Megatron): fp32 main gradient, master weight and two moments; SGD with momentum
    # in bf16 (the HFP8 paper's recipe at 16 bits): 2-byte gradient, master and one momentum
    assert adamw.grads_bytes == pytest.approx(2 * sgd.grads_bytes)
    assert adamw.optimizer_bytes == pytest.approx((4 + 8) / (2 + 2) * sgd.optimizer_bytes)


def test_optimizer_step_prices_each_parameter_at_its_own_bytes():
    # the one update model (netsim.update_bytes_per_elem): read gradient, master, moments;
    # write master, moments and the 16-bit working weight -- bf16 4+4+8 and 4+8+2 = 30 B per
    # parameter; FP8-LM's linear weight matrices 1+2+3 and 2+3+2 = 13 B, its embeddings,
    # LayerNorms and biases bf16's 30 B (they are not FP8 tensors); ZeRO-1 shards it
    hbm = H100.chip.memory_bandwidth_Bps * LlmParams().memory_efficiency
    plan = Plan(**PLAN, zero=1)
    for scheme, lin_bytes in (("bf16", 30), ("fp8-lm", 13)):
        r = predict(M, plan, scheme, H100)
        mem = r.memory
        expect = (mem.linear_params * lin_bytes + (mem.params - mem.linear_params) * 30) / 4
        assert r.optimizer_s == pytest.approx(expect / hbm, rel=1e-12)
    # a model whose vocabulary dominates: the non-linear share is priced at bf16, not FP8-LM
    wide = GptConfig(layers=2, hidden=1024, heads=16, seq=512, vocab=256000)
    small = Plan(tp=1, pp=1, dp=2, micro_batch=1, global_batch=2, zero=1)
    r = predict(wide, small, "fp8-lm", H100)
    lin, n = r.memory.linear_params, r.memory.params
    assert lin < 0.2 * n
    assert r.optimizer_s == pytest.approx((lin * 13 + (n - lin) * 30) / 2 / hbm, rel=1e-12)
    flat = n * 13 / 2 / hbm  # the old pricing: every parameter at FP8-LM's bytes
    assert r.optimizer_s > 1.8 * flat


def _json(capsys, *extra):
    argv = ["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "512", "--heads", "8",
            "--seq", "256", "--vocab", "1000", "--global-batch", "16", "--scheme", "bf16",
            "--json", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_memory_reserve_flag(capsys):
    one = ["--tp", "1", "--pp", "1", "--dp", "4", "--micro-batch", "1"]
    d = _json(capsys, *one)
    assert d["memory_reserve_GiB"] == LlmParams().memory_reserve_GiB
    bare = _json(capsys, *one, "--memory-reserve", "0")
    assert bare["memory_reserve_GiB"] == 0
    assert d["memory_GiB_per_gpu"] - bare["memory_GiB_per_gpu"] == pytest.approx(
        LlmParams().memory_reserve_GiB, rel=1e-12)
    # a bare count: the 13M-parameter model's 18 B per parameter (bf16, no ZeRO) and its
    # activations, a quarter GiB, not the 11.3 GiB of the reserve
    n = GptConfig(layers=4, hidden=512, heads=8, seq=256, vocab=1000).n_params
    assert bare["memory_GiB_per_gpu"] == pytest.approx(
        n * 18 / 2 ** 30 + bare["activations_GiB"], rel=1e-12)
    assert bare["memory_GiB_per_gpu"] < 0.3
    assert _json(capsys, *one, "--memory-reserve", "2.5")["memory_reserve_GiB"] == 2.5
    # the flag keeps LlmParams' bound (accelsim.bounds.MEMORY_RESERVE_GiB): refused at parse time
    for bad, msg in (("-1", "argument --memory-reserve: must be a finite number in [0, 1024], "
                            "got '-1'"), ("inf", "must be a finite number"),
                     ("2000", "argument --memory-reserve: must be a finite number in [0, 1024], "
                              "got '2000'")):
        argv = ["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "512", "--heads",
                "8", "--seq", "256", "--vocab", "1000", "--global-batch", "16", "--scheme",
                "bf16", *one, "--memory-reserve", bad]
        try:  # argparse's check exits 2
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        assert rc == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1


def test_search_takes_the_memory_reserve(capsys):
    m = GptConfig(layers=8, hidden=1024, heads=16, seq=1024, vocab=32000)
    h100 = str(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
    kw = dict(micro_batches=(1,), interleaves=(1,))
    base = search(m, h100, 8, 8, "bf16", LlmParams(memory_reserve_GiB=0), **kw)
    assert (base.memory_reserve_GiB == 0).all() and (base.status == "ok").sum() > 0
    # a reserve that leaves too little of the 80 GiB: every formable plan is out, and says why
    full = search(m, h100, 8, 8, "bf16", LlmParams(memory_reserve_GiB=79.9), **kw)
    assert (full.status != "ok").all()
    assert full.reason.str.contains(r"GiB per GPU \(reserve 79.9 included\) > 80 GiB").any()
    argv = ["llm", "--system", "dgx-h100", "--layers", "8", "--hidden", "1024", "--heads", "16",
            "--seq", "1024", "--vocab", "32000", "--global-batch", "8", "--scheme", "bf16",
            "--search", "--gpus", "8"]
    assert main([*argv, "--memory-reserve", "0"]) == 0
    assert "memory incl. a 0 GiB reserve per GPU" in capsys.readouterr().out
    assert main([*argv, "--memory-reserve", "79.9"]) == 2
    assert "none of 4608 plans for 8 GPUs fits" in capsys.readouterr().err


def test_json_values_are_in_the_units_their_names_say(capsys):
    # independent counts: tp 1, pp 1 -> the GPU holds the whole model (GptConfig.n_params)
    N = GptConfig(layers=4, hidden=512, heads=8, seq=256, vocab=1000).n_params
    d = _json(capsys, "--tp", "1", "--pp", "1", "--dp", "4", "--micro-batch", "1",
              "--memory-reserve", "0")
    assert d["params"] == N
    # bf16 without ZeRO: 2 B working weights, 4 B gradients, 12 B optimizer states, in 2^30 B
    assert d["weights_GiB"] == pytest.approx(N * 2 / 2 ** 30, rel=1e-12)
    assert d["optimizer_GiB"] == pytest.approx(N * 12 / 2 ** 30, rel=1e-12)
    parts = ("weights_GiB", "grads_GiB", "optimizer_GiB", "activations_GiB", "memory_reserve_GiB")
    assert d["memory_GiB_per_gpu"] == pytest.approx(sum(d[k] for k in parts), rel=1e-12)
    # ring all-reduce of fp32 gradients over 4 ranks: 2 x 3/4 x 4 N bytes sent, in 1e9 B
    assert d["weight_comm_GB"] == pytest.approx(2 * 3 / 4 * 4 * N / 1e9, rel=1e-12)
    assert d["samples_per_s"] * d["iteration_time_s"] == pytest.approx(16)
    assert d["tokens_per_s"] == pytest.approx(256 * d["samples_per_s"])
    assert 0 < d["mfu"] < 1  # a fraction, not a percentage
    # tp 2, pp 2: Megatron's 4 all-reduces of the 16-bit s x b x h activation per layer (each
    # sends 2 x 1/2 x 2 sbh bytes), 2 layers per stage; p2p: the 1/t slice forward and its
    # gradient backward; 8 micro-batches per iteration
    d = _json(capsys, "--tp", "2", "--pp", "2", "--dp", "1", "--micro-batch", "2")
    sbh, n_micro = 256 * 2 * 512, 16 // 2
    tp = 4 * 2 * sbh * 2
    pp = 2 * 2 * sbh / 2
    assert d["tp_comm_GB"] == pytest.approx(tp * n_micro / 1e9, rel=1e-12)
    assert d["pp_comm_GB"] == pytest.approx(pp * n_micro / 1e9, rel=1e-12)
    assert d["activation_comm_GB"] == pytest.approx((tp + pp) * n_micro / 1e9, rel=1e-12)
    assert d["activation_comm_GB_per_microbatch"] == pytest.approx((tp + pp) / 1e9, rel=1e-12)
    # FP8-LM Table 7's input conversion (here the backward all-reduce of the input gradients,
    # two per layer), per micro-batch in 2^30 B
    assert d["tp_input_comm_GiB_per_microbatch"] == pytest.approx(2 * 2 * 2 * sbh / 2 ** 30,
                                                                  rel=1e-12)


def test_docs_unit_table_names_every_json_key(capsys):
    # docs/llm.md's unit table: one row per key of `llm --json`, and a key's suffix is its unit
    import re

    assert main(["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "256", "--heads",
                 "4", "--seq", "128", "--vocab", "1000", "--gpus", "8", "--global-batch", "8",
                 "--scheme", "bf16", "--json"]) == 0
    keys = json.loads(capsys.readouterr().out)
    text = (REPO_ROOT / "docs" / "llm.md").read_text()
    table = text[text.index("| JSON key | unit |"):]
    table = table[:table.index("\n\n")]
    rows = dict(re.findall(r"^\| `([a-zA-Z_]+)` \| ([^|]+?) \|", table, flags=re.M))
    assert set(rows) == set(keys)
    for key, unit in rows.items():
        if key.endswith("_GiB") or "_GiB_" in key:
            assert unit.startswith("GiB"), key
        elif key.endswith("_GB") or "_GB_" in key:
            assert unit.startswith("GB"), key
        elif key.endswith("_s") and not key.endswith("per_s"):
            assert unit == "s", key


def test_llm_gpus_gives_dp_for_one_plan(capsys):
    base = ["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "512", "--heads", "8",
            "--seq", "256", "--vocab", "1000", "--global-batch", "64", "--scheme", "bf16",
            "--json", "--tp", "2"]
    from accelsim.cli import main

    assert main([*base, "--gpus", "16"]) == 0
    by_gpus = json.loads(capsys.readouterr().out)
    assert main([*base, "--dp", "8", "--micro-batch", "1"]) == 0
    assert json.loads(capsys.readouterr().out) == by_gpus
    assert by_gpus["dp"] == 8 and by_gpus["micro_batch"] == 1 and by_gpus["pp"] == 1


def test_llm_model_preset_is_the_dimension_flags(capsys):
    """--model gpt3-175b (a shipped preset) is GPT-3's dimension flags; flags override it; a
    model the GPT transformer path cannot express is refused naming the feature."""
    from accelsim.cli import main

    common = ["llm", "--system", "dgx-h100", "--tp", "8", "--pp", "4", "--gpus", "128",
              "--global-batch", "128", "--scheme", "bf16", "--json"]
    assert main([*common, "--model", "gpt3-175b"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert main([*common, "--layers", "96", "--hidden", "12288", "--heads", "96", "--seq",
                 "2048", "--vocab", "50257"]) == 0
    by_flags = json.loads(capsys.readouterr().out)
    assert by_name.pop("model") == "gpt3-175b"
    by_flags.pop("model")
    assert by_name == by_flags
    assert by_name["params"] == by_name["active_params"] == 174_604_259_328
    assert main([*common, "--model", "gpt3-175b", "--layers", "48"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] < by_name["params"]
    assert main([*common, "--model", "llama3-8b", "--ep", "2"]) == 2
    err = capsys.readouterr().err
    assert "ep 2 needs a mixture-of-experts model" in err and err.count("\n") == 1
