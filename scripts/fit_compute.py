"""Fit the two global efficiency parameters of the hierarchy compute model and print the fit.

    python scripts/fit_compute.py

Sources (accelsim/perf/published.py has the numbers and full citations):
  * large-GEMM throughput: cuBLAS SGEMM 8192^3 on V100 (yhgon/benchmark), the maximum
    achievable BF16 matmul on A100 and H100 (stas00/ml-engineering MAMF table), FP8 GEMM on
    H800 = H100 compute (deepseek-ai/DeepGEMM PR #81);
  * ResNet-50 training throughput on one V100 / A100 at every precision NVIDIA publishes
    (DeepLearningExamples PyTorch tables, pytorch-21.03), as run: fusion off (PyTorch eager),
    NHWC tensors for AMP and NCHW for FP32/TF32 (configs.yml).

Physically: ``array_efficiency`` is the fraction of peak MAC issue a large GEMM sustains (what
large, compute-bound GEMMs measure); ``memory_efficiency`` the fraction of peak HBM bandwidth a
streaming kernel reaches (what the memory-bound element-wise layers of ResNet-50 measure). Each
is fitted where it dominates: the first to the GEMM cases, then the second to the ResNet-50
cases, minimizing the root-mean-square log error. Never per case.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def predict(case, eff):
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands.predict import predict_step
    from accelsim.perf.gemm import gemm_time
    from accelsim.workload import load_workload

    system = load_system(ROOT / "arch_configs" / f"{case.system}.toml")
    if case.kind == "gemm":
        prec = get_scheme(case.scheme).compute_precision
        return gemm_time(system, case.m, case.n, case.k, prec, efficiency=eff).tflops
    wl = load_workload(ROOT / "workloads" / "resnet50.toml")
    return predict_step(system, wl, case.batch, case.scheme, fusion=case.fusion == "on",
                        layout=case.layout, efficiency=eff)["samples_per_s"]


def rms_log(cases, eff):
    errs = [math.log(predict(c, eff) / c.value) for c in cases]
    return math.sqrt(sum(e * e for e in errs) / len(errs))


def main() -> int:
    from accelsim.perf.gemm import FITTED, Efficiency
    from accelsim.perf.published import GEMM_CASES, RESNET50_CASES

    rn = [c for c in RESNET50_CASES if c.single_chip]
    grid_a = [round(0.60 + 0.01 * i, 2) for i in range(41)]
    best_a = min(grid_a, key=lambda a: rms_log(GEMM_CASES, Efficiency(a, 1.0)))
    grid_m = [round(0.50 + 0.02 * i, 2) for i in range(26)]
    best_m = min(grid_m, key=lambda m: rms_log(rn, Efficiency(best_a, m)))
    fit = Efficiency(array_efficiency=best_a, memory_efficiency=best_m)
    print(f"fit: array_efficiency = {fit.array_efficiency:.2f} (GEMM cases, rms log error "
          f"{rms_log(GEMM_CASES, fit):.3f}), memory_efficiency = {fit.memory_efficiency:.2f} "
          f"(ResNet-50 cases, rms log error {rms_log(rn, fit):.3f})")
    print(f"in the code (accelsim.perf.gemm.FITTED): {FITTED}")
    for c in (*GEMM_CASES, *rn):
        p = predict(c, fit)
        print(f"  {c.case:40s} published {c.value:8.1f} {c.unit:6s} predicted {p:8.1f} "
              f"({100 * (p / c.value - 1):+.1f} %)")
    if fit != FITTED:
        print("NOTE: FITTED differs from this fit; update accelsim/perf/gemm.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
