"""The flagship co-design report (issue 37; ``accelsim figures`` writes reports/codesign.md and
.csv): on the HFP8 paper's 64-chip system, every chip built by the chip builder at ONE die area
and power limit at 14 nm, one design per number format -- time and energy to a target
validation loss on two study models, with 95 % intervals from the seeds.

Inputs: the studies' learning curves shipped in ``accelsim/data/codesign/curves.csv``
(:data:`CURVES`; its README has the ``accelsim study`` commands, scripts/codesign_data.py
refreshes it) and the engine, through co-design's own entry points (:func:`step_point`,
:func:`codesign_table`). Nothing here is typed in from a run: rerun ``accelsim figures`` after
the engine or the curves change. The claims the report judges are in
:mod:`accelsim.dse.codesign_claims`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from accelsim.arch.builder import ChipSpec, build_chip
from accelsim.dse.codesign import codesign_table, step_point
from accelsim.dse.codesign_designs import Design
from accelsim.errors import Infeasible, InputError
from accelsim.paths import resolve_input

CURVES = Path(__file__).resolve().parent.parent / "data" / "codesign" / "curves.csv"
#: The system whose topology, links and chip memory every design keeps.
SYSTEM = "hfp8-64chip"
NODE_NM = 14.0  # the HFP8 paper's chips' node (Fleischer et al., VLSI 2018: a 14 nm AI core)
BASELINE = "fp16-amp"
#: Target = TARGET_MARGIN x the highest final validation loss of the baseline's seeds: the
#: loosest loss every baseline run reaches by its last evaluation, plus a 5 % margin. One rule
#: for both models, not tuned per recipe.
TARGET_MARGIN = 1.05
#: The studies' batch (study --batch-size 32), here per chip: data parallel over the 64 chips.
BATCH = 32
OPTIMIZER = "sgd-momentum"  # the studies' optimizer (accelsim.train: SGD, momentum 0.9)


@dataclass(frozen=True)
class FormatDesign:
    """One report row family: a format, the study recipe that trains in it, and the MAC units
    its chip is built with (the recipe's and its engine scheme's first/last-layer precision
    included; every built config needs a unit that runs fp16)."""

    label: str
    recipe: str
    formats: tuple[str, ...]
    units: str  # why these units


FORMATS = (
    FormatDesign("FP16", "fp16-amp", ("fp16",), "FP16 everywhere"),
    FormatDesign("FP8 (E5M2)", "fp8-e5m2", ("fp16", "fp8"),
                 "the table's FP8 MAC (E4M3 x E4M3 + FP16; E5M2's narrower multiplier is not "
                 "priced apart) and FP16 for the engine scheme's first and last layers"),
    FormatDesign("HFP8", "hfp8", ("fp16", "hfp8"),
                 "1-4-3/1-5-2 MAC and FP16 for the first and last layers (the recipe's "
                 "DLFloat16 1-6-9 layers, timed as FP16)"),
    FormatDesign("HiF8", "hif8", ("fp16", "hif8"),
                 "HiF8 MAC and the FP16 unit every config needs"),
    FormatDesign("MXFP8", "mxfp8", ("fp16", "bf16", "mxfp8"),
                 "MXFP8 block MAC, BF16 for the first and last layers (recipe and scheme), "
                 "FP16 as every config needs"),
    FormatDesign("NVFP4", "nvfp4", ("fp16", "bf16", "nvfp4"),
                 "NVFP4 block MAC, BF16 for the first and last layers (recipe and scheme), "
                 "FP16 as every config needs"),
)


@dataclass(frozen=True)
class StudyModel:
    """A study model, its dataset and the engine workload with its shapes."""

    model: str
    dataset: str
    workload: str
    title: str


MODELS = (
    StudyModel("gpt-char", "pydoc", "gpt-char", "character-level GPT (gpt-char on pydoc)"),
    StudyModel("cnn", "digits", "digits-cnn", "digits CNN (cnn on digits)"),
)


# ------------------------------------------------------------------------ the chips
def _spec(area_mm2: float, formats: tuple[str, ...], name: str,
          power_limit_W: float | None):
    from accelsim.arch.config import load_system

    base = load_system(SYSTEM).chip
    return ChipSpec(area_mm2=area_mm2, node_nm=NODE_NM, formats=formats,
                    frequency_GHz=base.core.frequency_Hz / 1e9,
                    array=(base.core.rows, base.core.cols),
                    sram_MiB=base.cores * base.core.scratchpad_bytes / 2**20,
                    power_limit_W=power_limit_W,
                    memory_bandwidth_GBps=base.memory_bandwidth_Bps / 1e9,
                    memory_capacity_GiB=base.memory_capacity_bytes / 2**30, name=name)


def fixed_area_mm2() -> float:
    """The die area every design gets: the smallest whole mm^2 at which the builder's FP16-only
    chip holds the system config's cores (20 arrays of 32x32 at 1.5 GHz: its 61.44 TFLOPS FP16
    per chip, the paper's ~4 PFLOPS over 64 chips) beside the config's scratchpads."""
    from accelsim.arch.config import load_system

    cores = load_system(SYSTEM).chip.cores
    area = 1.0
    while True:  # the cores grow with the area; a few hundred builds at most
        try:
            if build_chip(_spec(area, ("fp16",), "fp16", None)).cores >= cores:
                return area
        except InputError:  # too small for one array or its SRAM: grow
            pass
        area += 1.0


def fixed_power_W(area_mm2: float) -> float:
    """The power limit every design gets: the FP16 chip's peak power by the builder's rule (so
    the FP16 chip never throttles; a design whose MACs draw more is held to it)."""
    return build_chip(_spec(area_mm2, ("fp16",), "fp16", None)).power_limit_W


def designs(area_mm2: float, power_W: float) -> dict[str, Design]:
    """Recipe -> its design: the built chip placed in the system's topology."""
    base = str(resolve_input(SYSTEM, "system"))
    out = {}
    for f in FORMATS:
        spec = _spec(area_mm2, f.formats, f.label, power_W)
        out[f.recipe] = Design(f.label, base, area_mm2, spec)
    return out


# ------------------------------------------------------------------------ the steps
def target_loss(curves) -> float:
    """:data:`TARGET_MARGIN` x the highest final validation loss among the baseline's runs."""
    b = curves[curves["recipe"] == BASELINE]
    last = b.sort_values("step", kind="stable").groupby("seed")["val_loss"].last()
    return TARGET_MARGIN * float(last.max())


def model_steps(curves):
    """(target loss, per-run steps table, per-recipe steps table) of one model's curves."""
    from accelsim.train.target import recipe_steps, run_steps

    target = target_loss(curves)
    runs = run_steps(curves, target)
    recipes = [f.recipe for f in FORMATS if f.recipe in set(curves["recipe"])]
    return target, runs, recipe_steps(runs, target, BASELINE, recipes)


def _step_rows(design: Design, scheme: str, workload: str):
    import pandas as pd

    params = {"chip": design.key, "scheme": scheme, "workload": workload, "batch": BATCH,
              "optimizer": OPTIMIZER, "tp": 1, "pp": 1}
    try:
        row = {"chip": design.key, "scheme": scheme, "status": "ok", "reason": "",
               **step_point(params)}
    except Infeasible as exc:
        row = {"chip": design.key, "scheme": scheme, "status": "infeasible",
               "reason": str(exc)}
    return pd.DataFrame([row])


def paired_difference(runs, recipe: str, per_step: float, base_per_step: float):
    """(mean, ci95_lo, ci95_hi) over seeds of recipe's steps x ``per_step`` less the baseline's
    steps x ``base_per_step`` (paired by seed, Student t as the study), NaN unless both reach
    the target in every paired seed."""
    import numpy as np

    from accelsim.train.study import mean_ci

    r = runs[runs["recipe"] == recipe].set_index("seed")["steps_to_target"]
    b = runs[runs["recipe"] == BASELINE].set_index("seed")["steps_to_target"]
    seeds = r.index.intersection(b.index)
    d = (r.reindex(seeds) * per_step - b.reindex(seeds) * base_per_step).to_numpy(dtype=float)
    if len(d) < 2 or not np.isfinite(d).all():
        return math.nan, math.nan, math.nan
    m, _, hw = mean_ci(d)
    return m, m - hw, m + hw


def verdict(lo: float, hi: float, what: str) -> str:
    """Whether a paired difference (this format less FP16) has a 95 % interval excluding 0."""
    if lo != lo:
        return "no comparison (a run does not reach the target)"
    more, less = ("longer", "shorter") if what == "time" else ("more", "less")
    if lo > 0:
        return f"{more} than FP16 (95 % CI excludes 0)"
    if hi < 0:
        return f"{less} than FP16 (95 % CI excludes 0)"
    return "not resolved: the 95 % CI includes 0"


def report_table(curves_all):
    """The report's table: one row per model x format (REPORT_COLUMNS order)."""
    import pandas as pd

    from accelsim.arch.recipe_schemes import scheme_for_recipe

    area = fixed_area_mm2()
    power = fixed_power_W(area)
    by_recipe = designs(area, power)
    fp16 = build_chip(by_recipe[BASELINE].spec)
    parts = []
    for m in MODELS:
        curves = curves_all[curves_all["model"] == m.model]
        target, runs, steps = model_steps(curves)
        wl = str(resolve_input(m.workload, "workload"))
        rows = []
        for f in FORMATS:
            if f.recipe not in set(steps["recipe"]):
                continue
            d = by_recipe[f.recipe]
            scheme = scheme_for_recipe(f.recipe)
            t = codesign_table(steps, [d], [f.recipe], _step_rows(d, scheme, wl))
            chip = build_chip(d.spec)
            row = t.iloc[0].to_dict()
            st = steps.set_index("recipe").loc[f.recipe]
            row.update(model=m.model, workload=m.workload, target_loss=target,
                       format=f.label, formats=",".join(f.formats), cores=chip.cores,
                       peak_TFLOPS=chip.peak_flops(f.formats[-1]) / 1e12,
                       peak_vs_fp16=chip.peak_over(f.formats[-1], fp16, "fp16"),
                       power_limit_W=power, runs=int(st["n"]), runs_reached=int(st["reached"]),
                       datapath_unit=(chip.rates[row["datapath"]].host
                                      if row["datapath"] in chip.rates else ""))
            rows.append(row)
        t = pd.DataFrame(rows)
        base = t[t["recipe"] == BASELINE].iloc[0]
        for i, r in t.iterrows():
            for col, per in (("time", "step_time_s"), ("energy", "energy_per_step_J")):
                m_, lo, hi = (paired_difference(runs, r["recipe"], r[per], base[per])
                              if r["feasible"] and base["feasible"] else (math.nan,) * 3)
                unit = "s" if col == "time" else "J"
                t.loc[i, [f"{col}_vs_fp16_{unit}", f"{col}_vs_fp16_{unit}_ci95_lo",
                          f"{col}_vs_fp16_{unit}_ci95_hi"]] = [m_, lo, hi]
                t.loc[i, f"{col}_verdict"] = ("baseline" if r["recipe"] == BASELINE else
                                              verdict(lo, hi, col))
        parts.append(t)
    table = pd.concat(parts, ignore_index=True)
    return table[list(REPORT_COLUMNS)]


REPORT_COLUMNS = (
    "model", "workload", "target_loss", "format", "recipe", "scheme", "formats", "cores",
    "peak_TFLOPS", "peak_vs_fp16", "area_mm2", "power_limit_W", "feasible", "reason", "runs",
    "runs_reached",
    "steps_to_target", "steps_ci95_lo", "steps_ci95_hi", "step_time_s", "samples_per_s",
    "clock_MHz", "power_W", "datapath", "datapath_unit", "time_to_target_s", "time_to_target_s_ci95_lo",
    "time_to_target_s_ci95_hi", "energy_per_step_J", "energy_to_target_J",
    "energy_to_target_J_ci95_lo", "energy_to_target_J_ci95_hi", "time_vs_fp16_s",
    "time_vs_fp16_s_ci95_lo", "time_vs_fp16_s_ci95_hi", "time_verdict", "energy_vs_fp16_J",
    "energy_vs_fp16_J_ci95_lo", "energy_vs_fp16_J_ci95_hi", "energy_verdict")


def read_curves(path: str | Path = CURVES):
    """The shipped curves (model, dataset, recipe, seed, step, val_loss)."""
    import pandas as pd

    return pd.read_csv(path)


def build_report(curves_all):
    """(table, claims table, meta) of the report from the shipped curves: what
    :func:`accelsim.report.codesign.codesign_markdown` renders."""
    from accelsim.dse.codesign_claims import claims_table

    table = report_table(curves_all)
    area = float(table["area_mm2"].iloc[0])
    studies = {}
    for m in MODELS:
        c = curves_all[curves_all["model"] == m.model]
        steps = sorted(set(c["step"]))
        studies[m.model] = {
            "title": m.title, "dataset": m.dataset, "workload": m.workload,
            "steps": int(max(steps)), "eval_every": int(steps[0]),
            "seeds": (int(c.groupby("recipe")["seed"].nunique().min()),
                      int(c.groupby("recipe")["seed"].nunique().max()))}
    meta = {"system": SYSTEM, "node_nm": NODE_NM, "area_mm2": area,
            "power_W": fixed_power_W(area), "batch": BATCH, "optimizer": OPTIMIZER,
            "baseline": BASELINE, "target_margin": TARGET_MARGIN, "studies": studies,
            "units": {f.label: f.units for f in FORMATS}}
    return table, claims_table(table), meta
