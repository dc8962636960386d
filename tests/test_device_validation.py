"""Our own H100 and H200 measurements (accelsim/data/h100_device, h200_device) and the physics
they pinned down: the GEMM fallback for strides that are not 16-byte multiples, Megatron's
vocabulary padding, and the comparison script (scripts/device_validate.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

from accelsim.arch import ConfigError, load_system, read_toml, system_from_dict
from accelsim.engine.decoder import Decoder, head_op
from accelsim.perf.gemm import FITTED, gemm_time
from accelsim.workload.gpt import GptConfig

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "accelsim" / "data" / "h100_device"
#: the measured files as shipped (a user's clone has no ../shared; see the README beside them)
SHA256 = {
    "power.json": "8e87070f3e095cb53891604669edd9e58bcc2623f3c5916dd3d456921b113b6b",
    "breakdown.json": "8dc4f182c254a7847220ebed83d43b642a419d7f8bff1fb6a1ac120a59d78aba",
    "transformer.json": "4787f3d4188d7f6873f46bc39bd8b72d401b4b9163a8a7e5a39bf1e2de71e2a7",
    "inference.json": "25f428cbc1418e16e7c6b486a99b54ab44459e7c139efc3f618bbb0f48db32fb",
    "step_power.json": "49f058354d34ffa9dc0b26dc56d008d83405e75d458856119d18f9b13c5bc8eb",
    "kernels.json": "c4a9b1b8fb6aa2fadd1ca212518194cd54e95d319051746bf782a96020e35bf9",
    "burst.json": "4bc7e93b56ab9438692553e7e63cea951bf0f1d5c3b83e1d14ca090cc679e401",
}
DATA_H200 = REPO / "accelsim" / "data" / "h200_device"
SHA256_H200 = {
    "power.json": "46b59af3588dd6c9b8dfd1a347558e28fb7dbe34de9538b63a1120d378baf3c4",
    "burst.json": "724c25fae99a874e5e3531a65c1cd9040d394322ce13546832c64cad9746332c",
    "kernels.json": "bfe693ad81fa3241949f8e84588c84da1a1671da6b50aea8875a98059ef974db",
    "transformer.json": "eaaf2448b7bdad2258a499a947e3c8b8894ebd0a9b086c1e0cd83ecec53379bf",
    "inference.json": "38af3f0e9ca6e424ab2c82368e47e5b45631d10a6c04b46784d77edc3e20d41f",
    "step_power.json": "7f5f9b5be3be3e9bd87524448f2d353299e9d1868a444e44aa0654c8637d0228",
    "nvidia_smi.csv": "5a5868bce506a522c8c2cfc6fb949504c3957128940a13dfccb77f7653851026",
    "breakdown.json": "69aea9a69f473177f3a90404fb2aabbd53b5a44b65eb9811c3b9022c136f3af1",
    "decode_profile.json": "e561065167e8796979921f03b3d3c553d2dfdc3d922a9b39ad5a68ed36af7aef",
}


@pytest.fixture(scope="module")
def dv():
    spec = importlib.util.spec_from_file_location("device_validate",
                                                  REPO / "scripts" / "device_validate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod


@pytest.fixture(scope="module")
def h100():
    return load_system("h100-sxm")


@pytest.mark.parametrize(("data", "name", "digest"),
                         [(DATA, n, h) for n, h in sorted(SHA256.items())]
                         + [(DATA_H200, n, h) for n, h in sorted(SHA256_H200.items())])
def test_measurements_are_the_pinned_copies(data, name, digest):
    assert hashlib.sha256((data / name).read_bytes()).hexdigest() == digest
    assert name in (data / "README.md").read_text()


def test_unaligned_stride_runs_at_the_measured_fallback_rate(h100):
    """N = 50257 bf16 is a 100514-byte row stride: compute at unaligned_gemm_rate."""
    rate = h100.chip.unaligned_gemm_rate
    assert 0 < rate < 1
    odd = gemm_time(h100, 8192, 50257, 768, "bf16")
    even = gemm_time(h100, 8192, 50304, 768, "bf16")
    assert odd.bound == "compute"
    assert odd.compute_s == pytest.approx(even.compute_s / rate * 50257 / 50304, rel=0.01)
    # K misaligned too (the input-gradient GEMM); M (the token rows) is never a stride
    assert gemm_time(h100, 8192, 768, 50257, "bf16").compute_s > 4 * gemm_time(
        h100, 8192, 768, 50304, "bf16").compute_s
    assert gemm_time(h100, 8191, 768, 4096, "bf16").compute_s == pytest.approx(
        gemm_time(h100, 8192, 768, 4096, "bf16").compute_s, rel=0.01)


def test_alignment_is_in_bytes_of_the_data_element(h100):
    """FP8 needs strides of 16 elements, bf16 of 8; a block format's scales ride apart; a
    stride under 16 bytes (an MoE router's 8 experts) is a skinny op, not penalised."""
    assert gemm_time(h100, 4096, 4104, 4096, "bf16").compute_s == pytest.approx(
        gemm_time(h100, 4096, 4096, 4096, "bf16").compute_s * 4104 / 4096, rel=0.02)
    assert gemm_time(h100, 4096, 4104, 4096, "fp8").compute_s > 4 * gemm_time(
        h100, 4096, 4096, 4096, "fp8").compute_s
    router = gemm_time(h100, 8192, 8, 4096, "fp8")
    flat = dataclasses.replace(h100, chip=dataclasses.replace(h100.chip, unaligned_gemm_rate=1.0))
    assert router.time_s == gemm_time(flat, 8192, 8, 4096, "fp8").time_s


def test_a_chip_without_the_rate_has_no_penalty():
    a100 = load_system("a100-sxm")
    assert a100.chip.unaligned_gemm_rate == 1.0
    assert gemm_time(a100, 8192, 50257, 768, "bf16").compute_s == pytest.approx(
        gemm_time(a100, 8192, 50304, 768, "bf16").compute_s * 50257 / 50304, rel=0.01)


@pytest.mark.parametrize("value", [0, 1.5, "x", True])
def test_bad_unaligned_rate_names_the_key(value):
    data = read_toml(REPO / "arch_configs" / "h100-sxm.toml")
    data["chip"]["unaligned_gemm_rate"] = value
    with pytest.raises(ConfigError, match=r"chip\.unaligned_gemm_rate"):
        system_from_dict(data, "h100-sxm.toml")


def test_the_rate_reproduces_the_lm_head_it_was_measured_on(dv, h100):
    """The fit, checked: the three LM-head GEMMs at vocabulary 50257 over those at 50304, as
    measured and as modelled (one rate for all three kernels)."""
    heads = {r["vocab"]: r for r in dv.load("breakdown")["lm_head"]}
    keys = ("forward_us", "input_grad_us", "weight_grad_us")
    measured = sum(heads[50257][k] for k in keys) / sum(heads[50304][k] for k in keys)
    shapes = lambda v: ((8192, v, 768), (8192, 768, v), (768, v, 8192))  # noqa: E731
    model = sum(gemm_time(h100, *s, "bf16").time_s for s in shapes(50257)) / sum(
        gemm_time(h100, *s, "bf16").time_s for s in shapes(50304))
    assert model == pytest.approx(measured, rel=0.15)
    assert FITTED.array_efficiency == 0.88  # the rate is relative to this (its source says so)


def test_megatron_pads_the_vocabulary_pytorch_does_not():
    d = Decoder.of(GptConfig(layers=2, hidden=768, heads=12, seq=1024, vocab=50257))
    assert head_op(d, 1024, 1, "bf16").n == 50257
    assert head_op(d, 1024, 1, "bf16", 128).n == 50304
    assert head_op(d, 1024, 8, "bf16", 128).n == 51200 // 8
    assert head_op(d, 1024, 8, "bf16").n == -(-50257 // 8)


def test_eager_gpt_step_pays_the_measured_price_of_an_unpadded_head(dv):
    """Held out: GPT-2 small's eager step at vocabulary 50257 vs 50304 (nanoGPT's padding), the
    measured gap against the modelled one."""
    rows = {r["case"].split(":")[0]: r for r in dv.gpt_rows() if r["group"] == "gpt step"}
    measured = rows["gpt2-small"]["measured"] - rows["gpt2-small-v50304"]["measured"]
    model = rows["gpt2-small"]["accelsim"] - rows["gpt2-small-v50304"]["accelsim"]
    assert measured > 10 and model == pytest.approx(measured, rel=0.2)


def test_report_lists_every_group_with_its_target(dv, tmp_path):
    rs = dv.rows()
    groups = {r["group"] for r in rs}
    assert {"gemm: fixed clock (--clock boost)", "gemm: power model", "lm head", "attention",
            "attention kernels", "gpt step", "gpt memory", "inference",
            "gemm burst: fixed clock (--clock boost)", "gemm held 2 s: power model"} <= groups
    text = dv.report(rs)
    for g in groups:
        assert f"## {g} (target" in text
    assert "sha256" in text and "Measured facts" in text
    # the power model predicts a lowered clock for long GEMMs, as measured (within 15 %)
    long = [r for r in rs if r["group"] == "gemm: power model" and "8192x8192x8192" in r["case"]]
    assert long and all("clock" in r["note"] for r in long)


def test_gemm_command_says_when_a_stride_is_unaligned(capsys):
    from accelsim.cli import main

    argv = ["gemm", "--system", "h100-sxm", "--m", "8192", "--k", "768", "--scheme", "bf16"]
    assert main(argv + ["--n", "50257"]) == 0
    assert "not a multiple of 16 bytes" in capsys.readouterr().err
    assert main(argv + ["--n", "50304"]) == 0
    assert "not a multiple of 16 bytes" not in capsys.readouterr().err


def test_the_fixed_clock_is_the_burst_regime_and_the_power_model_the_held_one(dv):
    """Held out (burst.json): the same shapes, a 100-call burst from idle and held 2 s; the
    default fixed clock predicts the first, the 700 W power model the second, and not the
    other way round (bursts run 13-18 % faster than the held state)."""
    rs = dv.burst_rows()
    burst = [r for r in rs if r["group"].startswith("gemm burst")]
    held = [r for r in rs if r["group"].startswith("gemm held")]
    assert len(burst) == len(held) == 5
    assert all(abs(r["error_pct"]) <= 10 for r in burst)
    assert all(abs(r["error_pct"]) <= 5 for r in held)
    for b, h in zip(burst, held):
        assert h["measured"] > 1.1 * b["measured"]


def test_the_h200_is_compared_with_its_own_preset(dv):
    """The H200 (never fitted) runs through the same comparisons against h200-sxm; its
    unaligned LM head checks the H100's rate (label "checked", not "fit")."""
    rs = dv.rows(dv.H200)
    groups = {r["group"] for r in rs}
    assert {"gemm: power model", "gpt step", "gpt memory", "inference", "lm head",
            "attention kernels", "gemm held 2 s: power model", "step power: power model",
            "hbm copy power"} <= groups
    assert {r["label"] for r in rs} == {"checked"}
    assert dv.system(dv.H200).name == "h200-sxm"
    assert dv.system(dv.H200).chip.memory_bandwidth_Bps == pytest.approx(4.8e12)
    text = dv.report(rs, dv.H200)
    assert "h200_device" in text and "--device h200" in text


def test_a_group_without_its_data_file_is_left_out(dv, tmp_path):
    """A device that lacks a file (here: only power.json) gets the groups that file feeds."""
    (tmp_path / "power.json").write_bytes((dv.H200.data / "power.json").read_bytes())
    dev = dv.Device("x", "test GPU", "h200-sxm", tmp_path, tmp_path / "report.md")
    groups = {r["group"] for r in dv.rows(dev)}
    assert groups == {"gemm: fixed clock (--clock boost)", "gemm: power model", "hbm copy power"}
    assert "breakdown" not in dv.report(dv.rows(dev), dev)


def test_the_h200_runs_the_same_silicon_faster_only_where_memory_bound(dv):
    """Held out, a model property the second chip checks: H200 and H100 share the GH100 compute,
    so the model gives long compute-bound GEMMs the same time on both (measured within 5 %) and
    memory-bound GEMMs the H200's 1.43x bandwidth (measured: faster by more than 1.2x)."""
    def by_case(dev):
        return {r["case"].split(" (")[0]: r for r in dv.gemm_rows(dev)
                if r["group"] == "gemm: fixed clock (--clock boost)"}
    h100, h200 = by_case(dv.H100), by_case(dv.H200)
    big, skinny = "bf16 8192x4096x28672", "bf16 1x4096x28672"
    assert h200[big]["accelsim"] == pytest.approx(h100[big]["accelsim"], rel=0.01)
    assert h200[big]["measured"] == pytest.approx(h100[big]["measured"], rel=0.05)
    assert h100[skinny]["accelsim"] / h200[skinny]["accelsim"] == pytest.approx(4.8 / 3.35,
                                                                                  rel=0.05)
    assert h100[skinny]["measured"] / h200[skinny]["measured"] > 1.2


def test_profiled_decode_step_splits_into_its_kernels(dv):
    """The H200's profiled decode steps (decode_profile.json): the kernels' device time plus the
    gaps make up the step; the GEMM kernels stream the 15 GB of weights near HBM speed (0.7-0.95
    of 4.8 TB/s), so the rest of the step is the unfused decoder's other kernels."""
    facts = dv.decode_profile_facts(dv.H200)
    assert len(facts) == 3 and all("GEMM kernels" in f and "accelsim" in f for f in facts)
    for r in dv.load("decode_profile", dv.H200)["decode"]:
        ks = [k for k in r["graph_kernels"] if not k["name"].startswith(("aten::", "cuda"))]
        t_k = sum(k["us"] for k in ks) * 1e-6
        assert 0.75 * r["graph_s"] < t_k < r["graph_s"]
        t_g = sum(k["us"] for k in ks if dv._is_gemm_kernel(k["name"])) * 1e-6
        assert 0.7 < 15.0e9 / t_g / 4.8e12 < 0.95
    assert dv.decode_profile_facts(dv.H100) == []  # the H100 has no such file


def test_the_default_clock_meets_the_held_out_gemm_guards(dv):
    """Issue 34's regression guards at the default clock (the power-limited one): our own
    held-out steady GEMMs, 55 per chip, within 15 % on >= 90 % of the H100's and >= 80 % of the
    H200's (a chip no parameter was fitted on); each the row computed here, not a report."""
    import accelsim
    from accelsim.perf.power import gemm_power_limited

    for dev, share in ((dv.H100, 0.90), (dv.H200, 0.80)):
        rows = [r for r in dv.gemm_rows(dev) if r["group"] == "gemm: power model"]
        assert len(rows) == 55
        ok = sum(abs(r["accelsim"] / r["measured"] - 1) <= 0.15 for r in rows)
        assert ok / len(rows) >= share, (dev.system, ok)
    # ... and the group's model is what the default gemm_time gives
    s = dv.system(dv.H100).with_clock("power")
    assert accelsim.gemm_time(s, 8192, 8192, 8192, "bf16").time_s == pytest.approx(
        gemm_power_limited(s, 8192, 8192, 8192, "bf16").gemm.time_s, rel=1e-12)
