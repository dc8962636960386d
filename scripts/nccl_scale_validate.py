"""accelsim's collectives at scale against NCCL's own latency model and a published measurement.

1. Ring latency (accelsim/data/nccl_scale/ring_latency.csv, nccl-tests issue #123: a 1-channel
   ring all-reduce of 8-128 B on 2-8 GPUs of a DGX A100): accelsim's ring charges the node
   file's link latency per step (1 us NVSwitch) and nothing else; NCCL's form is a base cost
   plus a per-step latency. The two NCCL parameters are fitted (least squares) on the rows
   labelled ``fit`` and checked on the rows labelled ``checked``; old and new printed per row.
2. Data-parallel collectives at scale: one GPU per node (stride 8, as ``llm`` builds a DP group
   with tp = 8) on dgx-h100, 16 to 1,536 nodes, 64 MiB to 8 GiB: accelsim's bus bandwidth today
   and with NCCL's Simple-protocol ring latency (:data:`accelsim.netsim.nccl.NCCL_SIMPLE`), and
   NCCL's tree all-reduce where its cost model would pick it.
3. GPT-3 175B (TP 8, PP 8, 1,536 x 2,048-token batch, distributed optimizer) at 256 to 12,288
   GPUs: per-GPU throughput today, and with the DP collectives' latency charged as NCCL does.

Nothing here changes a default: it prints the size of the missing latency term.
Run: python scripts/nccl_scale_validate.py
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import replace

import numpy as np

from accelsim.arch import build_system
from accelsim.engine import LlmParams, Plan, predict
from accelsim.netsim.fabric import Fabric
from accelsim.netsim.nccl import NCCL_SIMPLE
from accelsim.paths import REPO_ROOT
from accelsim.ring import bus_factor, ring_collective_time
from accelsim.workload.gpt import GptConfig

DATA = REPO_ROOT / "accelsim" / "data" / "nccl_scale"
NODES = (16, 32, 64, 128, 256, 512, 1024, 1536)
SIZES = (64 * 2 ** 20, 2 ** 30, 8 * 2 ** 30)
CLOCK = "boost"  # validation scripts pass the clock explicitly


def ring_rows() -> list[dict]:
    with open(DATA / "ring_latency.csv", newline="") as f:
        return list(csv.DictReader(f))


def fit_ring_latency(rows: list[dict]) -> tuple[float, float]:
    """(base_s, step_s) of ``t = base + steps x step`` by least squares on the ``fit`` rows
    (steps = 2 (p - 1) for an all-reduce)."""
    fit = [r for r in rows if r["label"] == "fit"]
    steps = np.array([2 * (int(r["ranks"]) - 1) for r in fit], float)
    t = np.array([float(r["measured_time_us"]) * 1e-6 for r in fit])
    a = np.stack([np.ones_like(steps), steps], axis=1)
    (base, step), *_ = np.linalg.lstsq(a, t, rcond=None)
    return float(base), float(step)


def part1() -> tuple[float, float]:
    rows = ring_rows()
    a100 = build_system(REPO_ROOT / "arch_configs" / "dgx-a100.toml")
    lat = a100.link.latency_s
    base, step = fit_ring_latency(rows)
    print("1. ring all-reduce latency, 1 channel, DGX A100 (nccl-tests issue #123)")
    print(f"   accelsim today: {lat * 1e6:.1f} us per step, no base; fitted NCCL form: base "
          f"{base * 1e6:.2f} us + {step * 1e6:.2f} us per step (NCCL's Simple constants: "
          f"{NCCL_SIMPLE.base_s * 1e6:.1f} + {NCCL_SIMPLE.nvlink_step_s * 1e6:.1f})")
    print(f"   {'GPUs':>4} {'label':>8} {'measured':>9} {'old':>7} {'new':>7} {'old err':>8} "
          f"{'new err':>8}")
    err: dict[str, list[tuple[float, float]]] = {"fit": [], "checked": []}
    for r in rows:
        p = int(r["ranks"])
        meas = float(r["measured_time_us"])
        old = ring_collective_time("all-reduce", p, float(r["size_bytes"]),
                                   a100.link.bandwidth_Bps, lat) * 1e6
        new = (base + 2 * (p - 1) * step) * 1e6
        e_old, e_new = old / meas - 1, new / meas - 1
        err[r["label"]].append((e_old, e_new))
        print(f"   {p:>4} {r['label']:>8} {meas:>8.2f}u {old:>6.2f}u {new:>6.2f}u "
              f"{e_old:>+8.1%} {e_new:>+8.1%}")
    for label, es in err.items():
        print(f"   MAE {label:>7}: old {np.mean([abs(a) for a, _ in es]):.1%}, new "
              f"{np.mean([abs(b) for _, b in es]):.1%}")
    return base, step


def dp_times(fab: Fabric, kind: str, size: float, nodes: int) -> dict:
    """Seconds of one DP collective over ``nodes`` nodes, one GPU each: accelsim today (the
    links' per-step latency), with NCCL's ring latency, and as NCCL's tuner would run it (the
    cheaper of ring and tree for an all-reduce: ``Fabric(nccl=...)``)."""
    nccl = replace(fab, nccl=NCCL_SIMPLE)
    stride = fab.gpus_per_node
    bw = replace(fab, intra_latency_s=0.0, inter_latency_s=0.0).collective_s(kind, size, nodes,
                                                                              stride)
    return {"today": fab.collective_s(kind, size, nodes, stride),
            "nccl_ring": bw + NCCL_SIMPLE.ring_s(kind, nodes, nodes),
            "nccl_best": nccl.collective_s(kind, size, nodes, stride)}


def part2(h100) -> None:
    fab = Fabric.of(h100, nccl=None)  # the links' latency: accelsim before NCCL's
    print("\n2. DP collectives, one GPU per node, dgx-h100 (bus bandwidth GB/s: today / with "
          "NCCL's latency, best of ring and tree)")
    for kind in ("all-reduce", "reduce-scatter"):
        for size in SIZES:
            cells = []
            bus = {}
            for n in NODES:
                t = dp_times(fab, kind, size, n)
                bf = bus_factor(kind, n)
                bus[n] = {k: size * bf / v / 1e9 for k, v in t.items()}
                cells.append(f"{bus[n]['today']:.1f}/{bus[n]['nccl_best']:.1f}")
            ratio_old = bus[1024]["today"] / bus[16]["today"]
            ratio_new = bus[1024]["nccl_best"] / bus[16]["nccl_best"]
            print(f"   {kind:>14} {size / 2 ** 20:>6.0f} MiB  " + "  ".join(
                f"{n}:{c}" for n, c in zip(NODES, cells))
                + f"  | 1024/16 nodes: {ratio_old:.3f} -> {ratio_new:.3f}")


def part3(h100) -> None:
    print("\n3. GPT-3 175B, TP 8 PP 8, 1,536 x 2,048 tokens, ZeRO 1, dgx-h100 at the boost "
          "clock: per-GPU TFLOPS with the links' latency and with NCCL's (LlmParams.nccl_latency)")
    model = GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200,
                      flash_attention=True, name="gpt3-175b")
    print(f"   {'GPUs':>6} {'DP':>4} {'overlap':>7} {'iter s':>8} {'dp_comm s':>9} "
          f"{'TFLOPS/GPU':>10} {'NCCL lat':>9} {'change':>7}")
    for overlap in (False, True):
        for dp in (4, 8, 16, 32, 64, 96, 192):  # micro-batches per pipeline a multiple of pp
            plan = Plan(tp=8, pp=8, dp=dp, micro_batch=1, global_batch=1536, interleave=12,
                        sequence_parallel=True, recompute="selective", zero=1,
                        overlap_grad_reduce=overlap)
            old = predict(model, plan, "bf16", h100, LlmParams(nccl_latency=False))
            new = predict(model, plan, "bf16", h100, LlmParams(nccl_latency=True))
            print(f"   {8 * 8 * dp:>6} {dp:>4} {str(overlap):>7} {old.iteration_time_s:>8.3f} "
                  f"{old.dp_comm_s:>9.3f} {old.tflops_per_gpu:>10.1f} "
                  f"{new.tflops_per_gpu:>9.1f} "
                  f"{new.tflops_per_gpu / old.tflops_per_gpu - 1:>+7.2%}")


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    part1()
    h100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml").with_clock(CLOCK)
    part2(h100)
    part3(h100)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
