"""``accelsim sweep`` on the real training-step model (small workload to stay fast): axes from
the command line and from a TOML file, infeasible design points as rows with a reason,
rerunning resumes without recomputing, unknown keys are clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from accelsim.cli import main

REPO = Path(__file__).resolve().parents[1]
TINY = str(REPO / "workloads" / "tiny-cnn.toml")
SYSTEM = str(REPO / "arch_configs" / "hfp8-64chip.toml")


def sweep(*args):
    return main(["sweep", "--executor", "serial", "--no-progress", "--set", f"workload={TINY}",
                 "--set", f"system={SYSTEM}", *args])


def test_cli_axes_bandwidth_monotone_and_resume(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert sweep("--axis", "chip_GBps=32,64,128", "--axis", "scheme=fp8,hfp8",
                 "--out", str(out)) == 0
    t = pd.read_csv(out)
    assert len(t) == 6 and (t.status == "ok").all() and t.point_id.is_unique
    for _, g in t.groupby("scheme"):
        ips = g.sort_values("chip_GBps").samples_per_s.to_numpy()
        assert (ips[1:] >= ips[:-1]).all()
    assert (t.samples_per_s <= t.peak_samples_per_s).all()
    before = out.read_bytes()
    assert sweep("--axis", "chip_GBps=32,64,128", "--axis", "scheme=fp8,hfp8",
                 "--out", str(out)) == 0
    assert out.read_bytes() == before  # nothing recomputed or appended
    assert "6 points" in capsys.readouterr().out


def test_chip_sweep_resizes_the_boards_and_names_what_does_not_fit(tmp_path):
    out = tmp_path / "c.csv"
    assert sweep("--axis", "chips=64,48,8,12", "--set", "scheme=hfp8", "--out", str(out)) == 0
    t = pd.read_csv(out, keep_default_na=False).set_index("chips")
    assert (t.loc[[64, 48, 8], "status"] == "ok").all()
    # the chip count reached the model: peak FLOP/s scales with it
    peak = pd.to_numeric(t.loc[[64, 48, 8], "peak_flops_per_s"])
    for n in (48, 8):
        assert peak[n] == pytest.approx(n / 64 * peak[64])
    assert t.loc[12, "status"] == "infeasible"
    assert "12 chips do not fill 8-chip hybrid cube-mesh boards" in t.loc[12, "reason"]


def test_resized_overrides():
    from accelsim.arch.scenario import Unbuildable
    from accelsim.arch.scenario import resized_overrides as scaled_board_overrides

    hcm = {"topology": "hybrid-cube-mesh-64", "chips_per_board": 8}
    assert scaled_board_overrides(hcm, 1)["system.topology"] == "single"
    assert scaled_board_overrides(hcm, 8)["system.topology"] == "dgx1"
    assert scaled_board_overrides(hcm, 128) == {"system.topology": "multi-board",
                                                "system.boards": 16}
    with pytest.raises(Unbuildable, match="12 chips"):
        scaled_board_overrides(hcm, 12)
    # a sweep that sets the topology itself only gets the boards adjusted
    assert scaled_board_overrides(hcm, 12, topology_given=True) == {
        "system.boards": 1, "system.chips_per_board": 12}
    ring = {"topology": "ring", "chips_per_board": 4}
    assert scaled_board_overrides(ring, 12) == {"system.boards": 3}


def test_sweep_file_and_array_override(tmp_path):
    f = tmp_path / "sweep.toml"
    f.write_text('[base]\nscheme = "fp16"\nchip_GBps = 64\n[axes]\narray = ["16x16", "32x32"]\n')
    out = tmp_path / "a.csv"
    assert sweep("--file", str(f), "--out", str(out)) == 0
    t = pd.read_csv(out).set_index("array")
    assert (t.status == "ok").all()
    # the override reached the model: 4x the PEs is 4x the peak (the tiny net is too small to
    # gain from the bigger array: fill/drain dominates)
    assert t.loc["32x32", "peak_flops_per_s"] == pytest.approx(4 * t.loc["16x16", "peak_flops_per_s"])
    assert t.loc["32x32", "compute_s"] != t.loc["16x16", "compute_s"]


def test_unknown_key_is_a_clear_error(tmp_path, capsys):
    assert sweep("--axis", "bandwdith=1,2", "--out", str(tmp_path / "x.csv")) == 2
    assert "unknown sweep key(s) 'bandwdith'" in capsys.readouterr().err


def test_dry_run_lists_points(tmp_path, capsys):
    assert sweep("--axis", "compression=1:256:x16", "--out", str(tmp_path / "x.csv"),
                 "--dry-run") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(" todo " in ln for ln in lines[:3])
    assert lines[3] == "3 points; keys and values checked"


def test_dask_without_the_extra_fails_before_any_output(tmp_path, capsys, monkeypatch):
    """docs/dse.md's ``--executor dask`` example without accelsim[dask]: one line naming the
    extra, before the manifest, the journal or a progress bar (issue 21, item 2)."""
    monkeypatch.setitem(sys.modules, "dask", None)  # import dask.distributed -> ImportError
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    out = tmp_path / "c.csv"
    code = main(["sweep", "--set", f"workload={TINY}", "--set", f"system={SYSTEM}",
                 "--axis", "chip_GBps=32,64", "--executor", "dask", "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err.count("\n") == 1 and "pip install 'accelsim[dask]'" in cap.err
    assert "%|" not in cap.err and cap.out == ""
    assert list(tmp_path.iterdir()) == []


def test_docs_name_the_dask_extra_before_the_dask_example():
    lines = (REPO / "docs" / "dse.md").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("accelsim") and "--executor dask" in line:
            assert any("accelsim[dask]" in earlier for earlier in lines[max(0, i - 3):i]), line


def test_auto_executor_runs_small_sweeps_serially():
    """The rule of choose_executor (measured in sweep_executors): a pool only with enough
    independent work per worker."""
    from accelsim.dse import scenario
    from accelsim.dse import sweep as sw

    key = scenario.group_by()
    small = sw.spec_from_assignments(axes=["chip_GBps=32,64"], defaults=scenario.defaults())
    many = sw.spec_from_assignments(axes=["scheme=fp16,fp8,hfp8", "minibatch=256,384,512,768"],
                                    defaults=scenario.defaults())
    idle = {"idle": 16.0}  # as on an idle 16-core machine (the rule reads the load otherwise)
    assert sw.choose_executor(small.points(), 2, key, **idle) == "serial"
    assert sw.choose_executor(many.points(), 2, key, **idle) == "process"
    assert sw.choose_executor(many.points(), 1, key, **idle) == "serial"
    assert sw.choose_executor(many.points(), 4, key, **idle) == "serial"  # 12 over 4 workers
    assert sw.choose_executor(many.points(), 2, key, idle=1.5) == "serial"  # a busy machine
    # ungrouped points (cost unknown, one pipe message per row) stay serial
    assert sw.choose_executor([{"x": i} for i in range(100_000)], 2, **idle) == "serial"
