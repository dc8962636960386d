"""Validate the compute model against published GPU measurements; write the report.

    python scripts/validate_compute.py            # writes reports/compute_validation.{csv,md}

Every case of :mod:`accelsim.perf.published` (sources there) is predicted with the fitted
global parameters (:data:`accelsim.perf.gemm.FITTED`, from ``scripts/fit_compute.py``) and
compared: error per case, target within 15 % for every single-chip case. ResNet-50 is predicted
as measured (PyTorch eager: fusion off; cuDNN benchmark mode: Winograd where the model finds it
faster) and also with fusion on, and with Winograd off. A GEMM-size sweep (squares
256..16384) shows the size trend and what bounds each size.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 0.15
#: Cases the model is known to get wrong, with the likely cause (reported, never tuned away).
LIKELY_CAUSE = {
    "DGX A100 ResNet-50 AMP 8x256": "8 GPUs: measured strong scaling is 6.73x one GPU, the "
    "model's about 8x (its NVSwitch all-reduce of the FP16 gradients takes under 1 ms); the loss "
    "is likely the input pipeline (DALI decoding 16,600 images/s) and per-step synchronisation "
    "stragglers, which the model does not have",
}

#: Why published sweep points miss (reported with the sweep table, never tuned away).
SWEEP_CAUSE = {
    "V100 small sizes predicted too fast (FP32 1024, FP16 1024-2048)": "the model lets every SM "
    "run tiles down to the 32x32 array granule with perfect operand reuse inside the tile, so a "
    "small GEMM fills all 80 SMs in balanced waves at full per-SM efficiency; real kernels either "
    "use 128x128-class CTA tiles (a 1024^3 GEMM is then 64 tiles on 80 SMs, 2048^3 is 3.2 "
    "waves, rounded up to 4) or small sliced-K tiles that run each SM below peak. Per-warp "
    "operand reuse and the library's tile menu are not modelled. Tried and not adopted: a "
    "global minimum tile of 64 fixes FP32 1024 (-3 %) and changes no other point, but cuBLAS "
    "ships 32x32 sliced-K SGEMM kernels for small problems, so it would be a fit to one point, "
    "not the library's tile menu; 128 fixes "
    "FP16 2048 (+7 %) but breaks FP32 2048 (-15 %) and H100 512 (-27 %). The fixed per-kernel "
    "time (6 us, fitted to all sweep points) already accounts for H100 512^3, 6.6 us measured",
    "V100 FP16 large sizes (+12 %, 10240: +23 %)": "the global array_efficiency (0.88, fitted on "
    "SGEMM and the A100/H100 BF16/FP8 maxima) is above what V100 tensor cores sustain in this "
    "run (97 of 125 TFLOPS, 78 %): V100 HGEMM is likely held by the 300 W power cap, which "
    "lowers the clock below the 1530 MHz boost the preset uses; 10240^3 drops to 89 TFLOPS in "
    "the same run, which no size effect explains (40 whole waves of 256x128 tiles), a thermal/power "
    "effect the model does not have",
}


def main() -> int:
    import pandas as pd

    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.commands.predict import predict_step
    from accelsim.perf.gemm import FITTED, gemm_time
    from accelsim.perf.published import GEMM_CASES, GEMM_SWEEPS, RESNET50_CASES
    from accelsim.workload import load_workload

    wl = load_workload(ROOT / "workloads" / "resnet50.toml")
    rows = []
    for c in (*GEMM_CASES, *RESNET50_CASES):
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml")
        row = {"case": c.case, "system": c.system, "scheme": c.scheme, "unit": c.unit,
               "published": c.value, "single_chip": c.single_chip}
        if c.kind == "gemm":
            g = gemm_time(system, c.m, c.n, c.k, get_scheme(c.scheme).compute_precision)
            row.update(shape=f"{c.m}x{c.n}x{c.k}", predicted=g.tflops, bound=g.bound,
                       predicted_fusion_on=float("nan"), predicted_winograd_off=float("nan"))
        else:
            off = predict_step(system, wl, c.batch, c.scheme, fusion=False, layout=c.layout)
            on = predict_step(system, wl, c.batch, c.scheme, fusion=True, layout=c.layout)
            now = predict_step(system, wl, c.batch, c.scheme, fusion=False, layout=c.layout,
                               winograd=False)
            row.update(shape=f"batch {c.batch}/GPU, {c.layout.upper()}",
                       predicted=off["samples_per_s"],
                       bound="", predicted_fusion_on=on["samples_per_s"],
                       predicted_winograd_off=now["samples_per_s"])
        row["error_pct"] = 100 * (row["predicted"] / c.value - 1)
        row["within_target"] = abs(row["error_pct"]) <= 100 * TARGET
        row["likely_cause"] = LIKELY_CAUSE.get(c.case, "")
        row["source"] = c.source
        rows.append(row)
    df = pd.DataFrame(rows)
    pub = []
    for c in GEMM_SWEEPS:
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml")
        g = gemm_time(system, c.m, c.n, c.k, get_scheme(c.scheme).compute_precision)
        err = 100 * (g.tflops / c.value - 1)
        pub.append({"case": c.case, "series": c.case.rsplit(" ", 1)[0], "system": c.system,
                    "scheme": c.scheme, "n": c.m, "published": c.value,
                    "predicted": g.tflops, "error_pct": err,
                    "within_target": abs(err) <= 100 * TARGET, "bound": g.bound,
                    "waves": g.waves, "tile": f"{g.tile_m}x{g.tile_n}", "source": c.source})
    pub = pd.DataFrame(pub)
    sweep = []
    for sysname, prec in (("v100-sxm2", "fp16"), ("v100-sxm2", "fp32"), ("a100-sxm", "bf16"),
                          ("a100-sxm", "tf32"), ("h100-sxm", "bf16"), ("h100-sxm", "fp8")):
        system = load_system(ROOT / "arch_configs" / f"{sysname}.toml")
        for n in (256, 512, 1024, 2048, 4096, 8192, 16384):
            g = gemm_time(system, n, n, n, prec)
            sweep.append({"system": sysname, "precision": prec, "n": n, "tflops": g.tflops,
                          "fraction_of_peak": g.flops_per_s / system.chip.peak_flops(prec),
                          "bound": g.bound, "waves": g.waves, "tile": f"{g.tile_m}x{g.tile_n}",
                          "dram_over_compulsory": g.memory_bytes / g.compulsory_bytes})
    sw = pd.DataFrame(sweep)
    out = ROOT / "reports"
    out.mkdir(exist_ok=True)
    df.to_csv(out / "compute_validation.csv", index=False, float_format="%.4g")
    sw.to_csv(out / "compute_gemm_sweep.csv", index=False, float_format="%.4g")
    pub.to_csv(out / "compute_gemm_published_sweep.csv", index=False, float_format="%.4g")
    single = df[df.single_chip]
    lines = [
        "# Compute model vs published GPU measurements",
        "",
        f"Generated by `python scripts/validate_compute.py` with {FITTED} "
        "(fitted by `scripts/fit_compute.py`). Target: every single-chip case within 15 %.",
        f"Single-chip cases within target: {int(single.within_target.sum())} of {len(single)}.",
        "",
        "| case | system | scheme | shape | published | predicted | error | fusion on "
        "| Winograd off | within 15 % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        fon = "" if r.predicted_fusion_on != r.predicted_fusion_on else f"{r.predicted_fusion_on:.0f}"
        woff = ("" if r.predicted_winograd_off != r.predicted_winograd_off
                else f"{r.predicted_winograd_off:.0f}")
        mark = "yes" if r.within_target else ("**no**" if r.single_chip else "no (8 GPUs)")
        lines.append(f"| {r.case} | {r.system} | {r.scheme} | {r.shape} | {r.published:g} "
                     f"{r.unit} | {r.predicted:.1f} | {r.error_pct:+.1f} % | {fon} | {woff} "
                     f"| {mark} |")
    lines += ["", "## Published GEMM sweeps, small to large squares (M = N = K = n)", "",
              f"Points within 15 %: {int(pub.within_target.sum())} of {len(pub)} "
              "(no per-point constant: the sweeps fit only the one global per-kernel time, "
              "chip.kernel_launch_us, in scripts/fit_compute.py).", "",
              "| series | n | published TFLOP/s | predicted | error | bound | waves | tile "
              "| within 15 % |", "|---|---|---|---|---|---|---|---|---|"]
    for r in pub.itertuples():
        lines.append(f"| {r.series} | {r.n} | {r.published:.2f} | {r.predicted:.1f} | "
                     f"{r.error_pct:+.1f} % | {r.bound} | {r.waves} | {r.tile} | "
                     f"{'yes' if r.within_target else '**no**'} |")
    lines += ["", "Trend (throughput of the smallest over the largest size of each series):", ""]
    for name, grp in pub.groupby("series", sort=False):
        lo, hi = grp.iloc[0], grp.iloc[-1]
        meas, pred = lo.published / hi.published, lo.predicted / hi.predicted
        mono = bool((grp.predicted.diff().dropna() > 0).all())
        lines.append(f"- {name}: published {meas:.2f}, predicted {pred:.2f} "
                     f"(n = {lo.n} vs {hi.n}); predicted throughput rises with n: "
                     f"{'yes' if mono else 'no'}")
    lines += ["", "No A100 SXM sweep over several sizes was found in a stored, citable text (the "
              "one found, a crowd-sourced A100 PCIe 40GB run of the same torch.mm script, is a "
              "250 W part with a different clock under load, not this preset); A100 GEMMs are "
              "checked at the best MAMF shape only.", "",
              "Why the misses (not tuned away):", ""]
    for name, cause in SWEEP_CAUSE.items():
        lines.append(f"- **{name}**: {cause}")
    lines += ["", "## Cases the model gets wrong", ""]
    for r in df[~df.within_target].itertuples():
        cause = r.likely_cause or ("8-GPU run: the single-GPU error carries over, plus data-"
                                   "loading/synchronisation costs the model does not have")
        lines.append(f"- **{r.case}** ({r.error_pct:+.1f} %): {cause}")
    lines += ["", "## Sources", ""]
    for src in dict.fromkeys([*df.source, *pub.source]):
        lines.append(f"- {src}")
    lines += ["", "## GEMM-size trend (squares, predicted)", "",
              "| system | precision | n | TFLOP/s | of peak | bound | waves | DRAM / compulsory |",
              "|---|---|---|---|---|---|---|---|"]
    for r in sw.itertuples():
        lines.append(f"| {r.system} | {r.precision} | {r.n} | {r.tflops:.1f} | "
                     f"{100 * r.fraction_of_peak:.0f} % | {r.bound} | {r.waves} | "
                     f"{r.dram_over_compulsory:.2f} |")
    (out / "compute_validation.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[:len(df) + 12]))
    print(f"wrote {out / 'compute_validation.csv'}, {out / 'compute_gemm_sweep.csv'}, "
          f"{out / 'compute_validation.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
