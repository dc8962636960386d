"""Architecture configs: strict loading, SI conversion, published peaks, the bad-config corpus."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelsim.arch import ConfigError, load_system, read_toml, system_from_dict
from accelsim.cli import main

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "arch_configs").glob("*.toml"))
BAD = sorted((Path(__file__).resolve().parent / "data" / "bad_configs").glob("*.toml"))


def test_shipped_configs_present():
    names = {p.stem for p in CONFIGS}
    assert {"hfp8-64chip", "rapid-1chip", "dgx1-v100"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_number_in_a_shipped_config_has_a_source(path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("#", 1)[0]
        if "=" in code and re.search(r"=\s*[-+]?(\d|nan|inf)", code):
            assert "# source:" in line, f"{path.name}:{n}: number without '# source:' comment"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_load_and_are_frozen(path):
    s = load_system(path)
    assert s.name == path.stem
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.chips = 2  # type: ignore[misc]
    for p in ("fp16", "fp8", "hfp8"):
        assert s.peak_flops(p) == s.chips * s.chip.cores * s.chip.core.peak_flops(p)


def test_hfp8_system_matches_paper_peaks():
    # HFP8 paper appendix D: ~4 PFLOPS FP16, ~8 PFLOPS FP8/HFP8, 64 chips.
    s = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
    assert s.chips == 64 and s.boards * s.chips_per_board == 64
    assert s.topology == "hybrid-cube-mesh-64"
    assert s.peak_flops("fp16") == pytest.approx(4e15, rel=0.05)
    assert s.peak_flops("fp8") == pytest.approx(8e15, rel=0.05)
    assert s.peak_flops("hfp8") == s.peak_flops("fp8") == 2 * s.peak_flops("fp16")


def test_dgx1_matches_v100_datasheet():
    s = load_system(REPO / "arch_configs" / "dgx1-v100.toml")
    gpu = s.chip
    # V100 SXM2 datasheet: 125 TFLOPS tensor FP16, 80 SMs, 1530 MHz, 900 GB/s HBM2.
    assert gpu.peak_flops("fp16") == pytest.approx(125e12, rel=0.01)
    assert gpu.cores == 80 and gpu.core.frequency_Hz == pytest.approx(1.53e9)
    assert gpu.memory_bandwidth_Bps == pytest.approx(900e9)
    # NVLink 2: 25 GB/s per link per direction, 6 links per GPU -> 150 GB/s per direction.
    assert s.link.bandwidth_Bps == pytest.approx(25e9)
    assert s.link.links_per_chip == 6
    assert s.link.chip_bandwidth_Bps == pytest.approx(150e9)
    # No FP8 on V100: modelled at the FP16 rate.
    assert gpu.peak_flops("fp8") == gpu.peak_flops("hfp8") == gpu.peak_flops("fp16")
    assert s.topology == "dgx1" and s.chips == 8


def test_rapid_chip_matches_isscc_2021_peak():
    s = load_system(REPO / "arch_configs" / "rapid-1chip.toml")
    assert s.chips == 1 and s.chip.cores == 4
    # ISSCC 2021: 25.6 TFLOPS hybrid FP8 for the 4-core chip (our 1.5 GHz clock is ~4% lower).
    assert s.peak_flops("hfp8") == pytest.approx(25.6e12, rel=0.05)


def test_units_convert_once_to_si():
    s = load_system(REPO / "arch_configs" / "dgx1-v100.toml")
    assert s.chip.core.scratchpad_bytes == 96 * 1024
    assert s.chip.memory_capacity_bytes == 16 * 1024**3
    assert s.link.latency_s == pytest.approx(1e-6)
    assert s.inter_board_link.bandwidth_Bps == pytest.approx(6.25e9)
    h = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
    assert h.chip.core.scratchpad_bytes == 2 * 1024**2
    assert h.chip.core.sfu_ops_per_s == pytest.approx(64 * 1.5e9)
    assert h.chip.core.macs_per_cycle("fp8") == 2 * 32 * 32


def test_overrides_replace_existing_keys_only():
    path = REPO / "arch_configs" / "hfp8-64chip.toml"
    s = load_system(path, overrides={"system.link.bandwidth_GBps": 128, "chip.cores": 10})
    assert s.link.bandwidth_Bps == pytest.approx(128e9)
    assert s.chip.cores == 10
    with pytest.raises(ConfigError, match=r"system\.link\.bandwith_GBps"):
        load_system(path, overrides={"system.link.bandwith_GBps": 64})
    with pytest.raises(ConfigError, match=r"chip\.cores"):
        load_system(path, overrides={"chip.cores": 0})
    # the original file is untouched by overrides
    assert load_system(path).chip.cores == 20


def test_system_from_dict_reports_source_name():
    data = read_toml(REPO / "arch_configs" / "rapid-1chip.toml")
    data["core"]["rows"] = -1
    with pytest.raises(ConfigError) as exc:
        system_from_dict(data, source="sweep-point-7")
    assert exc.value.file == "sweep-point-7" and exc.value.key == "core.rows"
    assert exc.value.value == -1


def test_bad_config_corpus_is_large_enough():
    assert len(BAD) >= 20


def _expected_key(path: Path) -> str:
    m = re.search(r"^# expect-key: (\S+)", path.read_text(), re.M)
    assert m, f"{path.name} lacks '# expect-key:'"
    assert re.search(r"^# wrong: .+", path.read_text(), re.M), f"{path.name} lacks '# wrong:'"
    return m.group(1)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_config_fails_naming_file_and_key(path):
    key = _expected_key(path)
    with pytest.raises(ConfigError) as exc:
        load_system(path)
    msg = str(exc.value)
    assert exc.value.key == key, msg
    assert msg.startswith(str(path)) and f": {key}:" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("path", BAD[:3], ids=lambda p: p.stem)
def test_check_config_cli_one_line_error(path, capsys):
    assert main(["check-config", str(path)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and _expected_key(path) in err


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_check_config_cli_ok(path, capsys):
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and path.stem in out and "TFLOPS" in out


def test_check_config_missing_file(tmp_path, capsys):
    assert main(["check-config", str(tmp_path / "nope.toml")]) != 0
    assert "nope.toml" in capsys.readouterr().err


def test_topology_chip_count_rules():
    path = REPO / "arch_configs" / "dgx1-v100.toml"
    with pytest.raises(ConfigError, match=r"system\.topology"):
        load_system(path, overrides={"system.chips": 16, "system.boards": 2})
    s = load_system(path, overrides={"system.chips": 16, "system.boards": 2,
                                     "system.topology": "multi-board"})
    assert s.chips == 16 and s.peak_flops("fp16") == pytest.approx(2 * 8 * 125.3376e12)
    with pytest.raises(ConfigError, match=r"system\.chips_per_board"):
        load_system(path, overrides={"system.chips": 8, "system.boards": 2,
                                     "system.chips_per_board": 4, "system.topology": "multi-board"})


@given(rows=st.integers(1, 512), cols=st.integers(1, 512), rate=st.integers(1, 8),
       ghz=st.floats(0.1, 5.0), cores=st.integers(1, 128), chips=st.integers(1, 64),
       gbps=st.floats(0.5, 1000.0))
def test_peak_and_units_follow_the_config(rows, cols, rate, ghz, cores, chips, gbps):
    data = read_toml_cached()
    data["core"].update(rows=rows, cols=cols, frequency_GHz=ghz)
    data["core"]["macs_per_pe_per_cycle"]["fp8"] = rate
    data["chip"]["cores"] = cores
    data["system"].update(chips=chips, boards=chips, chips_per_board=1, topology="ring")
    data["system"]["link"]["bandwidth_GBps"] = gbps
    s = system_from_dict(data, source="h")
    assert s.peak_flops("fp8") == pytest.approx(2 * rows * cols * rate * ghz * 1e9 * cores * chips)
    assert s.link.bandwidth_Bps == pytest.approx(gbps * 1e9)


def read_toml_cached():
    import copy

    if not hasattr(read_toml_cached, "data"):
        read_toml_cached.data = read_toml(REPO / "arch_configs" / "rapid-1chip.toml")
    return copy.deepcopy(read_toml_cached.data)


def test_a_byte_order_mark_is_accepted(tmp_path, capsys):
    """A config (or workload, or sweep file) saved with a UTF-8 BOM by a Windows editor loads
    exactly as without it (was "TOML error: Invalid statement (at line 1, column 1)")."""
    from accelsim.dse.sweep import load_sweep_file
    from accelsim.workload import load_workload

    src = REPO / "arch_configs" / "h100-sxm.toml"
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    assert load_system(bom) == load_system(src)
    assert main(["check-config", str(bom)]) == 0
    wl = REPO / "workloads" / "tiny-cnn.toml"
    wbom = tmp_path / "w.toml"
    wbom.write_bytes(b"\xef\xbb\xbf" + wl.read_bytes())
    assert load_workload(wbom).layers == load_workload(wl).layers
    sweep = tmp_path / "s.toml"
    sweep.write_bytes(b"\xef\xbb\xbf[axes]\nscheme = [\"fp16\", \"fp8\"]\n")
    assert dict(load_sweep_file(sweep).axes) == {"scheme": ("fp16", "fp8")}


def test_deeply_nested_toml_is_a_config_error(tmp_path, capsys):
    """tomllib parses nested arrays recursively: 10^4 of them were a RecursionError (exit 70)
    in a config, a workload and a sweep file alike; now one line naming the file."""
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 10_000 + "]" * 10_000 + "\n")
    with pytest.raises(ConfigError, match="deep.toml: <toml>: arrays or tables nested too "
                                          "deeply") as exc:
        load_system(deep)
    assert exc.value.file == str(deep)
    for argv in (["check-config", str(deep)], ["layers", str(deep)],
                 ["sweep", "--file", str(deep), "--out", str(tmp_path / "s.csv"), "--dry-run"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{deep}" in err and "nested too deeply" in err and err.count("\n") == 1, err
