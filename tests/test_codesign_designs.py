"""Co-design designs from chip-builder keys: the System a ``[[design]]`` of builder keys gives is
the builder's chip (read back as ``accelsim chip`` writes it), placed in a system's topology
when it names one; the codesign command runs such a design with the spec's area; bad builder
keys are one-line errors naming the design."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from accelsim.arch.builder import ChipSpec, build_chip, place, system_of
from accelsim.arch.config import load_system
from accelsim.cli import main
from accelsim.dse.codesign_designs import Design, design_system, load_designs
from accelsim.errors import InputError

BUILT = ('[[design]]\nname = "hfp8-chip"\narea_mm2 = 248\nnode_nm = 14\n'
         'formats = ["fp16", "hfp8"]\nfrequency_GHz = 1.5\narray = [32, 32]\nsram_MiB = 40\n'
         'power_limit_W = 40\nmemory_bandwidth_GBps = 900\nmemory_capacity_GiB = 32\n')
SPEC = ChipSpec(area_mm2=248, node_nm=14, formats=("fp16", "hfp8"), frequency_GHz=1.5,
                array=(32, 32), sram_MiB=40, power_limit_W=40, memory_bandwidth_GBps=900,
                memory_capacity_GiB=32, name="hfp8-chip")


def test_a_builder_design_is_the_builders_chip(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(BUILT)
    (d,) = load_designs(p)
    assert d.spec == SPEC and d.area_mm2 == 248 and d.config == ""
    assert d.system() == system_of(build_chip(SPEC))
    assert design_system(d.key) == d.system()  # the key alone rebuilds it (process executors)


def test_a_builder_design_in_a_systems_topology(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(BUILT + 'system = "hfp8-64chip"\n')
    (d,) = load_designs(p)
    base = load_system("hfp8-64chip")
    s = d.system()
    assert s == place(build_chip(SPEC), base)
    assert s.chip == system_of(build_chip(SPEC)).chip  # every chip is the built one
    # ... and everything but the chip (and the name) is the system's
    assert dataclasses.replace(s, chip=base.chip, name=base.name,
                               description=base.description) == base


def test_codesign_runs_a_builder_design_with_its_area(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(BUILT + '[[design]]\nname = "gpu"\nconfig = "h100-sxm"\n')
    steps = tmp_path / "target.csv"
    pd.DataFrame([("fp16-amp", True, 100.0, 90.0, 110.0, 1.0, 1.0, 1.0)],
                 columns=["recipe", "feasible", "mean", "ci95_lo", "ci95_hi", "steps_ratio",
                          "steps_ratio_ci95_lo", "steps_ratio_ci95_hi"]).to_csv(steps,
                                                                               index=False)
    out = tmp_path / "c.csv"
    argv = ["codesign", "--designs", str(p), "--steps-csv", str(steps), "--workload",
            "tiny-cnn", "--batch", "8", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    t = pd.read_csv(out).set_index("design")
    assert t.loc["hfp8-chip", "area_mm2"] == 248 and t.loc["hfp8-chip", "feasible"]
    assert t.loc["hfp8-chip", "chip"].startswith("accelsim chip --area-mm2 248 --node 14")
    assert main(argv) == 0  # a rerun resumes from the journal: the same table
    assert pd.read_csv(out).equals(t.reset_index()[pd.read_csv(out).columns])


@pytest.mark.parametrize("text,msg", [
    (BUILT.replace("node_nm = 14\n", "node_nm = 15\n"), "--node 15"),
    (BUILT.replace("area_mm2 = 248\n", ""), "a built design needs area_mm2"),
    (BUILT.replace('formats = ["fp16", "hfp8"]', 'formats = "fp16"'), "formats must be a list"),
    (BUILT.replace("array = [32, 32]", "array = [32]"), "array must be [rows, cols]"),
    (BUILT + 'config = "h100-sxm"\n', "exclude each other"),
    (BUILT + "cores = 3\n", "unknown key(s) cores"),
    (BUILT.replace("area_mm2 = 248", "area_mm2 = 1"), "not less than the die's --area-mm2 1"),
])
def test_bad_builder_keys_name_the_design(tmp_path, text, msg):
    p = tmp_path / "d.toml"
    p.write_text(text)
    with pytest.raises(InputError, match=r"design\[0\]") as e:
        load_designs(p)
    assert msg in str(e.value)


def test_a_config_design_key_is_its_path():
    d = Design("gpu", "arch_configs/h100-sxm.toml")
    assert d.key == d.label == "arch_configs/h100-sxm.toml"
