"""Per-layer roofline model: table shape, bounds, FP16 first/last layer, peak and monotonicity."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arch import load_system
from accelsim.arch.schemes import get_scheme
from accelsim.perf import (
    gemm_cycles,
    BOUNDS,
    Mapping,
    core_gemm_time,
    data_parallel,
    evaluate_layer,
    layer_table,
)
from accelsim.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
SYS64 = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
SYS1 = load_system(REPO / "arch_configs" / "rapid-1chip.toml")
TINY = load_workload(REPO / "workloads" / "tiny-cnn.toml")
RESNET = load_workload(REPO / "workloads" / "resnet50.toml")


@functools.lru_cache(maxsize=None)
def _resnet_table(batch, scheme):
    return layer_table(SYS64, RESNET, batch, scheme)


def _with_core(system, **kw):
    chip = dataclasses.replace(system.chip, core=dataclasses.replace(system.chip.core, **kw))
    return dataclasses.replace(system, chip=chip)


def _with_chip(system, **kw):
    return dataclasses.replace(system, chip=dataclasses.replace(system.chip, **kw))


def test_table_is_tidy_one_row_per_layer_and_phase():
    df = layer_table(SYS1, TINY, 8, "hfp8")
    expected = sum(len(layer.gemms(8)) + len(layer.elementwise(8)) for layer in TINY.layers)
    assert len(df) == expected
    assert df.groupby(["layer", "phase"]).size().max() == 1
    assert set(df["bound"]) <= set(BOUNDS)
    assert df["feasible"].all() and (df["time_s"] > 0).all()
    comp = df[["compute_s", "scratchpad_s", "memory_s", "sfu_s"]].max(axis=1) + df["comm_s"]
    np.testing.assert_allclose(df["time_s"], comp, rtol=1e-12)
    # the bound names the largest term
    for _, r in df.iterrows():
        assert r[f"{r['bound']}_s"] == pytest.approx(max(r[f"{b}_s"] for b in BOUNDS))


def test_flops_match_analytic_resnet50():
    """ResNet-50 forward: ~4.1 GMACs per 224x224 image; training = 3x forward minus conv1's
    missing input gradient."""
    df = _resnet_table(64, "fp16")
    gemm = df[df["flops"] > 0]
    fwd_macs = gemm[gemm.phase == "fwd"]["flops"].sum() / 2 / 64
    assert 4.05e9 < fwd_macs < 4.15e9
    conv1 = RESNET.layers[0].gemms(1)["fwd"].macs
    assert gemm[gemm.phase == "bwd_data"]["flops"].sum() / 2 / 64 == fwd_macs - conv1
    assert gemm[gemm.phase == "wgrad"]["flops"].sum() / 2 / 64 == fwd_macs


@pytest.mark.parametrize("scheme", ["fp8", "hfp8"])
def test_first_and_last_layers_fp16_under_8bit_schemes(scheme):
    df = _resnet_table(64, scheme)
    prec = df[df["flops"] > 0].groupby("layer", sort=False)["precision"].first()
    assert prec.iloc[0] == "fp16" and prec.iloc[-1] == "fp16"
    assert (prec.iloc[1:-1] == scheme).all()  # each 8-bit scheme on its own datapath
    assert (_resnet_table(64, "fp16")["precision"] == "fp16").all()


@pytest.mark.parametrize("scheme", ["fp8", "hfp8"])
def test_elementwise_tensors_stored_in_the_consumers_precision(scheme):
    """Element-wise layers move tensors in the precision of the next GEMM layer (its input):
    8-bit between 8-bit GEMMs, FP16 ahead of the FP16 classifier; SFU work does not change."""
    df = _resnet_table(64, scheme)
    ew = df[df["flops"] == 0].groupby("layer", sort=False)["precision"].first()
    names = [la.name for la in RESNET.layers]
    last_gemm = max(i for i, la in enumerate(RESNET.layers) if la.is_gemm)
    for name, prec in ew.items():
        i = names.index(name)
        nxt = next((la for la in RESNET.layers[i + 1:] if la.is_gemm), None)
        want = "fp16" if nxt is None or names.index(nxt.name) == last_gemm else scheme
        assert prec == want, name
    assert set(ew.index) >= {"bn1", "maxpool", "avgpool"} and ew["bn1"] == scheme
    assert ew["avgpool"] == "fp16"
    ref = _resnet_table(64, "fp16").set_index(["layer", "phase"])
    got = df.set_index(["layer", "phase"])
    rows = got.index[(got["flops"] == 0) & (got["precision"] == scheme)]
    np.testing.assert_allclose(got.loc[rows, "memory_s"], ref.loc[rows, "memory_s"] / 2,
                               rtol=1e-12)
    np.testing.assert_array_equal(got.loc[rows, "sfu_s"], ref.loc[rows, "sfu_s"])


@pytest.mark.parametrize("scheme", ["fp16", "fp8", "hfp8"])
def test_no_layer_exceeds_peak(scheme):
    df = _resnet_table(64, scheme)
    peak = np.array([SYS64.peak_flops(p) for p in df["precision"]])
    assert (df["achieved_flops"] <= peak * (1 + 1e-12)).all()


def test_fp8_halves_compute_bound_time():
    """An FP8 PE does 2 MACs per cycle: a compute-bound GEMM runs ~2x faster."""
    core = SYS64.chip.core
    r16 = core_gemm_time(core, [4096], [1024], [1024], [1], "fp16", "ws", [1e15])
    r8 = core_gemm_time(core, [4096], [1024], [1024], [1], "fp8", "ws", [1e15])
    assert r16["bound"][0] == r8["bound"][0] == 0  # compute
    assert 1.9 < r16["compute_s"][0] / r8["compute_s"][0] <= 2.0


def test_infeasible_tile_is_a_row_with_reason():
    tiny_pad = _with_core(SYS1, scratchpad_bytes=1024)  # no 32x32 tile fits 1 KiB
    cols = evaluate_layer(tiny_pad, RESNET.layers[0], 4, "fp16", [data_parallel(tiny_pad)])
    assert not cols["feasible"].any()
    assert all("scratchpad" in r for r in cols["reason"])
    assert np.isinf(cols["time_s"]).all()


def test_mapping_validation():
    with pytest.raises(ValueError, match="core_mp"):
        Mapping(1, 1, 1, 0)
    with pytest.raises(ValueError, match="dataflow"):
        Mapping(1, 1, 1, 1, "rs")
    with pytest.raises(ValueError, match="batch"):
        layer_table(SYS1, TINY, 0, "fp16")


gemm_dims = st.integers(1, 4096)


@settings(max_examples=60)
@given(M=gemm_dims, N=gemm_dims, K=gemm_dims, prec=st.sampled_from(["fp16", "fp8"]),
       df=st.sampled_from(["ws", "os", "is"]), mem_GBps=st.floats(1, 4000))
def test_core_time_never_beats_peak(M, N, K, prec, df, mem_GBps):
    core = SYS64.chip.core
    r = core_gemm_time(core, [M], [N], [K], [1], prec, df, [mem_GBps * 1e9])
    assert r["feasible"][0]
    assert r["time_s"][0] >= M * N * K / (core.macs_per_cycle(prec) * core.frequency_Hz)
    assert r["time_s"][0] >= r["compute_s"][0] >= 0


@settings(max_examples=40)
@given(scale=st.floats(1.0, 8.0), which=st.sampled_from(
    ["frequency_Hz", "scratchpad_bandwidth_Bps", "memory_bandwidth_Bps", "sfu_ops_per_cycle",
     "ring_bandwidth_Bps", "link"]),
    scheme=st.sampled_from(["fp16", "fp8", "hfp8"]), batch=st.integers(1, 64),
    mapping=st.sampled_from([(1, 1, 4, 1), (1, 1, 2, 2), (1, 1, 1, 4)]))
def test_time_monotone_in_peak_and_bandwidth(scale, which, scheme, batch, mapping):
    """More compute or bandwidth never makes any layer or phase slower."""
    if which in ("frequency_Hz", "scratchpad_bandwidth_Bps", "sfu_ops_per_cycle"):
        faster = _with_core(SYS1, **{which: getattr(SYS1.chip.core, which) * scale})
    elif which == "link":
        faster = SYS1.with_link_bandwidth(SYS1.link.bandwidth_Bps * scale)
    else:
        faster = _with_chip(SYS1, **{which: getattr(SYS1.chip, which) * scale})
    m = Mapping(*mapping)
    base = layer_table(SYS1, TINY, batch, scheme, mapping=m)["time_s"].to_numpy()
    fast = layer_table(faster, TINY, batch, scheme, mapping=m)["time_s"].to_numpy()
    assert (fast <= base * (1 + 1e-12)).all()


def test_scheme_object_or_name():
    a = layer_table(SYS1, TINY, 4, "hfp8")
    b = layer_table(SYS1, TINY, 4, get_scheme("hfp8"))
    assert a.equals(b)


@settings(max_examples=60)
@given(M=st.integers(1, 3000), N=st.integers(1, 3000), K=st.integers(1, 3000),
       prec=st.sampled_from(["fp16", "fp8"]), df=st.sampled_from(["ws", "os", "is"]))
def test_untiled_compute_equals_systolic_reference(M, N, K, prec, df):
    """With room for the whole GEMM and the most bandwidth a config may give the compute time
    is exactly the systolic model's cycles at the precision's MAC rate."""
    from accelsim.bounds import SI_RANGES

    core = dataclasses.replace(SYS64.chip.core, scratchpad_bytes=10**12,
                               scratchpad_bandwidth_Bps=SI_RANGES["scratchpad_bandwidth_Bps"][1])
    r = core_gemm_time(core, [M], [N], [K], [2], prec, df, [1e30])
    mpe = int(core.macs_per_cycle_per_pe(prec))
    ref = gemm_cycles(M, N, K, core.rows, core.cols, df, macs_per_pe=mpe)
    assert r["cycles"][0] == 2 * ref  # tiling never saves array cycles; ties may pick a tile
    assert r["compute_s"][0] == pytest.approx(2 * ref / core.frequency_Hz, rel=1e-12)


def test_mixed_dataflows_in_one_call_match_separate_calls():
    core = SYS64.chip.core
    M, N, K = [300, 5000, 64], [129, 64, 2048], [4608, 77, 512]
    for prec in ("fp16", "fp8"):
        mixed = core_gemm_time(core, M * 3, N * 3, K * 3, [1] * 9, prec,
                               ["ws"] * 3 + ["os"] * 3 + ["is"] * 3, [45e9] * 9)
        for j, df in enumerate(("ws", "os", "is")):
            one = core_gemm_time(core, M, N, K, [1, 1, 1], prec, df, 45e9)
            for key in ("time_s", "cycles", "scratchpad_s", "memory_s", "tile_m"):
                np.testing.assert_array_equal(mixed[key][3 * j:3 * j + 3], one[key])
