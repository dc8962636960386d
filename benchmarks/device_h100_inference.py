"""Real-GPU reference for ``accelsim infer`` (run on a machine with a CUDA GPU and PyTorch; never
by tests or CI): a Llama-3-8B-shaped decoder (32 layers, hidden 4096, 32 query / 8 KV heads of
128, SwiGLU 14336, RMSNorm, rotary, vocabulary 128256; random bf16 weights) timed for

* the prefill of one prompt of T tokens (flash SDPA, causal), and
* one decode step of B sequences over a KV cache of L tokens (SDPA over the cache, GQA),
  eager and captured in a CUDA graph (what vLLM and TensorRT-LLM run),

with CUDA events (median of repeats after warm-up). ``--compare`` prints accelsim's prediction
beside each measurement (``accelsim infer --system h100-sxm --model llama3-8b --scheme bf16``).

    PYTHONPATH=. python3 benchmarks/device_h100_inference.py --out results.json --compare
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from _cuda import timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 32, 4096, 32, 8, 128, 14336, 128256
PROMPTS = (128, 512, 2048, 8192)
DECODE = [(b, L) for b in (1, 8, 32, 64, 128) for L in (512, 2048, 8192)]
KV_LIMIT_BYTES = 48 * 2 ** 30  # leave room for the 16 GB of weights on an 80 GB GPU


class Decoder:
    def __init__(self) -> None:
        g = torch.Generator(device="cuda").manual_seed(0)

        def w(*shape):
            return (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)
                    * shape[-1] ** -0.5)

        q = HEADS * HEAD_DIM
        kv = KV_HEADS * HEAD_DIM
        self.layers = [dict(qkv=w(q + 2 * kv, HIDDEN), o=w(HIDDEN, q),
                            gate_up=w(2 * FFN, HIDDEN), down=w(HIDDEN, FFN),
                            n1=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16),
                            n2=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16))
                       for _ in range(LAYERS)]
        self.embed = w(VOCAB, HIDDEN)
        self.head = w(VOCAB, HIDDEN)
        self.norm = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)

    @staticmethod
    def rotary(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        inv = 1.0 / (500000 ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos().to(x.dtype)[:, None], ang.sin().to(x.dtype)[:, None]  # [T, 1, d/2]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, cache=None, ctx: int = 0):
        """ids [B, T]; prefill when cache is None, else one decode step writing position ctx."""
        B, T = ids.shape
        x = self.embed[ids]
        for i, p in enumerate(self.layers):
            h = F.rms_norm(x, (HIDDEN,), p["n1"])
            qkv = h @ p["qkv"].T
            q, k, v = qkv.split((HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM), -1)
            q = self.rotary(q.view(B, T, HEADS, HEAD_DIM), pos).transpose(1, 2)
            k = self.rotary(k.view(B, T, KV_HEADS, HEAD_DIM), pos).transpose(1, 2)
            v = v.view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            if cache is None:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                kc, vc = cache[i]
                kc[:, :, ctx:ctx + 1] = k
                vc[:, :, ctx:ctx + 1] = v
                a = F.scaled_dot_product_attention(q, kc[:, :, :ctx + 1], vc[:, :, :ctx + 1],
                                                   enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B, T, -1) @ p["o"].T
            h = F.rms_norm(x, (HIDDEN,), p["n2"])
            gate, up = (h @ p["gate_up"].T).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ p["down"].T
        x = F.rms_norm(x[:, -1], (HIDDEN,), self.norm)
        return x @ self.head.T


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="inference_results.json")
    ap.add_argument("--compare", action="store_true", help="print accelsim's predictions too")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    m = Decoder()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "prefill": [], "decode": []}
    with torch.no_grad():
        for T in PROMPTS:
            ids = torch.randint(0, VOCAB, (1, T), device="cuda")
            pos = torch.arange(T, device="cuda")
            t = timed(lambda: m.forward(ids, pos), repeats=10)
            res["prefill"].append({"batch": 1, "prompt": T, "time_s": t})
            print(f"prefill T={T}: {t * 1e3:.2f} ms", flush=True)
        for B, L in DECODE:
            kv_bytes = B * (L + 1) * LAYERS * 2 * KV_HEADS * HEAD_DIM * 2
            if kv_bytes > KV_LIMIT_BYTES:
                continue
            cache = [tuple(torch.zeros(B, KV_HEADS, L + 1, HEAD_DIM, device="cuda",
                                       dtype=torch.bfloat16) for _ in range(2)) for _ in range(LAYERS)]
            ids = torch.randint(0, VOCAB, (B, 1), device="cuda")
            pos = torch.full((1,), L, device="cuda")
            eager = timed(lambda: m.forward(ids, pos, cache, L - 1))
            graph = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                m.forward(ids, pos, cache, L - 1)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(graph):
                m.forward(ids, pos, cache, L - 1)
            graphed = timed(graph.replay)
            res["decode"].append({"batch": B, "context": L, "eager_s": eager, "graph_s": graphed})
            print(f"decode B={B} L={L}: eager {eager * 1e3:.2f} ms, graph {graphed * 1e3:.2f} ms",
                  flush=True)
            del cache, graph
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if args.compare:
        from accelsim.arch import build_system
        from accelsim.engine.decoder import Decoder as D
        from accelsim.engine.inference import InferencePlan, infer
        from accelsim.workload.transformer import PRESETS

        sysm = build_system("h100-sxm")
        d = D(PRESETS["llama3-8b"], 8192, flash_attention=True)
        for r in res["prefill"]:
            p = infer(d, sysm, InferencePlan(), "bf16", 1, prompt=r["prompt"]).prefill.time_s
            print(f"prefill T={r['prompt']}: measured {r['time_s'] * 1e3:.2f} ms, accelsim "
                  f"{p * 1e3:.2f} ms ({p / r['time_s'] - 1:+.1%})")
        for r in res["decode"]:
            p = infer(d, sysm, InferencePlan(), "bf16", r["batch"],
                      context=r["context"]).decode.time_s
            print(f"decode B={r['batch']} L={r['context']}: graph {r['graph_s'] * 1e3:.2f} ms, "
                  f"accelsim {p * 1e3:.2f} ms ({p / r['graph_s'] - 1:+.1%})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
