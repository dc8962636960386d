"""Speed of the LLM model (issue 15 item 8), measured side by side in one run.

    python benchmarks/bench_llm.py [--workers 2] [--repeat 3]

Every time is printed as min / median / max over ``--repeat`` runs (the machine may be shared).

1. one prediction of a 1T-parameter GPT (Narayanan's 1008B: 128 layers, hidden 25600) on 512
   H100s (tp 8 x pp 64, dp 1), cold (empty GEMM cache) and warm; target < 1 s;
2. the same as the ``accelsim llm --json`` command (Python start-up and imports included);
3. a plan search for GPT-175B on 512 H100s (>= 1,000 plans), serially and with a process pool;
   target < 60 s on 2 cores;
4. inference (``accelsim infer``): one DeepSeek-V3 (MoE + MLA) training prediction on 2048
   GPUs, a Llama-3-70B request of 2048 output tokens (every decode step timed), and the
   ``--serve`` grid (9 batches x 3 contexts); target < 1 s each.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from _machine import cpu_model, ratios, spread, timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from accelsim.arch import build_system
    from accelsim.engine import Plan, predict
    from accelsim.engine.graph import gemm_timed as _gemm_s
    from accelsim.llm.search import search, search_spec
    from accelsim.workload.gpt import GptConfig

    h100_path = REPO / "arch_configs" / "dgx-h100.toml"
    h100 = build_system(h100_path)
    one_t = GptConfig(layers=128, hidden=25600, heads=160, seq=2048, vocab=51200)
    plan = Plan(tp=8, pp=64, dp=1, micro_batch=1, global_batch=512, recompute="full")
    rows = []
    rep = args.repeat

    def cold():
        _gemm_s.cache_clear()
        return predict(one_t, plan, "bf16", h100)

    r = cold()
    t_cold = timed(cold, rep)
    rows.append(("predict 1T params on 512 GPUs, cold", t_cold,
                 f"{r.model.n_params / 1e12:.2f}T params, {r.tflops_per_gpu:.0f} TFLOPS/GPU"))
    rows.append(("same, warm GEMM cache", timed(lambda: predict(one_t, plan, "bf16", h100), rep),
                 ""))
    cmd = [sys.executable, "-m", "accelsim.cli", "llm", "--system", str(h100_path),
           "--layers", "128", "--hidden", "25600", "--heads", "160", "--seq", "2048",
           "--vocab", "51200", "--tp", "8", "--pp", "64", "--dp", "1", "--micro-batch", "1",
           "--global-batch", "512", "--recompute", "full", "--scheme", "bf16", "--json"]
    rows.append(("accelsim llm --json (process incl. imports)",
                 timed(lambda: subprocess.run(cmd, check=True, capture_output=True, cwd=REPO,
                                              env={**os.environ, "PYTHONPATH": str(REPO)}), rep),
                 ""))
    g175 = GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
    n = search_spec(g175, str(h100_path), 512, 1536, "bf16").n_points
    ser, par = [], []
    for _ in range(rep):  # alternately, so both see the same machine load
        _gemm_s.cache_clear()
        ser += timed(lambda: search(g175, str(h100_path), 512, 1536, "bf16",
                                    executor="serial"), 1)
        _gemm_s.cache_clear()
        par += timed(lambda: search(g175, str(h100_path), 512, 1536, "bf16", executor="process",
                                    workers=args.workers), 1)
    tab = search(g175, str(h100_path), 512, 1536, "bf16", executor="serial")
    ok = int((tab.status == "ok").sum())
    rows.append(("plan search GPT-175B, 512 GPUs, serial", ser,
                 f"{n:,} plans ({ok:,} fit), median {n / statistics.median(ser):,.0f} plans/s"))
    rows.append((f"same, {args.workers} worker processes (incl. start-up)", par,
                 f"{spread(ratios(ser, par), '{:.2f}')}x serial (per-run ratios)"))
    from accelsim.engine.decoder import Decoder
    from accelsim.engine.inference import InferencePlan, infer
    from accelsim.workload.transformer import PRESETS

    h800 = build_system(REPO / "arch_configs" / "dgx-h800.toml")
    ds = Decoder(PRESETS["deepseek-v3"], 4096, flash_attention=True)
    ds_plan = Plan(tp=1, pp=16, dp=128, ep=64, micro_batch=1, global_batch=15360, zero=1,
                   overlap_moe_comm=True)
    rows.append(("predict DeepSeek-V3 on 2048 H800 (MoE, MLA, ep 64)",
                 timed(lambda: predict(ds, ds_plan, "te-fp8", h800), rep), ""))
    l70 = Decoder(PRESETS["llama3-70b"], 8192, flash_attention=True)
    ip = InferencePlan(tp=8)
    rows.append(("infer Llama-3-70B tp 8: prompt 2048 + 2048 output tokens",
                 timed(lambda: infer(l70, h100, ip, "fp8", 32, prompt=2048,
                                     output_tokens=2048), rep), "every decode step timed"))

    def serve():
        for ctx in (1024, 4096, 16384):
            for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                infer(l70, h100, ip, "fp8", b, context=ctx)

    rows.append(("infer --serve grid, 27 points", timed(serve, rep), ""))
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    w = max(len(x[0]) for x in rows)
    print(f"\n{'benchmark':<{w}}  {'seconds, min / median / max of ' + str(rep):>34}  notes")
    for name, secs, note in rows:
        print(f"{name:<{w}}  {spread(secs):>34}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
