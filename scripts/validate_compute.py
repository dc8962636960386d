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


#: Out-of-sample GPUs: why their misses happen (reported, never tuned away; nothing is refitted).
OOS_CAUSE = {
    "h100-pcie": "power: the H100 PCIe card runs the same GH100 SMs as the SXM5 part at half its "
    "power (350 W vs 700 W; NVIDIA H100 PCIe product brief PB-11133-001). The same script on an "
    "H100 SXM (control rows) is predicted within 11 % at n = 2048-8192 (19 of 20 points within "
    "15 %), so the per-SM "
    "model holds for this silicon; on the PCIe card the measured tensor-core throughput stops "
    "rising at n = 2048-4096 and flattens (FP16 458, 457, 437, 450) while a fixed-clock "
    "compute bound keeps rising to n = 8192: a 350 W cap lowers the SM clock below the 1.62 GHz "
    "the datasheet peaks imply, and more so the longer and denser the GEMM. The model has one "
    "clock per chip and no power limit. Two independent runs (H100 PCIe, H800 PCIe, the latter "
    "assumed to be the same compute) agree within 8 % at n >= 2048, so it is the part, not one "
    "machine",
    "a100-pcie-40gb": "power and a noisy shared run: the card is the A100 SXM silicon with the "
    "same datasheet peaks at 250 W instead of 400 W; the in-sample A100 SXM MAMF case is "
    "predicted within 1 %. Tensor-core throughput falls from n = 4096 to 8192 (FP16 241 -> 198), "
    "a power/clock signature no size effect gives. The first points the script times (FP32 at "
    "n = 1024, 2048, right after start-up) run at half the rate of n = 4096, as a GPU still at "
    "idle clocks would, and BF16 2048 (138) sits between 95 and 234: run-to-run noise on a "
    "shared cloud GPU that a deterministic model cannot follow",
    "a40": "FP32: on GA10x half of an SM's 128 FP32 lanes are a datapath shared with INT32 "
    "(NVIDIA GA102 whitepaper), so the integer address arithmetic of an SGEMM loop takes FP32 "
    "throughput away, and the 37.4 TFLOPS peak counts both datapaths as FFMA-only; V100/A100/"
    "H100, on which the global array_efficiency (0.88) was fitted, have separate INT32 units. "
    "The model over-predicts A40 FP32 by about 40 % (measured 23.7 of 37.4 TFLOPS, 63 %, "
    "against 77 % of the max-boost FP32 peak on the H100 SXM control). Tensor points: within "
    "or near 15 % except n = 8192, which the run itself puts below both 4096 and 10240 "
    "(FP16 113.5, 108.5, 119.2): a 300 W card's clock and run noise",
}


#: Why out-of-sample single-shape (MAMF) points miss, keyed by case (reported, not tuned away).
OOS_CASE_CAUSE = {
    "H200 FP8 MAMF 1280x4096x12032": "the model calls this shape L2-bound: its Hopper L2 "
    "bandwidth is an assumption (A100's 5120 B/clk; NVIDIA publishes none for H100/H200); "
    "see the L2 what-if below",
    "H100 SXM FP8 MAMF 1024x9216x14336": "as the H200 FP8 shape: thin M with long K; the "
    "model's tile choice is limited by the assumed Hopper L2 bandwidth (see H200 FP8)",
}


L2_WHAT_IF = 1.25  #: factor on the assumed Hopper L2 bandwidth, for the what-if only


def l2_what_if_lines(cases, load_system, get_scheme, gemm_time) -> list[str]:
    """Evidence, not the model: the Hopper rows with the assumed L2 bandwidth scaled by
    L2_WHAT_IF, beside the fitted H100 cases (which would move too)."""
    import dataclasses

    from accelsim.perf.published import GEMM_CASES

    def scaled(system):
        levels = tuple(dataclasses.replace(lv, bandwidth_Bps=lv.bandwidth_Bps * L2_WHAT_IF)
                       if lv.name == "L2" else lv for lv in system.chip.levels)
        return dataclasses.replace(system, chip=dataclasses.replace(system.chip, levels=levels))

    hopper = [c for c in cases.itertuples() if c.system in ("h100-sxm", "h200-sxm")]
    fitted = [c for c in GEMM_CASES if c.system == "h100-sxm"]
    out = ["", f"L2 what-if, as evidence and not as the model: the same predictions with the "
           f"assumed Hopper L2 bandwidth x {L2_WHAT_IF} (published -> error now, error "
           "what-if). The fitted H100 cases move as well, so the L2 figure and the global "
           "efficiencies are not separable with these data; a published Hopper L2 bandwidth "
           "would settle it.", ""]
    rows = [(c.case, c.system, c.scheme, *map(int, c.shape.split("x")), c.published, "")
            for c in hopper]
    rows += [(c.case, c.system, c.scheme, c.m, c.n, c.k, c.value, " (fitted)") for c in fitted]
    for case, sysname, scheme, m, n, k, value, tag in rows:
        system = load_system(ROOT / "arch_configs" / f"{sysname}.toml").with_boost_clock()
        prec = get_scheme(scheme).compute_precision
        now = gemm_time(system, m, n, k, prec).tflops
        wif = gemm_time(scaled(system), m, n, k, prec).tflops
        out.append(f"- {case}{tag}: {value:g} -> {100 * (now / value - 1):+.1f} %, "
                   f"{100 * (wif / value - 1):+.1f} %")
    return out


def out_of_sample(load_system, get_scheme, gemm_time):
    """Predict every out-of-sample point with the fitted globals as they are (no refit)."""
    import pandas as pd

    from accelsim.perf.published import OOS_GEMM_CASES, OOS_GEMM_SWEEPS, label

    cases = []
    for c in OOS_GEMM_CASES:
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml").with_boost_clock()
        g = gemm_time(system, c.m, c.n, c.k, get_scheme(c.scheme).compute_precision)
        err = 100 * (g.tflops / c.value - 1)
        cases.append({"case": c.case, "system": c.system, "scheme": c.scheme,
                      "shape": f"{c.m}x{c.n}x{c.k}", "published": c.value,
                      "predicted": g.tflops, "error_pct": err,
                      "within_target": abs(err) <= 100 * TARGET, "bound": g.bound,
                      "chip_in_fit": c.chip_in_fit, "label": label(c.case),
                      "likely_cause": OOS_CASE_CAUSE.get(c.case, ""), "source": c.source})
    rows = []
    for c in OOS_GEMM_SWEEPS:
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml").with_boost_clock()
        prec = get_scheme(c.scheme).compute_precision
        g = gemm_time(system, c.m, c.n, c.k, prec)
        err = 100 * (g.tflops / c.value - 1)
        rows.append({"case": c.case, "series": c.case.rsplit(" ", 1)[0],
                     "gpu": c.case.split(f" {c.scheme.upper()} ")[0], "system": c.system,
                     "scheme": c.scheme, "n": c.m, "published": c.value, "predicted": g.tflops,
                     "error_pct": err, "within_target": abs(err) <= 100 * TARGET,
                     "bound": g.bound, "waves": g.waves, "tile": f"{g.tile_m}x{g.tile_n}",
                     "peak_tflops": system.chip.peak_flops(prec) / 1e12,
                     "chip_in_fit": c.chip_in_fit, "label": label(c.case), "source": c.source})
    return pd.DataFrame(rows), pd.DataFrame(cases)


def out_of_sample_lines(oos, cases, l2_lines=()) -> list[str]:
    """The report section for :func:`out_of_sample`'s table."""
    from accelsim.perf.gemm import FITTED

    new = oos[~oos.chip_in_fit]
    a40t = new[(new.system == "a40") & (new.scheme != "fp32")]
    sizes = sorted(oos.n.unique())
    lines = ["", "## Out of sample: GPUs the fit never saw", "",
             f"Predicted with the fitted globals exactly as they are ({FITTED}, "
             "kernel_launch_us 6): **nothing was refitted**. scripts/fit_compute.py reads only "
             "GEMM_CASES, GEMM_SWEEPS and RESNET50_CASES; these points live in "
             "accelsim.perf.published.OOS_GEMM_SWEEPS and OOS_GEMM_CASES, which no fit "
             "reads. The presets (arch_configs/h100-pcie.toml, a100-pcie-40gb.toml, a40.toml, "
             "h200-sxm.toml) carry datasheet numbers only. Every sweep point is one "
             "crowd-sourced run of one torch.mm script "
             "(zzc0721/torch-performance-test-data; sources below). Control: the same script on "
             "an H100 SXM, a GPU the fit saw through other measurements.", "",
             f"Out-of-sample points within 15 %: {int(new.within_target.sum())} of {len(new)} "
             f"(tensor-core precisions: "
             f"{int(new[new.scheme != 'fp32'].within_target.sum())} of "
             f"{len(new[new.scheme != 'fp32'])}); control (H100 SXM): "
             f"{int(oos[oos.chip_in_fit].within_target.sum())} of "
             f"{len(oos[oos.chip_in_fit])}.", "",
             f"Verdict: the issue's target (every single-chip case within 15 %, trend right) "
             f"is {'met' if bool(new.within_target.all()) else '**not met**'} out of sample. "
             f"It nearly holds for the A40's tensor-core points ({a40t.within_target.sum()} of "
             f"{len(a40t)}) and holds for the H100 SXM control; it fails "
             "for the 250-350 W PCIe parts at n >= 4096 (over-predicted by 20-50 %) and for "
             "A40 FP32 (+40 %). Trend: the rise from n = 1024 to 4096 is right in direction "
             "and roughly in size, but on the PCIe parts the model keeps rising to n = 8192 "
             "while the measurements peak at n = 2048-4096 and then flatten or fall: the "
             "signature of a power limit, which the model does not have (see the causes "
             "below).", "",
             "Each cell: published / predicted TFLOP/s (error). Every point is labelled "
             "`checked` (held out from every fit).", "",
             "| series | preset | " + " | ".join(f"n = {n}" for n in sizes)
             + " | within 15 % | label |", "|---|---|" + "---|" * len(sizes) + "---|---|"]
    for name, g in oos.groupby("series", sort=False):
        cells = []
        for n in sizes:
            r = g[g.n == n].iloc[0]
            mark = "" if r.within_target else "**"
            cells.append(f"{r.published:.1f} / {r.predicted:.1f} ({mark}{r.error_pct:+.0f} %"
                         f"{mark})")
        tag = " (control)" if g.chip_in_fit.iloc[0] else ""
        lines.append(f"| {name}{tag} | {g.system.iloc[0]} | " + " | ".join(cells)
                     + f" | {int(g.within_target.sum())}/{len(g)} | "
                     + "/".join(sorted(set(g.label))) + " |")
    lines += ["", "Per GPU (tensor-core precisions TF32/FP16/BF16 and FP32 apart):", "",
              "| GPU | preset | precisions | within 15 % | median error | largest miss "
              "| measured best n | predicted best n |", "|---|---|---|---|---|---|---|---|"]
    for (gpu, tensor), g in oos.groupby(["gpu", oos.scheme != "fp32"], sort=False):
        worst = g.loc[g.error_pct.abs().idxmax()]
        best_meas = g.groupby("scheme").apply(lambda x: int(x.loc[x.published.idxmax()].n),
                                              include_groups=False)
        best_pred = g.groupby("scheme").apply(lambda x: int(x.loc[x.predicted.idxmax()].n),
                                              include_groups=False)
        lines.append(f"| {gpu}{' (control)' if g.chip_in_fit.iloc[0] else ''} | "
                     f"{g.system.iloc[0]} | {'TF32/FP16/BF16' if tensor else 'FP32'} | "
                     f"{int(g.within_target.sum())}/{len(g)} | {g.error_pct.median():+.0f} % | "
                     f"{worst.error_pct:+.0f} % ({worst.scheme} n={worst.n}) | "
                     f"{', '.join(map(str, sorted(set(best_meas))))} | "
                     f"{', '.join(map(str, sorted(set(best_pred))))} |")
    lines += ["", "Trend over size (throughput at n = 1024 over the best of the series):", ""]
    for name, g in oos.groupby("series", sort=False):
        meas = g.published.iloc[0] / g.published.max()
        pred = g.predicted.iloc[0] / g.predicted.max()
        lines.append(f"- {name}: published {meas:.2f}, predicted {pred:.2f}; measured peak at "
                     f"n = {int(g.loc[g.published.idxmax()].n)}, predicted at "
                     f"n = {int(g.loc[g.predicted.idxmax()].n)}")
    lines += ["", "What-if, as evidence and not as the model: the sustained SM clock at which "
              "the preset's own compute bound would give the measured large-GEMM throughput "
              "(mean of published / predicted over the tensor-core points n >= 4096, times the "
              "preset clock). The model has one clock per chip and no power limit; this "
              "number only shows the size of the clock drop a power cap would have to cause.", ""]
    from accelsim.arch.config import load_system

    for (gpu, system), g in oos.groupby(["gpu", "system"], sort=False):
        big = g[(g.n >= 4096) & (g.scheme != "fp32")]
        ratio = float((big.published / big.predicted).mean())
        f = load_system(ROOT / "arch_configs" / f"{system}.toml").chip.core.frequency_Hz / 1e9
        lines.append(f"- {gpu} ({system}, preset clock {f:.2f} GHz): measured / predicted "
                     f"{ratio:.2f} -> {ratio * f:.2f} GHz")
    new_cases = cases[~cases.chip_in_fit]
    lines += ["", "### Out of sample: best shapes of MAMF scans (single shapes)", "",
              "Long sustained runs (mean of 100 iterations after 50 warm-up ones per shape), "
              "the best shape of each scan; H200 SXM is a new preset (arch_configs/"
              "h200-sxm.toml: the H100 SXM compute with 141 GB HBM3e at 4.8 TB/s). Controls: "
              "the same table's later rows for the A100/H100 SXM, GPUs the fit saw.", "",
              f"Out-of-sample cases within 15 %: {int(new_cases.within_target.sum())} of "
              f"{len(new_cases)}; controls: "
              f"{int(cases[cases.chip_in_fit].within_target.sum())} of "
              f"{len(cases[cases.chip_in_fit])}.", "",
              "| case | preset | shape | published TFLOP/s | predicted | error | bound "
              "| within 15 % | label |", "|---|---|---|---|---|---|---|---|---|"]
    for r in cases.itertuples():
        tag = " (control)" if r.chip_in_fit else ""
        lines.append(f"| {r.case}{tag} | {r.system} | {r.shape} | {r.published:g} | "
                     f"{r.predicted:.1f} | {r.error_pct:+.1f} % | {r.bound} | "
                     f"{'yes' if r.within_target else '**no**'} | {r.label} |")
    lines += ["", "The two A100 PCIe sources disagree: the MAMF scan's best shapes (252.9 and "
              "256.4 TFLOPS, 81-82 % of peak, 40 or 80 GB not stated) are predicted within "
              "6 %, while the torch.mm crowd run's large squares reach only 198-241. A best "
              "shape of a scan is selected upward, the 80 GB card is a 300 W part, and the "
              "crowd run is on a shared cloud GPU; the model, with one clock per chip, sits "
              "with the MAMF scan.", ""]
    for r in cases[cases.likely_cause != ""].itertuples():
        lines.append(f"- **{r.case}** ({r.error_pct:+.1f} %): {r.likely_cause}")
    lines += list(l2_lines)
    lines += ["", "Why the sweep misses (likely physical causes; not tuned away):", ""]
    for system, cause in OOS_CAUSE.items():
        lines.append(f"- **{system}**: {cause}")
    lines += ["", "Out-of-sample sources:", ""]
    for src in dict.fromkeys([*oos.source, *cases.source]):
        lines.append(f"- {src}")
    return lines


def tables():
    """Every comparison of this script as tidy tables, nothing written: (in-sample cases,
    published sweeps, out-of-sample sweeps, out-of-sample cases, predicted size sweep). Each
    comparison row carries ``label`` (``fit``: scripts/fit_compute.py consumes it, from
    :data:`accelsim.perf.published.FIT_CASES`; ``checked``: held out)."""
    import pandas as pd

    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine.run import predict_step
    from accelsim.perf.gemm import FITTED, gemm_time
    from accelsim.perf.published import GEMM_CASES, GEMM_SWEEPS, RESNET50_CASES, label
    from accelsim.workload import load_workload

    wl = load_workload(ROOT / "workloads" / "resnet50.toml")
    rows = []
    for c in (*GEMM_CASES, *RESNET50_CASES):
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml").with_boost_clock()
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
        row["label"] = label(c.case)
        row["likely_cause"] = LIKELY_CAUSE.get(c.case, "")
        row["source"] = c.source
        rows.append(row)
    df = pd.DataFrame(rows)
    pub = []
    for c in GEMM_SWEEPS:
        system = load_system(ROOT / "arch_configs" / f"{c.system}.toml").with_boost_clock()
        g = gemm_time(system, c.m, c.n, c.k, get_scheme(c.scheme).compute_precision)
        err = 100 * (g.tflops / c.value - 1)
        pub.append({"case": c.case, "series": c.case.rsplit(" ", 1)[0], "system": c.system,
                    "scheme": c.scheme, "n": c.m, "published": c.value,
                    "predicted": g.tflops, "error_pct": err,
                    "within_target": abs(err) <= 100 * TARGET, "bound": g.bound,
                    "waves": g.waves, "tile": f"{g.tile_m}x{g.tile_n}", "label": label(c.case),
                    "source": c.source})
    pub = pd.DataFrame(pub)
    oos, oos_cases = out_of_sample(load_system, get_scheme, gemm_time)
    sweep = []
    for sysname, prec in (("v100-sxm2", "fp16"), ("v100-sxm2", "fp32"), ("a100-sxm", "bf16"),
                          ("a100-sxm", "tf32"), ("h100-sxm", "bf16"), ("h100-sxm", "fp8")):
        system = load_system(ROOT / "arch_configs" / f"{sysname}.toml").with_boost_clock()
        for n in (256, 512, 1024, 2048, 4096, 8192, 16384):
            g = gemm_time(system, n, n, n, prec)
            sweep.append({"system": sysname, "precision": prec, "n": n, "tflops": g.tflops,
                          "fraction_of_peak": g.flops_per_s / system.chip.peak_flops(prec),
                          "bound": g.bound, "waves": g.waves, "tile": f"{g.tile_m}x{g.tile_n}",
                          "dram_over_compulsory": g.memory_bytes / g.compulsory_bytes})
    sw = pd.DataFrame(sweep)
    return df, pub, oos, oos_cases, sw


def main() -> int:
    from accelsim.arch.config import load_system
    from accelsim.arch.schemes import get_scheme
    from accelsim.perf.gemm import FITTED, gemm_time

    df, pub, oos, oos_cases, sw = tables()
    out = ROOT / "reports"
    out.mkdir(exist_ok=True)
    df.to_csv(out / "compute_validation.csv", index=False, float_format="%.4g")
    sw.to_csv(out / "compute_gemm_sweep.csv", index=False, float_format="%.4g")
    pub.to_csv(out / "compute_gemm_published_sweep.csv", index=False, float_format="%.4g")
    oos.to_csv(out / "compute_validation_oos.csv", index=False, float_format="%.4g")
    oos_cases.to_csv(out / "compute_validation_oos_cases.csv", index=False, float_format="%.4g")
    single = df[df.single_chip]
    lines = [
        "# Compute model vs published GPU measurements",
        "",
        f"Generated by `python scripts/validate_compute.py` with {FITTED} "
        "(fitted by `scripts/fit_compute.py`). Target: every single-chip case within 15 %.",
        f"Single-chip cases within target: {int(single.within_target.sum())} of {len(single)}, "
        f"all of them fit rows (label `fit`: scripts/fit_compute.py fits the array efficiency "
        f"on the GEMM cases and the memory efficiency on the single-GPU ResNet-50 cases; "
        f"`checked`: held out from every fit).",
        "",
        "| case | system | scheme | shape | published | predicted | error | fusion on "
        "| Winograd off | within 15 % | label |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples():
        fon = "" if r.predicted_fusion_on != r.predicted_fusion_on else f"{r.predicted_fusion_on:.0f}"
        woff = ("" if r.predicted_winograd_off != r.predicted_winograd_off
                else f"{r.predicted_winograd_off:.0f}")
        mark = "yes" if r.within_target else ("**no**" if r.single_chip else "no (8 GPUs)")
        lines.append(f"| {r.case} | {r.system} | {r.scheme} | {r.shape} | {r.published:g} "
                     f"{r.unit} | {r.predicted:.1f} | {r.error_pct:+.1f} % | {fon} | {woff} "
                     f"| {mark} | {r.label} |")
    lines += ["", "## Published GEMM sweeps, small to large squares (M = N = K = n)", "",
              f"Points within 15 %: {int(pub.within_target.sum())} of {len(pub)} "
              "(no per-point constant: the sweeps fit only the one global per-kernel time, "
              "chip.kernel_launch_us, in scripts/fit_compute.py: every point is a fit row).", "",
              "| series | n | published TFLOP/s | predicted | error | bound | waves | tile "
              "| within 15 % | label |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in pub.itertuples():
        lines.append(f"| {r.series} | {r.n} | {r.published:.2f} | {r.predicted:.1f} | "
                     f"{r.error_pct:+.1f} % | {r.bound} | {r.waves} | {r.tile} | "
                     f"{'yes' if r.within_target else '**no**'} | {r.label} |")
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
              "checked at the best MAMF shape only. That A100 PCIe run is in the out-of-sample "
              "section below, with its own preset.", "",
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
    lines += out_of_sample_lines(
        oos, oos_cases, l2_what_if_lines(oos_cases, load_system, get_scheme, gemm_time))
    lines += ["", "## GEMM-size trend (squares, predicted)", "",
              "| system | precision | n | TFLOP/s | of peak | bound | waves | DRAM / compulsory |",
              "|---|---|---|---|---|---|---|---|"]
    for r in sw.itertuples():
        lines.append(f"| {r.system} | {r.precision} | {r.n} | {r.tflops:.1f} | "
                     f"{100 * r.fraction_of_peak:.0f} % | {r.bound} | {r.waves} | "
                     f"{r.dram_over_compulsory:.2f} |")
    (out / "compute_validation.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[:len(df) + 12]))
    print("\n".join(out_of_sample_lines(oos, oos_cases)[:len(oos.series.unique()) + 16]))
    print(f"wrote {out / 'compute_validation.csv'}, {out / 'compute_gemm_sweep.csv'}, "
          f"{out / 'compute_validation_oos.csv'}, {out / 'compute_validation_oos_cases.csv'}, "
          f"{out / 'compute_validation.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
