"""Real-GPU reference for the power limiter's two time scales (run on a machine with a CUDA GPU,
PyTorch and nvidia-ml-py; never by tests or CI): for the GEMM shapes the compute validation fits
(MAMF best shapes) and a few squares, the throughput of a short burst from idle (100 calls after
3 s idle, as MAMF-style benchmarks run) beside the steady state (the shape held 2 s, timed and
sampled over its last 0.5 s), with the SM clock and power of each.

    python3 benchmarks/device_h100_burst.py --out burst.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from device_h100_power import Sampler, chunked, gemm_fn  # noqa: E402

SHAPES = [("bf16", 6144, 2816, 17920), ("e4m3_fast1", 4096, 16384, 7168),
          ("bf16", 4096, 4096, 4096), ("bf16", 8192, 8192, 8192), ("e4m3_fast1", 8192, 8192, 8192)]


def burst_and_steady(s: Sampler, dtype: str, M: int, K: int, N: int) -> dict:
    fn = gemm_fn(dtype, M, K, N)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    time.sleep(3.0)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.monotonic()
    a.record()
    for _ in range(100):
        fn()
    b.record()
    b.synchronize()
    burst_us = a.elapsed_time(b) / 100 * 1e3
    wb = s.window(t0, time.monotonic())
    ch = chunked(fn, 2.0)
    last = [c for c in ch if c[0] > ch[-1][0] - 0.5]
    steady_us = sum(c[2] for c in last) / sum(c[1] for c in last) * 1e6
    ws = s.window(last[0][0] - last[0][2], last[-1][0])
    flop = 2 * M * K * N
    row = {"dtype": dtype, "M": M, "K": K, "N": N,
           "burst_us": round(burst_us, 2), "burst_TFLOPS": round(flop / burst_us / 1e6, 1),
           "burst_sm_MHz": wb.get("sm_MHz"), "burst_power_W": wb.get("power_W"),
           "burst_power_instant_W": wb.get("power_instant_W"),
           "steady_us": round(steady_us, 2), "steady_TFLOPS": round(flop / steady_us / 1e6, 1),
           "steady_sm_MHz": ws.get("sm_MHz"), "steady_power_W": ws.get("power_W"),
           "steady_temp_C": ws.get("temp_C")}
    print(row, flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="burst.json")
    args = ap.parse_args()
    s = Sampler()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "nvml": s.info(),
           "rows": []}
    s.start()
    for shape in SHAPES:
        res["rows"].append(burst_and_steady(s, *shape))
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    s.stop.set()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
