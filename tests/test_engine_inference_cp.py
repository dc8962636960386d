"""Context parallelism for inference (``InferencePlan.cp``, ``accelsim infer --cp``): a long
prompt's prefill split over cp ranks, checked against the same engine run without cp on the
rank's share of the prompt, the KV exchange by hand, the KV cache per GPU, and the refusals."""

from __future__ import annotations

import json

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import InferencePlan, infer
from accelsim.engine.plan import CP_ALGOS
from accelsim.errors import InputError
from accelsim.workload.transformer import PRESETS

# the preset's fixed clock: every pass at one clock, so passes compare op by op
DGX = build_system("dgx-h100").with_boost_clock()
LLAMA = Decoder(PRESETS["llama3-8b"], 8192, flash_attention=True)  # 32 layers, 8 KV heads
LONG = 131072  # a 128K-token prompt
KV_PER_TOKEN = 8 * (128 + 128) * 2  # one layer's K and V of a token, all KV heads, bf16


def _rows(r, op):
    return [x for x in r.prefill.rows() if x.op == op]


def test_cp1_is_the_plan_without_cp_whatever_the_algorithm():
    base = infer(LLAMA, DGX, InferencePlan(tp=2), "bf16", 2, prompt=4096, context=8192,
                 output_tokens=64)
    for algo in CP_ALGOS:
        r = infer(LLAMA, DGX, InferencePlan(tp=2, cp=1, cp_algo=algo), "bf16", 2,
                  prompt=4096, context=8192, output_tokens=64)
        assert r.rows() == base.rows()
        assert {**r.as_dict(), "cp_algo": "ring"} == base.as_dict()


@pytest.mark.parametrize("algo", CP_ALGOS)
def test_a_cp_rank_runs_the_gemms_of_its_share_and_its_share_of_the_attention(algo):
    """Every op but the attention and the exchange is the cp = 1 pass over prompt / cp
    tokens; the attention is cp causal blocks of prompt / cp tokens (ring, all-gather) or the
    whole prompt's over cp (Ulysses: its heads / cp over every key)."""
    cp, p = 8, LONG
    r = infer(LLAMA, DGX, InferencePlan(cp=cp, cp_algo=algo), "bf16", 1, prompt=p)
    share = infer(LLAMA, DGX, InferencePlan(), "bf16", 1, prompt=p // cp)
    whole = infer(LLAMA, DGX, InferencePlan(), "bf16", 1, prompt=p)
    same = lambda res: [x for x in res.prefill.rows() if x.op not in ("attention", "cp_comm")]  # noqa: E731
    assert same(r) == same(share)
    (a,) = _rows(r, "attention")
    if algo == "ulysses":
        assert a.time_s == _rows(whole, "attention")[0].time_s / cp
    else:
        assert a.time_s == _rows(share, "attention")[0].time_s * cp
    assert a.time_s < _rows(whole, "attention")[0].time_s


def test_the_kv_exchange_rows_carry_the_hand_counted_bytes():
    """Ring: cp - 1 messages of the rank's K and V per layer; all-gather: the other ranks'
    blocks (the same bytes, none hidden); Ulysses: Q, K, V and the output re-sharded (each
    all-to-all sends (cp - 1) / cp of the rank's buffer)."""
    cp, p, layers = 8, LONG, 32
    block = p // cp * KV_PER_TOKEN
    rows = {a: _rows(infer(LLAMA, DGX, InferencePlan(cp=cp, cp_algo=a), "bf16", 1, prompt=p),
                     "cp_comm") for a in CP_ALGOS}
    assert all(len(v) == 1 and v[0].stream == "cp_comm" for v in rows.values())
    assert rows["ring"][0].bytes == layers * (cp - 1) * block
    assert rows["allgather"][0].bytes == layers * (cp - 1) * block
    q_out = 2 * p // cp * 32 * 128 * 2  # Q and the output: 32 heads
    assert rows["ulysses"][0].bytes == pytest.approx(layers * (cp - 1) / cp * (q_out + block))
    # the ring's messages travel under the attention blocks; the all-gather waits for its own
    assert rows["ring"][0].time_s < rows["allgather"][0].time_s


def test_long_prompt_ttft_drops_with_cp_and_beats_tp_alone():
    """Llama-3-8B, a 128K prompt on 8 H100s: tp 8 all-reduces every layer's activations over
    the whole prompt; cp 8 sends only K and V (8 KV heads), so every algorithm is faster, and
    all are far faster than one GPU (which holds the model and its cache)."""
    ttft = lambda **kw: infer(LLAMA, DGX, InferencePlan(**kw), "bf16", 1,  # noqa: E731
                              prompt=LONG).prefill.time_s
    one, tp8 = ttft(), ttft(tp=8)
    for algo in CP_ALGOS:
        assert ttft(cp=8, cp_algo=algo) < tp8 < one
    assert ttft(tp=2, cp=4) < tp8


def test_each_cp_rank_holds_its_tokens_kv_cache_and_decodes_over_it():
    one = infer(LLAMA, DGX, InferencePlan(), "bf16", 2, prompt=LONG, context=LONG)
    r = infer(LLAMA, DGX, InferencePlan(cp=8), "bf16", 2, prompt=LONG, context=LONG)
    assert r.kv_cache_bytes == one.kv_cache_bytes / 8 == 2 * LONG // 8 * 32 * KV_PER_TOKEN
    assert r.weights_bytes == one.weights_bytes  # cp ranks each hold the whole model
    share = infer(LLAMA, DGX, InferencePlan(), "bf16", 2, context=LONG // 8)
    att = lambda res: [x for x in res.decode.rows() if x.op == "attention"]  # noqa: E731
    assert att(r) == att(share)  # a decode step's attention over the rank's 1 / cp
    (ag,) = [x for x in r.decode.rows() if x.op == "cp_comm"]
    # the partial outputs and their log-sum-exp in fp32: 32 heads x (128 + 1) per sequence
    assert ag.bytes == 32 * 7 * 2 * 32 * (128 + 1) * 4
    assert r.as_dict()["gpus"] == 8 and r.as_dict()["cp"] == 8


@pytest.mark.parametrize("kw, prompt, match", [
    (dict(cp=0), 4096, "inference plan cp"),
    (dict(cp_algo="tree"), 4096, "cp_algo must be one of"),
    (dict(cp=2, ep=2, tp=2), 4096, "drop ep"),
    (dict(cp=8), 4104, "divisible by 2 x cp = 16"),
    (dict(tp=2, cp=8, cp_algo="ulysses"), 4096, "must be divisible by cp 8"),
])
def test_bad_cp_plans_are_refused(kw, prompt, match):
    with pytest.raises(InputError, match=match):
        infer(LLAMA, DGX, InferencePlan(**kw), "bf16", 1, prompt=prompt)


def test_serving_and_chakra_refuse_cp():
    from accelsim.chakra.infer_graph import infer_export
    from accelsim.serving.run import Deployment

    with pytest.raises(InputError, match="context parallelism"):
        Deployment(DGX, LLAMA, InferencePlan(cp=2), "bf16")
    r = infer(LLAMA, DGX, InferencePlan(cp=2), "bf16", 1, prompt=4096)
    with pytest.raises(InputError, match="context parallelism"):
        infer_export(r)


def test_cli_cp(capsys):
    args = ["infer", "--system", "dgx-h100", "--model", "llama3-8b", "--scheme", "bf16",
            "--clock", "boost", "--batch", "1", "--prompt", "65536"]
    assert main([*args, "--cp", "8", "--cp-algo", "ulysses", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["cp"], d["cp_algo"], d["gpus"]) == (8, "ulysses", 8)
    for extra, msg in ((["--cp", "3"], "divisible by 2 x cp"),
                       (["--cp", "2", "--serve"], "--serve sweeps decode steps"),
                       (["--cp-algo", "tree"], "invalid choice")):
        assert main([*args, *extra]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]  # notes before, usage for argparse
        assert msg in last and last.startswith("accelsim infer: error:")
