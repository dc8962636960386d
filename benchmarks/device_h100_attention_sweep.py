"""Real-GPU reference for the attention kernel curves (run on a machine with a CUDA GPU and
PyTorch; never by tests or CI): PyTorch SDPA's cuDNN and FlashAttention-2 backends, bf16, causal
(and non-causal at 16k), head dim 64 and 128, sequence 512 to 32k, in the papers' setting (batch
x sequence = 16k tokens, heads x head dim = 2048; batch 1 beyond 16k).

    python3 benchmarks/device_h100_attention_sweep.py > rows.jsonl

One JSON list per case: [backend, head_dim, seq, causal, batch, forward us, backward us,
forward TFLOPS, backward TFLOPS]; times are medians of 10 CUDA-event-timed calls after 3
warm-ups; the backward is ``torch.autograd.grad`` of one forward (no accumulation into leaf
gradients) less the forward. accelsim/data/h100_device/attention_sweep.json holds one run;
tests/test_engine_attention_kernels.py compares the kernel model with it.
"""

import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(f, n: int = 10) -> float:
    for _ in range(3):
        f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(n):
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[n // 2] / 1e3


def main() -> None:
    sdpa = F.scaled_dot_product_attention
    for backend, name in ((SDPBackend.CUDNN_ATTENTION, "cudnn"),
                          (SDPBackend.FLASH_ATTENTION, "fa2")):
        for d in (64, 128):
            for s in (512, 1024, 2048, 4096, 8192, 16384, 32768):
                for causal in ((True, False) if s == 16384 else (True,)):
                    b, h = max(1, 16384 // s), 2048 // d
                    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16,
                                           requires_grad=True) for _ in range(3))
                    g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                    with sdpa_kernel(backend):
                        fw = timed(lambda: sdpa(q, k, v, is_causal=causal))
                        fb = timed(lambda: torch.autograd.grad(
                            sdpa(q, k, v, is_causal=causal), (q, k, v), g))
                    flops = 4 * b * h * s * s * d / (2 if causal else 1)
                    print(json.dumps([name, d, s, causal, b, round(fw * 1e6, 1),
                                      round((fb - fw) * 1e6, 1), round(flops / fw / 1e12),
                                      round(2.5 * flops / (fb - fw) / 1e12)]))


if __name__ == "__main__":
    main()
