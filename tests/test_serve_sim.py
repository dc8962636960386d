"""accelsim serve against its references: the engine's own prefill and decode step at low load,
Little's law measured from the event log, saturation past capacity, reproducibility,
speculative decoding's bound and MoE skew (issue 35, "How it will be checked")."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from accelsim import build_system, infer
from accelsim.cli import main
from accelsim.engine.comm import fabric_of
from accelsim.engine.inference import forward_pass
from accelsim.engine.iteration import IterationCost
from accelsim.engine.plan import LlmParams
from accelsim.llm.inference import inference_model, inference_plan
from accelsim.serving import serve
from accelsim.serving.costs import EXACT_UP_TO, SpecDecode, bucket

H100 = build_system("h100-sxm").with_boost_clock()  # the clock serve times iterations at


@pytest.mark.parametrize("name,system,tp,ep", [("llama3-8b", "h100-sxm", 1, 1),
                                              ("mixtral-8x7b", "dgx-h100", 2, 2)])
def test_an_iteration_is_forward_pass_for_a_pure_prefill_or_decode(name, system, tp, ep):
    """The mixed-batch parts add up to the engine's own pass (the one formula, split)."""
    s = build_system(system)
    m = inference_model(name)
    plan = inference_plan(s, m, tp=tp, ep=ep)
    cost = IterationCost(m, s, plan, "bf16")
    fab = fabric_of(s, LlmParams(memory_reserve_GiB=0.0))
    for prompt in (100, 512):
        want = forward_pass(m, s, fab, plan, "bf16", 1, prompt, prompt).time_s
        got = cost.linear_s(prompt) + cost.head_s(1) + cost.prefill_attention_s(prompt, 0)
        assert got == pytest.approx(want, rel=1e-12)
    for batch, ctx in ((1, 700), (24, 3000)):
        want = forward_pass(m, s, fab, plan, "bf16", batch, 1, ctx).time_s
        got = cost.linear_s(batch) + cost.head_s(batch) + cost.decode_attention_s(batch,
                                                                                   batch * ctx)
        assert got == pytest.approx(want, rel=1e-12)


def test_buckets_round_up_by_at_most_an_eighth_and_keep_powers_of_two():
    n = np.arange(1, 200_001)
    b = np.array([bucket(int(v)) for v in n])
    assert (b >= n).all() and (b <= n + n // 8).all()
    assert (b[:EXACT_UP_TO] == n[:EXACT_UP_TO]).all()
    assert all(bucket(1 << k) == 1 << k for k in range(18))


def test_low_load_ttft_is_the_prefill_plus_host_overhead_and_tpot_the_decode_step():
    I, O, host, req = 512, 32, 0.002, 0.003
    r = serve(H100, "llama3-8b", "bf16", rate=0.2, requests=30, input_tokens=I,
              output_tokens=O, host_overhead_s=host, request_overhead_s=req, seed=4)
    d = r.as_dict()
    assert d["host_overhead_s"] == pytest.approx(host + req)
    ref = infer(H100, "llama3-8b", "bf16", 1, prompt=I, context=I + O // 2)
    assert d["time_to_first_token_s_p50"] == pytest.approx(
        ref.prefill.time_s + d["host_overhead_s"], rel=0.10)
    assert d["time_per_output_token_s_p50"] == pytest.approx(ref.decode.time_s + host,
                                                             rel=0.10)
    assert d["preemptions"] == 0


def test_littles_law_holds_between_the_event_log_and_requests_out(tmp_path):
    """mean_running_requests (integrated over the window from the event log) equals
    requests_per_s x the mean latency of the requests written by --requests-out."""
    out = tmp_path / "r.csv"
    argv = ("serve --system h100-sxm --model llama3-8b --scheme bf16 --rate 6 --requests 400 "
            f"--input-tokens 256 --output-tokens 96 --seed 2 --json --requests-out {out}")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv.split()) == 0
    d = json.loads(buf.getvalue())
    rows = pd.read_csv(out)
    assert len(rows) == 400 and rows["measured"].sum() == d["measured_requests"]
    w = rows.loc[rows["measured"], "request_latency_s"].mean()
    assert d["mean_running_requests"] > 2  # a load where queueing and batching both happen
    assert d["mean_running_requests"] == pytest.approx(d["requests_per_s"] * w, rel=0.05)


def test_throughput_never_exceeds_the_offered_load_and_flattens_past_capacity():
    rates = (2.0, 40.0, 80.0)
    res = [serve(H100, "llama3-8b", "bf16", rate=r, requests=300, input_tokens=256,
                 output_tokens=64, max_batch=8, seed=1).as_dict() for r in rates]
    for d in res:
        assert d["requests_per_s"] <= d["offered_requests_per_s"]
    low, mid, high = res
    assert low["requests_per_s"] == pytest.approx(low["offered_requests_per_s"], rel=0.05)
    # past capacity: the offered load doubles, the throughput does not move
    assert mid["requests_per_s"] < 0.6 * mid["offered_requests_per_s"]
    assert high["requests_per_s"] == pytest.approx(mid["requests_per_s"], rel=0.05)
    assert low["time_to_first_token_s_p99"] < mid["time_to_first_token_s_p99"] \
        < high["time_to_first_token_s_p99"]


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    kw = dict(rate=8.0, requests=50, lengths="conversation", spec_decode=2, accept_rate=0.6)
    a = serve(H100, "llama3-8b", "bf16", seed=7, **kw)
    b = serve(H100, "llama3-8b", "bf16", seed=7, **kw)
    c = serve(H100, "llama3-8b", "bf16", seed=8, **kw)
    assert a.as_dict() == b.as_dict()
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert a.as_dict() != c.as_dict()


def test_a_full_kv_cache_preempts_and_every_request_still_finishes():
    r = serve(H100, "llama3-8b", "bf16", rate=30.0, requests=150, input_tokens=1024,
              output_tokens=256, memory_reserve_GiB=62.0, seed=3)
    d = r.as_dict()
    assert d["kv_cache_tokens_per_replica"] < 150 * (1024 + 256)
    assert d["preemptions"] > 0 and r.requests["preemptions"].sum() == d["preemptions"]
    assert (r.requests["finish_s"] > r.requests["arrival_s"]).all()
    assert 0.5 < d["kv_cache_utilization"] <= 1.0


def test_chunked_prefill_mixes_prompts_into_decode_iterations():
    kw = dict(rate=20.0, requests=100, input_tokens=2048, output_tokens=64, seed=5,
              max_batched_tokens=512)
    r = serve(H100, "llama3-8b", "bf16", chunked_prefill=True, **kw)
    it = r.log.iterations
    assert ((it[:, 3] > 0) & (it[:, 4] > 0)).any()  # prefill tokens and decodes together
    assert (it[:, 3] + it[:, 4] <= 512).all()  # the token budget
    with pytest.raises(ValueError, match="max_batched_tokens 512"):
        serve(H100, "llama3-8b", "bf16", chunked_prefill=False, **kw)


def test_speculative_decoding_speeds_up_batch_one_tpot_below_its_bound():
    spec = SpecDecode(3, 0.8)
    assert spec.expected_tokens == pytest.approx((1 - 0.8 ** 4) / 0.2)
    draws = spec.draw_array(200_000, np.random.default_rng(0))
    assert draws.mean() == pytest.approx(spec.expected_tokens, rel=0.01)
    kw = dict(rate=0.1, requests=20, input_tokens=512, output_tokens=128, seed=2)
    base = serve(H100, "llama3-8b", "bf16", **kw).as_dict()["time_per_output_token_s_p50"]
    fast = serve(H100, "llama3-8b", "bf16", spec_decode=3, accept_rate=0.8,
                 **kw).as_dict()["time_per_output_token_s_p50"]
    assert 1.0 < base / fast < 2.95


def test_a_skewed_moe_is_slower_than_a_balanced_one():
    dgx = build_system("dgx-h100")
    kw = dict(tp=2, ep=2, rate=0.5, requests=20, input_tokens=2048, output_tokens=16,
              seed=1)
    bal = serve(dgx, "mixtral-8x7b", "bf16", **kw).as_dict()
    hot = serve(dgx, "mixtral-8x7b", "bf16", expert_skew=3.0, **kw).as_dict()
    assert hot["time_to_first_token_s_p50"] > 1.05 * bal["time_to_first_token_s_p50"]
    assert hot["request_latency_s_p50"] > bal["request_latency_s_p50"]


def test_replicas_split_the_load():
    kw = dict(rate=30.0, requests=200, input_tokens=256, output_tokens=64, max_batch=8,
              seed=1)
    one = serve(H100, "llama3-8b", "bf16", **kw)
    two = serve(build_system("dgx-h100"), "llama3-8b", "bf16", replicas=2, **kw)
    assert set(two.requests["replica"]) == {0, 1}
    assert two.as_dict()["requests_per_s"] > 1.5 * one.as_dict()["requests_per_s"]
    assert two.as_dict()["gpus"] == 2


def test_disaggregated_serving_moves_the_kv_cache_and_reports_its_time():
    """P:D on the same GPUs as the aggregated replicas is one flag apart; the transfer is the
    engine's point-to-point time of the larger per-GPU KV shard."""
    from accelsim.engine.inference import kv_cache_bytes_per_gpu

    dgx = build_system("dgx-h100")
    kw = dict(tp=2, rate=4.0, requests=120, input_tokens=1024, output_tokens=64, seed=1)
    agg = serve(dgx, "llama3-70b", "bf16", replicas=4, **kw).as_dict()
    dis = serve(dgx, "llama3-70b", "bf16", disagg=(2, 2), **kw)
    d = dis.as_dict()
    assert d["gpus"] == agg["gpus"] == 8 and d["disagg"] == "2x2"
    m = inference_model("llama3-70b")
    share = kv_cache_bytes_per_gpu(m, inference_plan(dgx, m, tp=2), 1, 1024)
    fab = fabric_of(dgx, LlmParams(memory_reserve_GiB=0.0))
    assert d["kv_transfer_s_p50"] == pytest.approx(fab.p2p_s(share, False))
    assert (dis.requests["kv_transfer_s"] > 0).all()
    assert "kv_transfer_s_p50" not in agg
    # decode replicas free of prefills: steadier decode steps
    assert d["time_per_output_token_s_p99"] < agg["time_per_output_token_s_p99"]


def test_pipeline_stages_keep_micro_batches_in_flight():
    """pp stages: pp lanes of in-flight batches, so a pp=2 replica on twice the GPUs serves
    about twice the requests of a pp=1 one past capacity (stages not run one after another)."""
    dgx = build_system("dgx-h100")
    kw = dict(tp=4, rate=50.0, requests=200, input_tokens=512, output_tokens=96, seed=1)
    one = serve(dgx, "llama3-70b", "bf16", pp=1, **kw).as_dict()
    two = serve(dgx, "llama3-70b", "bf16", pp=2, **kw).as_dict()
    assert two["requests_per_s"] > 1.6 * one["requests_per_s"]


def test_a_prefix_cache_hit_prefills_only_the_rest_attending_the_cached_part():
    """Half of a 1024-token prompt cached: the prefill is the engine's chunk of 512 tokens
    after 512 cached ones (linear work, head and the chunk's attention), exactly."""
    kw = dict(rate=0.2, requests=20, input_tokens=1024, output_tokens=4, seed=3)
    cold = serve(H100, "llama3-8b", "bf16", **kw).as_dict()
    warm = serve(H100, "llama3-8b", "bf16", prefix_cache=True, prefix_hit_rate=0.5,
                 **kw).as_dict()
    m = inference_model("llama3-8b")
    cost = IterationCost(m, H100, inference_plan(H100, m), "bf16")
    chunk = cost.linear_s(512) + cost.head_s(1) + cost.prefill_attention_s(512, 512)
    assert warm["prefix_cache_hit_rate"] == pytest.approx(0.5)
    assert warm["time_to_first_token_s_p50"] == pytest.approx(chunk + warm["host_overhead_s"],
                                                              rel=1e-9)
    assert warm["time_to_first_token_s_p50"] < 0.75 * cold["time_to_first_token_s_p50"]
    assert "prefix_cache_hit_rate" not in cold


def test_prefix_ids_hit_once_their_prefix_has_been_prefilled(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("arrival_s,input_tokens,output_tokens,prefix,prefix_tokens\n"
                 "0,600,2,sys,500\n1,600,2,sys,500\n2,600,2,other,500\n")
    r = serve(H100, "llama3-8b", "bf16", arrivals=f, prefix_cache=True)
    hits = r.requests["prefix_cache_hit_tokens"].tolist()
    assert hits == [0, 496, 0]  # whole 16-token blocks of the shared prefix
    host = r.as_dict()["host_overhead_s"]  # each TTFT's fixed per-request part
    ttft = [t - host for t in r.requests["time_to_first_token_s"]]
    assert ttft[1] < 0.5 * ttft[0] and ttft[2] == pytest.approx(ttft[0])


def test_swap_preemption_keeps_the_cache_and_pays_its_copies():
    """Swap keeps every computed token (no re-prefill), and the copies cost the engine's
    per-token time over the host link: a slower link makes the same run slower."""
    from accelsim.engine.inference import kv_cache_bytes_per_gpu
    from accelsim.engine.iteration import kv_swap_s_per_token

    kw = dict(rate=30.0, requests=120, input_tokens=1024, output_tokens=256,
              memory_reserve_GiB=62.0, seed=3)
    rec = serve(H100, "llama3-8b", "bf16", **kw)
    fast = serve(H100, "llama3-8b", "bf16", preemption="swap", host_link_GBps=64.0, **kw)
    slow = serve(H100, "llama3-8b", "bf16", preemption="swap", host_link_GBps=0.5, **kw)
    assert fast.as_dict()["preemptions"] > 0 and rec.as_dict()["preemptions"] > 0
    # recompute re-prefills: more prefill tokens than the prompts; swap prefills each once
    prompts = 120 * 1024
    assert rec.log.iterations[:, 3].sum() > prompts
    assert fast.log.iterations[:, 3].sum() == prompts
    assert slow.as_dict()["request_latency_s_p50"] > fast.as_dict()["request_latency_s_p50"]
    m = inference_model("llama3-8b")
    assert kv_swap_s_per_token(m, inference_plan(H100, m), 64e9) == pytest.approx(
        kv_cache_bytes_per_gpu(m, inference_plan(H100, m), 1, 1) / 64e9)
