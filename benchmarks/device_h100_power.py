"""Real-GPU reference for the power-limited clock model (run on a machine with a CUDA GPU, PyTorch
and nvidia-ml-py; never by tests or CI): GEMMs held long enough for the power limiter to settle,
each timed over the last part of its run with the SM clock, board power and temperature sampled
(NVML, every 10 ms) in that same window; the transient of one heavy GEMM started from idle (what a
short benchmark burst sees); the per-call floor of small GEMMs eager and in a CUDA graph; and the
bandwidth of re-reads from L2 and of streams from HBM.

    python3 benchmarks/device_h100_power.py --out power.json

Every row says how it was measured; accelsim/data/h100_power/README.md says how the fit data was
taken (this script's steady rows fix that data's lag: the sampled window is the timed window).
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import torch

STEADY_S, WINDOW_S = 0.8, 0.4   # run each GEMM this long; time and sample its last WINDOW_S
LLAMA8B = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (4096, 128256)]  # (K, N)
LLAMA70B = [(8192, 10240), (8192, 57344), (28672, 8192)]
SKINNY = [(4096, 6144), (4096, 28672), (14336, 4096), (8192, 10240)]


class Sampler(threading.Thread):
    """NVML samples (monotonic time, SM MHz, power W, instant power W, temperature C, reasons)."""

    def __init__(self, period_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        import pynvml as nv

        nv.nvmlInit()
        self.nv, self.h, self.period = nv, nv.nvmlDeviceGetHandleByIndex(0), period_s
        self.rows: list[tuple] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def info(self) -> dict:
        nv, h = self.nv, self.h
        out = {}
        for key, f in [("power_limit_W", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3),
                       ("power_limit_default_W",
                        lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1e3),
                       ("max_sm_MHz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                       ("max_mem_MHz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
                       ("idle_sm_MHz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                       ("idle_power_W", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3),
                       ("idle_temp_C", lambda: nv.nvmlDeviceGetTemperature(h, 0)),
                       ("name", lambda: nv.nvmlDeviceGetName(h)),
                       ("driver", lambda: nv.nvmlSystemGetDriverVersion())]:
            try:
                out[key] = f()
            except Exception as e:  # noqa: BLE001 (a missing NVML query is recorded, not fatal)
                out[key] = f"unavailable: {e}"
        return out

    def _instant(self) -> float:
        try:  # NVML_FI_DEV_POWER_INSTANT = 186 (newer drivers; the plain reading is averaged)
            v = self.nv.nvmlDeviceGetFieldValues(self.h, [186])[0]
            return v.value.uiVal / 1e3 if v.nvmlReturn == 0 else float("nan")
        except Exception:  # noqa: BLE001
            return float("nan")

    def run(self) -> None:
        nv, h = self.nv, self.h
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
            except Exception:  # noqa: BLE001
                reasons = -1
            row = (t, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                   nv.nvmlDeviceGetPowerUsage(h) / 1e3, self._instant(),
                   nv.nvmlDeviceGetTemperature(h, 0), reasons)
            with self.lock:
                self.rows.append(row)
            time.sleep(self.period)

    def window(self, t0: float, t1: float) -> dict:
        with self.lock:
            rows = [r for r in self.rows if t0 <= r[0] <= t1]
        if not rows:
            return {"samples": 0}
        mean = lambda i: sum(r[i] for r in rows) / len(rows)  # noqa: E731
        reasons = 0
        for r in rows:
            reasons |= max(r[5], 0)
        return {"samples": len(rows), "sm_MHz": round(mean(1), 1), "power_W": round(mean(2), 1),
                "power_instant_W": round(mean(3), 1), "temp_C": round(mean(4), 1),
                "clock_reasons": reasons}

    def trace(self, t0: float, t1: float) -> list:
        with self.lock:
            return [[round(r[0] - t0, 3), r[1], round(r[2], 1), round(r[3], 1), r[4]]
                    for r in self.rows if t0 <= r[0] <= t1]


def chunked(fn, seconds: float) -> list[tuple[float, int, float]]:
    """Call fn in chunks of ~20 ms for `seconds`: (wall end, calls, GPU seconds) per chunk."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    n = max(1, int(0.02 / max(a.elapsed_time(b) / 1e3, 1e-7)))
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            fn()
        b.record()
        b.synchronize()
        out.append((time.monotonic(), n, a.elapsed_time(b) / 1e3))
    return out


def gemm_fn(dtype: str, M: int, K: int, N: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    if dtype in ("bf16", "fp16"):
        t = torch.bfloat16 if dtype == "bf16" else torch.float16
        A = torch.randn(M, K, device="cuda", dtype=t, generator=g)
        B = torch.randn(K, N, device="cuda", dtype=t, generator=g)
        return lambda: A @ B
    A = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
    B = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    return lambda: torch._scaled_mm(A, B, one, one, out_dtype=torch.bfloat16, use_fast_accum=True)


def steady_gemm(s: Sampler, dtype: str, M: int, K: int, N: int, kind: str) -> dict:
    fn = gemm_fn(dtype, M, K, N)
    fn()
    chunks = chunked(fn, STEADY_S)
    t1 = chunks[-1][0]
    t0 = t1 - WINDOW_S
    last = [c for c in chunks if c[0] > t0] or chunks[-1:]
    t0 = min(t0, last[0][0] - last[0][2])
    calls, gpu = sum(c[1] for c in last), sum(c[2] for c in last)
    us = gpu / calls * 1e6
    row = {"dtype": dtype, "M": M, "K": K, "N": N, "kind": kind, "time_us": round(us, 2),
           "TFLOPS": round(2 * M * K * N / us / 1e6, 1), "calls": calls}
    row.update(s.window(t0, t1))
    print(f"{dtype} {M}x{K}x{N}: {us:9.1f} us {row['TFLOPS']:7.1f} TFLOPS "
          f"{row.get('sm_MHz', '-')} MHz {row.get('power_W', '-')} W", flush=True)
    return row


def transient(s: Sampler, idle_s: float = 3.0, run_s: float = 4.0) -> dict:
    """bf16 8192^3 from idle: per-chunk throughput and the clock/power trace."""
    fn = gemm_fn("bf16", 8192, 8192, 8192)
    fn()
    torch.cuda.synchronize()
    time.sleep(idle_s)
    t0 = time.monotonic()
    chunks = chunked(fn, run_s)
    first100, calls, gpu = None, 0, 0.0
    for c in chunks:
        calls, gpu = calls + c[1], gpu + c[2]
        if first100 is None and calls >= 100:
            first100 = gpu / calls * 1e6
    flop = 2 * 8192 ** 3
    return {"shape": "bf16 8192x8192x8192", "idle_s": idle_s,
            "first_100_calls_us": round(first100, 1) if first100 else None,
            "chunks": [[round(c[0] - t0, 3), c[1], round(flop * c[1] / c[2] / 1e12, 1)]
                       for c in chunks],
            "chunk_columns": ["t_end_s", "calls", "TFLOPS"],
            "trace": s.trace(t0 - 0.2, chunks[-1][0]),
            "trace_columns": ["t_s", "sm_MHz", "power_W", "power_instant_W", "temp_C"]}


def small_floor() -> list[dict]:
    """Back-to-back small GEMMs: eager per-call time vs the same calls replayed in a CUDA graph."""
    out = []
    for dtype, n in [("bf16", 768), ("e4m3_fast1", 768), ("bf16", 1024), ("bf16", 2048)]:
        fn = gemm_fn(dtype, n, n, n)
        fn()
        ch = chunked(fn, 0.3)
        eager = sum(c[2] for c in ch) / sum(c[1] for c in ch)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(100):
                fn()
        ch = chunked(graph.replay, 0.3)
        graphed = sum(c[2] for c in ch) / sum(c[1] for c in ch) / 100
        out.append({"dtype": dtype, "M": n, "K": n, "N": n, "eager_us": round(eager * 1e6, 2),
                    "graph_us": round(graphed * 1e6, 2)})
        print(f"small {dtype} {n}^3: eager {eager * 1e6:.1f} us, graph {graphed * 1e6:.1f} us",
              flush=True)
    return out


def reread_kernel():
    """A Triton kernel re-reading an fp32 buffer ``reps`` times with loads that bypass L1
    (``.cg``): ``reread[(programs,)](x, y, n, reps, BLOCK=1024, num_warps=w)``."""
    import triton
    import triton.language as tl

    @triton.jit
    def reread(x, y, n, reps, BLOCK: tl.constexpr):
        pid, progs = tl.program_id(0), tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(reps):
            for start in range(pid * BLOCK, n, progs * BLOCK):
                offs = start + tl.arange(0, BLOCK)
                acc += tl.load(x + offs, mask=offs < n, other=0.0, cache_modifier=".cg")
        tl.store(y + pid * BLOCK + tl.arange(0, BLOCK), acc)

    return reread


def bandwidth(s: Sampler) -> list[dict]:
    """L2 re-reads (Triton kernel, loads that bypass L1) and HBM copies, with the clock sampled."""
    out = []
    try:
        reread = reread_kernel()
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for mib, reps in [(4, 400), (8, 200), (16, 100), (24, 70), (32, 50), (48, 35),
                          (2048, 1)]:
            n = mib * 2 ** 20 // 4
            x = torch.randn(n, device="cuda")
            for progs_per_sm, warps in [(4, 8), (8, 4)]:
                progs = sms * progs_per_sm
                y = torch.empty(progs * 1024, device="cuda")
                fn = lambda: reread[(progs,)](x, y, n, reps, BLOCK=1024, num_warps=warps)  # noqa
                fn()
                ch = chunked(fn, 0.3)
                t = sum(c[2] for c in ch) / sum(c[1] for c in ch)
                w = s.window(ch[0][0] - ch[0][2], ch[-1][0])
                row = {"kind": "reread", "MiB": mib, "reps": reps, "programs": progs,
                       "warps": warps, "time_us": round(t * 1e6, 1),
                       "GBps_read": round(mib * 2 ** 20 * reps / t / 1e9, 1), **w}
                out.append(row)
                print(f"reread {mib} MiB x{reps} ({progs}x{warps}w): {row['GBps_read']} GB/s "
                      f"at {w.get('sm_MHz')} MHz", flush=True)
    except Exception as e:  # noqa: BLE001 (the copies below still run)
        out.append({"kind": "reread", "error": repr(e)[:300]})
        print("reread failed:", repr(e)[:300], flush=True)
    for mib in (16, 64, 256, 1024, 4096):
        a = torch.empty(mib * 2 ** 18, device="cuda")
        b = torch.empty_like(a)
        fn = lambda: b.copy_(a)  # noqa: E731
        fn()
        ch = chunked(fn, 0.3)
        t = sum(c[2] for c in ch) / sum(c[1] for c in ch)
        w = s.window(ch[0][0] - ch[0][2], ch[-1][0])
        out.append({"kind": "copy", "MiB_each": mib, "time_us": round(t * 1e6, 2),
                    "GBps_rw": round(2 * mib * 2 ** 20 / t / 1e9, 1), **w})
        print(f"copy {mib} MiB: {out[-1]['GBps_rw']} GB/s at {w.get('sm_MHz')} MHz", flush=True)
        del a, b
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="power.json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    s = Sampler()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "nvml": s.info(), "steady_s": STEADY_S, "window_s": WINDOW_S}
    s.start()
    res["transient"] = transient(s)
    print("transient: first 100 calls", res["transient"]["first_100_calls_us"], "us", flush=True)
    res["small"] = small_floor()
    res["bandwidth"] = bandwidth(s)
    cases = []
    for d in ("bf16", "e4m3_fast1"):
        cases += [(d, n, n, n, "square") for n in (1024, 2048, 4096, 8192, 16384)]
        cases += [(d, 8192, k, n, "llama3-8b") for k, n in LLAMA8B]
        cases += [(d, 8192, k, n, "llama-70b") for k, n in LLAMA70B]
        cases += [(d, m, k, n, "skinny") for m in ((1, 16, 64, 256) if d == "bf16" else
                                                    (16, 64, 256)) for k, n in SKINNY]
    cases.append(("fp16", 8192, 8192, 8192, "square"))
    res["gemm"] = []
    for c in cases:
        try:
            res["gemm"].append(steady_gemm(s, *c))
        except Exception as e:  # noqa: BLE001 (one failing shape must not lose the rest)
            res["gemm"].append({"dtype": c[0], "M": c[1], "K": c[2], "N": c[3],
                                "error": repr(e)[:300]})
            print("failed", c, repr(e)[:200], flush=True)
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:  # written as rows finish: a timeout keeps what ran
            json.dump(res, f, indent=1)
    s.stop.set()
    res["nvml_end"] = s.info()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
