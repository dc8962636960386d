"""Real-GPU reference for the power of whole steps (run on a machine with a CUDA GPU, PyTorch and
nvidia-ml-py; never by tests or CI): eager GPT training steps and Llama-3-8B-shaped prefill and
CUDA-graph decode steps, each repeated for 3 s, timed and sampled (SM clock, board power) over
the last 1.5 s -- what the limiter's ~1 s average sees when kernels of different power alternate.

    python3 benchmarks/device_h100_step_power.py --out step_power.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from device_h100_inference import Decoder  # noqa: E402
from device_h100_power import Sampler  # noqa: E402
from device_h100_transformer import GPTS, gpt_training  # noqa: E402

RUN_S, WINDOW_S = 3.0, 1.5


def held(s: Sampler, fn) -> dict:
    """Call fn back to back for RUN_S; the mean call time, clock and power of the last WINDOW_S."""
    fn()
    torch.cuda.synchronize()
    marks, end = [], time.monotonic() + RUN_S
    while time.monotonic() < end:
        fn()
        torch.cuda.synchronize()
        marks.append(time.monotonic())
    last = [t for t in marks if t > marks[-1] - WINDOW_S]
    step = (last[-1] - last[0]) / max(len(last) - 1, 1)
    return {"step_s": step, "steps": len(last), **s.window(last[0], last[-1])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="step_power.json")
    args = ap.parse_args()
    s = Sampler()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "nvml": s.info(),
           "run_s": RUN_S, "window_s": WINDOW_S, "gpt": [], "inference": []}
    s.start()
    for name, layers, h, a, seq, vocab, batch in GPTS:
        model, opt, step = gpt_training(layers, h, a, seq, vocab, batch)
        row = {"name": name, "layers": layers, "hidden": h, "heads": a, "seq": seq,
               "vocab": vocab, "batch": batch, **held(s, step)}
        res["gpt"].append(row)
        print(row, flush=True)
        del model, opt, step
        torch.cuda.empty_cache()
        time.sleep(2.0)
    torch.backends.cuda.matmul.allow_tf32 = False
    m = Decoder()
    with torch.no_grad():
        ids = torch.randint(0, 128256, (1, 8192), device="cuda")
        pos = torch.arange(8192, device="cuda")
        row = {"phase": "prefill", "batch": 1, "prompt": 8192,
               **held(s, lambda: m.forward(ids, pos))}
        res["inference"].append(row)
        print(row, flush=True)
        time.sleep(2.0)
        B, L = 64, 2048
        cache = [tuple(torch.zeros(B, 8, L + 1, 128, device="cuda", dtype=torch.bfloat16)
                       for _ in range(2)) for _ in range(32)]
        ids = torch.randint(0, 128256, (B, 1), device="cuda")
        pos = torch.full((1,), L, device="cuda")
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            m.forward(ids, pos, cache, L - 1)
        torch.cuda.current_stream().wait_stream(st)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            m.forward(ids, pos, cache, L - 1)
        row = {"phase": "decode (CUDA graph)", "batch": B, "context": L,
               **held(s, graph.replay)}
        res["inference"].append(row)
        print(row, flush=True)
    s.stop.set()
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
