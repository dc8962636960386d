"""Schemes, the weight-update model and the three-phase breakdown (HFP8 paper appendix D).

The update byte counts are checked against a hand count of the tensors each optimizer step
reads and writes; the breakdown against the paper's qualitative claims (hfp8 all-gathers half
the bytes, updates 1/N of the weights, its weight-update time does not depend on bandwidth,
its advantage over fp8 grows with bandwidth and with compression)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.arch.schemes import SCHEME_NAMES, Scheme, get_scheme
from accelsim.netsim import UpdateParams, phase_times, weight_update_cost
from accelsim.netsim import topology as T
from accelsim.netsim.update import compression_cost, update_bytes_per_elem

#: schemes the HFP8 system recipes define (fp8-lm trains with AdamW only)
SGD_SCHEMES = tuple(n for n in SCHEME_NAMES if "sgd-momentum" in get_scheme(n).optimizers)

REPO = Path(__file__).resolve().parents[1]
N = 25_557_032  # ResNet-50 parameters (torchvision)
RATES = dict(memory_Bps=900e9, vector_ops_per_s=1.92e12)


def test_scheme_presets_and_errors():
    assert SCHEME_NAMES[:3] == ("fp16", "fp8", "hfp8")  # the paper's, then bf16/tf32/fp32
    h, f = get_scheme("hfp8"), get_scheme("FP8")
    assert h.all_gather_bytes_per_elem == 1 and f.all_gather_bytes_per_elem == 2
    assert h.phase_order == ("reduce_scatter", "weight_update", "all_gather")
    assert h.sharded_update and not f.sharded_update
    assert f.first_last_fp16 and h.first_last_fp16 and f.compute_precision == "fp8"
    assert get_scheme("fp16").compute_precision == "fp16"
    assert get_scheme(h) is h
    with pytest.raises(ValueError, match="known schemes: fp16, fp8, hfp8"):
        get_scheme("fp6")
    import dataclasses
    with pytest.raises(ValueError, match="sharded update must precede"):
        dataclasses.replace(h, phase_order=("reduce_scatter", "all_gather", "weight_update"))
    with pytest.raises(ValueError, match="requires a sharded"):
        dataclasses.replace(f, all_gather_payload="weights")


@pytest.mark.parametrize("scheme,opt,read,write", [
    # read: g + w + states + residual ; write: w + states + residual + compute copy
    ("fp16", "sgd-momentum", 2 + 2 + 2, 2 + 2),
    ("fp8", "sgd-momentum", 2 + 2 + 2, 2 + 2 + 1),
    ("hfp8", "sgd-momentum", 2 + 1 + 2 + 2, 1 + 2 + 2),
    # AdamW under fp16 compute: fp32 main gradient, master weight and moments, the fp16
    # working weight written back (FP16 AMP, Megatron-LM's formats)
    ("fp16", "adamw", 4 + 4 + 8, 4 + 8 + 2),
    ("hfp8", "sgd", 2 + 1 + 2, 1 + 2),
])
def test_update_bytes_hand_count(scheme, opt, read, write):
    assert update_bytes_per_elem(scheme, opt) == (read, write)


def test_weight_update_roofline_and_shard():
    full = weight_update_cost(N, "fp8", 64, **RATES)
    assert full.elems == N and full.bytes == N * 11
    assert full.time_s == pytest.approx(N * 11 / 900e9) and full.bound == "memory"
    shard = weight_update_cost(N, "hfp8", 64, **RATES)
    assert shard.elems == -(-N // 64) and shard.bytes == shard.elems * 12
    # vector-bound when the op rate is tiny; overhead per tensor adds once per tensor
    slow = weight_update_cost(1000, "fp16", 1, memory_Bps=1e12, vector_ops_per_s=1e3)
    assert slow.bound == "vector" and slow.time_s == pytest.approx(4.0)
    ov = weight_update_cost(N, "hfp8", 64, n_tensors=161,
                            params=UpdateParams(per_tensor_overhead_s=1e-6), **RATES)
    assert ov.time_s == pytest.approx(shard.time_s + 161e-6)
    eff = weight_update_cost(N, "fp8", 64, params=UpdateParams(memory_efficiency=0.5), **RATES)
    assert eff.time_s == pytest.approx(2 * full.time_s)
    with pytest.raises(ValueError, match="unknown optimizer"):
        weight_update_cost(N, "fp8", 64, optimizer="lamb", **RATES)
    with pytest.raises(ValueError, match="memory_efficiency"):
        UpdateParams(memory_efficiency=0)
    with pytest.raises(ValueError, match="memory_Bps"):
        weight_update_cost(N, "fp8", 64, memory_Bps=0, vector_ops_per_s=1e12)


def test_compression_cost():
    assert compression_cost(N, "fp8", 1, **RATES).time_s == 0
    c = compression_cost(N, "fp8", 256, **RATES)
    elems = N + -(-N // 256)
    assert c.bytes == elems * 6 and c.time_s == pytest.approx(elems * 6 / 900e9)
    with pytest.raises(ValueError, match="compression factor"):
        compression_cost(N, "fp8", 0.5, **RATES)


def breakdown(bw_GBps, compression=1.0, scheme="fp8", engine="analytic", **kw):
    return phase_times(T.hfp8_64(bw_GBps * 1e9), N, scheme, compression=compression,
                       engine=engine, **RATES, **kw)


def test_hfp8_vs_fp8_phases():
    f, h = breakdown(32), breakdown(32, scheme="hfp8")
    assert h.reduce_scatter_s == f.reduce_scatter_s
    assert h.all_gather_s < 0.55 * f.all_gather_s  # 8-bit weights vs 16-bit gradients
    assert h.weight_update_s < f.weight_update_s / 50  # 1/64 shard (x 12/11 bytes)
    assert h.total_s < f.total_s
    assert f.total_s == pytest.approx(f.reduce_scatter_s + f.all_gather_s + f.weight_update_s)


def test_weight_update_independent_of_bandwidth_and_more_bandwidth_never_slower():
    prev = None
    for bw in (8, 32, 64, 128, 512):
        cur = {s: breakdown(bw, scheme=s) for s in SGD_SCHEMES}
        for s, p in cur.items():
            assert p.weight_update_s == cur[s].weight_update_s == breakdown(8, scheme=s
                                                                             ).weight_update_s
            if prev:
                assert p.reduce_scatter_s <= prev[s].reduce_scatter_s
                assert p.all_gather_s <= prev[s].all_gather_s
        prev = cur


def test_paper_trends():
    """Qualitative claims of HFP8 appendix D (the magnitudes are engineer E's calibration)."""
    cut = {bw: 1 - breakdown(bw, scheme="hfp8").total_s / breakdown(bw).total_s
           for bw in (32, 64, 128)}
    assert 0 < cut[32] < cut[64] < cut[128]  # paper: 32% < 36% < 38%
    cut_c = 1 - breakdown(32, 256, "hfp8").total_s / breakdown(32, 256).total_s
    assert cut_c > cut[32]  # paper: 54% with 256x compression vs 32% without
    f1, f256 = breakdown(32), breakdown(32, 256)
    # network part: 1/256 of the bytes plus 14 steps of 1 us link latency
    net = f256.reduce_scatter_s - f256.compression_s
    assert net == pytest.approx(f1.reduce_scatter_s / 256 + 14e-6 * 255 / 256, rel=0.01)
    assert f256.all_gather_s == f1.all_gather_s  # compression applies to gradients only


@pytest.mark.parametrize("scheme", SGD_SCHEMES)
def test_engines_agree_on_breakdown(scheme):
    a = breakdown(64, 32, scheme, alpha_s=1e-6)
    d = breakdown(64, 32, scheme, engine="des", alpha_s=1e-6)
    for f in ("reduce_scatter_s", "all_gather_s", "weight_update_s", "total_s"):
        assert getattr(d, f) == pytest.approx(getattr(a, f), rel=0.01)


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown engine"):
        breakdown(32, engine="ns3")
    with pytest.raises(ValueError, match="compression factor"):
        breakdown(32, compression=0)
    with pytest.raises(ValueError, match="n_params"):
        phase_times(T.dgx1(), -1, "fp8", **RATES)
    # a model without weights (only matmul layers) has nothing to reduce
    assert phase_times(T.dgx1(), 0, "fp8", **RATES).total_s == 0.0


CONFIG = REPO / "arch_configs" / "hfp8-64chip.toml"


@pytest.mark.skipif(not CONFIG.exists(), reason="arch config not present")
def test_system_adapter_on_shipped_config():
    from accelsim.arch import load_system, with_link_bandwidth
    from accelsim.netsim import gradient_reduction_times, system_graph

    system = load_system(CONFIG)
    g = system_graph(system)
    assert len(T.chips(g)) == system.chips == 64
    p = gradient_reduction_times(with_link_bandwidth(system, 64), N, "hfp8", compression=256)
    g2 = T.build("hybrid-cube-mesh-64", 64, bandwidth_Bps=64e9, latency_s=system.link.latency_s,
                 inter_board_latency_s=system.inter_board_link.latency_s)
    q = phase_times(g2, N, "hfp8", compression=256, memory_Bps=system.chip.memory_bandwidth_Bps,
                    vector_ops_per_s=system.chip.sfu_ops_per_s)
    assert p.total_s == pytest.approx(q.total_s, rel=1e-12)
    assert p.weight_update_s == q.weight_update_s
    with pytest.raises(ValueError, match="link_GBps must be a positive"):
        with_link_bandwidth(system, 0)


def run_cli(argv, capsys):
    from accelsim.cli import main
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_collective_json_contract(capsys):
    rc, out, _ = run_cli(["collective", "--topology", "dgx1", "--chips", "8", "--op",
                          "all-reduce", "--bytes", str(1 << 30), "--engine", "des", "--json"],
                         capsys)
    d = json.loads(out)
    assert rc == 0 and 149 < d["bus_bandwidth_GBps"] <= 150 and d["time_s"] > 0
    rc, out, _ = run_cli(["collective", "--topology", "ring", "--chips", "8", "--op",
                          "reduce-scatter", "--bytes", "1600", "--link-GBps", "10", "--json"],
                         capsys)
    assert json.loads(out)["bus_bandwidth_GBps"] == pytest.approx(20.0)
    rc, out, _ = run_cli(["collective", "--topology", "hfp8-64", "--op", "all-gather",
                          "--bytes", "1000000", "--link-GBps", "32"], capsys)
    assert rc == 0 and "bus bandwidth" in out and "hierarchical" in out


@pytest.mark.parametrize("argv,msg", [
    (["--link-GBps", "0"], "--link-GBps must be > 0"),
    (["--link-GBps", "-3"], "--link-GBps must be > 0"),
    (["--link-GBps", "10", "--bytes", "1001", "--no-pad"], "do not divide"),
    (["--bytes", "0", "--link-GBps", "10"], "--bytes must be > 0"),
])
def test_cli_collective_errors(argv, msg, capsys):
    base = ["collective", "--topology", "ring", "--chips", "8", "--op", "reduce-scatter"]
    if "--bytes" not in argv:
        base += ["--bytes", "1600"]
    rc, _, err = run_cli(base + argv, capsys)
    assert rc == 2 and msg in err


@pytest.mark.skipif(not CONFIG.exists(), reason="arch config not present")
def test_cli_comm(capsys):
    rc, out, _ = run_cli(["comm", "--config", str(CONFIG), "--link-GBps", "32", "128",
                          "--compression", "1", "256", "--json"], capsys)
    rows = [json.loads(x) for x in out.splitlines()]
    assert rc == 0 and len(rows) == 12
    assert {r["scheme"] for r in rows} == {"fp16", "fp8", "hfp8"}  # the command's default
    rc, out, _ = run_cli(["comm", "--config", str(CONFIG), "--scheme", "hfp8"], capsys)
    assert rc == 0 and "reduce_scatter->weight_update->all_gather" in out
    with pytest.raises(SystemExit) as exc:  # argparse: the scheme names come from the registry
        run_cli(["comm", "--config", str(CONFIG), "--scheme", "int4"], capsys)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice: 'int4'" in err and "'hfp8'" in err


def test_scheme_is_data():
    # a new scheme is just data: e.g. FP32 gradients, replicated update
    s = Scheme(name="fp32", description="x", compute_precision="fp16", first_last_fp16=False,
               phase_order=("reduce_scatter", "all_gather", "weight_update"),
               reduce_scatter_bytes_per_elem=4, all_gather_bytes_per_elem=4,
               all_gather_payload="gradients", update_placement="replicated",
               gradient_bytes=4, master_weight_bytes=4, residual_bytes=0,
               optimizer_state_bytes=4, compute_copy_bytes=2, residual_ops_per_elem=0)
    p32 = phase_times(T.dgx1(), 1_000_000, s, **RATES)
    p16 = phase_times(T.dgx1(), 1_000_000, "fp16", **RATES)
    assert p32.rs_payload_bytes == 2 * p16.rs_payload_bytes


@pytest.mark.parametrize("cfg", sorted((REPO / "arch_configs").glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_config_has_a_breakdown(cfg):
    from accelsim.arch import load_system
    from accelsim.netsim import gradient_reduction_times

    from accelsim.arch.schemes import get_scheme

    system = load_system(cfg)
    for sc in SCHEME_NAMES:
        opt = "sgd-momentum" if "sgd-momentum" in get_scheme(sc).optimizers else "adamw"
        p = gradient_reduction_times(system, N, sc, n_tensors=161, optimizer=opt)
        assert p.total_s == pytest.approx(p.reduce_scatter_s + p.all_gather_s + p.weight_update_s)
        assert p.weight_update_s > 0
        if system.chips == 1:
            assert p.reduce_scatter_s == p.all_gather_s == 0
        else:
            assert p.reduce_scatter_s > 0 and p.all_gather_s > 0


def test_cli_collective_both_engines(capsys):
    rc, out, _ = run_cli(["collective", "--topology", "hfp8-64", "--op", "all-reduce", "--bytes",
                          "3840000", "--link-GBps", "32", "--engine", "both", "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["des_vs_analytic"] == pytest.approx(1.0, rel=0.01)
    rc, out, _ = run_cli(["collective", "--topology", "dgx1", "--op", "all-gather", "--bytes",
                          "4800", "--engine", "both"], capsys)
    assert rc == 0 and "des/analytic" in out
