"""Swamping study: its one-pass shortcuts equal the engine, and the command writes its files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd

from accelsim.arith import dot, get_engine
from accelsim.arith.swamping import chunk_sweep_table, prefix_results, sample_operands, study_engines


def test_prefix_results_equal_dot_of_each_prefix():
    rng = np.random.default_rng(0)
    a, b = sample_operands(rng, 3, 512, "positive")
    for label, eng in study_engines().items():
        res = prefix_results(a, b, eng, [64, 256, 512])
        for K in (64, 256, 512):
            np.testing.assert_array_equal(res[K].astype(np.float32), dot(a[:, :K], b[:, :K], eng), label)


def test_chunk_sweep_equals_engine_with_that_chunk():
    rng = np.random.default_rng(1)
    sweep = chunk_sweep_table(rng, K=1024, chunks=(8, 64, 1024), reps=2)
    rng = np.random.default_rng(1)
    pos = sample_operands(rng, 2, 1024, "positive")
    zm = sample_operands(rng, 2, 1024, "zero-mean")
    a, b = np.vstack([pos[0], zm[0]]), np.vstack([pos[1], zm[1]])
    exact = dot(a, b, get_engine("exact", a_format="e4m3fn", b_format="e5m2", out_format="fp32"))
    scale = np.abs(a * b).sum(axis=1)
    for c in (8, 64, 1024):
        got = dot(a, b, get_engine("hfp8", a_format="e4m3fn", b_format="e5m2", chunk=c, out_format="fp32"))
        err = np.abs(got.astype(np.float64) - exact) / scale
        row = sweep[(sweep["chunk"] == c) & (sweep["distribution"] == "positive")]
        # exact here is fp32-rounded, the table's is not: equal to a few fp32 ulps of the sum
        assert abs(row["rel_err_mean"].iloc[0] - err[:2].mean()) <= 2.0**-22


def test_swamping_command_writes_tables_and_png(tmp_path):
    out = tmp_path / "rep"
    r = subprocess.run([sys.executable, "-m", "accelsim", "swamping", "--out", str(out), "--max-k", "1024",
                        "--sweep-k", "1024", "--reps", "4", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(out / "swamping.csv")
    assert set(t["K"]) == {64, 128, 256, 512, 1024}
    assert set(t["engine"]) == set(study_engines())
    pos = t[(t["distribution"] == "positive") & (t["K"] == 1024)].set_index("engine")["rel_err_mean"]
    # the effect being reproduced: a 10-bit sequential sum swamps, chunking / fp32 do not
    assert pos["dlfloat16 sequential"] > 2 * pos["HFP8 chunked (64)"]
    assert pos["H100 fast_accum (no promotion)"] > 10 * pos["H100 promotion every 128"]
    assert pos["fp32 sequential"] < pos["HFP8 chunked (64)"] / 100
    s = pd.read_csv(out / "swamping_chunks.csv")
    assert sorted(set(s["chunk"])) == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert (out / "swamping.png").stat().st_size > 10_000
    bad = subprocess.run([sys.executable, "-m", "accelsim", "swamping", "--out", str(out), "--max-k", "1000"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--max-k 1000" in bad.stderr
