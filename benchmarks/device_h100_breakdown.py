"""Real-GPU breakdowns behind the end-to-end references (run on a machine with a CUDA GPU, PyTorch,
Triton and nvidia-ml-py; never by tests or CI):

* the kernels of an eager GPT training step (torch.profiler): per-kernel device time and count,
  and the GPU's busy time against the step's time (the rest is the GPU waiting on Python);
* the step again with the tied LM head padded to a multiple of 64 (50304, as nanoGPT does);
* the LM-head GEMMs alone (forward, input gradient, weight gradient) at vocabulary 50257 and
  50304: what an output width that is not a multiple of 8 costs cuBLAS;
* L2 re-reads and an HBM copy interleaved with heavy GEMMs, so that they run at the clock the
  power limiter holds (does L2 bandwidth follow the SM clock; does the HBM stream?);
* short flash-attention calls profiled: kernel time against the eager call's time.

    python3 benchmarks/device_h100_breakdown.py --out breakdown.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from _cuda import timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)
from device_h100_power import Sampler, chunked, gemm_fn, reread_kernel  # noqa: E402
from device_h100_transformer import gpt_case, gpt_training  # noqa: E402
from torch.profiler import ProfilerActivity, profile


def kernels(prof, steps: int) -> tuple[list[dict], float]:
    """Kernel rows (name, calls per step, device us per step) and the device busy us per step."""
    rows, busy = [], 0.0
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0.0)
        if not dev:  # CPU ops carry their kernels' time as children, not as self time
            continue
        rows.append({"name": e.key[:160], "calls": e.count / steps, "us": dev / steps})
        busy += dev / steps
    rows.sort(key=lambda r: -r["us"])
    return rows, busy


def profiled(fn, steps: int = 3) -> tuple[list[dict], float]:
    """Kernel rows and device busy us per call of ``fn``, profiled over ``steps`` calls after
    three warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    return kernels(prof, steps)


def profile_fn(fn, steps: int = 3) -> dict:
    rows, busy = profiled(fn, steps)
    return {"time_s": timed(fn, repeats=10), "busy_us": busy, "kernels": rows}


def gpt_profile(layers, h, a, s, vocab, batch) -> dict:
    model, opt, step = gpt_training(layers, h, a, s, vocab, batch)
    out = profile_fn(step)
    print(f"gpt {layers}x{h} b{batch} V{vocab}: step {out['time_s'] * 1e3:.1f} ms, "
          f"GPU busy {out['busy_us'] / 1e3:.1f} ms", flush=True)
    for r in out["kernels"][:12]:
        print(f"   {r['us']:9.1f} us  x{r['calls']:5.0f}  {r['name'][:90]}", flush=True)
    del model, opt
    torch.cuda.empty_cache()
    return {"layers": layers, "hidden": h, "heads": a, "seq": s, "vocab": vocab, "batch": batch,
            **out}


def lm_head(vocab: int, tokens: int = 8192, h: int = 768) -> dict:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(vocab, h, device="cuda", dtype=torch.bfloat16, generator=g)
    dy = torch.randn(tokens, vocab, device="cuda", dtype=torch.bfloat16, generator=g)
    out = {"vocab": vocab, "tokens": tokens, "hidden": h,
           "forward_us": timed(lambda: x @ w.t()) * 1e6,
           "input_grad_us": timed(lambda: dy @ w) * 1e6,
           "weight_grad_us": timed(lambda: dy.t() @ x) * 1e6}
    print(f"LM head V={vocab}: fwd {out['forward_us']:.0f} us, dx {out['input_grad_us']:.0f} us, "
          f"dW {out['weight_grad_us']:.0f} us", flush=True)
    return out


def at_limited_clock(s: Sampler) -> list[dict]:
    """L2 re-reads / an HBM copy between heavy GEMMs (the clock the limiter holds) and alone."""
    reread = reread_kernel()
    progs = torch.cuda.get_device_properties(0).multi_processor_count * 8
    x = torch.randn(16 * 2 ** 18, device="cuda")          # 16 MiB: fits in L2
    y = torch.empty(progs * 1024, device="cuda")
    a = torch.empty(2 ** 28, device="cuda")                 # 1 GiB each: HBM
    b = torch.empty_like(a)
    probes = {"reread_16MiB_x30": (lambda: reread[(progs,)](x, y, x.numel(), 30, BLOCK=1024,
                                                            num_warps=4), 16 * 2 ** 20 * 30),
              "copy_1GiB": (lambda: b.copy_(a), 2 * 2 ** 30)}
    heavy = gemm_fn("bf16", 8192, 8192, 8192)
    out = []
    for name, (fn, nbytes) in probes.items():
        fn()
        alone = chunked(fn, 0.3)
        t_alone = sum(c[2] for c in alone) / sum(c[1] for c in alone)
        w_alone = s.window(alone[0][0] - alone[0][2], alone[-1][0])
        times, t_end = [], time.monotonic() + 2.0
        t_start = None
        while time.monotonic() < t_end:
            for _ in range(4):
                heavy()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            now = time.monotonic()
            if now > t_end - 1.0:
                t_start = t_start or now
                times.append(e0.elapsed_time(e1) / 1e3)
        t_lim = sorted(times)[len(times) // 2]
        w_lim = s.window(t_start, time.monotonic())
        row = {"probe": name, "bytes": nbytes,
               "alone_GBps": round(nbytes / t_alone / 1e9, 1), "alone_sm_MHz": w_alone.get("sm_MHz"),
               "limited_GBps": round(nbytes / t_lim / 1e9, 1), "limited_sm_MHz": w_lim.get("sm_MHz"),
               "limited_power_W": w_lim.get("power_W"), "limited_samples": len(times)}
        out.append(row)
        print(row, flush=True)
        time.sleep(1.0)
    return out


def attention_profiles() -> list[dict]:
    out = []
    for b, h, s_, d in [(2, 16, 1024, 64), (4, 32, 2048, 128)]:
        q, k, v = (torch.randn(b, h, s_, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, s_, d, device="cuda", dtype=torch.bfloat16)

        def fwd_bwd():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        r = {"batch": b, "heads": h, "seq": s_, "head_dim": d,
             "fwd": profile_fn(fwd, steps=5), "fwd_bwd": profile_fn(fwd_bwd, steps=5)}
        print(f"attention b{b} h{h} s{s_} d{d}: fwd {r['fwd']['time_s'] * 1e6:.0f} us "
              f"(kernels {r['fwd']['busy_us']:.0f}), fwd+bwd {r['fwd_bwd']['time_s'] * 1e6:.0f} "
              f"us (kernels {r['fwd_bwd']['busy_us']:.0f})", flush=True)
        out.append(r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="breakdown.json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}

    def save():
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)

    s = Sampler()
    s.start()
    for key, fn in [("limited_clock", lambda: at_limited_clock(s)),
                    ("lm_head", lambda: [lm_head(50257), lm_head(50304)]),
                    ("attention", attention_profiles),
                    ("gpt", lambda: [gpt_profile(12, 768, 12, 1024, 50257, 8),
                                     gpt_profile(12, 768, 12, 1024, 50304, 8),
                                     gpt_profile(24, 1024, 16, 1024, 50257, 8)]),
                    ("gpt_padded_step", lambda: gpt_case("gpt2-small-v50304", 12, 768, 12, 1024,
                                                         50304, 8))]:
        try:
            res[key] = fn()
        except Exception as e:  # noqa: BLE001 (one failing part must not lose the others)
            res[key] = {"error": repr(e)[:400]}
            print(key, "failed:", repr(e)[:400], flush=True)
        save()
    s.stop.set()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
