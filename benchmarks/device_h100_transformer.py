"""Real-GPU reference for the engine's transformer path (run on a machine with a CUDA GPU and
PyTorch; never by tests or CI): causal flash attention (PyTorch SDPA) forward and forward +
backward, and eager GPT training steps (bf16 autocast, fused AdamW) with their peak memory.

    python3 benchmarks/device_h100_transformer.py --out results.json

Compare with ``accelsim op attention ... --flash-attention --json`` and ``accelsim predict
--workload FILE --batch B --scheme bf16 --optimizer adamw --memory-reserve 0 --json`` (docs/engine.md
records one run). Times are medians of CUDA-event-timed repeats after warm-up.
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F
from _cuda import timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)
from torch import nn

ATTENTION = [  # (batch, heads, seq, head_dim)
    (4, 32, 2048, 128),
    (2, 16, 1024, 64),
    (8, 12, 1024, 64),
    (1, 32, 8192, 128),
    (16, 16, 512, 64),
]
GPTS = [  # (name, layers, hidden, heads, seq, vocab, batch)
    ("gpt2-small", 12, 768, 12, 1024, 50257, 8),
    ("gpt-350m", 24, 1024, 16, 1024, 50257, 8),
    ("gpt2-small-b16", 12, 768, 12, 1024, 50257, 16),
    ("gpt-1.3b", 24, 2048, 16, 2048, 50257, 4),
]


def attention_case(b: int, h: int, s: int, d: int) -> dict:
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)

    def fwd():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def fwd_bwd():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(g)

    return {"batch": b, "heads": h, "seq": s, "head_dim": d, "fwd_s": timed(fwd, warmup=5),
            "fwd_bwd_s": timed(fwd_bwd, warmup=5)}


class Block(nn.Module):
    def __init__(self, h: int, a: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.a = a

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.a, h // self.a).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, layers: int, h: int, a: int, s: int, vocab: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(s, h)
        self.blocks = nn.ModuleList(Block(h, a) for _ in range(layers))
        self.ln = nn.LayerNorm(h)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.wte.weight.t()  # tied LM head


def gpt_training(layers, h, a, s, vocab, batch):
    """(model, optimizer, step): one eager training step (bf16 autocast, fused AdamW)."""
    torch.manual_seed(0)
    model = Gpt(layers, h, a, s, vocab).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    idx = torch.randint(0, vocab, (batch, s), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx)
            loss = F.cross_entropy(logits.float().view(-1, vocab), idx.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, step


def gpt_case(name, layers, h, a, s, vocab, batch) -> dict:
    model, opt, step = gpt_training(layers, h, a, s, vocab, batch)
    torch.cuda.reset_peak_memory_stats()
    t = timed(step, repeats=10, warmup=3)
    n = sum(p.numel() for p in model.parameters())
    out = {"name": name, "layers": layers, "hidden": h, "heads": a, "seq": s, "vocab": vocab,
           "batch": batch, "params": n, "step_s": t,
           "peak_memory_GiB": torch.cuda.max_memory_allocated() / 2**30}
    del model, opt
    torch.cuda.empty_cache()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results.json")
    args = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "attention": [attention_case(*c) for c in ATTENTION],
           "gpt": []}
    for c in GPTS:
        try:
            res["gpt"].append(gpt_case(*c))
        except torch.OutOfMemoryError as e:  # one case too large must not lose the rest
            res["gpt"].append({"name": c[0], "error": repr(e)[:300]})
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    return 0 if all(math.isfinite(g.get("step_s", math.nan)) for g in res["gpt"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
