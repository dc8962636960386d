"""Where a decode step's time goes on a real GPU (run on a machine with a CUDA GPU and PyTorch;
never by tests or CI): the Llama-3-8B-shaped decoder of device_h100_inference.py, one decode step
of B sequences over a KV cache of L tokens, profiled (torch.profiler: every kernel's device time
and count per step), eager and replayed from a CUDA graph, beside the step's CUDA-event time --
so the GEMMs' own bandwidth, the other kernels' time and the per-kernel cost the graph leaves
are each measured, not inferred from totals.
    python3 benchmarks/device_h100_decode_profile.py --out decode_profile.json
"""

from __future__ import annotations

import argparse
import json

import torch
from _cuda import timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)
from device_h100_breakdown import profiled  # noqa: E402
from device_h100_inference import HEAD_DIM, KV_HEADS, LAYERS, VOCAB, Decoder  # noqa: E402

CASES = [(1, 512), (8, 2048), (64, 2048)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="decode_profile.json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    m = Decoder()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "decode": []}
    with torch.no_grad():
        for B, L in CASES:
            cache = [tuple(torch.zeros(B, KV_HEADS, L + 1, HEAD_DIM, device="cuda",
                                       dtype=torch.bfloat16) for _ in range(2))
                     for _ in range(LAYERS)]
            ids = torch.randint(0, VOCAB, (B, 1), device="cuda")
            pos = torch.full((1,), L, device="cuda")

            def step():
                return m.forward(ids, pos, cache, L - 1)

            eager_rows, eager_busy = profiled(step)
            graph = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                step()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(graph):
                step()
            graph_rows, graph_busy = profiled(graph.replay)
            row = {"batch": B, "context": L, "eager_s": timed(step), "graph_s": timed(graph.replay),
                   "eager_busy_us": eager_busy, "graph_busy_us": graph_busy,
                   "eager_kernels": eager_rows, "graph_kernels": graph_rows}
            res["decode"].append(row)
            n = sum(r["calls"] for r in eager_rows if not r["name"].startswith("aten::"))
            print(f"decode B={B} L={L}: eager {row['eager_s'] * 1e3:.2f} ms, graph "
                  f"{row['graph_s'] * 1e3:.2f} ms, kernels/step {n:.0f}, busy eager "
                  f"{eager_busy / 1e3:.2f} ms graph {graph_busy / 1e3:.2f} ms", flush=True)
            for r in eager_rows[:10]:
                print(f"   {r['us']:9.1f} us  x{r['calls']:5.0f}  {r['name'][:90]}", flush=True)
            del cache, graph
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
