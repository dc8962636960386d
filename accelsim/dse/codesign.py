"""Co-design: chip designs x training recipes x one workload and plan, judged by the time and the
energy to a target validation loss.

A recipe's accuracy enters as its steps to the target (:mod:`accelsim.train.target`: a study's
mean and 95 % interval, or its ratio to the baseline's steps); a design's speed and energy enter
as one training step of the workload on it under the recipe's engine scheme
(:mod:`accelsim.arch.recipe_schemes`), timed by the engine's one entry point
(:func:`accelsim.engine.simulate`) at the power-limited clock and priced by the power model
(:mod:`accelsim.engine.energy`; a chip without a power table: :mod:`accelsim.dse.energy`'s
datapath table, layer workloads only). Then

    time_to_target_s   = steps x step_time_s       (the same for ci95_lo / ci95_hi)
    energy_to_target_J = steps x energy_per_step_J

where ``steps`` is the recipe's own mean steps to the target (``baseline_steps`` None) or
``baseline_steps x steps_ratio`` -- the user's steps for the large workload times the ratio the
study measured on a small one (an assumption, :data:`accelsim.train.target.SCALING_ASSUMPTION`).
The step times are the expensive, resumable part (:func:`step_point`, a sweep evaluator over
``chip x scheme``); :func:`codesign_table` joins them with the steps, a pure function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelsim.dse.codesign_designs import (BUILDER_KEYS, DESIGN_KEYS, Design,  # noqa: F401
                                           design_system, designs_from_chips, load_designs)
from accelsim.dse.sweep_spec import Infeasible
from accelsim.errors import InputError

#: The evaluator's output columns (one training step of the workload on one design).
STEP_COLUMNS = ("step_time_s", "samples_per_s", "energy_per_step_J", "power_W", "clock_MHz",
                "memory_GiB", "datapath", "energy_source")
#: The co-design table's columns (``--out``).
COLUMNS = ("design", "chip", "recipe", "scheme", "feasible", "reason", "steps_to_target",
           "steps_ci95_lo", "steps_ci95_hi", "step_time_s", "time_to_target_s",
           "time_to_target_s_ci95_lo", "time_to_target_s_ci95_hi", "energy_per_step_J",
           "energy_to_target_J", "energy_to_target_J_ci95_lo", "energy_to_target_J_ci95_hi",
           "samples_per_s", "area_mm2", "power_W", "clock_MHz", "datapath", "pareto")
#: Columns of a steps table (``study --target-loss``'s target.csv) that codesign reads.
STEPS_COLUMNS = ("recipe", "feasible", "mean", "ci95_lo", "ci95_hi", "steps_ratio",
                 "steps_ratio_ci95_lo", "steps_ratio_ci95_hi")


def load_steps_csv(path: str | Path):
    """A per-recipe steps table (``study --target-loss``'s ``target.csv``), checked."""
    import pandas as pd

    path = Path(path)
    try:
        t = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError,
            UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the steps table ({exc})") from None
    return check_steps(t, str(path))


def check_steps(t, where: str):
    """``t`` with the :data:`STEPS_COLUMNS` a steps table needs (one row per recipe, feasible
    a bool, numbers finite where feasible), else InputError naming ``where``."""
    import numpy as np

    missing = [c for c in STEPS_COLUMNS if c not in t.columns]
    if missing:
        raise InputError(f"{where}: no {', '.join(missing)} column(s) (a study's target.csv "
                         f"has {', '.join(STEPS_COLUMNS)})")
    if t["recipe"].duplicated().any():
        raise InputError(f"{where}: recipe {t['recipe'][t['recipe'].duplicated()].iloc[0]!r} "
                         "has more than one row")
    feas = t["feasible"].map({True: True, False: False, "True": True, "False": False})
    if feas.isna().any():
        raise InputError(f"{where}: feasible must be True or False")
    t = t.assign(feasible=feas.astype(bool), recipe=t["recipe"].astype(str))
    mean = t.loc[t["feasible"], "mean"].to_numpy(dtype=float)
    if not (np.isfinite(mean).all() and (mean > 0).all()):
        raise InputError(f"{where}: a feasible recipe needs a finite mean > 0 steps")
    return t.reset_index(drop=True)


# --------------------------------------------------------------------------- the step
def step_point(params: Mapping[str, Any]) -> dict[str, Any]:
    """One training step of ``workload`` on the design ``chip`` (a :attr:`Design.key`) under
    ``scheme`` (a sweep evaluator): layer workloads data parallel over the system's chips at ``batch`` per chip, a
    transformer under ``tp`` x ``pp`` with dp the rest (micro-batch ``batch``); the power-limited
    clock where the chip's power table prices the scheme's datapath, else its fixed clock."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.engine import Options, Plan, simulate
    from accelsim.engine.run import WorkloadPrediction, layer_step_energy

    system = design_system(params["chip"])
    scheme = get_scheme(params["scheme"])
    core, power = system.chip.core, system.chip.power
    for prec in dict.fromkeys((scheme.compute_precision, scheme.high_precision)):
        if not core.supports(prec):
            raise Infeasible(f"{system.name} has no {prec} rate (nor a wider datapath to run it "
                             "on)")
    if power is not None and power.has_energy(core.datapath(scheme.compute_precision)):
        system = system.with_power_model()
    else:
        system = system.with_boost_clock()
    workload = _workload(params["workload"])
    batch, optimizer = int(params["batch"]), params["optimizer"]
    tp, pp = int(params["tp"]), int(params["pp"])
    if workload.transformer is None:
        if (tp, pp) != (1, 1):
            raise InputError(f"workload {params['workload']}: a layer list trains data "
                             "parallel only (tp 1, pp 1)")
        plan = Plan(tp=1, pp=1, dp=system.chips, micro_batch=batch,
                    global_batch=batch * system.chips, optimizer=optimizer)
    else:
        if system.chips % (tp * pp):
            raise Infeasible(f"tp {tp} x pp {pp} does not divide {system.name}'s "
                             f"{system.chips} chips")
        dp = system.chips // (tp * pp)
        plan = Plan(tp=tp, pp=pp, dp=dp, micro_batch=batch, global_batch=batch * dp,
                    optimizer=optimizer)
    try:
        r = simulate(system, workload, plan, scheme, Options())
    except InputError as exc:  # what this design cannot run (a plan, a stack rule)
        raise Infeasible(str(exc)) from None
    d = r.as_dict()
    if not d["fits_memory"]:
        raise Infeasible(f"does not fit in memory on {system.name}")
    if isinstance(r, WorkloadPrediction):
        step_s, memory = r.step.step_s, r.memory_bytes / 2**30
        e = r.energy or (layer_step_energy(r) if power is not None else None)
        if e is not None:
            energy, source = e.energy_J, "power model"
        else:  # no power table: the datapath table predict prices such a chip's step with
            from accelsim.dse.energy import step_energy, step_work

            energy = step_energy(system, step_work(system, workload, r.scheme,
                                                   r.step.minibatch),
                                 step_s, r.step.minibatch).energy_J
            source = "datapath table (14 nm)"
    else:
        step_s, memory = r.iteration_time_s, r.memory.total_GiB
        energy = math.nan if r.energy is None else r.energy.energy_J
        source = "power model" if r.energy is not None else "none (no power table)"
    clock = system.chip.core.frequency_Hz / 1e6 if r.clock_MHz is None else r.clock_MHz
    return {"step_time_s": step_s, "samples_per_s": d["samples_per_s"],
            "energy_per_step_J": energy, "power_W": energy / step_s, "clock_MHz": clock,
            "memory_GiB": memory, "datapath": core.datapath(scheme.compute_precision),
            "energy_source": source}


step_point.columns = STEP_COLUMNS


def _workload(spec: str):
    from accelsim.paths import resolve_input
    from accelsim.workload import load_workload, read_scalesim_topology

    path = resolve_input(spec, "workload")
    return read_scalesim_topology(path) if path.suffix.lower() == ".csv" else load_workload(path)


# --------------------------------------------------------------------------- the table
def recipe_steps_for(steps_row: Mapping[str, Any],
                     baseline_steps: float | None) -> tuple[float, float, float] | None:
    """(steps, ci95_lo, ci95_hi) a recipe needs on the timed workload, None when it never reaches
    the target: its own mean and interval (``baseline_steps`` None) or ``baseline_steps`` times
    its ratio to the baseline and that ratio's interval."""
    if not bool(steps_row["feasible"]):
        return None
    if baseline_steps is None:
        return (float(steps_row["mean"]), float(steps_row["ci95_lo"]),
                float(steps_row["ci95_hi"]))
    ratio = float(steps_row["steps_ratio"])
    if ratio != ratio:
        return None
    return (baseline_steps * ratio, baseline_steps * float(steps_row["steps_ratio_ci95_lo"]),
            baseline_steps * float(steps_row["steps_ratio_ci95_hi"]))


def schemes_to_time(steps_table, recipes: Sequence[str],
                    baseline_steps: float | None) -> tuple[str, ...]:
    """The engine schemes of the ``recipes`` that reach the target (the only ones timed)."""
    from accelsim.arch.recipe_schemes import recipe_scheme

    steps = steps_table.set_index("recipe")
    return tuple(dict.fromkeys(
        recipe_scheme(r).scheme for r in recipes
        if recipe_scheme(r).scheme and recipe_steps_for(steps.loc[r], baseline_steps)))


def codesign_table(steps_table, designs: Sequence[Design], recipes: Sequence[str],
                   step_rows, baseline_steps: float | None = None):
    """One row per (design, recipe) (:data:`COLUMNS`): ``step_rows`` (the sweep's table over
    ``chip`` x ``scheme``) joined with ``steps_table``; an infeasible row (the recipe never
    reaches the target, has no engine scheme, or the design cannot run it) has a ``reason`` and
    no step, time or energy. ``pareto``: on the time-energy front of the feasible rows."""
    import numpy as np
    import pandas as pd

    from accelsim.arch.recipe_schemes import recipe_scheme
    from accelsim.dse.pareto import pareto_front

    steps = steps_table.set_index("recipe")
    engine = {(str(r["chip"]), str(r["scheme"])): r for _, r in step_rows.iterrows()}
    nan = math.nan
    rows = []
    for d in designs:
        for recipe in recipes:
            m = recipe_scheme(recipe)
            row = dict.fromkeys(COLUMNS, nan)
            row.update(design=d.name, chip=d.label, recipe=recipe, scheme=m.scheme or "",
                       feasible=False, reason="", pareto=False,
                       area_mm2=nan if d.area_mm2 is None else d.area_mm2)
            need = recipe_steps_for(steps.loc[recipe], baseline_steps)
            e = engine.get((d.key, m.scheme)) if m.scheme else None
            if m.scheme is None:
                row["reason"] = f"no engine scheme: {m.note}"
            elif need is None:
                row["reason"] = _infeasible_reason(steps.loc[recipe])
            elif e is None or e["status"] != "ok":
                row["reason"] = "design cannot run it: " + ("not evaluated" if e is None
                                                            else str(e["reason"]))
            else:
                row.update({c: float(e[c]) for c in ("step_time_s", "samples_per_s",
                                                     "energy_per_step_J", "power_W",
                                                     "clock_MHz")}, datapath=e["datapath"])
                n, lo, hi = need
                t, en = row["step_time_s"], row["energy_per_step_J"]
                row.update(feasible=True, steps_to_target=n, steps_ci95_lo=lo,
                           steps_ci95_hi=hi, time_to_target_s=n * t,
                           time_to_target_s_ci95_lo=lo * t, time_to_target_s_ci95_hi=hi * t,
                           energy_to_target_J=n * en, energy_to_target_J_ci95_lo=lo * en,
                           energy_to_target_J_ci95_hi=hi * en)
            rows.append(row)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    ok = table["feasible"] & np.isfinite(table["energy_to_target_J"].to_numpy(dtype=float))
    if ok.any():
        front = pareto_front(table.loc[ok, "time_to_target_s"], table.loc[ok, "energy_to_target_J"],
                             maximize=(False, False))
        table.loc[table.index[ok], "pareto"] = front
    return table


def _infeasible_reason(steps_row) -> str:
    if not bool(steps_row["feasible"]):
        runs = (f" ({int(steps_row['reached'])} of {int(steps_row['n'])} runs reached it)"
                if "n" in steps_row.index and "reached" in steps_row.index else "")
        return "infeasible: does not reach the target loss" + runs
    return "infeasible: the baseline does not reach the target (no step ratio)"
