"""Hostile files and output paths (issue 33): a trace file that is not the structure it claims,
outputs that collide or have the wrong suffix, and requests for unbounded work each give one
line naming the value and exit 2 (never exit 70, which is for bugs), before any long
computation."""

from __future__ import annotations

import json

import pytest

from accelsim.cli import main


def _run(argv, capsys):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse rejects a bad flag value with exit 2
        rc = exc.code
    err = capsys.readouterr().err
    return rc, err


def _one_error(rc, err, fragment):
    assert rc == 2, err
    assert fragment in err, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert len([ln for ln in err.splitlines() if "error" in ln]) == 1, err


# ---- trace files: the structure `accelsim plot --trace` reads is checked -------------------

@pytest.mark.parametrize("text, fragment", [
    ('{"traceEvents": [1, 2]}', "event 0 is not an object: 1"),          # was AttributeError
    ('"abc"', "traceEvents must be a list of events, got str"),           # was AttributeError
    ('{"traceEvents": 5}', "traceEvents must be a list of events, got int"),
    ('[{"ph": "X", "name": "a", "ts": "x", "dur": 1}]', "event 0: ts must be a finite number"),
    ('[{"ph": "X", "name": "a", "ts": NaN, "dur": 1}]', "ts must be a finite number, got nan"),
    ('[{"ph": "X", "name": "a", "ts": 0, "dur": -1}]',                     # was drawn
     "event 0: dur must be a finite number >= 0, got -1"),
    ('[{"ph": "X", "name": "a", "ts": 0, "dur": 1, "tid": [1]}]', "tid must be a number or"),
    ('[{"ph": "M", "name": "thread_name", "tid": 1, "args": 5}]', "a thread_name's args must"),
    ('[{"ph": "X", "ts": 0, "dur": 1}]', "event 0: a complete event needs a name"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),                 # was RecursionError
    ("[]", "the trace has no complete (ph X) events to draw"),
])
def test_a_malformed_trace_is_named(tmp_path, capsys, text, fragment):
    t = tmp_path / "t.json"
    t.write_text(text)
    png = tmp_path / "t.png"
    rc, err = _run(["plot", "--trace", t, "--out", png], capsys)
    _one_error(rc, err, f"--trace {t}: ")
    assert fragment in err and not png.exists(), err


def _trace(path, n_events, n_tracks):
    ev = [{"ph": "M", "name": "thread_name", "tid": t, "args": {"name": f"t{t}"}}
          for t in range(n_tracks)]
    ev += [{"ph": "X", "name": "op", "tid": i % n_tracks, "ts": float(i), "dur": 0.5}
           for i in range(n_events)]
    path.write_text(json.dumps({"traceEvents": ev}))


def test_a_trace_too_large_to_draw_is_refused_with_the_limit(tmp_path, capsys):
    """2,000 tracks took 40 s and 2 GB before writing a 260-inch PNG: refused at once."""
    from accelsim.report.trace import MAX_EVENTS, MAX_TRACKS

    t = tmp_path / "t.json"
    _trace(t, MAX_TRACKS + 1, MAX_TRACKS + 1)
    rc, err = _run(["plot", "--trace", t, "--out", tmp_path / "t.png"], capsys)
    _one_error(rc, err, f"{MAX_TRACKS + 1} tracks (threads), more than the {MAX_TRACKS} a "
                        "timeline draws")
    _trace(t, MAX_EVENTS + 1, 2)
    rc, err = _run(["plot", "--trace", t, "--out", tmp_path / "t.png"], capsys)
    _one_error(rc, err, f"{MAX_EVENTS + 1:,} complete events, more than the {MAX_EVENTS:,}")


def test_read_trace_inverts_write_trace(tmp_path):
    """The reader gives back what the writer wrote: one row per event, on its stream's track,
    times in seconds (to the microsecond rounding of JSON floats)."""
    from accelsim.engine.graph import Stream
    from accelsim.engine.trace import Timeline, read_trace, write_trace

    tl = Timeline()
    tl.run("gemm", 2e-3, Stream.COMPUTE)
    tl.run("all-reduce", 1e-3, Stream.DP)
    tl.run("gemm 2", 5e-4, Stream.COMPUTE)
    path = tmp_path / "t.json"
    write_trace(tl, path, "test")
    df = read_trace(path)
    assert list(df["name"]) == [e.name for e in tl.events]
    assert list(df["track"]) == [str(e.stream) for e in tl.events]
    assert df["start_s"].tolist() == pytest.approx([e.start_s for e in tl.events], abs=1e-12)
    assert df["dur_s"].tolist() == pytest.approx([e.dur_s for e in tl.events], abs=1e-12)


# ---- output paths: one check (commands._common) behind every output flag -------------------

PREDICT = "predict --system hfp8-64chip --workload tiny-cnn --batch 64"
EXPLORE = "explore --system hfp8-64chip --workload tiny-cnn --batch 64"
SERVE = "infer --system h100-sxm --model llama3-8b --scheme bf16 --serve --batches 1"

OUTPUT_CASES = [
    # two outputs on one file: the second silently overwrote the first
    (f"{PREDICT} --breakdown {{tmp}}/x.csv --trace {{tmp}}/x.csv",
     "--trace {tmp}/x.csv: must end in .json"),
    (f"{EXPLORE} --out {{tmp}}/e.csv --breakdown {{tmp}}/e_plans.csv",
     "--breakdown {tmp}/e_plans.csv: the same file as --out's plans table"),
    (f"{EXPLORE} --out {{tmp}}/e.csv --breakdown {{tmp}}/sub/../e.csv",
     "the same file as --out; give each output its own file"),
    # an output on an input: it would have been overwritten
    ("layers {tmp}/topo.csv --csv {tmp}/./topo.csv",
     "--csv {tmp}/topo.csv: the same file as the input WORKLOAD, which it would overwrite"),
    ("systolic --topology-csv {tmp}/topo.csv --rows 8 --cols 8 --out {tmp}/topo.csv",
     "the same file as the input --topology-csv"),
    (f"{PREDICT.replace('tiny-cnn', '{tmp}/topo.csv')} --breakdown {{tmp}}/topo.csv",
     "the same file as the input --workload"),
    # empty paths: Path("") is ".", the current folder
    ("study --recipes fp32 --steps 1 --out", "argument --out: an empty path ''"),
    ("train --compare fp32 --steps 1 --out", "argument --out: an empty path ''"),
    ("formats --out", "--out: an empty path ''; give a folder name"),
    (f"{PREDICT} --trace", "--trace: an empty path ''; give a file name"),
    (f"{EXPLORE} --out", "argument --out: an empty path"),
    ("layers tiny-cnn --csv", "argument --csv: an empty path"),
    # wrong suffixes (sweep --out x.txt was exit 70, after writing a manifest)
    ("sweep --out {tmp}/x.txt --set workload=tiny-cnn --executor serial",
     "--out {tmp}/x.txt: must end in .csv or .parquet"),
    ("sweep --out {tmp}/x.txt --set workload=tiny-cnn --dry-run", "must end in .csv or"),
    (f"{PREDICT} --breakdown {{tmp}}/b.json", "--breakdown {tmp}/b.json: must end in .csv"),
    (f"{SERVE} --out {{tmp}}/s.png --plot {{tmp}}/s.png", "--out {tmp}/s.png: must end in .csv"),
    ("workload gpt --preset gpt2-small --out {tmp}/g.txt", "--out {tmp}/g.txt: must end in .toml"),
    ("layers tiny-cnn --csv {tmp}/l.txt", "--csv {tmp}/l.txt: must end in .csv"),
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --out {tmp}/c.txt", "must end in .csv"),
    ("plot {tmp}/topo.csv --x a --y b --out {tmp}/topo.csv", "--out {tmp}/topo.csv: must end"),
    ("llm --system dgx-h100 --model gpt2-small --search --gpus 8 --global-batch 8 --scheme bf16 "
     "--out {tmp}/s.txt", "--out {tmp}/s.txt: must end in .csv or .parquet"),
]


@pytest.mark.parametrize("argv, fragment", OUTPUT_CASES,
                         ids=[f"{c[0].split(' --')[0]} #{i}" for i, c in enumerate(OUTPUT_CASES)])
def test_outputs_that_collide_or_misname_are_input_errors(tmp_path, capsys, argv, fragment):
    topo = tmp_path / "topo.csv"
    topo.write_text("Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,"
                    "Num Filter,Strides,\nConv1,8,8,3,3,4,8,1,\n")
    args = argv.format(tmp=tmp_path).split()
    if args[-1] in ("--out", "--trace", "--csv"):
        args.append("")  # an empty path, as a shell passes --out ""
    before = sorted(tmp_path.rglob("*"))
    rc, err = _run(args, capsys)
    _one_error(rc, err, fragment.format(tmp=tmp_path))
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, nothing created
    assert topo.read_text().startswith("Layer name")


def test_plot_never_overwrites_the_table_it_draws(tmp_path, capsys):
    t = tmp_path / "t.png"   # a CSV table under a figure's name
    t.write_text("a,b\n1,2\n")
    rc, err = _run(["plot", t, "--x", "a", "--y", "b", "--out", f"{tmp_path}/./t.png"], capsys)
    _one_error(rc, err, "the same file as the input TABLE, which it would overwrite")
    assert t.read_text() == "a,b\n1,2\n"


def test_distinct_outputs_are_all_written(tmp_path, capsys):
    """The check refuses only a real collision: a breakdown and a trace beside each other are
    both written."""
    b, t = tmp_path / "x.csv", tmp_path / "x.json"
    rc, err = _run(PREDICT.split() + ["--breakdown", b, "--trace", t], capsys)
    assert rc == 0, err
    assert b.read_text().startswith("layer,") and json.loads(t.read_text())["traceEvents"]


# ---- unbounded work: each request has a stated limit, refused before anything runs ---------

def _values(n):
    return ",".join(str(i) for i in range(1, n + 1))


@pytest.mark.parametrize("argv, fragment", [
    (f"{SERVE.replace('--batches 1', '--batches ' + _values(1001))}",
     "argument --batches: 1,001 values, more than the 1,000 --serve points in all"),
    (f"{SERVE.replace('--batches 1', '--batches ' + _values(500))} --contexts 1,2,3",
     "--serve: 500 --batches x 3 --contexts = 1,500 points, more than the 1,000"),
    (f"{SERVE} --contexts 99999999999999999999",
     "argument --contexts: expected integers in [1, 2,147,483,647]"),
    ("study --recipes fp32 --seeds 100000 --out {tmp}/s",
     "argument --seeds: must be an integer in [1, 1,000], got '100000'"),
    ("study --recipes fp32 --steps 100000000000 --out {tmp}/s",
     "argument --steps: must be an integer in [1, 1,000,000]"),
    ("study --recipes fp32,bf16-amp --seeds 1000 --steps 10000 --out {tmp}/s",
     "2 recipes x --seeds 1,000 x --steps 10,000 = 20,000,000 training steps, more than the "
     "10,000,000"),
])
def test_unbounded_work_is_refused_with_its_limit(tmp_path, capsys, argv, fragment):
    rc, err = _run(argv.format(tmp=tmp_path).split(), capsys)
    _one_error(rc, err, fragment)
    assert not (tmp_path / "s").exists()
