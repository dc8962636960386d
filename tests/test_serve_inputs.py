"""accelsim serve's inputs: the request stream (files, shipped lengths, gamma arrivals) and
every bad value refused in one line, from the library and the command line."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim import build_system
from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.serving import serve
from accelsim.serving.arrivals import Lengths, generate, read_arrivals, read_lengths

H100 = build_system("h100-sxm").with_boost_clock()  # the clock serve times iterations at


def test_the_shipped_conversation_lengths_have_the_published_sharegpt_means():
    """vLLM (Kwon et al., SOSP 2023) Fig. 11: ShareGPT means 161.31 in, 337.99 out."""
    lens = read_lengths("conversation")
    assert np.mean(lens.inputs) == pytest.approx(161.31, abs=0.01)
    assert np.mean(lens.outputs) == pytest.approx(337.99, abs=0.01)
    assert max(i + o for i, o in zip(lens.inputs, lens.outputs)) <= 2048


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_the_burstiness_cv(shape):
    reqs = generate(5.0, 40_000, Lengths.fixed(8, 8), np.random.default_rng(0), shape)
    gaps = np.diff([r.arrival_s for r in reqs])
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(shape), rel=0.05)


def test_an_arrivals_file_is_read_sorted_by_time(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("arrival_s,input_tokens,output_tokens,prefix,prefix_tokens\n"
                 "0.5,100,10,sys,64\n0.0,20,5,,\n")
    reqs = read_arrivals(f)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.prefix, r.prefix_tokens)
            for r in reqs] == [(0.0, 20, 5, "", 0), (0.5, 100, 10, "sys", 64)]
    j = tmp_path / "a.jsonl"
    j.write_text('{"arrival_s": 0.1, "input_tokens": 64, "output_tokens": 8}\n')
    r = serve(H100, "llama3-8b", "bf16", arrivals=j)
    assert r.as_dict()["requests"] == 1


@pytest.mark.parametrize("text,msg", [
    ("arrival_s,input_tokens\n0,5\n", "row 1: missing output_tokens"),
    ("arrival_s,input_tokens,output_tokens\nsoon,5,5\n", "arrival_s must be a number"),
    ("arrival_s,input_tokens,output_tokens\n-1,5,5\n", "finite and >= 0"),
    ("arrival_s,input_tokens,output_tokens\n0,2.5,5\n", "input_tokens must be an integer"),
    ("arrival_s,input_tokens,output_tokens\n0,0,5\n", "input_tokens must be an integer in"),
    ("arrival_s,input_tokens,output_tokens\n", "no requests"),
    ("arrival_s,input_tokens,output_tokens,prefix\n0,5,5,sys\n", "missing prefix_tokens"),
    ("arrival_s,input_tokens,output_tokens,prefix,prefix_tokens\n0,5,5,sys,9\n",
     "longer than the prompt"),
    ("arrival_s,input_tokens,output_tokens,prefix_tokens\n0,5,5,3\n", "without a prefix id"),
])
def test_bad_arrivals_files_name_the_row_and_the_key(tmp_path, text, msg):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(InputError, match=msg):
        read_arrivals(f)


@pytest.mark.parametrize("kw,msg", [
    (dict(rate=0.0), "rate must be a positive"),
    (dict(rate=float("nan")), "rate must be a positive"),
    (dict(rate=1.0, burstiness=0.0), "burstiness"),
    (dict(rate=1.0, requests=0), "requests must be"),
    (dict(rate=1.0, input_tokens=None), "give input_tokens and output_tokens"),
    (dict(rate=None), "give a request rate"),
    (dict(rate=1.0, lengths="conversation"), "not both"),
    (dict(rate=1.0, max_batch=0), "max_batch"),
    (dict(rate=1.0, spec_decode=3), "needs accept_rate"),
    (dict(rate=1.0, accept_rate=0.5), "accept_rate is for speculative"),
    (dict(rate=1.0, spec_decode=3, accept_rate=1.0), "accept_rate must be in"),
    (dict(rate=1.0, expert_skew=2.0), "expert_skew is for MoE"),
    (dict(rate=1.0, host_overhead_s=-1e-3), "host_overhead_s must be"),
    (dict(rate=1.0, seed=-1), "seed must be"),
    (dict(rate=1.0, slo_ttft_s=0.0), "slo_ttft_s must be"),
    (dict(rate=1.0, replicas=0), "replicas must be"),
    (dict(rate=1.0, input_tokens=200_000, output_tokens=10), "over max_batched_tokens"),
    (dict(rate=1.0, input_tokens=200_000, output_tokens=10, chunked_prefill=True,
          memory_reserve_GiB=40.0), "more than the"),
    (dict(rate=1.0, chunked_prefill=1), "chunked_prefill must be"),
    (dict(rate=1.0, prefix_hit_rate=0.5), "prefix_hit_rate is for the prefix cache"),
    (dict(rate=1.0, preemption="evict"), "unknown preemption 'evict'"),
    (dict(rate=1.0, host_link_GBps=64.0), "host_link_GBps is for KV offload"),
    (dict(rate=1.0, host_kv_GiB=1.0), "host_kv_GiB is for KV offload"),
    (dict(rate=1.0, preemption="swap", host_link_GBps=0.0), "host_link_GBps"),
    (dict(rate=1.0, preemption="swap", host_link_GBps=float("nan")), "host_link_GBps"),
    (dict(rate=1.0, preemption="swap", host_link_GBps=64e9), "host_link_GBps"),
    (dict(rate=1.0, preemption="swap", host_kv_GiB=0.0), "host_kv_GiB"),
    (dict(rate=1.0, preemption="swap", host_kv_GiB=True), "host_kv_GiB"),
    (dict(rate=1.0, preemption="swap", host_kv_GiB="4"), "host_kv_GiB"),
    (dict(rate=1.0, prefix_cache=True, prefix_hit_rate=1.5), "prefix hit rate must be"),
])
def test_bad_library_arguments_are_refused_by_name(kw, msg):
    args = dict(requests=5, input_tokens=64, output_tokens=8)
    args.update(kw)
    with pytest.raises(InputError, match=msg):
        serve(H100, "llama3-8b", "bf16", **args)


BASE = "serve --system h100-sxm --model llama3-8b --scheme bf16 "


@pytest.mark.parametrize("argv,msg", [
    (BASE + "--input-tokens 8 --output-tokens 8", "give --rate QPS"),
    (BASE + "--rate 1 --rates 1,2 --input-tokens 8 --output-tokens 8", "--rate or --rates"),
    (BASE + "--rate 1", "give --input-tokens and --output-tokens"),
    (BASE + "--rate -1 --input-tokens 8 --output-tokens 8", "argument --rate"),
    (BASE + "--rates 1,x --input-tokens 8 --output-tokens 8", "argument --rates"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --spec-decode 2", "go together"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --accept-rate 2", "--accept-rate"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --out x.csv", "--out is for --rates"),
    (BASE + "--rates 1,2 --input-tokens 8 --output-tokens 8 --trace t.json", "one run"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --requests-out r.txt", ".csv"),
    (BASE + "--rate 1 --lengths {tmp}/none.csv", "no such file"),
    (BASE + "--arrivals {tmp}/none.csv", "no such file"),
    (BASE + "--rate 1 --arrivals {tmp}/none.csv", "--arrivals sets times"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --expert-skew 2", "dense"),
    ("serve --system h100-sxm --model llama3-70b --scheme bf16 --rate 1 --input-tokens 8 "
     "--output-tokens 8", "no GPU memory for a KV cache"),
])
def test_bad_command_lines_are_one_line_errors(argv, msg, tmp_path, capsys):
    assert main(argv.format(tmp=tmp_path).split()) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1, err


def test_a_rates_sweep_writes_one_row_per_rate_and_a_trace_opens(tmp_path, capsys):
    import json

    import pandas as pd

    out = tmp_path / "s.csv"
    assert main((BASE + f"--rates 1,4 --requests 20 --input-tokens 64 --output-tokens 8 "
                 f"--out {out}").split()) == 0
    df = pd.read_csv(out)
    assert list(df["rate_requests_per_s"]) == [1, 4]
    trace = tmp_path / "t.json"
    assert main((BASE + f"--rate 2 --requests 10 --input-tokens 64 --output-tokens 8 "
                 f"--trace {trace}").split()) == 0
    ev = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "b" for e in ev) == 10 == sum(e["ph"] == "e" for e in ev)
    assert all(e["dur"] > 0 for e in ev if e["ph"] == "X")


@pytest.mark.parametrize("argv,msg", [
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --disagg 2", "expected PxD"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --disagg 0x2", "replicas in"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --prefill-tp 2", "for --disagg"),
    (BASE + "--rate 1 --input-tokens 8 --output-tokens 8 --disagg 1x1 --replicas 2",
     "drop --replicas"),
])
def test_bad_disaggregation_flags_are_one_line_errors(argv, msg, capsys):
    assert main(argv.split()) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1, err


def test_disagg_runs_from_the_command_line(capsys):
    import json

    argv = ("serve --system dgx-h100 --model llama3-8b --scheme bf16 --rate 2 --requests 20 "
            "--input-tokens 256 --output-tokens 16 --disagg 1x2 --prefill-tp 2 --json")
    assert main(argv.split()) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["disagg"] == "1x2" and d["gpus"] == 4 and d["kv_transfer_s_p50"] > 0


def test_serve_says_which_clock_ran(capsys):
    """The default is the power-limited clock over the measured window (a light stream: the
    chip's top clock); ``--clock boost`` the preset's fixed one; the text says which."""
    args = ("serve --system h100-sxm --model llama3-8b --scheme bf16 --rate 1 --requests 4 "
            "--input-tokens 64 --output-tokens 4").split()
    assert main(args) == 0
    assert "clock power-limited over the measured window: 1980 MHz (700 W limit)" \
        in capsys.readouterr().out
    assert main([*args, "--clock", "boost"]) == 0
    assert "clock 1830 MHz fixed" in capsys.readouterr().out


def test_plot_draws_the_latency_cdf_of_requests_out(tmp_path, capsys):
    req = tmp_path / "r.csv"
    assert main((BASE + f"--rate 4 --requests 30 --input-tokens 64 --output-tokens 8 "
                 f"--requests-out {req}").split()) == 0
    png = tmp_path / "cdf.png"
    assert main(["plot", str(req), "--cdf", "time_to_first_token_s", "--out", str(png)]) == 0
    assert png.stat().st_size > 1000
    assert main(["plot", str(req), "--cdf", "nosuch", "--out", str(png)]) == 2
    assert "--cdf nosuch: not a column" in capsys.readouterr().err


def test_a_rate_sweep_journals_each_rate_and_resumes(tmp_path, capsys):
    """--rates --out appends each rate's row as it finishes; a rerun with the same settings
    computes only the rates missing (its rows equal a fresh sweep's), and a journal of other
    settings is refused in one line."""
    import pandas as pd

    out = tmp_path / "rates.csv"
    cmd = BASE + f"--requests 30 --input-tokens 64 --output-tokens 8 --out {out} --rates "
    assert main((cmd + "1,4").split()) == 0
    assert len(pd.read_csv(out)) == 2
    assert main((cmd + "1,4,16").split()) == 0
    resumed = pd.read_csv(out)
    fresh = tmp_path / "fresh.csv"
    assert main((cmd.replace(str(out), str(fresh)) + "1,4,16").split()) == 0
    capsys.readouterr()
    cols = ["rate_requests_per_s", "requests_per_s", "time_to_first_token_s_p50"]
    pd.testing.assert_frame_equal(resumed[cols], pd.read_csv(fresh)[cols])
    assert main((cmd.replace("--requests 30", "--requests 31") + "1,4").split()) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and len(err.strip().splitlines()) == 1
