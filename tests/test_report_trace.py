"""A trace people can read: accelsim's events carry their op kind (the legend's colours) and the
trace its process name (the picture's title); execution order on the layer path."""

from __future__ import annotations

import pytest

from accelsim.cli import main
from accelsim.engine.trace import read_trace


def test_trace_carries_kinds_and_its_title(tmp_path, capsys):
    trace = tmp_path / "t.json"
    assert main(["predict", "--system", "dgx-h100", "--workload", "tiny-cnn", "--scheme", "fp16",
                 "--batch", "8", "--trace", str(trace), "--json"]) == 0
    capsys.readouterr()
    ev = read_trace(trace)
    assert ev.attrs["process"].startswith("accelsim predict: tiny-cnn on dgx-h100")
    assert {"conv", "reduce_scatter", "weight_update"} <= set(ev["kind"])
    compute = ev[ev["track"] == "compute"].sort_values("start_s")
    # execution order: every forward phase first, then the backward ones in reverse layer order
    phases = [n.rsplit("(", 1)[1].rstrip(")") for n in compute["name"]]
    n_fwd = phases.count("fwd")
    assert set(phases[:n_fwd]) == {"fwd"} and "fwd" not in phases[n_fwd:]
    first = [n.split()[0] for n in compute["name"][:n_fwd]]
    back = list(dict.fromkeys(n.split()[0] for n in compute["name"][n_fwd:]
                              if n.split()[0] != "grads"))
    assert back == [x for x in first[::-1] if x in back]
    png = tmp_path / "t.png"
    assert main(["plot", "--trace", str(trace), "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000


def test_a_foreign_trace_gets_kinds_from_its_names(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"traceEvents": [{"ph": "X", "name": "gemm (fwd)", "ts": 0, "dur": 5, '
                 '"tid": 1}, {"ph": "X", "name": "gemm (bwd)", "ts": 5, "dur": 5, "tid": 1}]}')
    ev = read_trace(f)
    assert list(ev["kind"]) == ["gemm", "gemm"] and ev.attrs["process"] == ""
    assert ev["dur_s"].sum() == pytest.approx(1e-5)


def test_llm_trace_is_the_pipeline_schedule(tmp_path, capsys):
    """llm's trace: one track per pipeline stage in 1F1B order (stage 0 runs p - 1 warm-up
    forwards before its first backward), the first micro-batches layer by layer in order, the
    trace ending at the iteration time."""
    import json

    trace = tmp_path / "t.json"
    assert main(["llm", "--system", "dgx-h100", "--layers", "8", "--hidden", "2048", "--heads",
                 "16", "--seq", "1024", "--vocab", "32000", "--tp", "2", "--pp", "4", "--dp",
                 "1", "--global-batch", "8", "--scheme", "bf16", "--trace", str(trace),
                 "--json"]) == 0
    it = json.loads(capsys.readouterr().out)["iteration_time_s"]
    ev = read_trace(trace)
    assert (ev["start_s"] + ev["dur_s"]).max() == pytest.approx(it, rel=1e-9)
    assert [f"stage {s}" for s in range(4)] == [t for t in dict.fromkeys(ev["track"])
                                                if t.startswith("stage")]
    s0 = ev[ev["track"] == "stage 0"].sort_values("start_s", kind="stable")
    phases = [n.rsplit("(", 1)[1].rstrip(")") for n in s0["name"]]
    first_bwd = phases.index("bwd")
    fwd_passes = {n.split()[0] for n in s0["name"][:first_bwd]}  # layer0 / layer1 events
    assert fwd_passes == {"layer0", "layer1", "p2p"}
    # 3 warm-up forwards and the 4th before the first backward: 4 passes of 2 layers
    assert list(s0["name"][:first_bwd]).count("layer0 qkv (fwd)") == 4
    last = ev[ev["track"] == "stage 3"]
    assert {"lm_head", "loss"} <= set(last["kind"])
