"""An error bar on every prediction (issue 34 item 8): the shipped band table is what
scripts/error_bands.py derives from the shipped validation tables, it passes the issue's two
checks, the lookup picks the regime's band (re-derived here from the rows), and the front-ends
report it."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from accelsim.arch import load_system
from accelsim.cli import main
from accelsim.engine import uncertainty as u
from accelsim.errors import ConfigError
from accelsim.paths import REPO_ROOT, resolve_input

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import error_bands  # noqa: E402

REPORTS = REPO_ROOT / "reports"


@pytest.fixture(scope="module")
def rows():
    return error_bands.collect(REPORTS)


@pytest.fixture(scope="module")
def shipped():
    import pandas as pd

    return pd.read_csv(u.BANDS_FILE, comment="#", keep_default_na=False)


def test_shipped_table_is_derived_from_the_shipped_reports(rows):
    """The file equals a fresh derivation (rerun the script when the reports move)."""
    assert u.BANDS_FILE.read_text() == error_bands.render(error_bands.bands(rows), rows)


def test_shipped_bands_pass_the_issue_checks(rows, shipped):
    """>= 80 % of held-out errors inside the band their own question gets; no band wider than
    3x its regime's mean absolute error (recomputed here from the rows)."""
    share, wide, _ = error_bands.checks(rows, shipped)
    assert share >= 0.8 and wide == []
    for r in shipped.to_dict("records"):
        mask = np.ones(len(rows), bool)
        for k in u.KEYS:
            if r[k] != u.ANY:
                mask &= (rows[k] == r[k]).to_numpy()
        e = rows.error[mask].to_numpy()
        assert len(e) == r["rows"] >= u.MIN_ROWS
        assert r["mae_pct"] == pytest.approx(np.abs(e).mean(), abs=0.05)
        assert r["error_high_pct"] - r["error_low_pct"] <= 3 * r["mae_pct"] + 1e-9


def test_every_family_has_rows_from_held_out_and_fit_data(rows):
    assert set(rows.family) == {f.value for f in u.Family}
    assert {"held-out", "leave-one-out"} <= set(rows.source)
    # the default clock's rows: the power-limited ones, not the --clock boost what-if
    assert not rows.validation.str.contains("fixed clock").any()
    assert not rows.validation.str.endswith(("gpt step", "inference")).any()


def test_a_question_gets_its_regimes_percentiles(rows):
    """Megatron-LM on many A100 nodes, 16-bit, 2K tokens: the band is the 10th / 90th
    percentile (sample values, outward) of exactly those rows."""
    sel = rows[(rows.family == "training") & (rows.nodes == "many") & (rows["stack"] == "megatron")
               & (rows.precision == "16-bit") & (rows.seq_range == "<=2048")]
    e = sel.error.to_numpy()
    lo, hi = np.percentile(e, 10, method="lower"), np.percentile(e, 90, method="higher")
    a100 = load_system(resolve_input("dgx-a100", "system"))
    band = u.training_band(a100, gpus=1024, precision="bf16", stack="megatron", seq=2048,
                           params=76e9)
    assert band.rows == len(sel)
    if hi - lo <= 3 * round(np.abs(e).mean(), 1):  # not capped: the plain percentiles
        assert band.low_pct == pytest.approx(lo, abs=0.1)
        assert band.high_pct == pytest.approx(hi, abs=0.1)
    assert band.in_domain and band.domain_note is None
    assert band.regime == "training / many nodes / megatron / 16-bit / seq <=2048"


def test_a_regime_without_rows_falls_back_to_a_wider_one():
    """No validated Megatron run on one node: the one-node training band answers."""
    h100 = load_system(resolve_input("dgx-h100", "system"))
    band = u.training_band(h100, gpus=8, precision="bf16", stack="megatron", seq=4096,
                           params=8e9)
    assert band.regime == "training / one node"


@pytest.mark.parametrize("kw,fragment", [
    (dict(gpus=200_000), "200000 GPUs (validated 1-"),
    (dict(params=5e12), "5e+03 B parameters (validated"),
    (dict(seq=1_000_000), "sequence 1000000 (validated"),
])
def test_outside_every_validated_range_is_not_in_domain(kw, fragment):
    a100 = load_system(resolve_input("dgx-a100", "system"))
    q = dict(gpus=64, precision="bf16", stack="megatron", seq=2048, params=7e9) | kw
    band = u.training_band(a100, **q)
    assert not band.in_domain and fragment in band.domain_note
    assert band.domain_note.startswith("outside the validated training domain: ")


def test_an_unvalidated_chip_is_not_in_domain():
    band = u.gemm_band(load_system(resolve_input("hfp8-64chip", "system")), "fp16")
    assert not band.in_domain and "chip hfp8-64chip (validated " in band.domain_note


def test_bins():
    assert [u.seq_range(s) for s in (None, 1, 2048, 2049, 8192, 8193)] == \
        ["*", "<=2048", "<=2048", "2049-8192", "2049-8192", ">8192"]
    assert u.nodes_class(8, 8) == "one" and u.nodes_class(9, 8) == "many"
    assert [u.precision_class(p) for p in ("tf32", "bf16", "fp8", "nvfp4")] == \
        ["32-bit", "16-bit", "8-bit", "8-bit"]
    assert [u.chip_name(n) for n in ("dgx-h100", "h100-sxm", "dgx1-v100", "v100-sxm2",
                                     "h100-pcie")] == ["h100", "h100", "v100", "v100", "h100-pcie"]


def test_a_malformed_table_is_a_config_error(tmp_path):
    f = tmp_path / "bands.csv"
    f.write_text("# x\nfamily,rows\ngemm,3\n")
    with pytest.raises(ConfigError, match="error_bands.py"):
        u.error_band(u.Question(u.Family.GEMM, u.Phase.GEMM, "h100-sxm", 1, 1, "bf16"), f)


KEYS = ("error_low_pct", "error_high_pct", "in_domain", "domain_note")


@pytest.mark.parametrize("argv", [
    ["gemm", "--system", "h100-sxm", "--m", "512", "--n", "512", "--k", "512"],
    ["infer", "--system", "h100-sxm", "--model", "gpt2-small", "--scheme", "bf16", "--batch",
     "1", "--prompt", "128"],
    ["llm", "--system", "dgx-h100", "--layers", "2", "--hidden", "256", "--heads", "4", "--seq",
     "256", "--vocab", "1024", "--scheme", "bf16", "--gpus", "8", "--global-batch", "8"],
    ["predict", "--system", "a100-sxm", "--workload", "tiny-cnn", "--batch", "8"],
], ids=["gemm", "infer", "llm", "predict"])
def test_front_ends_report_the_band(argv, capsys):
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["error_low_pct"] <= d["error_high_pct"] and isinstance(d["in_domain"], bool)
    assert (d["domain_note"] is None) == d["in_domain"]
    assert main(argv) == 0
    assert sum("error band" in ln for ln in capsys.readouterr().out.splitlines()) == 1


def test_a_new_validation_must_be_placed_not_dropped(tmp_path):
    """A validation the script does not know (new, or renamed by a refit) stops it, naming the
    validation, instead of silently leaving its rows out of every band."""
    import shutil

    for name in error_bands.REPORT_TABLES:
        shutil.copy(REPORTS / name, tmp_path / name)
    va = tmp_path / "validation_all.csv"
    va.write_text(va.read_text().replace("H100 measured here: gemm: power model",
                                         "H100 measured here: gemm: boost clock"))
    with pytest.raises(SystemExit, match="'H100 measured here: gemm: boost clock'.* is new"):
        error_bands.collect(tmp_path)
