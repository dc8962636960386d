"""LLM inference (accelsim.engine.inference, ``accelsim infer``): memory from the published
shapes by hand, and the physics bounds every step must respect (a decode step cannot beat
streaming its weights from HBM; a prefill cannot beat the tensor-core peak)."""

import json

import pytest

from accelsim.arch import build_system
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import InferencePlan, infer
from accelsim.errors import InputError
from accelsim.workload.transformer import PRESETS

H100 = build_system("h100-sxm")
DGX = build_system("dgx-h100")
LLAMA = Decoder(PRESETS["llama3-8b"], 8192, flash_attention=True)


def test_kv_cache_and_weights_are_the_hand_count():
    """Llama-3-8B: 32 layers x K and V x 8 KV heads x 128 x 2 bytes per token; bf16 weights
    2 bytes x 8,030,261,248."""
    r = infer(LLAMA, H100, InferencePlan(), "bf16", 4, context=1024)
    assert r.kv_cache_bytes == 4 * 1024 * 32 * 2 * 8 * 128 * 2
    assert r.weights_bytes == 8_030_261_248 * 2
    fp8 = infer(LLAMA, H100, InferencePlan(kv_dtype="fp8"), "bf16", 4, context=1024)
    assert fp8.kv_cache_bytes == r.kv_cache_bytes / 2
    # tp 8: 8 KV heads, one per GPU; the weights split but for norms (replicated)
    t8 = infer(LLAMA, DGX, InferencePlan(tp=8), "bf16", 4, context=1024)
    assert t8.kv_cache_bytes == r.kv_cache_bytes / 8
    assert r.weights_bytes / 8 < t8.weights_bytes < r.weights_bytes / 8 * 1.001


def test_fp8_weights_take_one_byte():
    r = infer(LLAMA, H100, InferencePlan(), "fp8", 1, context=16)
    emb = 2 * 128256 * 4096  # input embedding and untied head: the head is a GEMM (fp8)
    norms = 2 * 4096 * 32 + 4096
    linear = 8_030_261_248 - emb - norms
    assert r.weights_bytes == pytest.approx(linear + 128256 * 4096 + 2 * (128256 * 4096 + norms))


def test_decode_is_bounded_by_the_weight_stream():
    """Batch-1 decode reads every weight once: no faster than bytes / peak HBM bandwidth, and
    near it (within 2x: kernel fixed times and the fitted stream efficiency)."""
    r = infer(LLAMA, H100, InferencePlan(), "bf16", 1, context=512)
    floor = r.weights_bytes / H100.chip.memory_bandwidth_Bps
    assert floor < r.decode.time_s < 2 * floor
    # memory-bound: 8 sequences cost little more than one
    r8 = infer(LLAMA, H100, InferencePlan(), "bf16", 8, context=512)
    assert r8.as_dict()["decode_tokens_per_s"] > 7 * r.as_dict()["decode_tokens_per_s"]
    # a longer context reads more cache
    long = infer(LLAMA, H100, InferencePlan(), "bf16", 8, context=8192)
    assert long.decode.time_s > r8.decode.time_s


def test_prefill_is_bounded_by_the_peak():
    T = 4096
    r = infer(LLAMA, H100, InferencePlan(), "bf16", 1, prompt=T)
    flops = PRESETS["llama3-8b"].forward_flops(T) - (T - 1) * 2 * 4096 * 128256  # head: last
    assert r.prefill.time_s > flops / H100.peak_flops("bf16")
    assert r.as_dict()["time_to_first_token_s"] == r.prefill.time_s


def test_request_latency_adds_every_decode_step():
    r = infer(LLAMA, H100, InferencePlan(), "bf16", 2, prompt=128, output_tokens=3)
    steps = [infer(LLAMA, H100, InferencePlan(), "bf16", 2, context=c).decode.time_s
             for c in (129, 130)]
    assert r.request_latency_s == pytest.approx(r.prefill.time_s + sum(steps), rel=1e-12)
    d = r.as_dict()
    assert d["end_to_end_tokens_per_s"] == pytest.approx(2 * 3 / d["request_latency_s"])


def test_moe_decode_reads_only_the_chosen_experts():
    mix = Decoder(PRESETS["mixtral-8x7b"], 4096, flash_attention=True)
    one = infer(mix, H100, InferencePlan(), "fp8", 1, context=256)
    dense_equiv = 12_879_925_248  # active parameters, 1 byte each
    assert one.decode.time_s < 1.5 * dense_equiv / H100.chip.memory_bandwidth_Bps / 0.78
    r = infer(mix, DGX, InferencePlan(tp=8, ep=8), "bf16", 8, context=4096)
    assert any(o.op == "all_to_all" for _, ops in r.decode.layers for o in ops)


@pytest.mark.parametrize("kw,msg", [
    (dict(ep=2, tp=4), "ep 2 must be 1 or tp"),
    (dict(kv_dtype="int3"), "kv dtype must be one of"),
])
def test_bad_plan_names_the_value(kw, msg):
    with pytest.raises(InputError, match=msg):
        InferencePlan(**kw)


def test_cli(capsys, tmp_path):
    from accelsim.cli import main

    base = ["infer", "--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16"]
    assert main([*base, "--batch", "4", "--prompt", "256", "--output-tokens", "8",
                 "--context", "1024", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("prefill_s", "time_to_first_token_s", "decode_step_s", "decode_tokens_per_s",
              "request_latency_s", "end_to_end_tokens_per_s", "kv_cache_GiB",
              "memory_GiB_per_gpu", "params", "active_params"):
        assert k in d
    assert d["params"] == d["active_params"] == 8_030_261_248
    out = tmp_path / "serve.csv"
    png = tmp_path / "serve.png"
    assert main([*base, "--serve", "--batches", "1,8", "--contexts", "512,2048", "--out",
                 str(out), "--plot", str(png)]) == 0
    import pandas as pd

    df = pd.read_csv(out)
    assert len(df) == 4 and png.stat().st_size > 0
    bd = tmp_path / "bd.csv"
    assert main([*base, "--batch", "2", "--context", "100", "--breakdown", str(bd)]) == 0
    rows = pd.read_csv(bd)
    assert rows["exposed_s"].sum() == pytest.approx(
        infer(Decoder(PRESETS["llama3-8b"], 8192, flash_attention=True), H100, InferencePlan(),
              "bf16", 2, context=100).decode.time_s, rel=1e-5)
    capsys.readouterr()
    for argv, msg in ((["--batch", "1"], "give --prompt T"),
                      (["--batch", "1", "--context", "5", "--tp", "2"], "tp 2 must divide the 1 GPUs"),
                      (["--batch", "1", "--context", "5", "--pp", "2"], "needs a node file"),
                      (["--batch", "1", "--output-tokens", "4", "--context", "5"],
                       "--output-tokens needs --prompt")):
        assert main([*base, *argv]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1


def test_energy_follows_the_physics():
    """Static power is a floor; batching amortizes the weight stream, so the energy per output
    token falls with the batch; a chip without a power table reports none."""
    one = infer(LLAMA, H100, InferencePlan(), "bf16", 1, context=1024, prompt=1024)
    many = infer(LLAMA, H100, InferencePlan(), "bf16", 64, context=1024)
    static = H100.chip.power.static_W
    assert one.decode_energy.power_W > static
    assert one.decode_energy.energy_J > static * one.decode.time_s
    assert many.as_dict()["energy_J_per_output_token"] < one.as_dict()[
        "energy_J_per_output_token"] / 10
    # the compute-bound prefill draws more power than the memory-bound batch-1 decode
    assert one.prefill_energy.power_W > one.decode_energy.power_W
    v100 = build_system("v100-sxm2")
    assert v100.chip.power is None
    r = infer(LLAMA, v100, InferencePlan(), "fp16", 1, context=64)
    assert r.as_dict()["decode_step_energy_J"] is None  # a null key, as llm gives


def test_llm_reports_energy_between_static_and_the_limit():
    from accelsim.engine import Plan
    from accelsim.engine.transformer import predict
    from accelsim.workload.gpt import PRESETS as GPT

    r = predict(GPT["gpt3-175b"], Plan(tp=8, pp=8, dp=2, micro_batch=1, global_batch=64),
                "bf16", DGX)
    d = r.as_dict()
    assert DGX.chip.power.static_W < d["power_W_per_gpu"] < 1.5 * DGX.chip.power.power_limit_W
    assert d["energy_J"] == pytest.approx(d["power_W_per_gpu"] * d["iteration_time_s"] * 128)
    assert d["power_W"] == pytest.approx(d["power_W_per_gpu"] * 128)
    assert predict(GPT["gpt3-175b"], Plan(tp=8, pp=8, dp=2, micro_batch=1, global_batch=64),
                   "fp16", build_system("dgx1-v100")).as_dict()["energy_J"] is None


def test_power_limited_clock_is_the_default_on_llm_and_infer(capsys):
    """The default clock is the power-limited one (--power-model, kept, changes nothing):
    against the --clock boost what-if a long prefill slows and its mean power stays at the
    limit; --power-limit-W 350 slows it more, by less than half of its throughput; the
    memory-bound decode step does not move."""
    from accelsim.cli import main

    base = ["infer", "--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16",
            "--batch", "8", "--prompt", "2048", "--context", "2048", "--json"]
    out = {}
    for name, extra in (("fixed", ["--clock", "boost"]), ("model", []),
                        ("kept", ["--power-model"]), ("350", ["--power-limit-W", "350"])):
        assert main([*base, *extra]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    assert out["fixed"]["power_model"] is False and out["model"]["power_model"] is True
    assert out["kept"] == out["model"]
    assert out["fixed"]["prefill_s"] < out["model"]["prefill_s"] < out["350"]["prefill_s"]
    assert out["350"]["prefill_s"] < 2 * out["model"]["prefill_s"]
    assert out["model"]["prefill_power_W_per_gpu"] <= 700 + 1e-6
    assert out["350"]["prefill_power_W_per_gpu"] <= 350 + 1e-6
    assert out["350"]["decode_step_s"] == pytest.approx(out["fixed"]["decode_step_s"],
                                                        rel=0.02)
    assert main(["llm", "--system", "dgx1-v100", "--model", "gpt2-small", "--gpus", "8",
                 "--global-batch", "8", "--scheme", "fp16", "--power-model"]) == 2
    assert "no [chip.power] table" in capsys.readouterr().err
    assert main([*base, "--clock", "boost", "--power-limit-W", "350"]) == 2
    assert "--clock boost" in capsys.readouterr().err


def test_request_latency_closed_form_honours_a_sliding_window():
    """Mistral-7B's 4096-token window: the closed-form sum over the steps equals stepping
    through them one by one (contexts crossing the window)."""
    from pathlib import Path

    from accelsim.workload.hf_config import resolve_model

    cfg = resolve_model(Path(__file__).parent / "data" / "hf_configs" / "mistral-7b.json")
    assert cfg.sliding_window == 4096
    d = Decoder(cfg, cfg.seq, flash_attention=True)
    r = infer(d, H100, InferencePlan(), "bf16", 2, prompt=4000, output_tokens=201)
    steps = sum(infer(d, H100, InferencePlan(), "bf16", 2, context=c).decode.time_s
                for c in range(4001, 4201))
    assert r.request_latency_s == pytest.approx(r.prefill.time_s + steps, rel=1e-9)


@pytest.mark.parametrize("tp, power_model", [(1, False), (2, False), (1, True)])
def test_request_breakdown_sums_to_its_latency(tp, power_model):
    """The request's rows are its prefill and its decode steps (the issue's 2.766 s request
    summed to 1.409 s: the decode steps were missing); the steps' attention grows with the
    cache, so its row is larger than the steps times the first step's."""
    system = DGX.with_power_model() if power_model else DGX
    r = infer(LLAMA, system, InferencePlan(tp=tp), "bf16", 4, prompt=512, output_tokens=64)
    rows = r.rows()
    assert sum(x.exposed_s for x in rows) == pytest.approx(r.request_latency_s, rel=1e-12)
    assert sum(x.time_s for x in rows) == pytest.approx(r.request_latency_s, rel=1e-12)
    steps = [x for x in rows if x.layer.startswith("decode steps")]
    layers = {x.layer: int(x.layer.split('x')[1].split()[0]) for x in steps if 'layers' in x.layer}
    assert steps and all(x.count == layers.get(x.layer, 1) * 63 for x in steps)
    first = infer(LLAMA, system, InferencePlan(tp=tp), "bf16", 4, context=513)
    (att,) = [x for x in steps if x.op == "attention"]
    (att1,) = [x for x in first.rows() if x.op == "attention"]
    assert att.time_s > 63 * att1.time_s
    # a pipeline's sends carry the activations: (pp - 1) x batch x tokens x hidden x 2 B
    r2 = infer(LLAMA, system, InferencePlan(tp=tp, pp=2), "bf16", 4, prompt=512,
               output_tokens=64)
    sends = {x.layer: x.bytes for x in r2.rows() if x.op == "p2p"}
    h = LLAMA.hidden
    assert sends == {"prefill": 4 * 512 * h * 2, "decode steps": 63 * 4 * h * 2}
    # a decode step alone (no request) keeps its own rows
    assert sum(x.exposed_s for x in first.rows()) == pytest.approx(first.decode.time_s)
