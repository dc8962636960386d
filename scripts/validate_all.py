"""Every validation of accelsim against published or measured data, in one run, fit and held-out
rows kept apart.

    python scripts/validate_all.py [--quick] [--out DIR]

One table per validation, one row per compared number, with the columns ``case``,
``published`` (published or measured), ``accelsim``, ``error`` (its unit in ``error_unit``),
``tolerance``, ``in_target`` and ``label``:

* ``fit``       -- a fit script consumed the row (scripts/calibrate.py, fit_compute.py,
                   llm_fit.py, arith_h100_fit.py, fit_fsdp.py, fit_host_overhead.py): agreement
                   there is a fit, not a prediction;
* ``checked``   -- held out from every fit;
* ``reference`` -- a published number the model reproduces by construction (datasheet peaks).

Fit rows of the four refittable fits (appendix D, GPU compute, Megatron, FP8-LM memory) also
carry a leave-one-out prediction (``loo_accelsim``, ``loo_error``, ``loo_in_target``): the fit
re-run without that row, then the row predicted. The summary ends the run: per validation, the
held-out rows first, then the fit rows and their leave-one-out count.

Nothing is recomputed here: every number comes from the validation code that owns it
(accelsim.dse.hfp8_published / hfp8_study, scripts/validate_compute.py, llm_validate.py,
llm_fit.py, fit_compute.py, calibrate.py, scalesim_crosscheck.py, netsim_validate.py,
arith_h100_fit.py, device_validate.py; the fit-row sets in accelsim/*/published.py).
docs/validation.md describes every table. With ``--out`` holding the per-family tables
(``--out reports``) it ends by refreshing ``accelsim/data/error_bands.csv``
(scripts/error_bands.py, about a second). ``--quick`` (about half the time) narrows two searches, each stated in the output:
the appendix-D leave-one-out refits search 5-7 images per chip (not 3-12), the GPU memory
efficiency grid takes every other point, and netsim goes to 16 chips (DES 8) instead of 64 (32).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

COLUMNS = ("validation", "case", "published", "accelsim", "error", "error_unit", "tolerance",
           "in_target", "label", "loo_accelsim", "loo_error", "loo_in_target")
NAN = float("nan")


def _row(validation, case, published, accelsim, error, error_unit, tolerance, in_target, label,
         loo_accelsim=NAN, loo_error=NAN, loo_in_target=None):
    return {"validation": validation, "case": case, "published": published,
            "accelsim": accelsim, "error": error, "error_unit": error_unit,
            "tolerance": tolerance, "in_target": bool(in_target), "label": label,
            "loo_accelsim": loo_accelsim, "loo_error": loo_error, "loo_in_target": loo_in_target}


# --------------------------------------------------------------------------- HFP8 appendix D
def hfp8(quick: bool, log) -> list[dict]:
    """The ten appendix-D numbers (all fit rows of scripts/calibrate.py, with leave-one-out
    refits) and the DGX-1 check."""
    import calibrate

    from accelsim.arch import load_system
    from accelsim.dse import hfp8_published as hp
    from accelsim.dse import hfp8_study as study
    from accelsim.workload import load_workload

    res = study.run_study(ROOT / study.DEFAULT_SYSTEM, ROOT / study.DEFAULT_WORKLOAD,
                          dgx1_path=ROOT / study.DEFAULT_DGX1)
    batches = (5, 6, 7) if quick else (3, 4, 5, 6, 7, 8, 9, 10, 12)
    log(f"  appendix-D leave-one-out: ten minimax refits over {len(batches)} minibatches "
        f"({','.join(map(str, batches))} images per chip)")
    loo = {r["metric"]: r for r in calibrate.leave_one_out(
        load_system(ROOT / study.DEFAULT_SYSTEM), load_workload(ROOT / study.DEFAULT_WORKLOAD),
        batches)}
    out = []
    for r in res.tables["paper_comparison"].itertuples(index=False):
        lo = loo.get(r.metric)
        kw = {}
        if lo is not None:
            e = lo["loo"] - r.published
            kw = dict(loo_accelsim=lo["loo"], loo_error=e, loo_in_target=abs(e) <= r.tolerance)
        out.append(_row("HFP8 appendix D (Sun et al. 2019)", r.description, r.published,
                        r.accelsim, r.difference, "points", f"+-{r.tolerance:g}",
                        r.within_tolerance, r.label, **kw))
    for r in res.tables["dgx1"].itertuples(index=False):
        lo, hi = hp.DGX1_ERROR_BAND_PCT[r.gpus]
        out.append(_row("DGX-1 ResNet-50 FP16 (NVIDIA)", f"{r.case} img/s", r.published,
                        r.predicted, r.error_pct, "%", f"[{lo:+g}, {hi:+g}]",
                        lo <= r.error_pct <= hi, r.label))
    return out


# --------------------------------------------------------------------------- GPU compute
def compute(quick: bool, log) -> list[dict]:
    """scripts/validate_compute.py's tables, with fit_compute.py's leave-one-out."""
    import fit_compute
    import validate_compute

    df, pub, oos, oos_cases, _ = validate_compute.tables()
    grid = fit_compute.GRID_MEMORY[::2] if quick else fit_compute.GRID_MEMORY
    log(f"  GPU compute leave-one-out: {len(df[df.label == 'fit']) + len(pub)} three-stage "
        f"refits, memory-efficiency grid of {len(grid)} points")
    loo = {c.case: (p_out, pub_) for c, pub_, _, p_out, _ in
           fit_compute.leave_one_out(grid_memory=grid)}
    tol = 100 * validate_compute.TARGET

    def loo_kw(case):
        if case not in loo:
            return {}
        p_out, value = loo[case]
        e = 100 * (p_out / value - 1)
        return dict(loo_accelsim=p_out, loo_error=e, loo_in_target=abs(e) <= tol)

    out = []
    for r in df.itertuples(index=False):
        out.append(_row("GPU compute: GEMM and ResNet-50 cases", f"{r.case} ({r.unit})",
                        r.published, r.predicted, r.error_pct, "%", f"+-{tol:g}",
                        r.within_target, r.label, **loo_kw(r.case)))
    for r in pub.itertuples(index=False):
        out.append(_row("GPU compute: published GEMM sweeps", f"{r.case} (TFLOPS)", r.published,
                        r.predicted, r.error_pct, "%", f"+-{tol:g}", r.within_target, r.label,
                        **loo_kw(r.case)))
    for r in oos.itertuples(index=False):
        tag = " (control: GPU in the fit)" if r.chip_in_fit else ""
        out.append(_row("GPU compute: out of sample, torch.mm sweeps", f"{r.case}{tag}",
                        r.published, r.predicted, r.error_pct, "%", f"+-{tol:g}",
                        r.within_target, r.label))
    for r in oos_cases.itertuples(index=False):
        tag = " (control: GPU in the fit)" if r.chip_in_fit else ""
        out.append(_row("GPU compute: out of sample, MAMF best shapes", f"{r.case}{tag}",
                        r.published, r.predicted, r.error_pct, "%", f"+-{tol:g}",
                        r.within_target, r.label))
    return out


def datasheet_peaks() -> list[dict]:
    """Every preset's peak against the datasheet figure it is built from (reference rows)."""
    from accelsim.arch.config import load_system
    from accelsim.perf.published import DATASHEET_PEAKS, REFERENCE, datasheet_tolerance

    out = []
    for system, peaks in DATASHEET_PEAKS.items():
        chip = load_system(ROOT / "arch_configs" / f"{system}.toml").chip
        for prec, (figure, divisor) in peaks.items():
            v = float(figure) / divisor
            d = chip.peak_flops(prec) / 1e12
            tol = datasheet_tolerance(figure, divisor)
            out.append(_row("GPU datasheet peaks (TFLOP/s)", f"{system} {prec}", v, d, d - v,
                            "TFLOPS", f"+-{tol:.3g}", abs(d - v) <= tol, REFERENCE))
    return out


# --------------------------------------------------------------------------- LLMs
def llm(log) -> list[dict]:
    """scripts/llm_validate.py's rows; leave-one-out of both llm_fit.py fits."""
    import llm_fit
    import llm_validate

    from accelsim.arch import build_system

    a100 = build_system(ROOT / "arch_configs" / "dgx-a100.toml").with_boost_clock()
    h100 = build_system(ROOT / "arch_configs" / "dgx-h100.toml").with_boost_clock()
    log("  LLM leave-one-out: Megatron efficiencies over their 15 x 15 grid, FP8-LM reserve "
        "over its 201-point grid")
    meg = {r["case"]: r for r in llm_fit.megatron_loo(a100)}
    mem = {r["case"]: r for r in llm_fit.reserve_loo(h100)}
    out = []
    for r in llm_validate.rows():
        megatron = r["source"] == llm_validate.MEGATRON
        kw = {}
        key = r["case"].split()[0]
        lo = meg.get(key) if megatron else None
        if not megatron and r["quantity"] == "memory_per_gpu":
            parts = r["case"].split()
            lo = mem.get((parts[0], parts[-1], int(parts[-2][2:])))
        if lo is not None:
            e = lo["loo"] / lo["published"] - 1
            kw = dict(loo_accelsim=lo["loo"], loo_error=100 * e,
                      loo_in_target=abs(e) <= r["target"])
        name = ("Megatron-LM SC'21 Table 1 (TFLOPS/GPU)" if megatron
                else "FP8-LM Tables 5 and 7 (H100)")
        case = r["case"] if megatron else f"{r['case']} {r['quantity']} ({r['unit']})"
        out.append(_row(name, case, r["published"], r["predicted"], 100 * r["rel_error"], "%",
                        f"+-{100 * r['target']:g}", r["within_target"], r["label"], **kw))
    return out


def llm_published() -> list[dict]:
    """scripts/llm_published_validate.py: LLM inference and MoE training vs published numbers
    (held out, but the three Llama-3.1-8B online TTFT rows scripts/fit_host_overhead.py fits
    serve's per-request host overhead on: ``fit``)."""
    import llm_published_validate as v

    out = []
    for r in v.rows():
        if r["accelsim"] is None:
            continue
        out.append(_row(f"LLM inference / MoE training, published ({r['metric']})",
                        f"{r['id']} ({r['unit']})", r["published"], r["accelsim"],
                        r["error_pct"], "%", f"+-{100 * v.TOLERANCE:g}", r["in_target"],
                        r["label"]))
    return out


def mpt() -> list[dict]:
    """scripts/mpt_validate.py: MPT FSDP training throughput (llm-foundry's tables); every row
    ``fit`` (scripts/fit_fsdp.py fits the pytorch stack's comm_contention on its A100 rows; each
    of those carries its leave-one-out refit, :func:`fit_fsdp.leave_one_out`)."""
    import fit_fsdp
    import mpt_validate as v

    loo = fit_fsdp.leave_one_out()
    out = []
    for r in v.rows():
        # a row outside the fit did not inform it: its leave-one-out prediction is its own
        pred, e = loo.get(r["id"], (r["accelsim"], r["error"]))
        out.append(_row("MPT FSDP training, llm-foundry (tokens/s/GPU)",
                        f"{r['id']} (tokens/s/GPU)", r["published"], r["accelsim"],
                        100 * r["error"], "%", f"+-{100 * v.TOLERANCE:g}", r["in_target"],
                        r["label"], loo_accelsim=pred, loo_error=100 * e,
                        loo_in_target=abs(e) <= v.TOLERANCE))
    return out


def device() -> list[dict]:
    """scripts/device_validate.py: our own H100 SXM and H200 SXM measurements
    (accelsim/data/h100_device, h200_device): steady-state GEMMs (fixed clock and power model),
    flash attention, eager GPT training steps and memory, Llama-3-8B inference, whole-step
    power; held out except the LM-head GEMMs that set the H100 presets' unaligned_gemm_rate.
    No parameter was ever fitted on the H200."""
    import device_validate as v

    names = {"h100": "H100 measured here", "h200": "H200 measured here (chip never fitted)"}
    return [_row(f"{names[dev.key]}: {r['group']}", f"{r['case']} ({r['unit']})",
                 r["measured"], r["accelsim"], r["error_pct"], "%",
                 f"+-{r['tolerance_pct']:g}", r["in_target"], r["label"])
            for dev in v.DEVICES.values() for r in v.rows(dev)]


# --------------------------------------------------------------------------- SCALE-Sim, bits, netsim
def scalesim() -> list[dict]:
    """accelsim's --scalesim-compat cycles against SCALE-Sim v3's golden files (per file: total
    cycles, error = the largest per-layer difference)."""
    import scalesim_crosscheck as sc

    out = []
    for name, layers in sc.layer_comparisons().items():
        worst = max(abs(o - g) for _, g, o in layers)
        out.append(_row("SCALE-Sim v3 cycles", f"{name} ({len(layers)} layers, total cycles)",
                        sum(g for _, g, _ in layers), sum(o for _, _, o in layers), worst,
                        "cycles (max per layer)", f"+-{sc.TOLERANCE_CYCLES}",
                        worst <= sc.TOLERANCE_CYCLES, "checked"))
    return out


def h100_bits() -> list[dict]:
    """The h100-fp8 engine (preset parameters) on every stored H100 FP8 GEMM output word. A fit
    row: scripts/arith_h100_fit.py picks the preset as the unique zero of a parameter grid on
    these same words."""
    import arith_h100_fit as h

    cases = h.load_cases()
    total = sum(c[-1].size for c in cases)
    bad = h.mismatches(cases)
    return [_row("H100 FP8 GEMM output bits", f"{len(cases)} cases, words matching", total,
                 total - bad, bad, "words", "0", bad == 0, "fit")]


def netsim(quick: bool) -> list[dict]:
    """netsim_validate.py: closed form / symmetric DES vs explicit schedules, DES vs analytic."""
    import netsim_validate as nv

    chips, des = (16, 8) if quick else (64, 32)
    out = []
    for (kind, engine), e in sorted(nv.symmetric_vs_explicit(chips, des, quiet=True).items()):
        out.append(_row("netsim: symmetric (closed form) vs explicit schedules",
                        f"{kind} {engine}, <= {chips if engine == 'analytic' else des} chips",
                        NAN, NAN, e, "relative", "1e-9", e <= 1e-9, "checked"))
    worst, _ = nv.des_vs_analytic()
    for name, e in sorted(worst.items()):
        # cut-through switches: the DES and the closed form agree on every topology
        tol = 1e-9
        out.append(_row("netsim: DES vs analytic (explicit schedules)", name, NAN, NAN, e,
                        "relative", f"{tol:.3g}", e <= tol, "checked"))
    return out


# --------------------------------------------------------------------------- output
def _fmt(v, nd=4):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.{nd}g}"
    return str(v)


def print_tables(df: pd.DataFrame) -> None:
    for name, g in df.groupby("validation", sort=False):
        unit = g.error_unit.iloc[0]
        print(f"\n## {name}  (error in {unit})")
        cols = ["case", "published", "accelsim", "error", "tolerance", "in_target", "label"]
        has_loo = g.loo_in_target.notna().any()
        if has_loo:
            cols += ["loo_accelsim", "loo_error", "loo_in_target"]
        t = g[cols].copy()
        for c in cols:
            t[c] = [_fmt(v) for v in t[c]]
        with pd.option_context("display.width", 250, "display.max_colwidth", 70,
                               "display.max_rows", 500):
            print(t.to_string(index=False))


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per validation: held-out rows in target, then fit rows (and their leave-one-out), then
    reference rows."""
    rows = []
    for name, g in df.groupby("validation", sort=False):
        r = {"validation": name}
        for lab in ("checked", "fit", "reference"):
            s = g[g.label == lab]
            r[lab] = f"{int(s.in_target.sum())}/{len(s)}" if len(s) else ""
        s = g[g.loo_in_target.notna()]
        r["fit, left out"] = (f"{int(s.loo_in_target.astype(bool).sum())}/{len(s)}"
                              if len(s) else "")
        rows.append(r)
    return pd.DataFrame(rows).rename(columns={"checked": "held out (checked)"})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="narrower leave-one-out searches and netsim sizes (stated in the output)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="also write DIR/validation_all.csv (every row) and "
                    "DIR/validation_summary.csv")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:5.0f} s] {msg}", flush=True)

    rows = []
    for what, fn in (("HFP8 appendix D + DGX-1", lambda: hfp8(args.quick, log)),
                     ("GPU compute", lambda: compute(args.quick, log)),
                     ("GPU datasheet peaks", datasheet_peaks),
                     ("Megatron-LM and FP8-LM", lambda: llm(log)),
                     ("LLM inference and MoE training (published)", llm_published),
                     ("MPT FSDP training (llm-foundry)", mpt),
                     ("H100 and H200 measured here (device_validate)", device),
                     ("SCALE-Sim cycles", scalesim),
                     ("H100 FP8 bits", h100_bits),
                     ("netsim engines", lambda: netsim(args.quick))):
        log(what)
        rows += fn()
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    print_tables(df)
    summ = summary(df)
    print("\n## Summary: rows in target (held out first; 'fit, left out' = leave-one-out "
          "refits predicting each fit row)")
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(summ.to_string(index=False))
    held = df[df.label == "checked"]
    fit = df[df.label == "fit"]
    loo = df[df.loo_in_target.notna()]
    print(f"\nheld out: {int(held.in_target.sum())}/{len(held)} in target; fit: "
          f"{int(fit.in_target.sum())}/{len(fit)} in target (left out of their fit: "
          f"{int(loo.loo_in_target.astype(bool).sum())}/{len(loo)}); reference: "
          f"{int(df[df.label == 'reference'].in_target.sum())}/"
          f"{len(df[df.label == 'reference'])}"
          + ("; --quick: narrowed searches (see the log lines)" if args.quick else ""))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out / "validation_all.csv", index=False, float_format="%.6g")
        summ.to_csv(args.out / "validation_summary.csv", index=False)
        print(f"wrote {args.out / 'validation_all.csv'}, {args.out / 'validation_summary.csv'}")
        import error_bands  # the error bars the front-ends report, refreshed with the tables

        if all((args.out / name).is_file() for name in error_bands.REPORT_TABLES):
            log("error bands (scripts/error_bands.py)")
            error_bands.main(["--reports", str(args.out)])
        else:
            print(f"error bands not refreshed: {args.out} lacks the per-family tables "
                  f"({', '.join(error_bands.REPORT_TABLES[1:])}); run scripts/error_bands.py")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
