"""Real-GPU microbenchmarks of the element-wise kernels eager PyTorch runs in a GPT training step
(run on a machine with a CUDA GPU and PyTorch; never by tests or CI): each op alone, at the
token x width shapes of GPT-2 small and a 1.3B model, timed as kernels (10 calls captured in a
CUDA graph, the replay timed with CUDA events: no Python issue cost) and as eager calls (back to
back from Python), with the bytes each must move -- so a kernel kind's achieved bandwidth and
an op's eager floor are measured here, not fitted to the steps they are checked on.

    python3 benchmarks/device_h100_kernels.py --out kernels.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

SHAPES = [(8, 1024, 768, 12, 50304), (4, 2048, 2048, 16, 50304)]  # (batch, seq, h, heads, V)


def kernel_us(fn, calls: int = 10) -> float:
    """Median per-call time of fn replayed from a CUDA graph of `calls` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(15):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(out)


def eager_us(fn, calls: int = 50) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / calls


def ops(b: int, s: int, h: int, a: int, V: int) -> list[tuple[str, str, float, object]]:
    """(name, kind, bytes moved, fn) for one shape."""
    T, d, f = b * s, h // a, 4 * h
    bf, f32 = torch.bfloat16, torch.float32
    r = lambda *sh, dt=bf: torch.randn(*sh, device="cuda", dtype=dt)  # noqa: E731
    x16, y16, x32, y32 = r(T, h), r(T, h), r(T, h, dt=f32), r(T, h, dt=f32)
    qkv = r(b, s, 3 * h)
    heads = r(b, a, s, d)
    dq, dk, dv = r(b, a, s, d), r(b, a, s, d), r(b, a, s, d)
    g16, u16 = r(T, f), r(T, f)
    w, bias = torch.ones(h, device="cuda"), torch.zeros(h, device="cuda")
    ln_out, mean, rstd = torch.ops.aten.native_layer_norm(x32, (h,), w, bias, 1e-5)
    logits = r(T, V, dt=f32)
    lsm = torch.log_softmax(logits, -1)
    big16 = r(T, V)
    e2, e4 = 2, 4
    return [
        ("copy bf16", "copy", 2 * T * h * e2, lambda: y16.copy_(x16)),
        ("qkv permute .contiguous()", "permute",
         2 * T * 3 * h * e2, lambda: qkv.view(b, s, 3, a, d).permute(2, 0, 3, 1, 4).contiguous()),
        ("q from qkv .contiguous()", "permute", 2 * T * h * e2,
         lambda: qkv.view(b, s, 3, a, d)[:, :, 0].transpose(1, 2).contiguous()),
        ("attn out transpose+reshape", "permute", 2 * T * h * e2,
         lambda: heads.transpose(1, 2).reshape(b, s, h)),
        ("stack dq dk dv", "cat", 2 * 3 * T * h * e2, lambda: torch.stack((dq, dk, dv))),
        ("cast fp32->bf16", "cast", T * h * (e4 + e2), lambda: x32.to(bf)),
        ("cast bf16->fp32", "cast", T * h * (e2 + e4), lambda: x16.to(f32)),
        ("add fp32+fp32", "add", 3 * T * h * e4, lambda: x32 + y32),
        ("add fp32+bf16", "add", T * h * (2 * e4 + e2), lambda: x32 + x16),
        ("gelu bf16", "gelu", 2 * T * f * e2, lambda: F.gelu(g16)),
        ("gelu backward bf16", "gelu", 3 * T * f * e2,
         lambda: torch.ops.aten.gelu_backward(u16, g16)),
        ("layer_norm fp32", "layernorm", 2 * T * h * e4,
         lambda: torch.ops.aten.native_layer_norm(x32, (h,), w, bias, 1e-5)),
        ("layer_norm backward fp32", "layernorm", 3 * T * h * e4,
         lambda: torch.ops.aten.native_layer_norm_backward(y32, x32, (h,), mean, rstd, w, bias,
                                                           (True, True, True))),
        ("bias grad: sum over tokens bf16", "reduce", T * f * e2, lambda: g16.sum(0)),
        ("log_softmax fp32", "softmax", 2 * T * V * e4, lambda: torch.log_softmax(logits, -1)),
        ("log_softmax backward fp32", "softmax", 3 * T * V * e4,
         lambda: torch.ops.aten._log_softmax_backward_data(lsm, lsm, -1, f32)),
        ("fill fp32 logits-sized", "fill", T * V * e4, lambda: logits.zero_()),
        ("cast logits bf16->fp32", "cast", T * V * (e2 + e4), lambda: big16.float()),
    ]


def adamw(n_params: int) -> dict:
    """One fused AdamW step over n_params fp32 parameters in 12 tensors (eager: a few big
    multi-tensor kernels). Bytes: read param, grad, m, v; write param, m, v (28 B/param)."""
    ps = [torch.zeros(n_params // 12, device="cuda", requires_grad=True) for _ in range(12)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-4, fused=True)
    t = eager_us(opt.step, calls=20)
    return {"name": f"fused AdamW step, {n_params / 1e6:.0f}M fp32 params", "kind": "optimizer",
            "bytes": 28 * n_params, "eager_us": t, "GBps": 28 * n_params / t / 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="kernels.json")
    args = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for shape in SHAPES:
        for name, kind, nbytes, fn in ops(*shape):
            row = {"shape": dict(zip(("batch", "seq", "hidden", "heads", "vocab"), shape)),
                   "name": name, "kind": kind, "bytes": nbytes}
            try:
                row["kernel_us"] = kernel_us(fn)
                row["eager_us"] = eager_us(fn)
                row["GBps"] = nbytes / row["kernel_us"] / 1e3
            except Exception as e:  # noqa: BLE001 (one op that cannot be captured: say so)
                row["error"] = repr(e)[:300]
            res["rows"].append(row)
            print(f"{shape[2]:5d} {name:34s} {row.get('kernel_us', float('nan')):9.1f} us "
                  f"(eager {row.get('eager_us', float('nan')):8.1f}) "
                  f"{row.get('GBps', float('nan')):7.0f} GB/s {row.get('error', '')}", flush=True)
            torch.cuda.empty_cache()
    for n in (124_000_000, 1_300_000_000):
        res["rows"].append(adamw(n))
        print(res["rows"][-1], flush=True)
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
