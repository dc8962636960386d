"""The scenario layer (issue: one scenario, one meaning per knob). One test per reported bug:
each fails on the code before the scenario layer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from accelsim.arch import build_system, chip_GBps, off_chip_links
from accelsim.cli import main

REPO = Path(__file__).resolve().parents[1]
SYSTEM = str(REPO / "arch_configs" / "hfp8-64chip.toml")
TINY = str(REPO / "workloads" / "tiny-cnn.toml")
PHASES = ["reduce_scatter_s", "all_gather_s", "weight_update_s"]


def comm_json(capsys, *args) -> list[dict]:
    assert main(["comm", "--config", SYSTEM, "--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def sweep(*args) -> int:
    return main(["sweep", "--executor", "serial", "--no-progress", *args])


def test_chip_and_link_bandwidth_have_one_meaning_each(tmp_path, capsys):
    # the config states 4 GB/s per link, 8 links per chip: 32 GB/s per chip (the paper's lowest)
    system = build_system(SYSTEM)
    assert off_chip_links(system) == 8 and chip_GBps(system) == pytest.approx(32.0)
    by_chip = comm_json(capsys, "--chip-GBps", "32", "--scheme", "fp8")[0]
    by_link = comm_json(capsys, "--link-GBps", "4", "--scheme", "fp8")[0]
    out = tmp_path / "s.csv"
    assert sweep("--axis", "chip_GBps=32", "--set", "scheme=fp8", "--out", str(out)) == 0
    row = pd.read_csv(out).iloc[0]
    for k in PHASES:
        assert by_chip[k] == pytest.approx(by_link[k], rel=1e-12)
        assert row[k] == pytest.approx(by_chip[k], rel=1e-9)
    assert row["link_GBps"] == pytest.approx(4.0) and by_chip["link_GBps"] == pytest.approx(4.0)
    # and 8x the per-link value is not the same scenario
    capsys.readouterr()
    fast = comm_json(capsys, "--link-GBps", "32", "--scheme", "fp8")[0]
    assert fast["chip_GBps"] == pytest.approx(256.0)
    assert fast["reduce_scatter_s"] < by_chip["reduce_scatter_s"] / 4


def test_inter_board_bandwidth_is_its_own_knob(tmp_path):
    out = tmp_path / "ib.csv"
    assert sweep("--axis", "system.inter_board.bandwidth_GBps=1,100", "--set", "scheme=fp8",
                 "--set", f"workload={TINY}", "--out", str(out)) == 0
    t = pd.read_csv(out).set_index("system.inter_board.bandwidth_GBps")
    assert (t.status == "ok").all()
    assert t.loc[1, "reduce_scatter_s"] > t.loc[100, "reduce_scatter_s"]
    assert t.loc[1, "inter_board_GBps"] == 1 and t.loc[100, "inter_board_GBps"] == 100
    # the board links keep the configured 4 GB/s
    assert (t["link_GBps"] == 4).all()
    # the same through the named knob, and a chip total cannot also fix the inter-board links
    assert build_system(SYSTEM, link_GBps=4, inter_board_GBps=1).inter_board_link.bandwidth_Bps \
        == 1e9
    with pytest.raises(ValueError, match="chip_GBps splits"):
        build_system(SYSTEM, chip_GBps=32, inter_board_GBps=1)


def test_comm_workload_counts_its_parameter_tensors(capsys):
    by_workload = comm_json(capsys, "--workload", "resnet50", "--scheme", "fp8")[0]
    by_count = comm_json(capsys, "--params", "25557032", "--tensors", "161", "--scheme", "fp8")[0]
    assert by_workload["n_tensors"] == 161
    assert by_workload["weight_update_s"] == pytest.approx(by_count["weight_update_s"], rel=1e-12)
    no_tensors = comm_json(capsys, "--params", "25557032", "--scheme", "fp8")[0]
    assert no_tensors["weight_update_s"] < by_workload["weight_update_s"]


@pytest.mark.parametrize("key", ["chip.core.rows", "core.rowz", "bandwdith"])
def test_misspelt_sweep_key_fails_before_any_point_runs(tmp_path, capsys, key):
    out = tmp_path / "x.csv"
    assert sweep("--set", f"{key}=16", "--set", f"workload={TINY}", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err
    assert not out.exists()  # nothing ran, nothing written


def test_bad_sweep_value_names_key_and_value(tmp_path, capsys):
    out = tmp_path / "x.csv"
    assert sweep("--axis", "scheme=fp8,fp7", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "scheme='fp7'" in err and "fp16" in err and not out.exists()
    assert sweep("--axis", "minibatch=64,-1", "--set", f"workload={TINY}", "--out", str(out)) == 2
    assert "minibatch=-1" in capsys.readouterr().err


def test_sweep_records_every_setting_and_accepts_workload_names(tmp_path):
    out = tmp_path / "s.csv"
    assert sweep("--set", "workload=tiny-cnn", "--set", "scheme=fp16", "--out", str(out)) == 0
    row = pd.read_csv(out).iloc[0]
    # the defaults that shaped the row are in it: calibrated update knobs, minibatch, bandwidths
    from accelsim.dse.hfp8_study import PAPER_SETUP

    for k, v in {"minibatch": PAPER_SETUP.minibatch, "overlap": PAPER_SETUP.overlap,
                 "per_tensor_overhead_s": PAPER_SETUP.per_tensor_overhead_s,
                 "memory_efficiency": PAPER_SETUP.memory_efficiency,
                 "chip_GBps": 32.0, "link_GBps": 4.0, "inter_board_GBps": 4.0, "chips": 64,
                 "compression": 1.0, "engine": "analytic", "workload": "tiny-cnn"}.items():
        assert row[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert row["samples_per_s"] > 0 and "images_per_s" not in row.index
    man = json.loads(Path(str(out) + ".manifest.json").read_text())
    assert man["sample_kind"] == {"tiny-cnn": "image"}
    assert man["defaults"]["minibatch"] == 384 and "PAPER_SETUP" in man["defaults_source"]


def test_sample_kind_names_what_samples_per_s_counts():
    from accelsim.dse.scenario import _workload, sample_kind

    assert sample_kind(_workload("resnet50")) == "image"
    assert sample_kind(_workload("bert-base")) == "sequence"


def test_plot_any_sweep_table(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert sweep("--axis", "chip_GBps=32,64", "--axis", "scheme=fp8,hfp8", "--set",
                 f"workload={TINY}", "--out", str(out)) == 0
    png = tmp_path / "p.png"
    assert main(["plot", str(out), "--x", "chip_GBps", "--y", "samples_per_s", "--hue", "scheme",
                 "--facet", "compression", "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["plot", str(out), "--x", "chip_GBps", "--y", "images_per_s",
                 "--out", str(png)]) == 2
    assert "'images_per_s' not in the table" in capsys.readouterr().err


def _cli(*args, **kw):
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.Popen([sys.executable, "-m", "accelsim.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_ctrl_c_during_a_sweep_exits_130_and_says_what_was_saved(tmp_path, executor):
    out = tmp_path / "s.csv"
    proc = _cli("sweep", "--executor", executor, "--workers", "2", "--no-progress", "--axis",
                "compression=1:400:1", "--set", f"workload={TINY}", "--out", str(out),
                start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("sweep wrote no rows in 120 s")
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr.decode()
    assert b"Traceback" not in stderr and b"Traceback" not in stdout
    assert b"saved in" in stdout + stderr and b"resume" in stdout + stderr
    assert len(pd.read_csv(out)) >= 2


def test_closed_pipe_exits_quietly():
    proc = _cli("formats")
    proc.stdout.close()  # the reader goes away at once, like `| head -0`
    _, stderr = proc.communicate(timeout=60)
    assert b"Traceback" not in stderr and b"BrokenPipe" not in stderr


def test_the_same_sweep_with_axes_in_another_order_resumes(tmp_path, capsys):
    out = tmp_path / "s.csv"
    a = ("--axis", "chip_GBps=32,64", "--axis", "scheme=fp8,hfp8")
    b = ("--axis", "scheme=fp8,hfp8", "--axis", "chip_GBps=32,64")
    assert sweep(*a, "--set", f"workload={TINY}", "--out", str(out)) == 0
    before = pd.read_csv(out)
    assert sweep(*b, "--set", f"workload={TINY}", "--out", str(out)) == 0
    after = pd.read_csv(out)
    assert len(after) == 4 and set(after.point_id) == set(before.point_id)


def test_sweep_takes_fusion_with_predicts_default():
    """chip.fusion is an optional key a sweep may set (it was refused as 'no existing key'),
    and a point that does not set it fuses as predict does (on for a GPU)."""
    from accelsim.dse.scenario import build_scenario

    base = {"system": "h100-sxm", "workload": "resnet50", "scheme": "fp16", "minibatch": 64}
    assert build_scenario(base).system.chip.fusion is True
    assert build_scenario({**base, "chip.fusion": False}).system.chip.fusion is False
    hfp8 = {**base, "system": "hfp8-64chip", "minibatch": 64 * 8}
    assert build_scenario(hfp8).system.chip.fusion is False  # no hierarchy: the paper's
    with pytest.raises(Exception, match="chip.fusio"):
        build_scenario({**base, "chip.fusio": True})
