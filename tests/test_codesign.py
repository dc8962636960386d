"""``accelsim codesign`` on a tiny synthetic steps table (no training): step time and energy are
predict's, the intervals are the steps' times the step exactly, infeasible points get no time, a
rerun resumes without the engine and writes the same table, bad inputs are one-line errors."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from accelsim.cli import main

STEPS = pd.DataFrame([
    # recipe, feasible, mean, ci95_lo, ci95_hi, steps_ratio, ratio lo, ratio hi, n, reached
    ("fp16-amp", True, 100.0, 90.0, 110.0, 1.0, 1.0, 1.0, 3, 3),
    ("hfp8", True, 107.0, 95.0, 119.0, 1.07, 1.01, 1.13, 3, 3),
    ("fp8-e5m2", False, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 3, 1),
    ("s2fp8", True, 120.0, 100.0, 140.0, 1.2, 1.1, 1.3, 3, 3),
], columns=["recipe", "feasible", "mean", "ci95_lo", "ci95_hi", "steps_ratio",
            "steps_ratio_ci95_lo", "steps_ratio_ci95_hi", "n", "reached"])


@pytest.fixture
def steps_csv(tmp_path):
    p = tmp_path / "target.csv"
    STEPS.to_csv(p, index=False)
    return p


def _run(tmp_path, steps_csv, *extra):
    out = tmp_path / "codesign.csv"
    argv = ["codesign", "--chips", "h100-sxm", "--steps-csv", str(steps_csv), "--workload",
            "tiny-cnn", "--batch", "16", "--out", str(out), "--no-progress", *extra]
    assert main(argv) == 0
    return pd.read_csv(out).set_index("recipe"), out


def _predict(scheme: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["predict", "--system", "h100-sxm", "--workload", "tiny-cnn", "--batch", "16",
                 "--scheme", scheme, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_times_are_predicts_step_times_steps_and_cis_exact(tmp_path, steps_csv, capsys):
    t, _ = _run(tmp_path, steps_csv)
    assert "timing them on this workload is an assumption" in capsys.readouterr().out
    for recipe, scheme in (("fp16-amp", "fp16"), ("hfp8", "hfp8")):
        r, ref = t.loc[recipe], _predict(scheme, capsys)
        assert r["scheme"] == scheme and r["feasible"]
        # H100: its config gives hfp8 a rate (the fp8 one, arch_configs/h100-sxm.toml)
        assert r["datapath"] == scheme
        assert r["step_time_s"] == ref["step_time_s"]  # the same engine call as predict
        assert r["energy_per_step_J"] == pytest.approx(ref["energy_J"], rel=1e-12)
        s = STEPS.set_index("recipe").loc[recipe]
        for suffix, k in (("", "mean"), ("_ci95_lo", "ci95_lo"), ("_ci95_hi", "ci95_hi")):
            assert r[f"time_to_target_s{suffix}"] == s[k] * r["step_time_s"]
            assert r[f"energy_to_target_J{suffix}"] == s[k] * r["energy_per_step_J"]
        assert r["power_W"] == pytest.approx(ref["power_W"], rel=1e-9)
    # infeasible: never reaches the target / no engine scheme -> a reason, never a time
    for recipe, why in (("fp8-e5m2", "does not reach the target loss (1 of 3 runs"),
                        ("s2fp8", "no engine scheme")):
        r = t.loc[recipe]
        assert not r["feasible"] and why in r["reason"]
        assert all(math.isnan(r[c]) for c in ("time_to_target_s", "time_to_target_s_ci95_lo",
                                                "energy_to_target_J", "steps_to_target",
                                                "step_time_s"))
    assert (tmp_path / "codesign.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_study_folder_steps_from_its_saved_curves(tmp_path, capsys):
    """--study DIR --target-loss L: the steps come from DIR/curves.csv (hand-made here: the
    first evaluation at or below 1.0 is step 20, 30 for fp16-amp's seeds; 30, 30 for hfp8)."""
    rows = [("fp16-amp", 0, [2.0, 0.9, 0.5]), ("fp16-amp", 1, [2.0, 1.5, 1.0]),
            ("hfp8", 0, [2.0, 1.1, 0.8]), ("hfp8", 1, [2.0, 1.2, 1.0])]
    pd.DataFrame([{"recipe": r, "seed": s, "step": 10 * (i + 1), "train_loss": v,
                   "val_loss": v, "test_accuracy": 0.0}
                  for r, s, vs in rows for i, v in enumerate(vs)]).to_csv(
        tmp_path / "curves.csv", index=False)
    pd.DataFrame({"recipe": ["fp16-amp", "hfp8"], "verdict": [None, "not resolved"]}).to_csv(
        tmp_path / "summary.csv", index=False)
    out = tmp_path / "c.csv"
    assert main(["codesign", "--chips", "h100-sxm", "--study", str(tmp_path), "--target-loss",
                 "1.0", "--workload", "tiny-cnn", "--batch", "16", "--out", str(out),
                 "--no-progress"]) == 0
    t = pd.read_csv(out).set_index("recipe")
    assert t.loc["fp16-amp", "steps_to_target"] == 25.0 and t.loc["hfp8", "steps_to_target"] == 30
    assert t.loc["hfp8", "time_to_target_s"] == 30 * t.loc["hfp8", "step_time_s"]


def test_baseline_steps_multiply_the_ratio(tmp_path, steps_csv, capsys):
    t, _ = _run(tmp_path, steps_csv, "--baseline-steps", "5000")
    r = t.loc["hfp8"]
    assert r["steps_to_target"] == 5000 * 1.07
    assert r["time_to_target_s_ci95_lo"] == 5000 * 1.01 * r["step_time_s"]
    assert r["time_to_target_s_ci95_hi"] == 5000 * 1.13 * r["step_time_s"]
    assert "assumption: a recipe's step ratio" in capsys.readouterr().out


def test_rerun_resumes_without_the_engine_and_writes_the_same_table(tmp_path, steps_csv,
                                                                   monkeypatch):
    _, out = _run(tmp_path, steps_csv)
    first = out.read_bytes()
    import accelsim.engine as engine

    def no_engine(*a, **k):
        raise AssertionError("a journalled step was recomputed")

    monkeypatch.setattr(engine, "simulate", no_engine)
    _run(tmp_path, steps_csv)
    assert out.read_bytes() == first


def test_ctrl_c_says_what_was_saved(tmp_path, steps_csv, capsys, monkeypatch):
    import accelsim.engine as engine

    real, calls = engine.simulate, []

    def interrupt_second(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(engine, "simulate", interrupt_second)
    with pytest.raises(SystemExit) as e:
        _run(tmp_path, steps_csv)
    assert e.value.code == 130
    err = capsys.readouterr().err
    assert "1 of 2 design x scheme steps are saved" in err and "to resume" in err


def test_designs_file_gives_area_and_a_design_that_cannot_run(tmp_path, steps_csv):
    (tmp_path / "d.toml").write_text('[[design]]\nname = "gpu"\nconfig = "h100-sxm"\n'
                                     'area_mm2 = 814\n[[design]]\nname = "rapid"\n'
                                     'config = "rapid-1chip"\n')
    out = tmp_path / "c.csv"
    assert main(["codesign", "--designs", str(tmp_path / "d.toml"), "--steps-csv",
                 str(steps_csv), "--recipes", "fp16-amp", "--workload", "tiny-cnn", "--batch",
                 "16", "--out", str(out), "--no-progress"]) == 0
    t = pd.read_csv(out).set_index("design")
    assert t.loc["gpu", "area_mm2"] == 814 and math.isnan(t.loc["rapid", "area_mm2"])
    assert t["recipe"].tolist() == ["fp16-amp", "fp16-amp"]


@pytest.mark.parametrize("edit,extra,msg", [
    (lambda s: s.drop(columns="ci95_hi"), (), "no ci95_hi column"),
    (lambda s: s, ("--recipes", "fp9"), "--recipes: fp9: not in the steps table"),
    (lambda s: s, ("--target-loss", "2"), "--target-loss goes with --study"),
    (lambda s: s.assign(feasible="maybe"), (), "feasible must be True or False"),
    (lambda s: s.assign(mean=-1.0), (), "a feasible recipe needs a finite mean > 0 steps"),
])
def test_bad_inputs_are_one_line(tmp_path, capsys, edit, extra, msg):
    p = tmp_path / "t.csv"
    edit(STEPS).to_csv(p, index=False)
    rc = main(["codesign", "--chips", "h100-sxm", "--steps-csv", str(p), "--workload",
               "tiny-cnn", "--batch", "16", "--out", str(tmp_path / "o.csv"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and err.count("\n") == 1, err


def test_bad_study_folder_and_designs_are_one_line(tmp_path, capsys):
    (tmp_path / "d.toml").write_text('[[design]]\nname = "x"\nconfig = "h100-sxm"\nrows = 3\n')
    for args, msg in ((["--chips", "h100-sxm", "--study", str(tmp_path), "--target-loss", "1"],
                       "no curves.csv"),
                      (["--chips", "h100-sxm", "--study", str(tmp_path)], "needs --target-loss"),
                      (["--designs", str(tmp_path / "d.toml"), "--study", str(tmp_path),
                        "--target-loss", "1"], "unknown key(s) rows")):
        rc = main(["codesign", *args, "--workload", "tiny-cnn", "--batch", "16", "--out",
                   str(tmp_path / "o.csv")])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and err.count("\n") == 1, err


def test_plot_pareto_reads_the_table(tmp_path, steps_csv, capsys):
    """``accelsim plot pareto`` draws the table's feasible rows (lower time and energy better)
    and marks the same front codesign's ``pareto`` column does."""
    t, out = _run(tmp_path, steps_csv)
    capsys.readouterr()
    assert main(["plot", "pareto", "--csv", str(out), "--x", "time_to_target_s", "--y",
                 "energy_to_target_J", "--x-lower-better", "--y-lower-better", "--hue",
                 "scheme", "--out", str(tmp_path / "f.png")]) == 0
    printed = capsys.readouterr().out
    on = t[t["pareto"].astype(bool)]
    assert f"{len(on)} of {int(t['feasible'].sum())} feasible rows" in printed


def test_a_transformer_is_timed_as_predict_times_it(tmp_path, steps_csv, capsys):
    out = tmp_path / "g.csv"
    assert main(["codesign", "--chips", "h100-sxm", "--steps-csv", str(steps_csv), "--recipes",
                 "fp16-amp", "--workload", "gpt2-small", "--batch", "8", "--out", str(out),
                 "--no-progress"]) == 0
    r = pd.read_csv(out).iloc[0]
    capsys.readouterr()
    assert main(["predict", "--system", "h100-sxm", "--workload", "gpt2-small", "--batch", "8",
                 "--scheme", "fp16", "--optimizer", "adamw", "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert r["step_time_s"] == ref["step_time_s"] and r["samples_per_s"] == ref["samples_per_s"]
    assert r["energy_per_step_J"] == pytest.approx(ref["energy_J"], rel=1e-12)
    assert r["time_to_target_s_ci95_hi"] == 110.0 * r["step_time_s"]
