"""accelsim serve's energy per output token against infer's: one request at low load is its
prefill and its decode steps as infer prices them (engine/energy.py) plus static power over the
idle gaps; a fuller batch spends less per token; no power model, no energy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelsim import build_system, infer
from accelsim.engine.energy import Work, work_energy
from accelsim.engine.iteration import IterationCost
from accelsim.llm.inference import inference_model, inference_plan
from accelsim.serving import serve

H100 = build_system("h100-sxm").with_boost_clock()  # the clock serve times iterations at


@pytest.mark.parametrize("name,system,tp,ep", [("llama3-8b", "h100-sxm", 1, 1),
                                              ("mixtral-8x7b", "dgx-h100", 2, 2)])
def test_an_iterations_work_priced_is_infers_energy_of_the_same_pass(name, system, tp, ep):
    """The parts' FLOPs and bytes, priced, are infer's prefill and decode-step energy."""
    s = build_system(system).with_boost_clock()
    m = inference_model(name)
    plan = inference_plan(s, m, tp=tp, ep=ep)
    cost = IterationCost(m, s, plan, "bf16")

    def add(*ws: Work) -> Work:
        return Work(sum(w.flops for w in ws), sum(w.attention_flops for w in ws),
                    sum(w.bytes for w in ws))

    prompt, ctx = 512, 700
    ref = infer(s, m, "bf16", 1, prompt=prompt, context=ctx, tp=tp, ep=ep)
    pre = add(cost.linear_work(prompt), cost.head_work(1),
              cost.prefill_attention_work(prompt, 0))
    dec = add(cost.linear_work(1), cost.head_work(1), cost.decode_attention_work(1, ctx))
    for work, p, e in ((pre, ref.prefill, ref.prefill_energy),
                       (dec, ref.decode, ref.decode_energy)):
        got = work_energy(s, "bf16", p.time_s, plan.gpus, work)
        assert got.dynamic_J == pytest.approx(e.dynamic_J, rel=1e-9)
        assert got.energy_J == pytest.approx(e.energy_J, rel=1e-9)


def test_one_request_at_low_load_is_infers_prefill_and_decode_steps_plus_idle_static():
    """Energy per output token of a lone request = (infer's prefill energy + each decode
    step's, at its own context) / output tokens, plus static power while the GPU waits on the
    host (per request and per iteration overheads)."""
    I, O, host, req = 512, 24, 0.002, 0.005
    d = serve(H100, "llama3-8b", "bf16", rate=1.0, requests=1, input_tokens=I,
              output_tokens=O, host_overhead_s=host, request_overhead_s=req,
              seed=3).as_dict()
    pre = infer(H100, "llama3-8b", "bf16", 1, prompt=I)
    steps = [infer(H100, "llama3-8b", "bf16", 1, context=c) for c in range(I + 1, I + O)]
    busy_J = pre.prefill_energy.energy_J + sum(s.decode_energy.energy_J for s in steps)
    busy_s = pre.prefill.time_s + sum(s.decode.time_s for s in steps)
    window_s = d["request_latency_s_p50"]  # the window: its arrival to its last token
    assert window_s > busy_s + req  # the overheads leave the GPU idle
    idle_J = H100.chip.power.static_W * (window_s - busy_s)
    assert d["energy_J_per_output_token"] == pytest.approx((busy_J + idle_J) / O, rel=0.05)
    assert d["energy_J"] == pytest.approx(d["energy_J_per_output_token"] * O, rel=1e-12)
    assert d["power_W_per_gpu"] == pytest.approx(d["energy_J"] / window_s, rel=1e-12)


def test_energy_per_token_falls_as_the_batch_fills():
    kw = dict(requests=200, input_tokens=256, output_tokens=64, seed=5)
    runs = [serve(H100, "llama3-8b", "bf16", rate=r, **kw).as_dict() for r in (0.5, 4, 16)]
    running = [d["mean_running_requests"] for d in runs]
    per_token = [d["energy_J_per_output_token"] for d in runs]
    assert running[0] < running[1] < running[2]
    assert per_token[0] > per_token[1] > per_token[2]
    # the mean power rises with the load, never above the board limit here
    power = [d["power_W_per_gpu"] for d in runs]
    assert power[0] < power[1] < power[2] <= H100.chip.power.power_limit_W


@pytest.mark.parametrize("system,scheme", [("v100-sxm2", "fp16"), (None, "bf16")])
def test_no_power_model_gives_null_energy(system, scheme):
    s = replace(H100, chip=replace(H100.chip, power=None)) if system is None \
        else build_system(system)
    d = serve(s, "llama3-8b", scheme, rate=1.0, requests=10, input_tokens=128,
              output_tokens=8, seed=0).as_dict()
    assert d["energy_J_per_output_token"] is None
    assert d["energy_J"] is None and d["power_W_per_gpu"] is None
