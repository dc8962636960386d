"""Systolic-array cycle model: SCALE-Sim v3 golden data, reference vs vectorized twin, bounds."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelsim.perf.systolic import (
    DATAFLOWS,
    conv_gemm_dims,
    conv_output_size,
    gemm_cycles,
    gemm_cycles_array,
    systolic_gemm,
)

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "scalesim"
GOLDEN_FILES = sorted(GOLDEN_DIR.glob("scalesim_v3_*_cycles.csv"))
SHAPE_COLUMNS = ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "filters", "stride")
TOLERANCE_CYCLES = 1  # issue 4: "within +-1 cycle per layer"


def _read_golden(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(ln for ln in fh if not ln.startswith("#")))


def _array_and_dataflow(path: Path) -> tuple[int, int, str]:
    parts = path.stem.split("_")  # scalesim_v3_<net>_<R>x<C>_<df>_cycles
    rows, cols = (int(x) for x in parts[-3].split("x"))
    return rows, cols, parts[-2]


def test_golden_files_present():
    names = {p.name for p in GOLDEN_FILES}
    assert "scalesim_v3_resnet50_128x128_ws_cycles.csv" in names
    assert "scalesim_v3_resnet50_128x128_os_cycles.csv" in names


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_matches_scalesim_v3(path):
    """Every layer of every recorded SCALE-Sim run, within +-1 cycle (it comes out exact)."""
    rows, cols, dataflow = _array_and_dataflow(path)
    gold = _read_golden(path)
    assert gold, f"{path} has no rows"
    header = path.read_text().splitlines()[:6]
    assert any("command:" in ln for ln in header), "golden file lacks its provenance header"
    shapes = np.array([[int(g[c]) for c in SHAPE_COLUMNS] for g in gold])
    dims = [conv_gemm_dims(*s, scalesim_compat=True) for s in shapes.tolist()]
    M, N, K = (np.array(x) for x in zip(*dims))
    ours = gemm_cycles_array(M, N, K, rows, cols, dataflow, scalesim_compat=True)
    theirs = np.array([int(g["compute_cycles"]) for g in gold])
    assert all(int(g["stall_cycles"]) == 0 for g in gold)  # pure compute time recorded
    diff = ours - theirs
    bad = [(g["layer"], int(t), int(o)) for g, t, o, d in zip(gold, theirs, ours, diff)
           if abs(d) > TOLERANCE_CYCLES]
    assert not bad, f"layers off by more than {TOLERANCE_CYCLES} cycle: {bad[:5]}"
    # The slow reference agrees on every layer too.
    for (m, n, k), o in zip(dims, ours):
        assert gemm_cycles(m, n, k, rows, cols, dataflow, scalesim_compat=True) == o
    # SCALE-Sim's mapping efficiency is the same fold-occupancy our model derives.
    for (m, n, k), g in zip(dims, gold):
        eff = systolic_gemm(m, n, k, rows, cols, dataflow).mapping_efficiency
        assert eff * 100 == pytest.approx(float(g["mapping_efficiency_pct"]), rel=1e-9)


dims_st = st.integers(1, 3000)
arr_st = st.integers(1, 256)


@given(M=st.integers(1, 1000), N=st.integers(1, 1000), K=st.integers(1, 1000),
       R=st.integers(2, 256), C=st.integers(2, 256), df=st.sampled_from(DATAFLOWS),
       mpe=st.integers(1, 4), compat=st.booleans())
def test_reference_equals_vectorized(M, N, K, R, C, df, mpe, compat):
    ref = gemm_cycles(M, N, K, R, C, df, macs_per_pe=mpe, scalesim_compat=compat)
    vec = gemm_cycles_array([M], [N], [K], R, C, df, macs_per_pe=mpe, scalesim_compat=compat)
    assert vec.dtype == np.int64 and int(vec[0]) == ref


@given(M=dims_st, N=dims_st, K=dims_st, R=arr_st, C=arr_st, df=st.sampled_from(DATAFLOWS),
       mpe=st.integers(1, 4))
def test_never_faster_than_peak(M, N, K, R, C, df, mpe):
    """cycles >= MACs / (PEs x MACs per PE): no prediction beats the array's peak."""
    res = systolic_gemm(M, N, K, R, C, df, macs_per_pe=mpe)
    assert res.cycles * R * C * mpe >= M * N * K
    assert 0 < res.utilization <= 1.0 + 1e-12
    assert 0 < res.mapping_efficiency <= 1.0


@given(M=dims_st, N=dims_st, K=dims_st, R=arr_st, C=arr_st, df=st.sampled_from(DATAFLOWS),
       which=st.sampled_from("MNK"), extra=st.integers(1, 500))
def test_monotone_in_problem_size(M, N, K, R, C, df, which, extra):
    base = gemm_cycles_array(M, N, K, R, C, df)
    d = {"M": M, "N": N, "K": K}
    d[which] += extra
    assert gemm_cycles_array(d["M"], d["N"], d["K"], R, C, df) >= base


def test_hand_computed_examples():
    # WS, 4x4 array, K=8 rows of weights (2 row folds), N=4 (1 col fold), M=10 streamed:
    # each fold = preload 4 + stream 10 + skew 4 + 4 - 2 = 20 cycles -> 40.
    assert gemm_cycles(10, 4, 8, 4, 4, "ws") == 40
    # OS: M=8 -> 2 row folds, N=4 -> 1 col fold, K=10 streamed, no preload: 10 + 6 = 16 -> 32.
    assert gemm_cycles(8, 4, 10, 4, 4, "os") == 32
    # IS: K=8 rows (2 folds), M=4 cols (1 fold), N=10 streamed: like WS -> 40.
    assert gemm_cycles(4, 10, 8, 4, 4, "is") == 40
    # 1x1 array, OS: every output is its own fold of K cycles.
    assert gemm_cycles(3, 5, 7, 1, 1, "os") == 3 * 5 * 7
    # Two FP8 MACs per PE halve the reduction length (rounded up).
    assert gemm_cycles(8, 4, 10, 4, 4, "os", macs_per_pe=2) == 2 * (5 + 6)
    # SCALE-Sim counts the last cycle's index from 0.
    assert gemm_cycles(8, 4, 10, 4, 4, "os", scalesim_compat=True) == 31


def test_conv_lowering_shapes():
    # torchvision ResNet-50 conv1: 224x224, 7x7/2, pad 3 -> 112x112.
    assert conv_output_size(224, 7, 2, 3) == 112
    assert conv_gemm_dims(224, 224, 7, 7, 3, 64, 2, padding=3, batch=2) == (2 * 112 * 112, 64,
                                                                            147)
    # SCALE-Sim: no padding, ceil((224 - 7 + 2) / 2) = 110.
    assert conv_output_size(224, 7, 2, scalesim_compat=True) == 110
    assert conv_output_size(56, 1, 2, scalesim_compat=True) == 29  # ceil(57 / 2)
    assert conv_output_size(56, 1, 2) == 28
    for size, k, s in [(57, 3, 2), (15, 3, 1), (7, 7, 1), (9, 2, 3)]:
        assert conv_output_size(size, k, s, scalesim_compat=True) == math.ceil((size - k + s) / s)


@pytest.mark.parametrize("bad", [
    dict(M=0), dict(N=-3), dict(K=2.5), dict(rows=0), dict(cols=True), dict(dataflow="rs"),
    dict(macs_per_pe=0)])
def test_bad_input_raises_clear_error(bad):
    kw = dict(M=4, N=4, K=4, rows=2, cols=2, dataflow="ws", macs_per_pe=1) | bad
    with pytest.raises(ValueError, match=next(iter(bad)) if "dataflow" not in bad else "rs"):
        gemm_cycles(**kw)


def test_empty_conv_output_raises():
    with pytest.raises(ValueError, match="empty"):
        conv_gemm_dims(3, 3, 5, 5, 1, 1, 1)


def test_the_reference_refuses_a_loop_it_cannot_finish():
    """gemm_cycles(10**12, ...) looped over 10^24 folds (never returned): refused with the count
    and the limit; the vectorized twin gives the count at that size, and the reference agrees
    with it at the limit."""
    from accelsim.errors import SizeError
    from accelsim.perf.systolic import MAX_REFERENCE_FOLDS

    with pytest.raises(SizeError, match=r"1,000,000,000,000,000,000,000,000 folds, more than "
                                        r"the 10,000,000"):
        gemm_cycles(10**12, 10**12, 8, 1, 1, "os")
    assert int(gemm_cycles_array(10**6, 10**6, 8, 1024, 1024, "os")) == \
        977 * 977 * (8 + 1024 + 1024 - 2)   # ceil(10^6 / 1024) = 977 folds each way
    m = MAX_REFERENCE_FOLDS // 4
    assert gemm_cycles(m, 4, 3, 1, 1, "os") == int(gemm_cycles_array(m, 4, 3, 1, 1, "os"))
