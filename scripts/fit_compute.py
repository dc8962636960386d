"""Fit the two global efficiency parameters of the hierarchy compute model and print the fit.

    python scripts/fit_compute.py [--loo]     # --loo: leave-one-out refits (~1-2 min)

Sources (accelsim/perf/published.py has the numbers and full citations):
  * large-GEMM throughput: cuBLAS SGEMM 8192^3 on V100 (yhgon/benchmark), the maximum
    achievable BF16 matmul on A100 and H100 (stas00/ml-engineering MAMF table), FP8 GEMM on
    H800 = H100 compute (deepseek-ai/DeepGEMM PR #81);
  * ResNet-50 training throughput on one V100 / A100 at every precision NVIDIA publishes
    (DeepLearningExamples PyTorch tables, pytorch-21.03), as run: fusion off (PyTorch eager),
    NHWC tensors for AMP and NCHW for FP32/TF32 (configs.yml).

  * published GEMM sweeps, small to large squares (V100 FP32/FP16 torch.mm, H100 BF16 XLA
    table), for the per-kernel fixed time.

Physically: ``array_efficiency`` is the fraction of peak MAC issue a large GEMM sustains (what
large, compute-bound GEMMs measure); ``kernel_launch_us`` (a chip key, the same in every GPU
preset) the fixed time of every kernel: launch, pipeline fill and epilogue (what the small
GEMMs of the sweeps measure: the smallest GEMM of XLA's H100 table, 256x512x256, takes 5.9 us);
``memory_efficiency`` the fraction of peak HBM bandwidth a streaming kernel reaches (what the
memory-bound element-wise layers of ResNet-50 measure). Each is fitted where it dominates, in
that order, minimizing the root-mean-square log error. Never per case.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def predict(case, eff, launch_us=None):
    """The model's value for a published case; ``launch_us`` None: the preset's."""
    import dataclasses

    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.run import predict_step
    from accelsim.perf.gemm import gemm_time
    from accelsim.workload import load_workload

    system = load_system(ROOT / "arch_configs" / f"{case.system}.toml").with_boost_clock()
    if launch_us is not None:
        system = dataclasses.replace(system, chip=dataclasses.replace(
            system.chip, kernel_launch_s=launch_us * 1e-6))
    if case.kind == "gemm":
        prec = get_scheme(case.scheme).compute_precision
        return gemm_time(system, case.m, case.n, case.k, prec, efficiency=eff).tflops
    wl = load_workload(ROOT / "workloads" / "resnet50.toml")
    return predict_step(system, wl, case.batch, case.scheme, fusion=case.fusion == "on",
                        layout=case.layout, efficiency=eff)["samples_per_s"]


_CACHE: dict = {}


def predict_cached(case, eff, launch_us=None):
    """:func:`predict`, memoized on (case, efficiency, launch): the leave-one-out refits
    evaluate the same grid points many times."""
    key = (case, eff, launch_us)
    if key not in _CACHE:
        _CACHE[key] = predict(case, eff, launch_us)
    return _CACHE[key]


def rms_log(cases, eff, launch_us=None):
    errs = [math.log(predict_cached(c, eff, launch_us) / c.value) for c in cases]
    return math.sqrt(sum(e * e for e in errs) / len(errs))


GRID_ARRAY = tuple(round(0.60 + 0.01 * i, 2) for i in range(41))
GRID_LAUNCH_US = tuple(0.5 * i for i in range(2, 21))  # 1 .. 10 us
GRID_MEMORY = tuple(round(0.50 + 0.02 * i, 2) for i in range(26))


def fit(array_cases, launch_cases, memory_cases, *, grid_memory=GRID_MEMORY):
    """The staged fit: (array_efficiency, kernel_launch_us, memory_efficiency), each on the
    cases where it dominates, minimizing the RMS log error."""
    from accelsim.perf.gemm import STREAM_EFFICIENCY, Efficiency

    best_a = min(GRID_ARRAY, key=lambda a: rms_log(array_cases, Efficiency(a, 1.0, STREAM_EFFICIENCY)))
    best_l = min(GRID_LAUNCH_US, key=lambda lu: rms_log(launch_cases, Efficiency(best_a, 1.0, STREAM_EFFICIENCY), lu))
    best_m = min(grid_memory, key=lambda m: rms_log(memory_cases, Efficiency(best_a, m, STREAM_EFFICIENCY), best_l))
    return best_a, best_l, best_m


def leave_one_out(*, grid_memory=GRID_MEMORY):
    """Refit without each fit row and predict it: [(case, published, in-fit prediction,
    left-out prediction, refit (a, launch_us, m))]. Every other row keeps its stage."""
    from accelsim.perf.gemm import STREAM_EFFICIENCY, Efficiency
    from accelsim.perf.published import FIT_ARRAY_CASES, FIT_LAUNCH_CASES, FIT_MEMORY_CASES

    full = fit(FIT_ARRAY_CASES, FIT_LAUNCH_CASES, FIT_MEMORY_CASES, grid_memory=grid_memory)
    out = []
    for c in dict.fromkeys((*FIT_LAUNCH_CASES, *FIT_MEMORY_CASES)):
        refit = fit(*([x for x in cases if x != c] for cases in
                      (FIT_ARRAY_CASES, FIT_LAUNCH_CASES, FIT_MEMORY_CASES)),
                    grid_memory=grid_memory)
        a, lu, m = refit
        out.append((c, c.value, predict_cached(c, Efficiency(full[0], full[2], STREAM_EFFICIENCY), full[1]),
                     predict_cached(c, Efficiency(a, m, STREAM_EFFICIENCY), lu), refit))
    return out


def main() -> int:
    from accelsim.arch.config import load_system
    from accelsim.perf.gemm import FITTED, STREAM_EFFICIENCY, Efficiency
    from accelsim.perf.published import FIT_ARRAY_CASES, FIT_LAUNCH_CASES, FIT_MEMORY_CASES

    for what, cases in (("array_efficiency", FIT_ARRAY_CASES),
                        ("kernel_launch_us", FIT_LAUNCH_CASES),
                        ("memory_efficiency", FIT_MEMORY_CASES)):
        print(f"fit rows for {what} ({len(cases)}; label 'fit' in the reports): "
              + "; ".join(c.case for c in cases))
    best_a, best_l, best_m = fit(FIT_ARRAY_CASES, FIT_LAUNCH_CASES, FIT_MEMORY_CASES)
    rn, gemms = FIT_MEMORY_CASES, FIT_LAUNCH_CASES
    fit_ = Efficiency(array_efficiency=best_a, memory_efficiency=best_m, stream_efficiency=STREAM_EFFICIENCY)
    print(f"fit: array_efficiency = {fit_.array_efficiency:.2f} (large GEMM cases, rms log error "
          f"{rms_log(FIT_ARRAY_CASES, fit_, best_l):.3f}), kernel_launch_us = {best_l:g} (all GEMM "
          f"cases and sweeps, rms log error {rms_log(gemms, fit_, best_l):.3f}), "
          f"memory_efficiency = {fit_.memory_efficiency:.2f} (ResNet-50 cases, rms log error "
          f"{rms_log(rn, fit_, best_l):.3f})")
    presets = {c.system: load_system(ROOT / "arch_configs" / f"{c.system}.toml").chip
               .kernel_launch_s * 1e6 for c in (*gemms, *rn)}
    print(f"in the code (accelsim.perf.gemm.FITTED): {FITTED}; kernel_launch_us in the presets: "
          + ", ".join(f"{k} {v:g}" for k, v in presets.items()))
    for c in (*gemms, *rn):
        p = predict_cached(c, fit_, best_l)
        print(f"  {c.case:40s} published {c.value:8.1f} {c.unit:6s} predicted {p:8.1f} "
              f"({100 * (p / c.value - 1):+.1f} %)")
    if fit_ != FITTED:
        print("NOTE: FITTED differs from this fit; update accelsim/perf/gemm.py")
    if any(abs(v - best_l) > 1e-9 for v in presets.values()):
        print("NOTE: a preset's kernel_launch_us differs from this fit; update arch_configs/")
    if "--loo" in sys.argv[1:]:
        print("\nleave-one-out: refit all three stages without each fit row, predict it")
        for c, pub, p_in, p_out, (a, lu, m) in leave_one_out():
            print(f"  {c.case:40s} published {pub:8.1f} in fit {100 * (p_in / pub - 1):+6.1f} % "
                  f"left out {100 * (p_out / pub - 1):+6.1f} %  (refit a={a:.2f}, "
                  f"launch={lu:g} us, m={m:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
