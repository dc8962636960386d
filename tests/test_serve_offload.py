"""KV offload to host memory (``serve --kv-offload``, issue 35 item 5): a preempted sequence's
KV blocks go to host memory over the chip's sourced ``[chip] host_link_GBps`` and come back
before it runs again, instead of being recomputed; the copies' time is their bytes over the
link, every request finishes, and nothing changes while the cache never fills."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from accelsim import build_system
from accelsim.cli import main
from accelsim.engine.inference import kv_cache_bytes_per_gpu
from accelsim.errors import InputError
from accelsim.llm.inference import inference_model, inference_plan
from accelsim.serving import serve

H100 = build_system("h100-sxm").with_boost_clock()  # the clock serve times iterations at
# a cache of ~22k tokens (62 GiB set aside) for 120 requests of 1280 tokens: it fills
FULL = dict(rate=30.0, requests=120, input_tokens=1024, output_tokens=256,
            memory_reserve_GiB=62.0, seed=3)
SETTINGS = ("preemption", "host_link_GBps", "host_kv_GiB")


def _run(**kw):
    return serve(H100, "llama3-8b", "bf16", **kw)


@pytest.fixture(scope="module")
def runs():
    return {"recompute": _run(**FULL), "offload": _run(preemption="swap", **FULL),
            "slow": _run(preemption="swap", host_link_GBps=8.0, **FULL)}


def test_the_presets_host_link_is_the_datasheets_pcie_rate_per_direction():
    """The datasheets' "PCIe Gen5: 128 GB/s" / "PCIe Gen4: 64 GB/s" count both directions."""
    for name, gbps in (("h100-sxm", 64), ("dgx-h100", 64), ("h200-sxm", 64), ("b200", 64),
                       ("a100-sxm", 32), ("a40", 32), ("v100-sxm2", 16)):
        assert build_system(name).chip.host_link_Bps == gbps * 1e9, name
    assert build_system("rapid-1chip").chip.host_link_Bps is None


def test_offload_keeps_the_cache_where_recompute_computes_it_again(runs):
    rec, off = runs["recompute"].as_dict(), runs["offload"].as_dict()
    assert rec["preemptions"] > 0 and off["preemptions"] > 0
    assert rec["recomputed_tokens"] > 0 and rec["kv_offloads"] == 0
    assert rec["kv_offloaded_bytes"] == 0 and rec["kv_offload_s"] == 0
    # unlimited host memory: every preemption is an offload, nothing is computed twice
    assert off["recomputed_tokens"] == 0 and off["kv_offloads"] == off["preemptions"]
    prompts = FULL["requests"] * FULL["input_tokens"]
    # a re-prefill computes the dropped tokens and the next one (which a decode would have)
    assert runs["recompute"].log.iterations[:, 3].sum() == \
        prompts + rec["recomputed_tokens"] + rec["preemptions"]
    assert runs["offload"].log.iterations[:, 3].sum() == prompts


def test_the_copies_take_their_bytes_over_the_chips_host_link(runs):
    m = inference_model("llama3-8b")
    per_token = kv_cache_bytes_per_gpu(m, inference_plan(H100, m), 1, 1)
    for key, gbps in (("offload", 64.0), ("slow", 8.0)):
        d = runs[key].as_dict()
        assert d["host_link_GBps"] == gbps
        # out and back: every offloaded token crosses twice, whole tokens of the cache
        assert d["kv_offloaded_bytes"] > 0
        assert d["kv_offloaded_bytes"] / per_token == pytest.approx(
            round(d["kv_offloaded_bytes"] / per_token), abs=1e-6)
        assert d["kv_offload_s"] == pytest.approx(d["kv_offloaded_bytes"] / (gbps * 1e9),
                                                  rel=1e-12)
    fast, slow = runs["offload"].as_dict(), runs["slow"].as_dict()
    assert slow["kv_offloaded_bytes"] == fast["kv_offloaded_bytes"]  # the same swaps
    # the copies stall their iterations: a slower link stretches the run by their time
    busy = {k: float((runs[k].log.iterations[:, 2] - runs[k].log.iterations[:, 1]).sum())
            for k in ("offload", "slow")}
    assert busy["slow"] - busy["offload"] == pytest.approx(
        slow["kv_offload_s"] - fast["kv_offload_s"], rel=1e-9)


@pytest.mark.parametrize("key", ["recompute", "offload", "slow"])
def test_every_request_finishes_with_its_tokens(runs, key):
    r = runs[key]
    t = r.requests
    assert len(t) == FULL["requests"] and (t["finish_s"] > t["arrival_s"]).all()
    assert (t["output_tokens"] == FULL["output_tokens"]).all()
    assert (t["time_to_first_token_s"] > 0).all()
    assert r.as_dict()["preemptions"] == int(t["preemptions"].sum())


def test_host_memory_too_small_for_any_sequence_is_recompute():
    """0.1 GiB holds 819 tokens of Llama-3-8B's bf16 cache (128 KiB each): less than any
    preempted sequence (a 1024-token prompt and more), so every preemption recomputes and the
    run is the recompute run, bit for bit."""
    small = _run(preemption="swap", host_kv_GiB=0.1, **FULL)
    rec = _run(**FULL)
    a, b = small.as_dict(), rec.as_dict()
    assert a["kv_offloads"] == 0 and a["host_kv_GiB"] == 0.1
    assert {k: v for k, v in a.items() if k not in SETTINGS} == \
        {k: v for k, v in b.items() if k not in SETTINGS}


def test_a_host_budget_between_offloads_some_and_recomputes_the_rest(runs):
    mid = _run(preemption="swap", host_kv_GiB=0.3, **FULL).as_dict()  # ~2,450 tokens
    rec, off = runs["recompute"].as_dict(), runs["offload"].as_dict()
    assert 0 < mid["kv_offloads"] < mid["preemptions"]
    assert 0 < mid["recomputed_tokens"] < rec["recomputed_tokens"]
    assert off["recomputed_tokens"] == 0


def test_no_offload_while_the_cache_never_fills():
    kw = dict(rate=2.0, requests=40, input_tokens=512, output_tokens=64, seed=1)
    plain, off = _run(**kw), _run(preemption="swap", **kw)
    a, b = plain.as_dict(), off.as_dict()
    assert a["preemptions"] == 0 and b["kv_offloads"] == 0 and b["kv_offload_s"] == 0
    assert {k: v for k, v in a.items() if k not in SETTINGS} == \
        {k: v for k, v in b.items() if k not in SETTINGS}
    pd.testing.assert_frame_equal(plain.requests, off.requests)


def test_a_chip_without_a_host_link_refuses_offload_naming_the_key(tmp_path, capsys):
    bare = dataclasses.replace(H100, chip=dataclasses.replace(H100.chip, host_link_Bps=None))
    with pytest.raises(InputError, match=r"\[chip\] host_link_GBps"):
        serve(bare, "llama3-8b", "bf16", preemption="swap", rate=1.0, requests=5,
              input_tokens=64, output_tokens=8)
    # the override gives it one
    r = serve(bare, "llama3-8b", "bf16", preemption="swap", host_link_GBps=32.0, rate=1.0,
              requests=5, input_tokens=64, output_tokens=8)
    assert r.as_dict()["host_link_GBps"] == 32.0
    text = (Path(__file__).resolve().parents[1] / "arch_configs" / "h100-sxm.toml").read_text()
    f = tmp_path / "nolink.toml"
    f.write_text("\n".join(line for line in text.splitlines()
                           if not line.startswith("host_link_GBps")))
    argv = (f"serve --system {f} --model llama3-8b --scheme bf16 --rate 1 --requests 5 "
            "--input-tokens 64 --output-tokens 8 --kv-offload").split()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "[chip] host_link_GBps" in err and err.count("\n") == 1, err


BASE = ("serve --system h100-sxm --model llama3-8b --scheme bf16 --rate 1 --requests 5 "
        "--input-tokens 64 --output-tokens 8 ")


@pytest.mark.parametrize("extra,msg", [
    ("--kv-offload --preemption recompute", "drop --preemption recompute"),
    ("--host-kv-GiB 4", "--host-kv-GiB is for --kv-offload"),
    ("--host-link-GBps 64", "--host-link-GBps is for --kv-offload"),
    ("--kv-offload --host-kv-GiB 0", "argument --host-kv-GiB"),
    ("--kv-offload --host-kv-GiB nan", "argument --host-kv-GiB"),
    ("--kv-offload --host-link-GBps 0", "argument --host-link-GBps"),
    ("--kv-offload --host-link-GBps 1e12", "argument --host-link-GBps"),
])
def test_bad_offload_flags_are_one_line_errors(extra, msg, capsys):
    assert main((BASE + extra).split()) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1, err


def test_kv_offload_is_swap_preemption_in_the_json(capsys):
    import json

    assert main((BASE + "--kv-offload --host-kv-GiB 4 --json").split()) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["preemption"] == "swap" and d["host_link_GBps"] == 64.0 and d["host_kv_GiB"] == 4
    for k in ("kv_offloads", "kv_offloaded_bytes", "kv_offload_s", "recomputed_tokens"):
        assert d[k] == 0, k  # five short requests never fill the cache


@pytest.mark.parametrize("kw,msg", [
    (dict(s_per_token=0.0, bytes_per_token=1.0), "s_per_token"),
    (dict(s_per_token=1e-6, bytes_per_token=float("nan")), "bytes_per_token"),
    (dict(s_per_token=1e-6, bytes_per_token=1.0, capacity_tokens=-1), "capacity"),
    (dict(s_per_token=1e-6, bytes_per_token=1.0, capacity_tokens=1.5), "capacity"),
])
def test_a_bad_host_offload_is_refused_by_name(kw, msg):
    from accelsim.serving.scheduler import HostOffload

    with pytest.raises(InputError, match=msg):
        HostOffload(**kw)


@pytest.mark.parametrize("bps", [0.0, -64e9, float("inf"), 1e30, True])
def test_a_chip_refuses_an_implausible_host_link(bps):
    with pytest.raises(InputError, match="host_link_Bps"):
        dataclasses.replace(H100.chip, host_link_Bps=bps)
    with pytest.raises(InputError, match="host_link_Bps"):
        H100.with_host_link_bandwidth(bps)
