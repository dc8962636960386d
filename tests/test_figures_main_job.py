"""The main job end to end: ``accelsim figures --out DIR`` writes the contract's tables, the
figures, summary.md and manifest.json; the published numbers of the HFP8 paper (appendix D) are
reproduced by ONE parameter set within the stated tolerance (3 percentage points for every
ratio; the '~40-60 %' communication share as 50 +- 10); throughput never exceeds the
peak-FLOPS ceiling and never drops when bandwidth grows."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pandas as pd
import pytest

from accelsim.cli import main
from accelsim.dse import hfp8_published as published
from accelsim.dse import hfp8_study as study
from accelsim.dse import training
from accelsim.engine import schedule

REPO = Path(__file__).resolve().parents[1]
LINKS = (32.0, 64.0, 128.0)
COMPRESSIONS = (1.0, 32.0, 64.0, 128.0, 256.0, 512.0)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("reports")
    for name in ("calibration.csv", "calibration_ranges.csv"):  # scripts/calibrate.py's tables
        (d / name).write_bytes((REPO / "reports" / name).read_bytes())
    assert main(["figures", "--out", str(d), "--no-progress",
                 "--system", str(REPO / study.DEFAULT_SYSTEM),
                 "--workload", str(REPO / study.DEFAULT_WORKLOAD),
                 "--dgx1", str(REPO / study.DEFAULT_DGX1)]) == 0
    return d


@pytest.fixture(scope="module")
def thr(out):
    return pd.read_csv(out / "throughput.csv")


def test_contract_tables_cover_the_grid(out, thr):
    br = pd.read_csv(out / "comm_breakdown.csv")
    for t, cols in ((thr, ["scheme", "chip_GBps", "compression", "samples_per_s"]),
                    (br, ["scheme", "chip_GBps", "compression", "reduce_scatter_s",
                          "all_gather_s", "weight_update_s"])):
        assert set(cols) <= set(t.columns)
        grid = {(s, b, c) for s in ("fp16", "fp8", "hfp8") for b in LINKS for c in COMPRESSIONS}
        got = list(zip(t.scheme, t.chip_GBps.astype(float), t.compression.astype(float)))
        assert len(got) == len(set(got)) == len(grid) and set(got) == grid
        assert (t.select_dtypes("number") >= 0).all().all()


def test_figures_summary_and_manifest_exist(out):
    for name in ("fig8_throughput.png", "compression_sweep.png", "fig9_comm_breakdown.png",
                 "dgx1_resnet50.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    summary = (out / "summary.md").read_text()
    for p in published.PUBLISHED:
        assert p.description in summary
    assert "analytic" in summary and "DGX-1" in summary
    man = json.loads((out / "manifest.json").read_text())
    assert man["engine"] == "analytic" and man["accelsim_version"]
    roles = {i["role"]: i for i in man["inputs"]}
    assert roles["system"]["sha256"] == study.sha256_file(REPO / study.DEFAULT_SYSTEM)
    assert {o["path"] for o in man["outputs"]} >= {"throughput.csv", "comm_breakdown.csv",
                                                  "summary.md"}


def test_summary_carries_the_calibration_of_this_parameter_set(out):
    """reports/calibration*.csv (scripts/calibrate.py --out reports) are for PAPER_SETUP, cover
    every published number, and summary.md shows the identifiability table."""
    res = pd.read_csv(REPO / "reports" / "calibration.csv")
    assert list(res["metric"]) == [p.key for p in published.PUBLISHED]
    p = study.PAPER_SETUP
    assert res["fit_params"].iloc[0] == (
        f"PAPER_SETUP minibatch={p.minibatch} overlap={p.overlap:g} "
        f"per_tensor_overhead_s={p.per_tensor_overhead_s:g} "
        f"memory_efficiency={p.memory_efficiency:g}"), "re-run scripts/calibrate.py --out reports"
    assert ((res["fit"] - res["published"]).abs() <= res["tolerance"]).all()
    summary = (out / "summary.md").read_text()
    assert "## Calibration: how well the published numbers pin the parameters" in summary
    assert "| group | quantity | unit | fit | low | high | spread_pct | note |" in summary
    for q in ("per_tensor_overhead_s", "memory_efficiency", "overlap", "minibatch"):
        assert f"| parameter | {q} |" in summary


def test_ten_published_numbers_are_compared():
    assert len(published.PUBLISHED) == 10
    assert {p.key for p in published.PUBLISHED} >= {
        "hfp8_comm_cut_64GBps_256x_pct", "hfp8_comm_cut_128GBps_256x_pct",
        "fp8_over_fp16_gain_compressed_max_pct"}
    cmp_ = pd.read_csv(REPO / "reports" / "paper_comparison.csv")
    assert list(cmp_["metric"]) == [p.key for p in published.PUBLISHED]
    assert cmp_["within_tolerance"].all()


_CASES = [pytest.param(p, id=p.key) for p in published.PUBLISHED]


@pytest.mark.parametrize("pub", _CASES)
def test_published_number_reproduced_within_tolerance(thr, pub):
    ours = published.paper_metrics(thr)[pub.key]
    assert abs(ours - pub.value) <= pub.tolerance, (
        f"{pub.description}: published {pub.value}{pub.unit}, accelsim {ours:.2f}{pub.unit}")


def test_the_papers_qualitative_claims_hold(thr):
    claims = published.qualitative_claims(thr)
    assert claims["holds"].all(), claims[~claims["holds"]].to_string()


def test_more_bandwidth_never_lowers_throughput(thr):
    for _, g in thr.groupby(["scheme", "compression"]):
        ips = g.sort_values("chip_GBps")["samples_per_s"].to_numpy()
        assert (ips[1:] >= ips[:-1]).all()


def test_throughput_never_exceeds_the_peak_flops_ceiling(thr):
    assert (thr["utilization"] <= 1.0).all()
    assert (thr["achieved_flops_per_s"] <= thr["peak_flops_per_s"]).all()


def test_dgx1_check_is_reported(out):
    d = pd.read_csv(out / "dgx1.csv").set_index("gpus")
    assert list(d.index) == [1, 8] and list(d.published) == [1200.0, 8322.0]
    # Both rows bounded from both sides (hfp8_published.DGX1_ERROR_BAND_PCT, with the why):
    # one GPU tests the compute model (+-10 %; it is a fit row of scripts/fit_compute.py); eight
    # GPUs (held out) sit +15.8 % high because the model has no input pipeline, stragglers or
    # framework synchronisation: the one-GPU error compounded with the measured scaling loss
    # (NVIDIA: 86.7 % from 1 to 8 GPUs) the model lacks. The band [+10, +22] % keeps it there.
    for gpus, (lo, hi) in published.DGX1_ERROR_BAND_PCT.items():
        assert lo <= d.error_pct[gpus] <= hi, (gpus, d[["published", "predicted", "error_pct"]])
    assert list(d.label) == ["fit", "checked"]
    assert d.predicted_scaling_pct[8] >= d.published_scaling_pct[8]
    assert d.published_scaling_pct[8] == pytest.approx(100 * 8322 / (8 * 1200))
    assert d.predicted_scaling_pct[8] <= 100.0


def test_schemes_agree_when_communication_is_free(out):
    from accelsim.arch import load_system
    from accelsim.workload import load_workload

    system = load_system(REPO / study.DEFAULT_SYSTEM)
    workload = load_workload(REPO / study.DEFAULT_WORKLOAD)
    free = schedule.CommPhases(0.0, 0.0, 0.0)
    ips = {s: schedule.combine(training.compute_profile(system, workload, s, study.PAPER_SETUP.minibatch),
                         free).samples_per_s for s in study.SCHEMES}
    assert ips["fp8"] == ips["hfp8"]  # same compute precision: only communication differs
    assert ips["fp16"] < ips["fp8"]  # FP8 compute is faster
    # and communication only ever costs throughput
    thr = pd.read_csv(out / "throughput.csv")
    for s in study.SCHEMES:
        assert (thr[thr.scheme == s].samples_per_s < ips[s]).all()


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    assert main(["figures", "--out", str(tmp_path), "--system", "no/such.toml"]) == 2
    assert "system not found: 'no/such.toml'" in capsys.readouterr().err
    assert main(["figures", "--out", str(tmp_path), "--minibatch", "0"]) == 2
    assert "argument --minibatch: must be an integer in [1, " in capsys.readouterr().err
    # a design that does not fit is named, with the way out
    assert main(["figures", "--out", str(tmp_path), "--no-progress", "--dgx1", "none",
                 "--system", str(REPO / "arch_configs" / "rapid-1chip.toml")]) == 2
    err = capsys.readouterr().err
    assert "GiB per chip > memory" in err and "try a smaller --minibatch" in err


def test_tracked_outputs_carry_no_date_machine_or_run_time(out):
    """Rerunning `accelsim figures` leaves `git status` clean (issue 21, item 11): summary.md
    and manifest.json hold no date, platform or timing; those go to the ignored run.json."""
    import re

    man_text = (out / "manifest.json").read_text()
    man = json.loads(man_text)
    assert not {"date_utc", "python", "platform", "elapsed_s"} & set(man)
    iso_date = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
    for name in ("summary.md", "manifest.json"):
        assert not iso_date.search((out / name).read_text()), name
    assert platform.platform() not in man_text
    run = json.loads((out / man["run_record"]).read_text())
    assert iso_date.match(run["date_utc"]) and run["python"] == platform.python_version()
    # shipped inputs are recorded by their shipped name, the same from any folder
    assert {i["path"] for i in man["inputs"]} == {
        study.DEFAULT_SYSTEM, study.DEFAULT_WORKLOAD, study.DEFAULT_DGX1,  # + the co-design's:
        "accelsim/data/codesign/curves.csv", "workloads/gpt-char.toml", "workloads/digits-cnn.toml"}
    assert "/reports/run.json" in (REPO / ".gitignore").read_text().split()
