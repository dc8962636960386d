"""Speed of the serving simulation (issue 35 item 9).

    python benchmarks/bench_serve.py [--repeat 3] [--requests 10000] [--big]

1. 10,000 requests on one replica: Llama-3-8B (bf16) on one H100, ShareGPT-like lengths
   (``--lengths conversation``), Poisson arrivals at 20 requests/s (about 60 % of the
   replica's capacity), vLLM's default limits; target < 10 s on 2 cores;
2. with ``--big``: 50,000 requests through 64 GPUs disaggregated, Llama-3-70B (fp8) on
   DGX-H100 nodes, 4 prefill and 12 decode replicas of tp 4, at 60 requests/s; target < 60 s.

Each run builds a fresh deployment (every iteration bucket timed by the engine again; the
first run also fills perf's GEMM cache, so it is the slowest) and is printed as min / median /
max wall seconds over ``--repeat`` runs (the big one: one run, with its CPU seconds), with the
simulated requests per wall second.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from _machine import cpu_model, spread, timed  # noqa: E402 (benchmarks/ on sys.path as a script)

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs")
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--big", action="store_true", help="also the 64-GPU disaggregated run")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from accelsim.arch import build_system
    from accelsim.serving import serve

    h100 = build_system("h100-sxm")
    last = {}

    def once():
        r = serve(h100, "llama3-8b", "bf16", rate=args.rate, requests=args.requests,
                  lengths="conversation", seed=0)
        last.update(r.as_dict())

    t = timed(once, args.repeat)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"Python {platform.python_version()}")
    print(f"{args.requests:,} requests at {args.rate:g}/s on one replica: "
          f"{spread(t, '{:.2f}')} s (min / median / max of {len(t)}), "
          f"{args.requests / sorted(t)[len(t) // 2]:,.0f} requests/s simulated; "
          f"{last['iterations']:,} iterations, TTFT p99 {last['time_to_first_token_s_p99']:.3f} s, "
          f"TPOT p50 {last['time_per_output_token_s_p50'] * 1e3:.2f} ms")
    if args.big:
        import time

        dgx = build_system("dgx-h100")
        t0, c0 = time.perf_counter(), time.process_time()
        d = serve(dgx, "llama3-70b", "fp8", tp=4, disagg=(4, 12), rate=60.0, requests=50_000,
                  lengths="conversation", seed=0).as_dict()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"50,000 requests, 64 GPUs (4x12 disaggregated, tp 4): {wall:.1f} s wall, "
              f"{cpu:.1f} s CPU, {50_000 / wall:,.0f} requests/s simulated; "
              f"{d['iterations']:,} iterations, KV transfer p50 "
              f"{d['kv_transfer_s_p50'] * 1e3:.2f} ms, TTFT p99 "
              f"{d['time_to_first_token_s_p99']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
