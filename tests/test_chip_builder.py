"""The chip builder (accelsim.arch.builder, ``accelsim chip``): its peaks come from the datapath
table (checked against mac_cost / fp8_packing, computed independently), its area split's one
fitted parameter is re-derived from the published-chip table and checked on a second chip, the
config it writes loads and runs, and bad inputs are one-line errors naming the flag."""

from __future__ import annotations

import re
import tomllib

import pytest

from accelsim.arch import builder as b
from accelsim.arch.config import load_system
from accelsim.arch.datapath_cost import AREA_FROM_45NM, fp8_packing, mac_cost, precision_mac
from accelsim.cli import main
from accelsim.errors import InputError

HFP8_NODE = 14.0  # Sun et al., NeurIPS 2019, appendix D: the HFP8 design is 14 nm


def _spec(**kw) -> b.ChipSpec:
    base = dict(area_mm2=400.0, node_nm=HFP8_NODE, formats=("fp16", "hfp8"), frequency_GHz=1.5)
    return b.ChipSpec(**{**base, **kw})


@pytest.mark.parametrize("narrow", ["hfp8", "fp8"])
def test_fp8_to_fp16_peak_ratio_at_the_hfp8_node_is_the_tables(narrow):
    system = b.system_of(b.build_chip(_spec(formats=("fp16", narrow))))
    ratio = system.peak_flops(narrow) / system.peak_flops("fp16")
    # independently: the two MAC units' areas (both accumulate in fp16, as the HFP8 design)
    operand = {"hfp8": "hfp8", "fp8": "fp8-e4m3"}[narrow]
    expected = (mac_cost("fp16", "fp16", HFP8_NODE).area_um2
                / mac_cost(operand, "fp16", HFP8_NODE).area_um2)
    assert ratio == pytest.approx(expected, rel=1e-12)
    assert 1.7 <= ratio <= 2.3
    if narrow == "hfp8":
        assert ratio == pytest.approx(fp8_packing(HFP8_NODE).area_ratio, rel=1e-12)


def test_same_area_fp16_chip_against_an_fp16_hfp8_chip():
    """The same die: an FP16-only chip and an FP16+HFP8 one get the same MAC area; the second's
    HFP8 peak over the first's FP16 peak is the area ratio up to whole cores."""
    only = b.build_chip(_spec(formats=("fp16",), area_mm2=2000.0))
    both = b.build_chip(_spec(area_mm2=2000.0))
    assert only.mac_budget_mm2 == both.mac_budget_mm2
    ratio = both.peak_flops("hfp8") / only.peak_flops("fp16")
    assert 1.7 <= ratio <= 2.3
    # each chip's peak is its used MAC area over the format's MAC area (whole cores only)
    for chip, p in ((only, "fp16"), (both, "hfp8"), (both, "fp16")):
        macs = chip.mac_area_used_mm2 / (precision_mac(p, HFP8_NODE).area_um2 * 1e-6)
        assert chip.peak_flops(p) == pytest.approx(2 * macs * 1.5e9, rel=1e-12)
        assert chip.mac_area_used_mm2 <= chip.mac_budget_mm2


def test_rates_energies_and_fallbacks():
    chip = b.build_chip(_spec(formats=("fp16", "hfp8", "int8")))
    s = b.system_of(chip)
    core, power = s.chip.core, s.chip.power
    assert core.macs_per_cycle_per_pe("int8") == 1.0  # the narrowest unit sizes the PE
    for p in ("fp16", "hfp8"):
        assert core.macs_per_cycle_per_pe(p) == pytest.approx(
            precision_mac("int8", HFP8_NODE).area_um2 / precision_mac(p, HFP8_NODE).area_um2)
        assert power.energy_per_flop_J(p) == pytest.approx(
            precision_mac(p, HFP8_NODE).energy_pJ / 2 * 1e-12)
    # fp8 (E4M3, fp16 accumulation) is not built: the hfp8 unit holds its bits and runs it
    assert chip.rates["fp8"].host == "hfp8"
    assert core.macs_per_cycle_per_pe("fp8") == core.macs_per_cycle_per_pe("hfp8")
    assert "bf16" not in chip.rates  # 8 exponent bits: no built unit holds it
    assert core.datapath("mxfp8") == "fp8"  # the block formats fall back as model.py says
    # power: static is the H100's share of the limit; no limit given: the chip's peak power
    assert power.static_W == pytest.approx(power.power_limit_W * 120 / 700)
    assert chip.peak_power_W == pytest.approx(power.power_limit_W)


def test_area_split_agrees_with_the_dse_area_rule():
    """accelsim.dse.energy prices a PE at its widest mode (max of rate x MAC area): for a built
    chip that is the builder's PE area."""
    from accelsim.dse.energy import EnergyParams, pe_area_um2

    chip = b.build_chip(_spec(formats=("fp16", "hfp8", "bf16")))
    assert pe_area_um2(b.system_of(chip).chip.core, EnergyParams(node_nm=HFP8_NODE)) == \
        pytest.approx(chip.pe_area_um2, rel=1e-12)


# ----------------------------------------------------------------- the fit and the check
def test_the_fitted_share_and_its_check_on_a_second_chip():
    rows = b.published_chips()
    assert sorted(r.label for r in rows) == ["checked", "fit"]
    for r in rows:
        assert r.node_nm in AREA_FROM_45NM, r.name  # inside the scaling table
        assert "http" in r.source, r.name
    fit, checked = b.chip_labelled("fit"), b.chip_labelled("checked")
    # the shipped constant is the fit, to its 4 printed decimals
    assert abs(fit.fitted_share() - b.NON_MAC_SHARE) <= 5e-5
    # the check: dense MACs per mm^2 of the second chip within 30 %
    predicted, published = (checked.predicted_macs() / checked.die_mm2,
                            checked.dense_macs / checked.die_mm2)
    assert abs(predicted / published - 1) <= 0.30, (predicted, published)


def test_fit_script_prints_the_fit_and_the_check(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "fit_chip_area.py"
    spec = importlib.util.spec_from_file_location("fit_chip_area", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main() == 0
    out = capsys.readouterr().out
    assert "fit" in out and "checked" in out and "within 30%" in out


# ------------------------------------------------------------------ the written config
def test_written_config_passes_check_config_and_runs_gemm_predict_and_llm(tmp_path, capsys):
    out = tmp_path / "chip.toml"
    assert main(["chip", "--area-mm2", "400", "--node", "14", "--format", "fp16,hfp8",
                 "--frequency-GHz", "1.5", "--power-limit-W", "300", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    for n, line in enumerate(out.read_text().splitlines(), 1):  # every number has a source
        code = line.split("#", 1)[0]
        if "=" in code and re.search(r"=\s*[-+]?(\d|nan|inf)", code):
            assert "# source:" in line, f"line {n}: {line}"
    assert main(["check-config", str(out)]) == 0
    assert "4 cores" in capsys.readouterr().out
    assert load_system(out).chip.power.power_limit_W == 300
    assert main(["gemm", "--system", str(out), "--m", "512", "--n", "512", "--k", "512",
                 "--scheme", "hfp8", "--json"]) == 0
    assert main(["predict", "--system", str(out), "--workload", "tiny-cnn", "--batch", "8",
                 "--scheme", "hfp8"]) == 0
    assert main(["llm", "--system", str(out), "--layers", "2", "--hidden", "256", "--heads", "4",
                 "--seq", "128", "--vocab", "1024", "--tp", "1", "--pp", "1", "--dp", "1",
                 "--micro-batch", "1", "--global-batch", "4", "--scheme", "fp8"]) == 0
    capsys.readouterr()


def test_build_is_pure_and_the_toml_reads_back_exactly(tmp_path):
    spec = _spec(formats=("bf16", "fp16", "mxfp8"), sram_MiB=64.0, memory_capacity_GiB=80.5,
                 array=(64, 32))
    a, c = b.build_chip(spec), b.build_chip(spec)
    assert b.toml_text(a) == b.toml_text(c)
    data = tomllib.loads(b.toml_text(a))
    assert data["core"]["rows"] == 64 and data["core"]["cols"] == 32
    assert data["chip"]["memory_capacity_MiB"] * 2**20 == round(80.5 * 2**30)
    s = b.write(a, tmp_path / "x.toml")
    assert load_system(s).chip.cores == a.cores


# ------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("flags,fragment", [
    ("--area-mm2 400 --node 5 --format fp16", "--node 5 (node_nm): not a node of the scaling"),
    ("--area-mm2 400 --node 180 --format fp16", "--node 180 (node_nm)"),
    ("--area-mm2 400 --node 14 --format fp16,fp9", "argument --format: unknown format 'fp9'"),
    ("--area-mm2 -5 --node 14 --format fp16", "argument --area-mm2: must be a finite number > 0"),
    ("--area-mm2 5 --node 14 --format fp16", "--area-mm2 5 (area_mm2): too small for one 128x128"),
    ("--area-mm2 400 --node 14 --format hif8", "--format hif8 (formats): no built datapath runs "
     "fp16"),
    ("--area-mm2 400 --node 14 --format fp16 --sram-MiB 1e6", "--sram-MiB 1e+06 (sram_MiB)"),
    ("--area-mm2 400 --node 14 --format fp16 --array 8x0", "argument --array: must be ROWSxCOLS"),
])
def test_bad_inputs_are_one_line_errors_naming_the_flag(flags, fragment, tmp_path, capsys):
    args = ["chip", *flags.split(), "--frequency-GHz", "1", "--out", str(tmp_path / "c.toml")]
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse rejects a bad flag value with exit 2
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "c.toml").exists()


@pytest.mark.parametrize("kw,field", [
    (dict(area_mm2=float("nan")), "area_mm2"), (dict(node_nm=True), "node_nm"),
    (dict(formats=()), "formats"), (dict(formats=("fp16", "fp16")), "formats"),
    (dict(frequency_GHz=0), "frequency_GHz"), (dict(array=(128, 0)), "array"),
    (dict(power_limit_W=-1.0), "power_limit_W"), (dict(name=" "), "name"),
])
def test_the_python_api_refuses_bad_specs_naming_the_field(kw, field):
    with pytest.raises(InputError, match=rf"\({field}\)"):
        _spec(**kw)


@pytest.mark.parametrize("node", [130.0, 45.0, 14.0, 7.0])
def test_default_sram_is_the_fit_chips_share_of_the_die_at_any_node(node):
    fit = b.chip_labelled("fit")
    share = fit.sram_MiB * b.sram_mm2_per_MiB(fit.node_nm) / fit.die_mm2
    chip = b.build_chip(_spec(node_nm=node, area_mm2=3000.0, array=(32, 32)))
    assert chip.sram_mm2 / 3000.0 == pytest.approx(share, rel=1e-12)
    # SRAM macro area = bit cell x 2^23 bits / 0.7 per MiB: denser nodes hold more MiB
    assert chip.sram_MiB == pytest.approx(
        chip.sram_mm2 / (SRAM_CELL[node] * 8 * 2**20 / 0.7 * 1e-6), rel=1e-12)


#: the published bit cells (um^2) the SRAM rule rests on, typed from their sources
SRAM_CELL = {130.0: 0.346 * 6.4, 45.0: 0.346, 14.0: 0.0588, 7.0: 0.027}
