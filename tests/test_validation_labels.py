"""The ``label`` column of every validation report is true: a row a fit consumed is labelled
``fit``, never ``checked``.

The fit-row sets live beside the published tables (accelsim/*/published.py) and are what the
fit scripts read; here the set is derived independently, from what each fit script's objective
ACTUALLY consumes when it runs (its prediction / objective functions are wrapped to record their
cases), and compared with the committed reports' labels row by row.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from accelsim.dse import hfp8_published
from accelsim.llm import published as llm_published
from accelsim.perf import published as perf_published

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
sys.path.insert(0, str(REPO / "scripts"))


def _script(name):
    return importlib.import_module(name)


# --------------------------------------------------------------------------- appendix D
@pytest.fixture(scope="module")
def calibrate_consumed():
    """Keys of the published numbers scripts/calibrate.py's minimax objective reads, for the
    Calibrator main() builds (default fit keys)."""
    calibrate = _script("calibrate")
    from accelsim.arch import load_system
    from accelsim.dse import hfp8_study as study
    from accelsim.workload import load_workload

    cal = calibrate.Calibrator(load_system(REPO / study.DEFAULT_SYSTEM),
                               load_workload(REPO / study.DEFAULT_WORKLOAD))
    seen = set()

    class Recorder(dict):
        def __getitem__(self, key):
            seen.add(key)
            return 0.0

    cal.worst(Recorder())
    return frozenset(seen)


def test_calibrate_fits_exactly_its_declared_rows(calibrate_consumed):
    assert calibrate_consumed == hfp8_published.CALIBRATE_FIT_KEYS


@pytest.mark.parametrize("report", ["paper_comparison.csv", "calibration.csv"])
def test_appendix_d_reports_label_the_fit_rows(calibrate_consumed, report):
    df = pd.read_csv(REPORTS / report)
    assert len(df) == len(hfp8_published.PUBLISHED)
    for r in df.itertuples():
        assert r.label == ("fit" if r.metric in calibrate_consumed else "checked"), r.metric


# --------------------------------------------------------------------------- GPU compute
@pytest.fixture(scope="module")
def compute_consumed():
    """Measured cases scripts/fit_compute.py's objective (rms_log inside fit) evaluates when
    main() runs; predictions are stubbed so the run takes no time."""
    fc = _script("fit_compute")
    seen = set()
    orig_rms, orig_pred = fc.rms_log, fc.predict_cached

    def rms(cases, eff, launch_us=None):
        seen.update(c for c in cases)
        return 0.0

    fc.rms_log = rms
    fc.predict_cached = lambda c, eff, launch_us=None: c.value
    old_argv = sys.argv
    sys.argv = ["fit_compute.py"]
    try:
        fc.main()
    finally:
        fc.rms_log, fc.predict_cached, sys.argv = orig_rms, orig_pred, old_argv
    return frozenset(seen)


def test_fit_compute_fits_exactly_its_declared_rows(compute_consumed):
    assert {c.case for c in compute_consumed} == perf_published.FIT_CASES


@pytest.mark.parametrize("report", ["compute_validation.csv", "compute_gemm_published_sweep.csv",
                                    "compute_validation_oos.csv",
                                    "compute_validation_oos_cases.csv"])
def test_compute_reports_label_the_fit_rows(compute_consumed, report):
    names = {c.case for c in compute_consumed}
    df = pd.read_csv(REPORTS / report)
    for r in df.itertuples():
        assert r.label == ("fit" if r.case in names else "checked"), (report, r.case)


def test_dgx1_rows_are_fit_where_the_compute_fit_used_the_same_measurement(compute_consumed):
    """The DGX-1 check's one-V100 figure is the V100 AMP ResNet-50 number fit_compute.py fits
    (same NVIDIA table); the 8-GPU figure is in no fit."""
    used = {c.value for c in compute_consumed
            if c.kind == "resnet50" and c.system == "v100-sxm2" and c.scheme == "fp16"}
    d = pd.read_csv(REPORTS / "dgx1.csv")
    assert list(d.gpus) == [1, 8]
    for r in d.itertuples():
        assert r.label == ("fit" if r.published in used else "checked"), r.case


# --------------------------------------------------------------------------- LLMs
@pytest.fixture(scope="module")
def llm_consumed():
    """(model, scheme, micro_batch, system) of every prediction scripts/llm_fit.py's objectives
    make when main() runs (predictions stubbed)."""
    lf = _script("llm_fit")
    seen = set()
    orig = lf.predict

    def fake(model, plan, scheme, system, params=None):
        seen.add((model.name, scheme, plan.micro_batch, system.name))
        return types.SimpleNamespace(tflops_per_gpu=100.0,
                                     memory=types.SimpleNamespace(total_bytes=50 * 2 ** 30))

    lf.predict = fake
    old_argv = sys.argv
    sys.argv = ["llm_fit.py"]
    try:
        lf.main()
    finally:
        lf.predict, sys.argv = orig, old_argv
    return frozenset(seen)


def test_llm_fit_fits_exactly_its_declared_rows(llm_consumed):
    megatron = {m for m, s, b, sysname in llm_consumed if sysname == "dgx-a100"}
    memory = {(m, s, b) for m, s, b, sysname in llm_consumed if sysname == "dgx-h100"}
    assert megatron == llm_published.MEGATRON_FIT
    assert memory == llm_published.FP8LM_MEMORY_FIT


def test_llm_report_labels_the_fit_rows(llm_consumed):
    megatron = {m for m, s, b, sysname in llm_consumed if sysname == "dgx-a100"}
    memory = {(m, s, b) for m, s, b, sysname in llm_consumed if sysname == "dgx-h100"}
    df = pd.read_csv(REPORTS / "llm_validation.csv")
    n_fit = 0
    for r in df.itertuples():
        words = r.case.split()
        if "A100" in r.case:  # Megatron: "<name> <n>xA100 t.. p.. v.."
            fitted = words[0] in megatron
        elif r.quantity == "memory_per_gpu":  # "<name> <n>xH100 t p d mb<b> <scheme>"
            fitted = (words[0], words[-1], int(words[-2][2:])) in memory
        else:
            fitted = False
        n_fit += fitted
        assert r.label == ("fit" if fitted else "checked"), (r.case, r.quantity)
    assert n_fit == len(megatron) + len(memory)


# --------------------------------------------------------------------------- validate_all
def test_validate_all_report_carries_the_same_labels():
    """reports/validation_all.csv (scripts/validate_all.py --out reports) labels each
    validation's rows as the source reports do: per validation, the same fit / checked counts."""
    va = pd.read_csv(REPORTS / "validation_all.csv")

    def counts(df):
        return df["label"].value_counts().to_dict()

    def va_counts(prefix):
        return counts(va[va.validation.str.startswith(prefix)])

    assert va_counts("HFP8 appendix D") == counts(pd.read_csv(REPORTS / "paper_comparison.csv"))
    assert va_counts("DGX-1") == counts(pd.read_csv(REPORTS / "dgx1.csv"))
    compute = pd.concat([pd.read_csv(REPORTS / f)[["label"]] for f in (
        "compute_validation.csv", "compute_gemm_published_sweep.csv",
        "compute_validation_oos.csv", "compute_validation_oos_cases.csv")])
    assert va_counts("GPU compute") == counts(compute)
    llm = pd.read_csv(REPORTS / "llm_validation.csv")
    meg = llm.source.str.startswith("Narayanan")
    assert va_counts("Megatron") == counts(llm[meg])
    assert va_counts("FP8-LM") == counts(llm[~meg])
    # leave-one-out values exist exactly for the fit rows of the five refittable fits (MPT:
    # every row; the ones outside fit_fsdp's rows carry their own error)
    loo = va[va.loo_in_target.notna()]
    assert (loo.label == "fit").all()
    refittable = va[va.validation.str.startswith(("HFP8", "GPU compute", "Megatron", "FP8-LM",
                                                  "MPT FSDP"))]
    assert len(loo) == int((refittable.label == "fit").sum())


@pytest.fixture(scope="module")
def host_overhead_consumed():
    """Case ids of accelsim/data/llm_published.toml scripts/fit_host_overhead.py's objective
    reads when main() runs (serve runs stubbed)."""
    fh = _script("fit_host_overhead")
    seen = set()
    orig = fh.objective, fh.predict, fh.Setting

    def objective(cases, sets, overhead_s):
        seen.update(c["id"] for c in cases)
        return abs(overhead_s - 0.004)

    fh.objective, fh.Setting = objective, lambda case: None
    fh.predict = lambda case, setting, overhead_s: case["value"]
    try:
        fh.main([])
    finally:
        fh.objective, fh.predict, fh.Setting = orig
    return frozenset(seen)


def test_fit_host_overhead_fits_exactly_its_declared_rows(host_overhead_consumed):
    assert host_overhead_consumed == llm_published.HOST_OVERHEAD_FIT


def test_published_llm_report_labels_the_fit_rows(host_overhead_consumed):
    """reports/llm_published_validation.csv (scripts/llm_published_validate.py) labels the
    rows scripts/fit_host_overhead.py consumes ``fit`` and every other row ``checked``; no other
    fit script reads its source, accelsim/data/llm_published.toml; validate_all.csv's rows of
    that validation say the same."""
    fit_scripts = [p for p in (REPO / "scripts").glob("*.py")
                   if p.stem.startswith(("fit_", "calibrate", "llm_fit", "arith_h100_fit"))
                   and p.stem != "fit_host_overhead"]
    assert len(fit_scripts) >= 5
    for p in fit_scripts:
        assert "llm_published" not in p.read_text(), p.name  # the .toml or its script
    df = pd.read_csv(REPORTS / "llm_published_validation.csv")
    want = df["id"].map(lambda i: "fit" if i in host_overhead_consumed else "checked")
    assert (df["label"] == want).all()
    assert (df["label"] == "fit").sum() == len(host_overhead_consumed)
    va = pd.read_csv(REPORTS / "validation_all.csv")
    mine = va[va.validation.str.startswith("LLM inference / MoE training, published")]
    asked = df[df["accelsim"].notna()]
    assert len(mine) == len(asked)
    assert list(mine["label"]) == list(asked["label"])


def test_the_fsdp_leave_one_out_refits_on_the_other_rows():
    """fit_fsdp's leave-one-out: each row's error at the grid value the *other* rows pick
    (lowest mean absolute error, the first of equals), computed here by brute force."""
    import numpy as np

    fit = _script("fit_fsdp")
    rng = np.random.default_rng(3)
    errs = rng.normal(0.0, 0.1, size=(len(fit.GRID), 5))
    for i in range(5):
        others = np.delete(errs, i, axis=1)
        mae = [float(np.mean(np.abs(row))) for row in others]
        k = min(range(len(mae)), key=lambda j: (mae[j], j))
        assert fit.best_k(others) == k
    tie = np.zeros((3, 2))
    assert fit.best_k(tie) == 0  # equals: the first, as the fit's grid walk keeps it
