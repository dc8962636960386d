"""The power/clock model (accelsim.perf.power, [chip.power]): what a power-limited GPU does
(a long dense GEMM below the max clock at the limit, a skinny one at the max clock), the
what-if limit, the pinned fit data and its fit re-derived, strict loading, clean CLI errors."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from accelsim.arch import ConfigError, build_system, load_system, read_toml, system_from_dict
from accelsim.cli import main
from accelsim.perf.gemm import gemm_time
from accelsim.perf.power import (gemm_at_clock, gemm_power_limited, kernel_power_W,
                                 system_at_clock, voltage_ratio)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "accelsim" / "data" / "h100_power"
#: sha256 of the shipped copy of ../shared/data/h100_power/h100_gemm_power.json (fit data)
DATA_SHA256 = "b0f2ba51fe8bbb2412a75b7dfe654f288c0b27a7701d8aa72e24647bd3399d07"
POWER_PRESETS = ("h100-sxm", "h100-pcie", "a100-sxm", "a100-pcie-40gb", "dgx-h100", "dgx-a100")


@pytest.fixture(scope="module")
def h100():
    return load_system("h100-sxm")


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_data_is_the_pinned_copy_with_its_readme():
    assert hashlib.sha256((DATA / "h100_gemm_power.json").read_bytes()).hexdigest() == DATA_SHA256
    assert "limiter" in (DATA / "README.md").read_text()


def test_long_large_bf16_gemm_runs_power_limited_near_1400_mhz(h100):
    pg = gemm_power_limited(h100, 16384, 16384, 16384, "bf16")
    assert pg.limited
    assert 1250 <= pg.clock_MHz <= 1550
    assert pg.power_W == pytest.approx(700, rel=0.01)
    assert pg.energy_J == pytest.approx(pg.power_W * pg.gemm.time_s)
    # at the preset's fixed 1.83 GHz the same GEMM would draw more than the limit
    g = gemm_time(h100, 16384, 16384, 16384, "bf16")
    assert kernel_power_W(h100, g, h100.chip.core.frequency_Hz) > 700


def test_skinny_decode_gemm_runs_at_the_max_clock(h100):
    pg = gemm_power_limited(h100, 8, 8192, 8192, "bf16")
    assert not pg.limited and pg.clock_MHz == pytest.approx(1980)
    assert pg.power_W < 700 and pg.gemm.bound == "memory"


def test_power_rises_with_clock_as_f_times_v_squared(h100):
    """Compute-bound, time ~ 1/f (launch aside): dynamic power ~ f V(f)^2 (a shape whose
    chip-memory bytes are the compulsory ones at both clocks, so only the clock differs)."""
    p = h100.chip.power
    lo, hi = (gemm_at_clock(h100, 8192, 8192, 4096, "bf16", f) for f in (1.0e9, 1.5e9))
    assert lo.gemm.bound == hi.gemm.bound == "compute"
    assert lo.gemm.memory_bytes == hi.gemm.memory_bytes
    assert lo.power_W < hi.power_W
    expected = 1.5 * (voltage_ratio(p, 1.5e9) / voltage_ratio(p, 1.0e9)) ** 2
    assert (hi.power_W - p.static_W) / (lo.power_W - p.static_W) == pytest.approx(expected,
                                                                                rel=0.01)


def test_memory_part_does_not_scale_with_clock(h100):
    slow = gemm_time(system_at_clock(h100, 0.99e9), 8, 8192, 8192, "bf16")
    fast = gemm_time(system_at_clock(h100, 1.98e9), 8, 8192, 8192, "bf16")
    assert slow.memory_s == fast.memory_s and slow.launch_s == fast.launch_s
    big_slow = gemm_time(system_at_clock(h100, 0.99e9), 8192, 8192, 4096, "bf16")
    big_fast = gemm_time(system_at_clock(h100, 1.98e9), 8192, 8192, 4096, "bf16")
    assert big_slow.compute_s == pytest.approx(2 * big_fast.compute_s)


def test_l2_keeps_its_bandwidth_and_shared_memory_follows_the_clock(h100):
    """Measured (accelsim/data/h100_device/breakdown.json): L2 re-reads ran at 0.92x the
    bandwidth at 0.71x the SM clock, so the shared level does not scale; a core's private
    level (shared memory, 128 B/clk) does."""
    levels = {lv.name: lv for lv in h100.chip.levels}
    half = {lv.name: lv for lv in system_at_clock(h100, h100.chip.core.frequency_Hz / 2).chip.levels}
    assert half["L2"].bandwidth_Bps == levels["L2"].bandwidth_Bps
    assert half["smem"].bandwidth_Bps == pytest.approx(levels["smem"].bandwidth_Bps / 2)


def test_power_limit_350_w_lowers_throughput_by_less_than_half(capsys):
    argv = ["gemm", "--system", "h100-sxm", "--m", "16384", "--n", "16384", "--k", "16384",
            "--scheme", "bf16", "--json"]
    full = _json(capsys, argv + ["--power-model"])
    capped = _json(capsys, argv + ["--power-limit-W", "350"])
    assert capped["power_limit_W"] == 350 and capped["power_W"] <= 350 * (1 + 1e-9)
    assert capped["clock_MHz"] < full["clock_MHz"]
    assert 0.5 < capped["tflops"] / full["tflops"] < 1
    for d in (full, capped):
        assert d["power_model"] is True
        assert d["energy_J"] == pytest.approx(d["power_W"] * d["time_s"])


def test_default_gemm_timing_is_power_limited_and_boost_reports_its_fixed_clock(h100, capsys):
    d = _json(capsys, ["gemm", "--system", "h100-sxm", "--m", "4096", "--n", "4096", "--k",
                       "4096", "--scheme", "bf16", "--json"])
    import accelsim

    assert d["time_s"] == accelsim.gemm_time(h100, 4096, 4096, 4096, "bf16").time_s
    assert d["power_model"] is True and d["power_W"] <= h100.chip.power.power_limit_W + 1e-6
    d = _json(capsys, ["gemm", "--system", "h100-sxm", "--m", "4096", "--n", "4096", "--k",
                       "4096", "--scheme", "bf16", "--clock", "boost", "--json"])
    assert d["time_s"] == gemm_time(h100.with_boost_clock(), 4096, 4096, 4096, "bf16").time_s
    assert d["power_model"] is False and d["clock_MHz"] == pytest.approx(1830)
    assert d["power_W"] > h100.chip.power.static_W
    d = _json(capsys, ["op", "gemm", "--system", "v100-sxm2", "--m", "64", "--n", "64", "--k",
                       "64", "--json"])
    assert d["clock_MHz"] is None and d["power_W"] is None and d["energy_J"] is None


@pytest.mark.parametrize("value,fragment", [("abc", "not a number"), ("0", "must be"),
                                            ("-5", "must be"), ("inf", "must be"),
                                            ("nan", "must be"), ("100", "static power")])
def test_bad_power_limit_is_a_one_line_error(value, fragment, capsys):
    try:
        rc = main(["op", "gemm", "--system", "h100-sxm", "--m", "8", "--n", "8", "--k", "8",
                   "--power-limit-W", value])
    except SystemExit as exc:  # argparse rejects a bad flag value with exit 2
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and fragment in err and "--power-limit-W" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_power_model_needs_a_power_table(capsys):
    assert main(["gemm", "--system", "v100-sxm2", "--m", "8", "--n", "8", "--k", "8",
                 "--power-model"]) == 2
    err = capsys.readouterr().err
    assert "[chip.power]" in err and "Traceback" not in err


@pytest.mark.parametrize("name", POWER_PRESETS)
def test_presets_have_a_consistent_power_table(name):
    chip = load_system(name).chip
    p = chip.power
    assert p is not None and 0 < p.static_W < p.power_limit_W
    assert p.max_clock_Hz >= chip.core.frequency_Hz  # the fixed clock is an effective one
    for q in ("bf16", "fp16", "fp8", "tf32"):
        assert p.energy_per_flop_J(chip.core.datapath(q)) > 0


def _edited(name: str, **power):
    data = read_toml(REPO / "arch_configs" / f"{name}.toml")
    data["chip"]["power"].update(power)
    return data


@pytest.mark.parametrize("edit,key", [
    ({"bogus_W": 1}, "chip.power.bogus_W"),
    ({"static_W": 800}, "chip.power.static_W"),
    ({"voltage_floor": 1.5}, "chip.power.voltage_floor"),
    ({"power_limit_W": -700}, "chip.power.power_limit_W"),
    ({"flop_pJ": {"int4": 1.0}}, "chip.power.flop_pJ.int4"),
])
def test_power_table_is_loaded_strictly(edit, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        system_from_dict(_edited("h100-sxm", **edit), "h100-sxm.toml")


def test_fit_is_rederived_and_matches_the_presets():
    """scripts/fit_power.py's fit, rerun here, gives the numbers the presets carry."""
    spec = importlib.util.spec_from_file_location("fit_power", REPO / "scripts" / "fit_power.py")
    fit_power = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fit_power  # its dataclass looks its module up
    try:
        spec.loader.exec_module(fit_power)
    finally:
        del sys.modules[spec.name]
    f = fit_power.fit(verbose=False)
    floor, e, used = f.floor, f.energies, f.used
    # fit quality as reported (reports/power_validation.md): rms power error of the fit rows
    assert sum(x * x for x in f.power_residuals) / len(f.power_residuals) < 0.2**2
    # the copies: our own H100's, each sampled in its own window; the fit data's last copy
    # (608 W while the power still decays from its heavy GEMMs) is a lagging sample, left out
    assert {r.label for r in used if r.kind == "copy"} == {
        f"copy {m} MiB (h100_device)" for m in (256, 1024, 4096)}
    lagging = next(r for r in f.rows if r.label == "copy 4096 MiB")
    assert "decaying" in lagging.use
    assert len([r for r in used if r.kind == "gemm"]) == 7
    for name, scale in fit_power.PRESETS.items():
        p = load_system(name).chip.power
        assert p.voltage_floor == pytest.approx(floor, abs=0.005)
        assert p.memory_J_per_byte == pytest.approx(e["byte"] * scale * 1e-12, rel=1e-3)
        assert p.energy_per_flop_J("bf16") == pytest.approx(e["16-bit"] * scale * 1e-12,
                                                            rel=1e-3)
        fp8 = e["16-bit" if name in fit_power.FP8_ON_16BIT else "fp8"]
        assert p.energy_per_flop_J("fp8") == pytest.approx(fp8 * scale * 1e-12, rel=1e-3)



def test_predict_layer_workload_reports_the_energy_its_clock_was_limited_by(capsys):
    """A layer workload's predict --json has energy_J / power_W (transformers had them): on a
    chip with a power table, the engine's account over the step's rows -- the one the power
    limiter holds to the limit, so the reported power never exceeds it."""
    import json

    from accelsim.cli import main
    from accelsim.engine.run import layer_step_energy, predict_workload
    from accelsim.workload import load_workload

    assert main(["predict", "--system", "h100-sxm", "--workload", "resnet50", "--scheme",
                 "fp16", "--batch", "32", "--fusion", "off", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    from accelsim.engine import LlmParams
    from accelsim.engine.stack import get_stack

    system = build_system("h100-sxm")
    stack = LlmParams(stack=get_stack("megatron"), memory_reserve_GiB=0.0)  # predict's default
    r = predict_workload(system, load_workload("resnet50"), 32, "fp16", fusion=False,
                         stack=stack)
    assert out["step_time_s"] == pytest.approx(r.step.step_s, rel=1e-12)
    assert out["energy_J"] == pytest.approx(r.energy.energy_J, rel=1e-12)
    assert out["clock_MHz"] == pytest.approx(r.clock_MHz, rel=1e-12)
    assert out["power_W"] == pytest.approx(out["energy_J"] / out["step_time_s"], rel=1e-12)
    assert out["power_W_per_gpu"] == out["power_W"]  # one chip
    assert out["tflops_per_gpu"] == pytest.approx(out["tflops"], rel=1e-12)
    assert system.chip.power.static_W < out["power_W"] <= system.chip.power.power_limit_W + 1e-6
    # the boost what-if prices its own step the same way, at its own clock
    assert main(["predict", "--system", "h100-sxm", "--workload", "resnet50", "--scheme",
                 "fp16", "--batch", "32", "--fusion", "off", "--clock", "boost", "--json"]) == 0
    boost = json.loads(capsys.readouterr().out)
    rb = predict_workload(system.with_boost_clock(), load_workload("resnet50"), 32, "fp16",
                          fusion=False, stack=stack)
    assert boost["energy_J"] == pytest.approx(layer_step_energy(rb).energy_J, rel=1e-12)


def test_gemm_time_api_and_cli_agree_with_the_power_model(capsys):
    """accelsim.gemm_time on a system with its power model on times the GEMM at the clock its
    power allows, as ``accelsim gemm --power-model`` does (it gave the fixed clock's 757
    TFLOPS against the CLI's 648); without the model both keep the preset's clock."""
    import json

    import accelsim
    from accelsim.cli import main

    s = build_system("h100-sxm")
    api = accelsim.gemm_time(s.with_power_model(), 4096, 4096, 4096, "bf16")
    assert main(["gemm", "--system", "h100-sxm", "--m", "4096", "--n", "4096", "--k", "4096",
                 "--scheme", "bf16", "--power-model", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert api.time_s == pytest.approx(cli["time_s"], rel=1e-12)
    fixed = accelsim.gemm_time(s.with_boost_clock(), 4096, 4096, 4096, "bf16")
    assert api.time_s > fixed.time_s  # 700 W holds this GEMM below the preset's clock
    assert api.tflops == pytest.approx(648, abs=1) and fixed.tflops == pytest.approx(757, abs=1)
    assert accelsim.gemm_time(s, 4096, 4096, 4096, "bf16") == api  # the default: power-limited
    assert main(["gemm", "--system", "h100-sxm", "--m", "4096", "--n", "4096", "--k", "4096",
                 "--scheme", "bf16", "--clock", "boost", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_s"] == pytest.approx(fixed.time_s,
                                                                          rel=1e-12)
    assert main(["gemm", "--system", "h100-sxm", "--m", "4096", "--n", "4096", "--k", "4096",
                 "--scheme", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] == pytest.approx(api.time_s, rel=1e-12) and out["power_W"] <= 700
