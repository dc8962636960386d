"""Design-space explorer: best plan, full tables, infeasible rows, overlap, executors, CLI."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arch import load_system
from accelsim.cli import main
from accelsim.dse import STRATEGIES, explore, mapping_candidates
from accelsim.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
SYS64 = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
SYS1 = load_system(REPO / "arch_configs" / "rapid-1chip.toml")
TINY = load_workload(REPO / "workloads" / "tiny-cnn.toml")
RESNET = load_workload(REPO / "workloads" / "resnet50.toml")
NO_COMM = {"reduce_scatter_s": 0.0, "all_gather_s": 0.0, "weight_update_s": 0.0}


def test_mapping_candidates_cover_all_factorizations():
    maps = mapping_candidates(SYS64, ("ws",))
    assert len(maps) == 7 * 6  # 64 = 1x64 ... 64x1; 20 cores: 1,2,4,5,10,20
    assert all(m.chip_dp * m.chip_mp == 64 and m.core_dp * m.core_mp == 20 for m in maps)


@pytest.mark.parametrize("scheme", ["fp16", "fp8", "hfp8"])
def test_best_plan_and_tables(scheme):
    res = explore(SYS1, TINY, 32, scheme, executor="serial")
    plans = res.plans
    assert len(plans) == len(STRATEGIES) * 3 * 2
    assert res.best["feasible"]
    assert res.step_s == pytest.approx(plans[plans.feasible]["step_s"].min())
    # the breakdown is the best plan's layers, one row per layer x phase, summing up
    lay = res.layers
    n_rows = sum(len(la.gemms(32)) + len(la.elementwise(32)) for la in TINY.layers)
    assert len(lay) == n_rows
    assert lay.groupby("layer")[["chip_dp", "chip_mp", "core_dp", "core_mp"]].nunique().max().max() == 1
    assert lay[lay.phase == "fwd"]["time_s"].sum() == pytest.approx(res.fwd_s)
    assert lay[lay.phase.isin(["bwd_data", "bwd"])]["time_s"].sum() == pytest.approx(res.bwd_data_s)
    assert lay[lay.phase == "wgrad"]["time_s"].sum() == pytest.approx(res.wgrad_s)
    b = res.best
    assert b["step_s"] == pytest.approx(b["compute_s"] + b["exposed_comm_s"])
    assert b["samples_per_s"] == pytest.approx(32 / b["step_s"])
    # every point: whole-layer FLOPs over that mapping's time never beats the system peak
    pts = res.points[res.points.feasible & (res.points.flops > 0)]
    peak = np.array([SYS1.peak_flops(p) for p in pts["precision"]])
    assert (pts["flops"] / pts["time_s"] <= peak).all()
    assert b["achieved_flops"] <= SYS1.peak_flops(res.scheme if scheme == "fp16" else "fp8")


def test_infeasible_points_and_plans_are_rows_with_reasons():
    # minibatch 16 on 64 chips: pure data parallelism over chips cannot work, hybrid can
    res = explore(SYS64, TINY, 16, "fp8", dataflows=("ws",), executor="serial")
    bad = res.points[~res.points.feasible]
    assert len(bad) and bad["reason"].str.contains("minibatch 16").all()
    assert np.isinf(bad["time_s"]).all()
    data = res.plans[res.plans.strategy == "data"]
    assert (~data.feasible).all() and data["reason"].str.contains("minibatch").all()
    assert res.best["feasible"] and res.best["strategy"] == "hybrid"
    assert (res.layers["chip_dp"] <= 16).all()


def test_memory_capacity_makes_plans_infeasible():
    small = dataclasses.replace(SYS1, chip=dataclasses.replace(SYS1.chip,
                                                                memory_capacity_bytes=10_000))
    res = explore(small, TINY, 64, "fp16", executor="serial", comm=NO_COMM)
    assert not res.plans["feasible"].any()
    assert res.plans["reason"].str.contains("GiB per chip").all()
    assert not res.best["feasible"] and np.isnan(res.step_s) and res.layers.empty


def test_overlap_hides_only_reduce_scatter():
    comm = {"reduce_scatter_s": 1e-3, "all_gather_s": 2e-4, "weight_update_s": 1e-4}
    res = explore(SYS1, TINY, 32, "fp16", executor="serial", comm=comm,
                  strategies=("data",), dataflows=("ws",))
    off = res.plans[~res.plans.overlap].iloc[0]
    on = res.plans[res.plans.overlap].iloc[0]
    assert off["exposed_comm_s"] == pytest.approx(1.3e-3)
    assert on["all_gather_s"] + on["weight_update_s"] <= on["exposed_comm_s"]
    assert on["exposed_comm_s"] < off["exposed_comm_s"]
    hidden = off["exposed_comm_s"] - on["exposed_comm_s"]
    assert hidden <= min(on["bwd_data_s"] + on["wgrad_s"], 1e-3) + 1e-15
    # with free communication every plan's step is pure compute and overlap changes nothing
    free = explore(SYS1, TINY, 32, "fp16", executor="serial", comm=NO_COMM)
    np.testing.assert_allclose(free.plans["step_s"], free.plans["compute_s"])


def test_executors_agree():
    kw = dict(dataflows=("ws", "os"), comm=NO_COMM)
    a = explore(SYS1, TINY, 8, "hfp8", executor="serial", **kw)
    b = explore(SYS1, TINY, 8, "hfp8", executor="thread", max_workers=2, **kw)
    with ThreadPoolExecutor(2) as ex:
        c = explore(SYS1, TINY, 8, "hfp8", executor=ex, **kw)
    d = explore(SYS1, TINY, 8, "hfp8", executor="process", max_workers=2, **kw)
    pd.testing.assert_frame_equal(a.points, b.points)
    pd.testing.assert_frame_equal(a.points, c.points)
    pd.testing.assert_frame_equal(a.points, d.points)
    pd.testing.assert_frame_equal(a.plans, b.plans)


def test_bad_arguments():
    with pytest.raises(ValueError, match="executor"):
        explore(SYS1, TINY, 8, "fp8", executor="mpi")
    with pytest.raises(ValueError, match="dataflow"):
        explore(SYS1, TINY, 8, "fp8", dataflows=("rs",))
    with pytest.raises(ValueError, match="strategy"):
        explore(SYS1, TINY, 8, "fp8", strategies=("magic",))
    with pytest.raises(ValueError, match="scheme"):
        explore(SYS1, TINY, 8, "fp4")
    with pytest.raises(ValueError, match="reduce_scatter_s"):
        explore(SYS1, TINY, 8, "fp8", comm={"reduce_scatter_s": -1, "all_gather_s": 0,
                                             "weight_update_s": 0})


def test_resnet50_64chip_fp8_beats_fp16_and_respects_peak():
    kw = dict(dataflows=("ws",), executor="serial")
    r16 = explore(SYS64, RESNET, 1024, "fp16", **kw)
    r8 = explore(SYS64, RESNET, 1024, "fp8", **kw)
    assert r8.best["samples_per_s"] > r16.best["samples_per_s"]
    assert r8.best["compute_s"] < r16.best["compute_s"]
    for r, prec in ((r16, "fp16"), (r8, "fp8")):
        ok = r.plans[r.plans.feasible]
        assert (ok["achieved_flops"] <= SYS64.peak_flops(prec)).all()


def test_cli_explore_and_systolic(tmp_path, capsys):
    out = tmp_path / "pts.csv"
    rc = main(["explore", "--system", str(REPO / "arch_configs" / "rapid-1chip.toml"),
               "--workload", str(REPO / "workloads" / "tiny-cnn.toml"), "--batch", "16",
               "--scheme", "fp8", "--executor", "serial", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "# best:" in text and "samples/s" in text
    pts = pd.read_csv(out)
    assert {"layer", "phase", "time_s", "feasible", "reason"} <= set(pts.columns)
    assert (tmp_path / "pts_plans.csv").is_file() and (tmp_path / "pts_best_layers.csv").is_file()
    # argparse's positive_int: exit 2, one line
    assert main(["explore", "--system", str(REPO / "arch_configs" / "rapid-1chip.toml"),
                 "--workload", "tiny-cnn", "--batch", "0"]) == 2
    assert "argument --batch: must be an integer in [1, " in capsys.readouterr().err


def test_cli_systolic_contract(tmp_path):
    """`accelsim systolic --topology-csv ... --scalesim-compat --out` (external contract)."""
    topo = REPO / "tests" / "data" / "scalesim" / "resnet50_scalesim_topology.csv"
    gold_path = REPO / "tests" / "data" / "scalesim" / "scalesim_v3_resnet50_128x128_ws_cycles.csv"
    out = tmp_path / "cycles.csv"
    rc = main(["systolic", "--topology-csv", str(topo), "--rows", "128", "--cols", "128",
               "--dataflow", "ws", "--scalesim-compat", "--out", str(out)])
    assert rc == 0
    got = pd.read_csv(out)
    gold = pd.read_csv(gold_path, comment="#")
    assert list(got["layer"]) == list(gold["layer"])
    assert (abs(got["compute_cycles"] - gold["compute_cycles"]) <= 1).all()
    wl = main(["systolic", "--workload", str(REPO / "workloads" / "tiny-cnn.toml"), "--rows",
               "8", "--cols", "8", "--dataflow", "os", "--out", str(tmp_path / "t.csv")])
    assert wl == 0 and len(pd.read_csv(tmp_path / "t.csv")) == 3
    assert main(["systolic", "--topology-csv", str(tmp_path / "missing.csv"), "--rows", "4",
                 "--cols", "4"]) == 2


@settings(max_examples=12)
@given(scale=st.floats(1.0, 4.0), which=st.sampled_from(
    ["frequency_Hz", "scratchpad_bandwidth_Bps", "memory_bandwidth_Bps", "ring_bandwidth_Bps",
     "link"]), scheme=st.sampled_from(["fp16", "fp8", "hfp8"]), batch=st.sampled_from([64, 256]),
    overlap=st.booleans())
def test_throughput_monotone_in_peak_and_bandwidth(scale, which, scheme, batch, overlap):
    """More peak compute or bandwidth never lowers the explorer's best throughput."""
    core, chip = SYS64.chip.core, SYS64.chip
    if which in ("frequency_Hz", "scratchpad_bandwidth_Bps"):
        fast = dataclasses.replace(SYS64, chip=dataclasses.replace(
            chip, core=dataclasses.replace(core, **{which: getattr(core, which) * scale})))
    elif which == "link":
        fast = SYS64.with_link_bandwidth(SYS64.link.bandwidth_Bps * scale)
    else:
        fast = dataclasses.replace(SYS64, chip=dataclasses.replace(
            chip, **{which: getattr(chip, which) * scale}))
    kw = dict(dataflows=("ws",), overlap=(overlap,), executor="serial")
    base = explore(SYS64, TINY, batch, scheme, **kw).best["samples_per_s"]
    better = explore(fast, TINY, batch, scheme, **kw).best["samples_per_s"]
    assert better >= base * (1 - 1e-12)


def test_dask_executor_matches_serial():
    pytest.importorskip("dask", reason="optional extra accelsim[dask] not installed")
    kw = dict(dataflows=("ws",), comm=NO_COMM)
    a = explore(SYS1, TINY, 8, "fp8", executor="serial", **kw)
    b = explore(SYS1, TINY, 8, "fp8", executor="dask", max_workers=2, **kw)
    pd.testing.assert_frame_equal(a.points, b.points)
    assert a.best == b.best


def test_restricting_strategies_only_prunes_points():
    full = explore(SYS64, TINY, 64, "fp16", dataflows=("ws", "os"), executor="serial")
    data = explore(SYS64, TINY, 64, "fp16", dataflows=("ws", "os"), strategies=("data",),
                   executor="serial")
    assert len(data.points) < len(full.points)
    assert ((data.points["chip_mp"] == 1) & (data.points["core_mp"] == 1)).all()
    cols = ["fwd_s", "bwd_data_s", "wgrad_s", "step_s"]
    pd.testing.assert_frame_equal(
        data.plans[cols].reset_index(drop=True),
        full.plans[full.plans.strategy == "data"][cols].reset_index(drop=True))


def test_ties_resolve_to_data_parallel():
    """Element-wise layers cost the same under every split; the plan keeps them data parallel
    (a channel split would only move memory around)."""
    res = explore(SYS64, TINY, 64, "fp8", dataflows=("ws",), strategies=("hybrid",),
                  executor="serial", comm=NO_COMM)
    ew = res.layers[~res.layers.kind.isin(["conv", "linear", "matmul"])]
    assert len(ew) and (ew["chip_mp"] == 1).all() and (ew["chip_dp"] == 64).all()
    assert mapping_candidates(SYS64, ("ws",))[0].chip_dp == 64


def test_memory_model_admits_nvidias_resnet50_batch_on_a_16gb_v100():
    """NVIDIA trains ResNet-50 (AMP) with 256 images per 16 GB V100 (DeepLearningExamples,
    DGX-1 16GB rows): the explorer's footprint must fit there. Only tensors a backward pass
    reads are kept: nothing for adds, average pooling, or ReLU (in-place, its output is the
    next layer's saved input)."""
    v100 = load_system(REPO / "arch_configs" / "dgx1-v100.toml")
    res = explore(v100, RESNET, 8 * 256, "fp16", strategies=("data-chips",), overlap=(False,),
                  comm=NO_COMM, executor="serial")
    assert res.best["feasible"]
    assert 8 * 2**30 < res.best["memory_per_chip_bytes"] < 16 * 2**30
    kinds = {la.kind: la.saved_elements for la in RESNET.layers}
    assert kinds["add"] == kinds["relu"] == kinds["avgpool"] == 0
    saved = sum(la.saved_elements for la in RESNET.layers)
    gemm_in = sum(la.input_elements for la in RESNET.layers if la.is_gemm)
    kept = sum(la.input_elements for la in RESNET.layers
               if la.kind in ("batchnorm", "maxpool", "softmax"))
    assert saved == gemm_in + kept


def _hidden_by_hand(pick) -> float:
    """The per-layer walk the explorer used before its step was a schedule: in backward order a
    layer's gradient is ready after its weight gradient and element-wise backward; its
    reduce-scatter starts then or when the previous one ends; its data gradient follows."""
    t = rs_free = total = 0.0
    for r in list(pick.sort_values("index").itertuples(index=False))[::-1]:
        t += r.wgrad + r.bwd
        if r.rs_s > 0:
            rs_free = max(t, rs_free) + r.rs_s
            total += r.rs_s
        t += r.bwd_data
    return total - max(0.0, rs_free - t)


def test_overlap_is_the_schedule_of_per_layer_buckets():
    """With overlap, each layer's gradient reduce-scatter runs on the data-parallel stream as
    soon as its gradient is ready: the scheduled step equals the per-layer walk by hand, and
    the best plan's rows and trace are that schedule (they sum to / end at its step)."""
    res = explore(SYS64, RESNET, 64 * 4, "fp16", strategies=("data",), dataflows=("ws",))
    plans = res.plans.set_index("overlap")
    no, yes = plans.loc[False], plans.loc[True]
    assert yes["step_s"] < no["step_s"]
    assert res.best["overlap"]
    pick = res.layers.groupby("index").agg(rs_s=("grad_reduce_scatter_s", "sum")).reset_index()
    wide = res.layers.pivot_table(index="index", columns="phase", values="time_s",
                                  aggfunc="sum", fill_value=0.0)
    for ph in ("wgrad", "bwd", "bwd_data"):
        pick[ph] = wide[ph].reindex(pick["index"]).to_numpy() if ph in wide else 0.0
    hidden = _hidden_by_hand(pick)
    want = yes["compute_s"] + yes["reduce_scatter_s"] + yes["all_gather_s"] \
        + yes["weight_update_s"] - min(hidden, yes["reduce_scatter_s"])
    assert yes["step_s"] == pytest.approx(want, rel=1e-12)
    assert sum(r.exposed_s for r in res.rows()) == pytest.approx(res.step_s, rel=1e-12)
    assert res.timeline().end_s == pytest.approx(res.step_s, rel=1e-12)
    # the buckets are rows of their own, on the data-parallel stream, mostly hidden
    buckets = [r for r in res.rows() if r.op == "reduce_scatter"]
    assert len(buckets) > 1 and {str(r.stream) for r in buckets} == {"dp_comm"}
    # each bucket carries the bytes its chip sends: all of them, fp16 gradients over a ring
    # of 64, are the whole model's reduce-scatter
    assert sum(r.bytes for r in buckets) == pytest.approx(2 * RESNET.n_params * 63 / 64,
                                                          rel=1e-12)
    assert sum(r.exposed_s for r in buckets) < sum(r.time_s for r in buckets)


def test_explore_and_predict_time_one_layer_step_alike():
    """The same layer list on one H100 through explore's CLI and predict: the same fusion
    default and the same update stream, so the step agrees (the GPT-2 layer list was 38.6 ms
    in explore against 37.0 in predict: unfused, the update at 100 % of HBM)."""
    from accelsim.engine import LlmParams
    from accelsim.engine.run import predict_workload

    gpt = load_workload(REPO / "workloads" / "gpt2-small.toml")
    layers = type(gpt)(**{**{f: getattr(gpt, f) for f in gpt.__dataclass_fields__},
                          "transformer": None})
    h100 = load_system(REPO / "arch_configs" / "h100-sxm.toml")
    stack = LlmParams(memory_reserve_GiB=0.0)  # its attention layers run on a stack's kernel
    p = predict_workload(h100, layers, 8, "bf16", fusion=h100.chip.default_fusion,
                         optimizer="adamw", stack=stack)
    e = explore(h100.with_fusion(h100.chip.default_fusion), layers, 8, "bf16",
                optimizer="adamw", strategies=("data",), stack=stack)
    assert e.step_s == pytest.approx(p.step.step_s, rel=0.005)
    assert e.best["weight_update_s"] == pytest.approx(p.step.weight_update_s, rel=1e-12)
