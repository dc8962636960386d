"""The optional config keys of the hierarchy model: strict, opt-in, and a no-op when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.arch import ConfigError, Table, load_system, read_toml, system_from_dict
from accelsim.arch.schemes import SCHEME_NAMES, get_scheme, with_policy

REPO = Path(__file__).resolve().parents[1]


def _a100():
    return read_toml(REPO / "arch_configs" / "a100-sxm.toml")


def test_config_without_new_keys_has_no_hierarchy_no_launch_no_fusion():
    s = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
    assert s.chip.levels == () and s.chip.kernel_launch_s == 0.0 and s.chip.fusion is False
    assert not s.chip.has_hierarchy


def test_levels_are_read_innermost_first_in_SI():
    s = system_from_dict(_a100(), "a100.toml")
    smem, l2 = s.chip.levels
    assert (smem.name, smem.capacity_bytes, smem.shared_by) == ("smem", 164 * 1024, 1)
    assert (l2.name, l2.capacity_bytes, l2.shared_by) == ("L2", 40 * 1024**2, 108)
    assert l2.bandwidth_Bps == pytest.approx(7219.2e9)
    assert s.chip.kernel_launch_s == pytest.approx(6e-6)  # fitted: scripts/fit_compute.py


@pytest.mark.parametrize("mutate,key", [
    (lambda d: d["chip"]["level"][1].update(shared_by=7), "chip.level[1].shared_by"),
    (lambda d: d["chip"]["level"][0].update(size_KiB=3), "chip.level[0].size_KiB"),
    (lambda d: d["chip"]["level"][0].pop("bandwidth_GBps"), "chip.level[0].bandwidth_GBps"),
    (lambda d: d["chip"].update(fusion="yes"), "chip.fusion"),
    (lambda d: d["chip"].update(kernel_launch_us=-1), "chip.kernel_launch_us"),
    (lambda d: d["chip"].update(level={"name": "x"}), "chip.level"),
    (lambda d: d["chip"]["level"].reverse(), "chip.level"),
    (lambda d: d["core"]["macs_per_pe_per_cycle"].update(tf32=0), "tf32"),
])
def test_bad_hierarchy_keys_name_file_and_key(mutate, key):
    data = _a100()
    mutate(data)
    with pytest.raises(ConfigError) as err:
        system_from_dict(data, "bad.toml")
    assert str(err.value).startswith("bad.toml: ") and key in str(err.value)


def test_table_reader_is_public():
    t = Table("f.toml", "x", {"a": 1, "b": True})
    assert t.integer("a") == 1 and t.boolean("b", default=False) is True
    t.finish()


def test_gpu_schemes_reduce_like_fp16_at_their_byte_widths():
    fp16 = get_scheme("fp16")
    assert {"bf16", "tf32", "fp32"} <= set(SCHEME_NAMES)
    for name, nbytes in (("bf16", 2.0), ("tf32", 4.0), ("fp32", 4.0)):
        sc = get_scheme(name)
        assert sc.compute_precision == name and not sc.first_last_fp16
        assert sc.phase_order == fp16.phase_order and sc.update_placement == "replicated"
        for f in ("reduce_scatter_bytes_per_elem", "all_gather_bytes_per_elem",
                  "gradient_bytes", "master_weight_bytes", "optimizer_state_bytes"):
            assert getattr(sc, f) == nbytes


def test_policy_switch_and_bad_override_precision():
    assert with_policy("fp8", first_last_high=False).first_last_fp16 is False
    assert with_policy("fp8").first_last_fp16 is True
    with pytest.raises(ValueError, match="wl.toml.*'fc'.*fp7"):
        with_policy("fp8", overrides={"fc": "fp7"}, source="wl.toml")


@pytest.mark.parametrize("key,value", [("simt_precisions", ["fp6"]), ("simt_precisions", "fp32"),
                                       ("simt_precisions", [["fp32"]])])
def test_bad_simt_precisions(key, value):
    data = _a100()
    data["core"][key] = value
    with pytest.raises(ConfigError, match=f"bad.toml: core.{key}"):
        system_from_dict(data, "bad.toml")


def test_bad_layout():
    data = _a100()
    data["chip"]["layout"] = "chwn"
    with pytest.raises(ConfigError, match="bad.toml: chip.layout.*nhwc, nchw"):
        system_from_dict(data, "bad.toml")
