"""accelsim serve --search (accelsim.serving.search): every configuration runs the same seeded
stream, a row is exactly a plain serve run of its settings, the table is ranked by goodput per
GPU then per joule, the journal resumes and refuses other settings, bad axes are one line."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pandas as pd
import pytest

from accelsim import build_system
from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.llm.inference import inference_model
from accelsim.serving import SearchSpace, search, serve
from accelsim.serving import config_search as cs

DGX = build_system("dgx-h100")
#: near gpt2-small's capacity on few GPUs: some configurations miss the SLOs, some do not
STREAM = dict(rate=300.0, requests=40, input_tokens=512, output_tokens=16, seed=3,
              slo_ttft_s=0.02, slo_tpot_s=0.002)
#: tp 8 splits gpt2-small's 12 heads unevenly, 3x3 at tp 2 needs 12 GPUs: counted, not errors
SPACE = SearchSpace(8, tp=(2, 8), max_batch=(2, 64), chunk=(None, 256), kv_cache=("bf16",),
                    disagg=(None, (1, 1), (3, 3)))


@pytest.fixture(scope="module")
def table():
    return search(DGX, "gpt2-small", "bf16", gpus=8, space=SPACE, executor="serial", **STREAM)


def _serve(row) -> dict:
    """The plain serve run of a row's settings."""
    split = None if not row["disagg"] else tuple(int(n) for n in row["disagg"].split("x"))
    prefill_tp = None if pd.isna(row["prefill_tp"]) else int(row["prefill_tp"])
    return serve(DGX, "gpt2-small", "bf16", tp=int(row["tp"]), pp=int(row["pp"]),
                 ep=int(row["ep"]), replicas=1 if split else int(row["replicas"]),
                 disagg=split, prefill_tp=prefill_tp, kv_cache=row["kv_cache"],
                 max_batch=int(row["max_batch"]),
                 max_batched_tokens=int(row["max_batched_tokens"]),
                 chunked_prefill=bool(row["chunked_prefill"]), **STREAM).as_dict()


def test_the_table_is_ranked_by_goodput_per_gpu_then_per_joule(table):
    ok = table[table["status"] == "ok"]
    assert list(ok["rank"]) == list(range(1, len(ok) + 1))
    assert list(ok.index) == list(range(len(ok)))  # ranked rows first, in rank order
    per_gpu = ok["goodput_requests_per_s"] / ok["gpus"]  # recomputed from its parts
    assert (ok["goodput_requests_per_s_per_gpu"] == per_gpu).all()
    g, j = per_gpu.to_numpy(), ok["goodput_requests_per_J"].to_numpy()
    for k in range(len(ok) - 1):
        assert g[k] > g[k + 1] or (g[k] == g[k + 1] and j[k] >= j[k + 1])
    assert g[0] > 2 * g[-1]  # the SLOs do separate them
    power = ok["power_W_per_gpu"] * ok["gpus"]
    assert ok["goodput_requests_per_J"].to_numpy() == pytest.approx(
        (ok["goodput_requests_per_s"] / power).to_numpy(), rel=1e-12)


def test_invalid_configurations_are_rows_with_their_reason(table):
    bad = table[table["status"] == "infeasible"]
    assert bad["rank"].isna().all() and (table["status"] != "ok").sum() == len(bad)
    assert (bad.index >= (table["status"] == "ok").sum()).all()  # after the ranked rows
    assert (table[table["status"] == "ok"]["tp"] == 2).all()
    heads = bad[(bad["tp"] == 8) & (bad["disagg"] == "")]
    assert len(heads) == 4 and (heads["reason"] == "heads 12 not divisible by tp 8").all()
    big = bad[(bad["tp"] == 2) & (bad["disagg"] == "3x3")]
    assert len(big) == 4 and (big["reason"] == "uses 12 GPUs, more than 8").all()
    assert bad["goodput_requests_per_s"].isna().all()
    assert len(table) == len(SPACE.configs(DGX, inference_model("gpt2-small")))


@pytest.mark.parametrize("pick", ["best", "disagg", "chunked", "worst"])
def test_a_row_is_a_plain_serve_run_of_its_settings(table, pick):
    ok = table[table["status"] == "ok"]
    row = {"best": ok.iloc[0], "worst": ok.iloc[-1],
           "disagg": ok[ok["disagg"] != ""].iloc[0],
           "chunked": ok[ok["chunked_prefill"]].iloc[0]}[pick]
    d = _serve(row)
    assert d["gpus"] == row["gpus"] and d["tp"] == row["tp"]
    for k in cs.METRIC_COLUMNS:
        if k in d:
            want = d[k]
            assert (want is None and pd.isna(row[k])) or row[k] == want, k


def test_an_interrupted_journal_resumes_to_the_same_table(tmp_path, monkeypatch):
    space = SearchSpace(2, tp=(1, 2), max_batch=(2,), chunk=(None,), kv_cache=("bf16", "fp8"))
    full = search(DGX, "gpt2-small", "bf16", gpus=2, space=space, out=tmp_path / "a.csv",
                  executor="serial", **STREAM)
    lines = (tmp_path / "a.csv").read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 + 4
    (tmp_path / "b.csv").write_bytes(b"".join(lines[:3]))  # the header and two rows
    calls = []
    real = cs.run
    monkeypatch.setattr(cs, "run", lambda *a: calls.append(1) or real(*a))
    again = search(DGX, "gpt2-small", "bf16", gpus=2, space=space, out=tmp_path / "b.csv",
                   executor="serial", **STREAM)
    assert len(calls) == 2  # only the two missing configurations ran
    pd.testing.assert_frame_equal(again, full)
    assert (tmp_path / "b.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()
    # a folder holds serve_search.csv
    folder = search(DGX, "gpt2-small", "bf16", gpus=2, space=space, out=tmp_path / "d",
                    executor="serial", **STREAM)
    pd.testing.assert_frame_equal(folder, full)
    assert (tmp_path / "d" / cs.TABLE_NAME).read_bytes() == (tmp_path / "a.csv").read_bytes()


@pytest.mark.parametrize("change", [{"slo_ttft_s": 0.03}, {"rate": 200.0}, {"seed": 4}])
def test_a_journal_of_other_settings_is_refused(tmp_path, change):
    space = SearchSpace(1, tp=(1,), max_batch=(2,), chunk=(None,), kv_cache=("bf16",))
    out = tmp_path / "s.csv"
    search(DGX, "gpt2-small", "bf16", gpus=1, space=space, out=out, **STREAM)
    before = out.read_bytes()
    with pytest.raises(InputError, match="holds a search of other settings"):
        search(DGX, "gpt2-small", "bf16", gpus=1, space=space, out=out,
               **{**STREAM, **change})
    assert out.read_bytes() == before


NO_DASK = importlib.util.find_spec("distributed") is None


@pytest.mark.parametrize("executor", [
    "process", pytest.param("dask", marks=pytest.mark.skipif(
        NO_DASK, reason="dask.distributed not installed (optional extra accelsim[dask])"))])
def test_the_process_and_dask_executors_give_the_serial_table(tmp_path, executor):
    space = SearchSpace(2, tp=(1, 2), max_batch=(2,), chunk=(None,), kv_cache=("bf16",))
    kw = dict(gpus=2, space=space, **STREAM)
    a = search(DGX, "gpt2-small", "bf16", out=tmp_path / "a.csv", executor=executor,
               workers=2 if executor == "process" else 1, **kw)
    b = search(DGX, "gpt2-small", "bf16", executor="serial", **kw)
    pd.testing.assert_frame_equal(a, b)


def test_a_moe_model_searches_ep_1_and_ep_tp_once_each():
    cfgs = SearchSpace(8, tp=(1, 2, 8), max_batch=(64,), chunk=(None,), kv_cache=("fp8",)
                       ).configs(DGX, inference_model("mixtral-8x7b"))
    assert [(c["tp"], c["ep"], c["replicas"], c["gpus"]) for c in cfgs] == [
        (1, 1, 8, 8), (2, 1, 4, 8), (2, 2, 4, 8), (8, 1, 1, 8), (8, 8, 1, 8)]
    only = SearchSpace(8, tp=(2,), expert_parallel=(True,), max_batch=(64,), chunk=(None,),
                       kv_cache=("fp8",)).configs(DGX, inference_model("mixtral-8x7b"))
    assert [(c["tp"], c["ep"]) for c in only] == [(2, 2)]


def test_all_splits_fill_the_gpus_with_prefill_and_decode_replicas():
    cfgs = SearchSpace(8, tp=(2,), max_batch=(64,), chunk=(None,), kv_cache=("bf16",),
                       disagg=(None, "all"), prefill_tp=(2, 4)
                       ).configs(DGX, inference_model("gpt2-small"))
    assert [(c["disagg"], c["prefill_tp"], c["gpus"]) for c in cfgs] == [
        ("", None, 8), ("1x3", 2, 8), ("2x2", 2, 8), ("3x1", 2, 8), ("1x2", 4, 8)]


@pytest.mark.parametrize("kw,msg", [
    (dict(tp=(0,)), "search axis tp must be an integer"),
    (dict(tp=()), "search axis tp must be a non-empty list"),
    (dict(kv_cache=("fp4",)), "'fp4' is not a KV-cache dtype"),
    (dict(chunk=(0,)), "search axis chunk"),
    (dict(max_batch=tuple(range(1, 70))), "69 values, more than 64"),
    (dict(expert_parallel=(1,)), "takes True/False"),
    (dict(disagg=("most",)), "is not None (aggregated), 'all'"),
])
def test_bad_axes_are_one_line_errors(kw, msg):
    with pytest.raises(InputError, match=re.escape(msg)):
        SearchSpace(4, **kw)


def test_a_search_over_the_bound_is_refused_before_it_runs():
    space = SearchSpace(8, tp=(1,), max_batch=tuple(range(1, 65)),
                        chunk=tuple(range(100, 164)), kv_cache=("bf16", "fp8", "fp16"))
    with pytest.raises(InputError, match="more than 10,000 configurations"):
        search(DGX, "gpt2-small", "bf16", gpus=8, space=space, **STREAM)


CLI = ("serve --search --system dgx-h100 --model gpt2-small --scheme bf16 --rate 300 "
       "--requests 40 --input-tokens 512 --output-tokens 16 --seed 3 ")


@pytest.mark.parametrize("argv,fragment", [
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-tp 0", "argument --search-tp: must be an integer"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-kv-cache fp4", "'fp4' is not a KV-cache dtype"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-chunk big", "argument --search-chunk"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-ep 2", "expected 1 (no expert parallelism) or tp"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-disagg 2y3", "expected PxD"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --search-ep tp",
     "expert parallelism (ep = tp) is for MoE models; gpt2-small is dense"),
    (CLI + "--slo-ttft-ms 20", "--search needs --gpus N"),
    (CLI + "--gpus 2", "--search ranks by goodput: give --slo-ttft-ms"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --tp 2", "--search explores --tp: drop it (its axis is "
                                               "--search-tp)"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --chunked-prefill", "its axis is --search-chunk"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --trace t.json", "--trace is for one run"),
    (CLI + "--gpus 2 --slo-ttft-ms 20 --out {tmp}/x.json", "--out"),
    (CLI.replace("--search ", "") + "--search-tp 1,2", "--search-tp is for --search"),
    (CLI + "--gpus 8 --slo-ttft-ms 20 --search-tp 1 --search-max-batch "
     + ",".join(map(str, range(1, 65))) + " --search-chunk "
     + ",".join(map(str, range(100, 164))) + " --search-kv-cache bf16,fp8,fp16",
     "more than 10,000 configurations"),
    ("serve --search --system h100-sxm --model llama3-70b --scheme bf16 --rate 1 --requests 4 "
     "--input-tokens 64 --output-tokens 4 --gpus 1 --slo-ttft-ms 100 --search-max-batch 64 "
     "--search-chunk off", "none of the 2 "
     "configurations on 1 GPUs can serve this stream: 2 like"),
])
def test_bad_search_command_lines_are_one_line_exit_2(argv, fragment, tmp_path, capsys):
    try:
        rc = main(argv.format(tmp=tmp_path).split())
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert fragment in err, err
    assert "Traceback" not in err
    assert len([ln for ln in err.splitlines() if "error" in ln]) == 1, err


def test_the_command_prints_the_best_and_json_is_the_first_row(tmp_path, capsys):
    argv = (CLI + f"--gpus 2 --slo-ttft-ms 20 --slo-tpot-ms 2 --search-max-batch 2,64 "
            f"--search-chunk off --search-kv-cache bf16 --executor serial --out {tmp_path}")
    assert main(argv.split()) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(tmp_path / cs.TABLE_NAME)
    assert "4 configurations, 4 ran, 0 skipped" in out
    assert main((argv + " --json").split()) == 0  # resumed: nothing runs again
    best = json.loads(capsys.readouterr().out)
    first = table.iloc[0]
    assert best["rank"] == 1 and best["point_id"] == first["point_id"]
    assert math.isclose(best["goodput_requests_per_s_per_gpu"],
                        first["goodput_requests_per_s_per_gpu"], rel_tol=0)


def test_ctrl_c_says_what_was_saved(tmp_path, capsys, monkeypatch):
    real, calls = cs.run, []

    def stop_at_third(*a):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(cs, "run", stop_at_third)
    out = tmp_path / "s.csv"
    argv = (CLI + f"--gpus 2 --slo-ttft-ms 20 --search-max-batch 2,64 --search-chunk off "
            f"--search-kv-cache bf16 --executor serial --out {out}")
    with pytest.raises(SystemExit) as exc:
        main(argv.split())
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert f"interrupted; 2 configurations are saved in {out}" in err
    assert len(pd.read_csv(out)) == 2
