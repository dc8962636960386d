"""The sweep engine: specs from CLI strings and TOML, stable point ids, appending, infeasible rows,
and resume after an injected failure or interrupt with no point lost or duplicated."""

from __future__ import annotations

import csv
import importlib.util
import os
import sys

import pytest

from accelsim.dse import sweep as sw


# Evaluators must be top-level functions so worker processes can unpickle them.
def toy(params):
    """y = a * b; b == 0 is infeasible (a reason row), c == 'boom' is an error."""
    if params.get("c") == "boom":
        raise RuntimeError("injected failure")
    if params["b"] == 0:
        raise sw.Infeasible(f"b is zero (a={params['a']})")
    return {"y": params["a"] * params["b"], "pid": os.getpid()}


toy.columns = ("y", "pid")


def toy_fails_at(params):
    if params["a"] == 3 and params["b"] == 2:
        raise RuntimeError("injected failure at a=3, b=2")
    return toy(params)


toy_fails_at.columns = toy.columns


def toy_interrupt_at(params):
    if params["a"] == 2 and params["b"] == 1:
        raise KeyboardInterrupt
    return toy(params)


toy_interrupt_at.columns = toy.columns


SPEC = sw.SweepSpec(base=(("c", "x"),), axes=(("a", (1, 2, 3, 4)), ("b", (0, 1, 2))))


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_parse_assignment_lists_ranges_and_types():
    assert sw.parse_assignment("link_GBps=32,64,128") == ("link_GBps", (32, 64, 128))
    assert sw.parse_assignment("compression=32:512:x2") == ("compression", (32, 64, 128, 256, 512))
    assert sw.parse_assignment("cores=2:8:2") == ("cores", (2, 4, 6, 8))
    assert sw.parse_assignment("scheme=fp16,hfp8") == ("scheme", ("fp16", "hfp8"))
    assert sw.parse_assignment("x=2.5,true") == ("x", (2.5, True))
    for bad in ("novalue", "=3", "k=", "k=1:5:x1", "k=a:b:1", "k=1:5:0"):
        with pytest.raises(ValueError, match="sweep"):
            sw.parse_assignment(bad)


def test_spec_rejects_duplicates_and_empty_axes():
    with pytest.raises(ValueError, match="given twice"):
        sw.SweepSpec(base=(("a", 1),), axes=(("a", (1, 2)),))
    with pytest.raises(ValueError, match="no values"):
        sw.SweepSpec(axes=(("a", ()),))
    with pytest.raises(ValueError, match="repeats"):
        sw.SweepSpec(axes=(("a", (32, 32.0)),))
    with pytest.raises(ValueError, match="both as a fixed value and as an axis"):
        sw.spec_from_assignments(axes=["a=1,2"], base=["a=3"])


def test_spec_from_assignments_defaults_are_replaced_by_axes():
    spec = sw.spec_from_assignments(axes=["b=1,2"], base=["c=z"], defaults={"a": 7, "b": 9})
    assert spec.points() == [{"b": 1, "a": 7, "c": "z"}, {"b": 2, "a": 7, "c": "z"}]


def test_point_id_is_stable_and_order_free():
    assert sw.point_id({"a": 1, "b": "x"}) == sw.point_id({"b": "x", "a": 1.0})
    assert sw.point_id({"a": 1}) != sw.point_id({"a": "1"})
    assert sw.point_id({"a": 1}) != sw.point_id({"a": 2})
    assert len({sw.point_id(p) for p in SPEC.points()}) == SPEC.n_points == 12


def test_load_sweep_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[base]\nc = "x"\n[axes]\na = [1, 2, 3, 4]\nb = [0, 1, 2]\n')
    assert sw.load_sweep_file(f) == SPEC
    f.write_text('[axes]\na = 3\n')
    with pytest.raises(ValueError, match=r"s.toml: axes.a must be a list"):
        sw.load_sweep_file(f)
    f.write_text('[bogus]\na = [3]\n')
    with pytest.raises(ValueError, match="unknown table"):
        sw.load_sweep_file(f)
    f.write_text('[axes]\na = [1, 2]\na = [3]\n')
    with pytest.raises(ValueError, match="invalid TOML"):
        sw.load_sweep_file(f)
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        sw.load_sweep_file(tmp_path / "missing.toml")


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_sweep_writes_every_point_once_with_infeasible_reasons(tmp_path, executor):
    out = tmp_path / "t.csv"
    table = sw.run_sweep(SPEC, toy, out, executor=executor, workers=2, progress=False)
    assert len(table) == 12 and table["point_id"].is_unique
    infeasible = table[table.status == "infeasible"]
    assert sorted(infeasible.a) == [1, 2, 3, 4] and infeasible.y.isna().all()
    assert all(r.startswith("b is zero") for r in infeasible.reason)
    ok = table[table.status == "ok"]
    assert (ok.y == ok.a * ok.b).all()
    assert list(table.columns) == ["point_id", "a", "b", "c", "status", "reason", "y", "pid"]
    # Running again recomputes nothing.
    seen = []
    again = sw.run_sweep(SPEC, toy, out, executor=executor, progress=False, on_row=seen.append)
    assert seen == [] and len(_rows(out)) == 12 and again.equals(table)


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_resume_after_injected_failure(tmp_path, executor):
    out = tmp_path / "t.csv"
    with pytest.raises(RuntimeError, match="injected failure at a=3"):
        sw.run_sweep(SPEC, toy_fails_at, out, executor=executor, workers=2, progress=False)
    first = _rows(out)
    assert 0 < len(first) < 12
    assert all(r["status"] in ("ok", "infeasible") for r in first)
    # Resume with the fixed evaluator: only the missing points run.
    seen = []
    table = sw.run_sweep(SPEC, toy, out, executor=executor, workers=2, progress=False,
                         on_row=seen.append)
    assert len(seen) == 12 - len(first)
    assert {r["point_id"] for r in first}.isdisjoint(r["point_id"] for r in seen)
    rows = _rows(out)
    assert len(rows) == 12 and len({r["point_id"] for r in rows}) == 12
    assert len(table) == 12 and set(table.point_id) == {sw.point_id(p) for p in SPEC.points()}


def test_resume_after_keyboard_interrupt_in_worker(tmp_path):
    out = tmp_path / "t.csv"
    with pytest.raises(KeyboardInterrupt):
        sw.run_sweep(SPEC, toy_interrupt_at, out, executor="serial", progress=False)
    n_first = len(_rows(out))
    assert n_first == 4  # a=1 (3 points), then a=2,b=0; interrupted at a=2,b=1
    table = sw.run_sweep(SPEC, toy, out, executor="serial", progress=False)
    assert len(table) == 12 and table.point_id.is_unique and len(_rows(out)) == 12


def test_resume_after_ctrl_c_in_main_process_with_pool(tmp_path):
    out = tmp_path / "t.csv"
    count = {"n": 0}

    def interrupt_after_five(row):
        count["n"] += 1
        if count["n"] == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sw.run_sweep(SPEC, toy, out, executor="process", workers=2, progress=False,
                     on_row=interrupt_after_five)
    first = _rows(out)
    assert 5 <= len(first) <= 12 and len({r["point_id"] for r in first}) == len(first)
    table = sw.run_sweep(SPEC, toy, out, executor="process", workers=2, progress=False)
    assert len(table) == 12 and table.point_id.is_unique and len(_rows(out)) == 12


def test_truncated_last_line_is_recomputed_not_kept(tmp_path):
    out = tmp_path / "t.csv"
    sw.run_sweep(SPEC, toy, out, executor="serial", progress=False)
    data = out.read_bytes()
    out.write_bytes(data[:-7])  # a crash while writing the last row
    with pytest.warns(sw.JournalWarning, match=r"t\.csv: 1 bad line.* line 13: cut short"):
        table = sw.run_sweep(SPEC, toy, out, executor="serial", progress=False)
    assert len(table) == 12 and table.point_id.is_unique and out.read_bytes() == data


def test_mismatched_existing_table_is_a_clear_error(tmp_path):
    out = tmp_path / "t.csv"
    out.write_text("point_id,zzz\n")
    with pytest.raises(ValueError, match="existing sweep table has columns"):
        sw.run_sweep(SPEC, toy, out, executor="serial", progress=False)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown executor"):
        sw.run_sweep(SPEC, toy, None, executor="threads", progress=False)
    with pytest.raises(ValueError, match="declares no output columns"):
        sw.run_sweep(SPEC, lambda p: {}, None, executor="serial", progress=False)
    with pytest.raises(ValueError, match=r"must end in \.csv or \.parquet"):
        sw.run_sweep(SPEC, toy, "out.txt", executor="serial", progress=False)


def test_in_memory_sweep_without_output():
    table = sw.run_sweep(SPEC, toy, None, executor="serial", progress=False)
    assert len(table) == 12 and (table.status == "ok").sum() == 8


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                    reason="dask.distributed not installed (optional extra accelsim[dask])")
def test_dask_local_cluster_matches_process_pool(tmp_path):
    a = sw.run_sweep(SPEC, toy, tmp_path / "a.csv", executor="dask", workers=2, progress=False)
    b = sw.run_sweep(SPEC, toy, tmp_path / "b.csv", executor="serial", progress=False)
    assert a.drop(columns="pid").equals(b.drop(columns="pid"))


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(ValueError, match="needs pyarrow"):
        sw.run_sweep(SPEC, toy, tmp_path / "t.parquet", executor="serial", progress=False)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                    reason="pyarrow not installed (Parquet output is optional)")
def test_parquet_output_survives_an_interrupt_and_matches_csv(tmp_path):
    import pandas as pd

    out = tmp_path / "t.parquet"
    with pytest.raises(KeyboardInterrupt):
        sw.run_sweep(SPEC, toy_interrupt_at, out, executor="serial", progress=False)
    assert not out.exists()  # a Parquet file is written whole, once every point is in
    journal = tmp_path / "t.parquet.journal.csv"
    assert len(_rows(journal)) == 4  # finished rows are kept in the journal meanwhile
    sw.run_sweep(SPEC, toy, out, executor="serial", progress=False)
    got = pd.read_parquet(out)
    ref = sw.run_sweep(SPEC, toy, tmp_path / "ref.csv", executor="serial", progress=False)
    assert len(got) == len(ref) == 12 and got["point_id"].is_unique
    key = ["a", "b"]
    cols = [c for c in ref.columns if c != "pid"]
    pd.testing.assert_frame_equal(
        got[cols].sort_values(key).reset_index(drop=True),
        ref[cols].sort_values(key).reset_index(drop=True), check_dtype=False)
