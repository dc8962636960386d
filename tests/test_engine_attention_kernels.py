"""Attention kernels by their published bars (accelsim.engine.attention_kernels) and the attention
variants (ALiBi, sliding windows): the owner function against the data file read independently,
the interpolation and its clamps, the stated fallback rules, ALiBi's free bias, the banded
FLOPs against a brute-force count, and the errors."""

from __future__ import annotations

import csv
import math
from dataclasses import replace

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine.attention_kernels import (DATA, FlashImpl, GpuClass, causal_ratio,
                                               gpu_class, kernel_efficiency)
from accelsim.engine.decoder import Decoder, layer_ops
from accelsim.engine.graph import AttentionOp, flash_attention_parts
from accelsim.engine.stack import MEGATRON, PYTORCH, AttentionKernel, FlashKernel
from accelsim.errors import InputError
from accelsim.workload.transformer import PRESETS, PositionKind, attended_pairs

H100 = build_system("h100-sxm")
A100 = build_system("a100-sxm")
BW = 3e12


def _bars() -> list[dict]:
    with DATA.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _attn(**kw) -> AttentionOp:
    return AttentionOp(**{**dict(batch=2, heads=16, seq=4096, head_dim=128, flash=True), **kw})


# ---- the data and the owner ---------------------------------------------------------------------

def test_every_bar_has_a_source_and_the_owner_returns_it():
    """Each non-causal bar (causal A100 bars: the only ones) comes back exactly as TFLOPS over
    the GPU's peak; forward + backward bars stand for both passes."""
    rows = _bars()
    assert len(rows) == 144 and all(r["source"].strip() for r in rows)
    own = {(r["gpu"], r["kernel"], r["pass"]) for r in rows if r["causal"] == "0"}
    for r in rows:
        if r["causal"] == "1" and (r["gpu"], r["kernel"], r["pass"]) in own:
            continue  # causal forward bars set the kernel's causal ratio only
        want = float(r["tflops"]) / float(r["peak_tflops"])
        passes = (False, True) if r["pass"] == "fwd_bwd" else (r["pass"] == "bwd",)
        for backward in passes:
            got = kernel_efficiency(r["kernel"], r["gpu"], backward, r["causal"] == "1",
                                    int(r["head_dim"]), int(r["seq"]))
            assert got == pytest.approx(want, rel=1e-12), r


@pytest.mark.parametrize("impl", list(FlashImpl))
@pytest.mark.parametrize("backward", [False, True])
def test_efficiency_rises_with_sequence_and_head_dim_as_the_bars_do(impl, backward):
    """Every kernel's published bars rise from 512 tokens to 16k, and from head dim 64 to 128
    where the bars do (H100); the curve between them is linear in log2 of each, the nearest
    bar outside."""
    e = lambda hd, s: kernel_efficiency(impl, GpuClass.HOPPER, backward, False, hd, s)  # noqa
    for hd in (64, 128):
        assert e(hd, 512) < e(hd, 2048) and e(hd, 512) < e(hd, 16384)
        assert e(hd, 256) == e(hd, 512) and e(hd, 65536) == e(hd, 16384)  # clamped
        mid = e(hd, round(2 ** 10.5))  # between the 1k and 2k bars
        assert mid == pytest.approx((e(hd, 1024) + e(hd, 2048)) / 2, rel=1e-3)
    # head dim 128 above 64 at 16k wherever the bars say so (Triton's forward: 395 < 403)
    bars = {int(r["head_dim"]): float(r["tflops"]) for r in _bars() if (
        r["gpu"], r["kernel"], r["pass"], r["causal"], r["seq"]) == (
        "h100", impl, "bwd" if backward else "fwd", "0", "16384")}
    if bars:
        assert (e(64, 16384) < e(128, 16384)) == (bars[64] < bars[128])
        assert e(90, 4096) == pytest.approx(
            e(64, 4096) + (e(128, 4096) - e(64, 4096)) * (math.log2(90) - 6), rel=1e-12)
    else:  # Triton's backward: its forward at FA2's ratio
        assert e(64, 16384) > e(128, 16384)
    assert e(256, 4096) == e(128, 4096) and e(32, 4096) == e(64, 4096)


def test_causal_runs_at_the_plateau_ratio_and_the_a100_bars_are_causal():
    """H100: the non-causal curve times causal / non-causal at 16k, head dim 128 (cuDNN: 539 /
    595, what our device measurements agree with); the A100 bars are causal forward +
    backward (FA2 paper Fig. 4c), so a causal op reads them as they are."""
    assert causal_ratio(FlashImpl.CUDNN, GpuClass.HOPPER) == pytest.approx(539 / 595)
    assert causal_ratio(FlashImpl.FA2, GpuClass.HOPPER) == pytest.approx(335 / 370)
    for hd, s in ((64, 1024), (128, 8192)):
        nc = kernel_efficiency("cudnn", "h100", False, False, hd, s)
        assert kernel_efficiency("cudnn", "h100", False, True, hd, s) == \
            pytest.approx(nc * 539 / 595, rel=1e-12)
    assert causal_ratio(FlashImpl.FA2, GpuClass.AMPERE) == 1.0
    assert kernel_efficiency("fa2", "a100", True, True, 64, 16384) == pytest.approx(171 / 312)


def test_kernels_without_bars_run_what_a_stack_runs_there():
    """On an A100, FA3 (Hopper-only) and cuDNN (SDPA runs FA2 there) are FA2; Triton's H100
    backward (no bars) is its forward at FA2's backward / forward ratio."""
    for impl in (FlashImpl.FA3, FlashImpl.CUDNN):
        for backward in (False, True):
            assert kernel_efficiency(impl, "a100", backward, True, 128, 8192) == \
                kernel_efficiency("fa2", "a100", backward, True, 128, 8192)
    for hd, s in ((64, 512), (128, 16384)):
        t, f2, b2 = (kernel_efficiency(k, "h100", b, False, hd, s)
                     for k, b in (("triton", False), ("fa2", False), ("fa2", True)))
        assert kernel_efficiency("triton", "h100", True, False, hd, s) == \
            pytest.approx(t * b2 / f2, rel=1e-12)


def test_chips_read_the_bars_of_their_tensor_core_class():
    for name, cls in (("a100-sxm", GpuClass.AMPERE), ("v100-sxm2", GpuClass.AMPERE),
                      ("h100-sxm", GpuClass.HOPPER), ("h200-sxm", GpuClass.HOPPER),
                      ("b200", GpuClass.HOPPER)):
        assert gpu_class(build_system(name).chip) is cls, name


def test_bad_arguments_are_input_errors():
    with pytest.raises(InputError, match="seq"):
        kernel_efficiency("fa2", "h100", False, False, 128, 0)
    with pytest.raises(InputError, match="head_dim"):
        kernel_efficiency("fa2", "h100", False, False, True, 512)
    with pytest.raises(ValueError):
        kernel_efficiency("fa9", "h100", False, False, 128, 512)


def test_stacks_name_their_kernel_once():
    """Both presets run cuDNN (SDPA's and Transformer Engine's choice on Hopper, FA2 on an
    A100); megatron keeps the unfused kernel for a model without flash attention."""
    assert PYTORCH.flash == MEGATRON.flash == FlashKernel(FlashImpl.CUDNN)
    assert PYTORCH.attention is AttentionKernel.FLASH
    assert MEGATRON.attention is AttentionKernel.AS_MODEL


def test_the_kernel_sets_the_attention_time():
    """Same op, same chip: forward time over the kernel's own bars (compute bound)."""
    op = _attn(causal=False, seq=16384, batch=1)
    peak = H100.chip.peak_flops("bf16")
    launch = H100.chip.kernel_launch_s
    for impl, tflops in (("fa2", 370), ("fa3", 648), ("cudnn", 595), ("triton", 395)):
        f, _, bound = flash_attention_parts(H100, op, FlashKernel(impl), BW)
        assert bound == "compute"
        assert f - launch == pytest.approx(op.flops / (peak * tflops / 989.4), rel=1e-12)


# ---- ALiBi ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["fa2", "cudnn", "triton"])
@pytest.mark.parametrize("system", [H100, A100], ids=["h100", "a100"])
def test_alibi_costs_what_plain_flash_costs(impl, system):
    """FlashAttention-2 >= 2.4 adds ALiBi's bias in-kernel with "almost no loss"
    (Dao-AILab/flash-attention#540); cuDNN and llm-foundry's Triton kernel too."""
    plain = _attn()
    assert flash_attention_parts(system, replace(plain, alibi=True), FlashKernel(impl), BW) == \
        flash_attention_parts(system, plain, FlashKernel(impl), BW)
    assert replace(plain, alibi=True).flops == plain.flops


def test_flash_attention_3_refuses_alibi():
    with pytest.raises(InputError, match="FlashAttention-3 has no ALiBi"):
        flash_attention_parts(H100, _attn(alibi=True), FlashKernel("fa3"), BW)


def test_an_alibi_decoder_has_no_position_table_and_tells_its_attention():
    cfg = replace(PRESETS["gpt2-small"], positions=PositionKind.ALIBI)
    d = Decoder(cfg, 4096)  # no learned table to run out of
    assert d.n_positions == 0 and d.alibi
    assert PRESETS["gpt2-small"].n_params - cfg.n_params == 1024 * 768
    _, attn, _ = layer_ops(d, False, 4096, 1, 1, 1, False, "bf16")
    assert attn.alibi and attn.window == 0
    with pytest.raises(InputError, match="positions"):
        replace(cfg, positions="xpos")


# ---- sliding windows -------------------------------------------------------------------------------

def _brute_pairs(seq: int, window: int) -> int:
    """Query-key pairs (i, j) a causal banded kernel computes, counted one by one."""
    return sum(1 for i in range(seq) for j in range(seq) if 0 <= i - j < window)


@pytest.mark.parametrize("seq,window", [(37, 8), (64, 1), (50, 49), (9, 9), (9, 20)])
def test_window_flops_are_the_exact_banded_count(seq, window):
    """A causal flash kernel over a band computes exactly the pairs with 0 <= i - j < w
    (counted one by one); a window at least the sequence leaves the causal half."""
    op = _attn(seq=seq, window=window, head_dim=64, heads=3, batch=2)
    pairs = _brute_pairs(seq, window)
    assert attended_pairs(seq, window, True) == pairs
    if window < seq:
        assert op.flops == pytest.approx(2 * 2 * op.batch * op.heads * op.head_dim * pairs,
                                         rel=1e-12)
        assert op.span == window
    else:
        assert op.flops == _attn(seq=seq, head_dim=64, heads=3, batch=2).flops
        assert op.span == seq
    # an unfused kernel computes (and masks) every score
    assert replace(op, flash=False).flops == replace(op, flash=False, window=0).flops


def test_a_window_shortens_long_sequence_attention():
    """32k tokens with a 4k window: the band's FLOPs at the 4k efficiency."""
    full, band = _attn(seq=32768, batch=1), _attn(seq=32768, batch=1, window=4096)
    assert band.flops / full.flops == pytest.approx(
        attended_pairs(32768, 4096) / (32768 ** 2 / 2), rel=1e-12)
    k = FlashKernel()
    (ff, fb, _), (bf, bb, _) = (flash_attention_parts(H100, op, k, BW) for op in (full, band))
    assert bf < ff / 3 and bb < fb / 3
    d = Decoder(replace(PRESETS["llama3-8b"], sliding_window=4096), 32768, flash_attention=True)
    _, attn, _ = layer_ops(d, False, 32768, 1, 1, 1, False, "bf16")
    assert attn.window == 4096 and attn.flops == pytest.approx(
        4 * 32 * 128 * attended_pairs(32768, 4096), rel=1e-12)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "8"])
def test_bad_windows_are_input_errors(bad):
    with pytest.raises(InputError, match="window"):
        _attn(window=bad)
    with pytest.raises(InputError, match="sliding_window"):
        replace(PRESETS["llama3-8b"], sliding_window=bad if bad != -1 else 0)


def test_llm_and_infer_take_alibi_and_window(capsys):
    common = ["llm", "--system", "dgx-h100", "--model", "llama3-8b", "--seq", "8192",
              "--gpus", "8", "--global-batch", "64", "--scheme", "bf16", "--json"]
    assert main(common) == 0
    import json

    base = json.loads(capsys.readouterr().out)
    assert main([*common, "--window", "2048"]) == 0
    banded = json.loads(capsys.readouterr().out)
    assert banded["iteration_time_s"] < base["iteration_time_s"]
    assert main([*common, "--alibi", "--attention-kernel", "fa3"]) == 2
    assert "FlashAttention-3 has no ALiBi" in capsys.readouterr().err
    assert main([*common, "--window", "0"]) == 2
    # the plan search rebuilds the model from --model in its workers: it refuses the variants
    assert main([*common[:-1], "--search", "--window", "1024"]) == 2
    assert "drop --window" in capsys.readouterr().err
    assert main(["infer", "--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16",
                 "--batch", "1", "--prompt", "8192", "--window", "1024", "--alibi"]) == 0


def test_op_attention_takes_the_kernel_and_the_variants(capsys):
    import json

    base = ["op", "attention", "--system", "h100-sxm", "--batch", "1", "--heads", "32", "--seq",
            "16384", "--head-dim", "128", "--flash-attention", "--no-causal", "--json",
            "--clock", "boost"]  # the bars' ratio holds at one clock
    out = {}
    for k in ("fa2", "cudnn"):
        assert main([*base, "--attention-kernel", k]) == 0
        out[k] = json.loads(capsys.readouterr().out)
    # compute bound at 16k: the forward times stand as the bars do (595 / 370)
    assert out["fa2"]["fwd_s"] / out["cudnn"]["fwd_s"] == pytest.approx(595 / 370, rel=1e-3)
    assert main([*base, "--window", "2048"]) == 0
    banded = json.loads(capsys.readouterr().out)
    assert banded["window"] == 2048 and banded["flops"] == 4 * 32 * 128 * 16384 * 2048
    assert main([*base, "--alibi", "--attention-kernel", "fa3"]) == 2


def test_long_sequences_agree_with_our_h100_measurement():
    """Held out: SDPA's cuDNN and FA2 backends on our H100 (accelsim/data/h100_device/
    attention_sweep.json), 4k to 32k tokens, causal and not, head dim 64 and 128: forward +
    backward within issue 23's 20 % attention target (today -11 % to +18 %). Below 4k the causal
    model is optimistic (cuDNN -36 % at 512, FA2 -29 % at 2k for head dim 128): the plateau's
    causal ratio misses the short sequences' diagonal-block loss; it stays, since our validated
    device rows (reports/device_validation.md, "attention kernels") hold with it."""
    import json

    from accelsim.engine.stack import STREAM_EFFICIENCY
    from accelsim.paths import REPO_ROOT

    doc = json.loads((REPO_ROOT / "accelsim" / "data" / "h100_device" /
                      "attention_sweep.json").read_text())
    bw = H100.chip.memory_bandwidth_Bps * STREAM_EFFICIENCY
    errs = []
    for r in doc["rows"]:
        if r["seq"] < 4096:
            continue
        op = AttentionOp(batch=r["batch"], heads=r["heads"], seq=r["seq"],
                         head_dim=r["head_dim"], causal=r["causal"], flash=True)
        f, b, _ = flash_attention_parts(H100, op, FlashKernel(r["kernel"]), bw)
        errs.append((f + b) * 1e6 / (r["fwd_us"] + r["bwd_us"]) - 1)
    assert len(errs) == 20
    assert max(abs(e) for e in errs) <= 0.20, errs


def test_op_attention_runs_at_its_power_limited_clock(capsys):
    """A long flash attention repeated is compute-bound: by default it runs at the clock its
    average power allows (within the limit, slower than the --clock boost what-if, which
    draws more), and a lower --power-limit-W slows it further."""
    import json

    base = ["op", "attention", "--system", "h100-sxm", "--batch", "8", "--heads", "32", "--seq",
            "8192", "--head-dim", "128", "--flash-attention", "--json"]
    out = {}
    for name, extra in (("power", []), ("boost", ["--clock", "boost"]),
                        ("350", ["--power-limit-W", "350"])):
        assert main([*base, *extra]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    assert out["power"]["power_model"] and out["power"]["power_W"] <= 700 + 1e-6
    assert out["boost"]["clock_MHz"] is None and out["boost"]["power_W"] > 700
    assert out["boost"]["fwd_bwd_s"] < out["power"]["fwd_bwd_s"] < out["350"]["fwd_bwd_s"]
    assert out["350"]["power_W"] <= 350 + 1e-6
