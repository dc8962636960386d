"""Fit the step model's few global knobs to every published appendix-D number of the HFP8 paper
(minimax: the worst deviation in units of its tolerance), print the fit, and show how well the
data pin each knob.

Fitted (one value each, for every figure; nothing per point), inside physical bounds
(:data:`BOUNDS`, each with its source):

* ``per_tensor_overhead_s`` -- fixed cost per parameter tensor per optimizer step on a chip; a
  sharded (HFP8) update still visits every tensor's slice, so HFP8 does not divide this part.
* ``memory_efficiency`` -- fraction of peak chip memory bandwidth the streaming update reaches.
* ``minibatch`` -- global minibatch, a multiple of the chip count (compute vs communication).
* ``overlap`` -- fraction of back-propagation during which the gradient reduce-scatter runs
  (step.py's one overlap rule). Fitted because the ten numbers are NOT all within tolerance
  with the reduction fully exposed (the script prints that best no-overlap compromise and the
  numbers that conflict); layer-wise gradients are ready before back-propagation ends, so a
  partly hidden reduce-scatter is what data-parallel frameworks do (bucketed all-reduce).

The model is accelsim's own: collective times from netsim (independent of the knobs, cached),
weight-update and compression costs from netsim's functions, compute profiles from the explorer
(cached per minibatch), the published metrics from ``hfp8_published.paper_metrics``. Only the
step-time rule is evaluated here on arrays (:func:`step_arrays`, the vectorized twin of
``schedule.combine``; tests/test_training_calibration.py checks them against each other).

Stages: a coarse grid over all knobs for every candidate minibatch, then a fine grid around the
best region; the fit is the fine-grid point with the smallest worst deviation. Identifiability:
every fine-grid point inside the bounds whose ten deviations are all within tolerance; the
range of each knob over that set and the spread it causes in every figure of the study.

Run: ``python scripts/calibrate.py [--out reports] [--loo]`` (writes calibration.csv,
calibration_ranges.csv and calibration_spread.csv there). Paste the printed ``PAPER_SETUP``
into ``accelsim/dse/hfp8_study.py`` if it changed, then regenerate the reports
(``python -m accelsim.cli figures --out reports``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from accelsim.arch import build_system, load_system, with_chip_bandwidth  # noqa: E402
from accelsim.arch.scenario import single_chip_overrides  # noqa: E402
from accelsim.dse import hfp8_published as published  # noqa: E402
from accelsim.dse import hfp8_study as study  # noqa: E402
from accelsim.dse import training  # noqa: E402
from accelsim.engine import run as engine_run  # noqa: E402
from accelsim.engine import schedule  # noqa: E402
from accelsim.netsim import UpdateParams, compression_cost, weight_update_cost  # noqa: E402
from accelsim.netsim.system import chip_rates  # noqa: E402
from accelsim.paths import resolve_input  # noqa: E402
from accelsim.workload import load_workload  # noqa: E402


# --------------------------------------------------------------------------- physical bounds
class Bound(NamedTuple):
    """A physical bound on one knob, with where it comes from."""

    name: str
    lo: float
    hi: float
    source: str


BOUNDS: dict[str, Bound] = {b.name: b for b in (
    Bound("per_tensor_overhead_s", 0.0, 10e-6,
          "lower: 0, a fully fused multi-tensor update (NVIDIA apex FusedSGD docs, "
          "nvidia.github.io/apex: 'a multi-tensor apply launch that batches the elementwise "
          "updates applied to all the model's parameters into one or a few kernel launches'); "
          "upper: one kernel per tensor for each of ~3 element-wise steps of SGD with momentum "
          "at the ~3 us null-kernel launch floor (NVIDIA developer forums, 'Too much time for "
          "kernel launch latency', forums.developer.nvidia.com/t/233645) = ~10 us"),
    Bound("memory_efficiency", 0.58, 0.89,
          "measured streaming kernels on HBM2 (te42kyfo/gpu-benches README, cuda-stream): "
          "upper 0.89 = best read+write kernel at full occupancy (4-stream triad 799 GB/s of "
          "900 on V100-PCIe, 1384 of 1555 GB/s on A100-SXM4-40GB); lower 0.58 = the triad "
          "with only one thread block per SM (908 of 1555 GB/s on A100, 602 of 900 on V100)"),
    Bound("overlap", 0.0, 1.0, "definition (fraction of the backward pass)"),
)}

#: Grid steps of the fine stage (also the resolution the fit is quoted with).
FINE_STEP = {"per_tensor_overhead_s": 0.02e-6, "memory_efficiency": 0.0025, "overlap": 0.01}
COARSE_N = {"per_tensor_overhead_s": 51, "memory_efficiency": 32, "overlap": 26}
KNOBS = ("per_tensor_overhead_s", "memory_efficiency", "overlap")


def step_arrays(profile: schedule.ComputeProfile, rs, ag, wu, cs, overlap):
    """(step_s, exposed_comm_s) of :func:`accelsim.engine.schedule.combine` on numpy arrays of
    parameter sets: step = compute + compression pass + exposed comm, the reduce-scatter
    hidden behind at most ``overlap`` x backward (never more than the reduce-scatter)."""
    hidden = np.minimum(np.maximum(np.multiply(overlap, profile.backward_s), 0.0), rs)
    exposed = rs + ag + wu - hidden
    return profile.compute_s + cs + exposed, exposed


class Calibrator:
    """Cached pieces of the fit for one system + workload: collective times per scheme x
    chip_GBps x compression (independent of the knobs), compute profiles per minibatch, the
    weight-update / compression costs from netsim's functions."""

    def __init__(self, system, workload, engine: str = "analytic", *,
                 fit_keys: frozenset[str] = published.CALIBRATE_FIT_KEYS):
        self.system, self.workload, self.engine = system, workload, engine
        #: the published numbers the objective reads (leave-one-out passes all but one)
        self.fit_keys = frozenset(fit_keys)
        self.fit_rows = tuple(q for q in published.PUBLISHED if q.key in self.fit_keys)
        if len(self.fit_rows) != len(self.fit_keys):
            raise ValueError(f"unknown published keys: {sorted(self.fit_keys - {q.key for q in published.PUBLISHED})}")
        self.n, self.nt = int(workload.n_params), workload.n_param_tensors
        self.mem, self.vec = chip_rates(system)
        self.settings = [(s, b, c) for s in study.SCHEMES for b in study.CHIP_GBPS
                         for c in study.COMPRESSIONS]
        self.coll = {}
        for s, b, c in self.settings:
            base = schedule.TrainingParams(minibatch=system.chips, compression=c, engine=engine)
            ph = engine_run.comm_phases(with_chip_bandwidth(system, b), workload, s, base)
            self.coll[s, b, c] = (ph.reduce_scatter_s, ph.all_gather_s)
        self._profiles: dict[int, dict] = {}

    # ---- model pieces (netsim's functions, evaluated per distinct efficiency)
    def update_s(self, scheme: str, t, eff, *, system=None, n_chips=None):
        """Weight-update time on arrays: netsim's weight_update_cost at each distinct
        efficiency (per-tensor overhead 0), plus n_tensors x t (the cost model's own term)."""
        mem, vec = chip_rates(system) if system is not None else (self.mem, self.vec)
        chips = n_chips or self.system.chips
        eff = np.asarray(eff, dtype=float)
        u, inv = np.unique(eff, return_inverse=True)
        base = np.array([weight_update_cost(
            self.n, scheme, chips, memory_Bps=mem, vector_ops_per_s=vec, n_tensors=self.nt,
            params=UpdateParams(memory_efficiency=float(e))).time_s for e in u])
        one = weight_update_cost(self.n, scheme, chips, memory_Bps=mem, vector_ops_per_s=vec,
                                 n_tensors=self.nt,
                                 params=UpdateParams(memory_efficiency=float(u[0]),
                                                     per_tensor_overhead_s=1e-6)).time_s
        slope = (one - base[0]) / 1e-6  # = n_tensors
        return base[inv].reshape(eff.shape) + slope * np.asarray(t, dtype=float)

    def compress_s(self, scheme: str, comp: float, eff):
        eff = np.asarray(eff, dtype=float)
        u, inv = np.unique(eff, return_inverse=True)
        v = np.array([compression_cost(self.n, scheme, comp, memory_Bps=self.mem,
                                       vector_ops_per_s=self.vec,
                                       params=UpdateParams(memory_efficiency=float(e))).time_s
                      for e in u])
        return v[inv].reshape(eff.shape)

    def profiles(self, per_chip: int) -> dict:
        if per_chip not in self._profiles:
            mb = per_chip * self.system.chips
            self._profiles[per_chip] = {s: training.compute_profile(self.system, self.workload, s, mb)
                                        for s in study.SCHEMES}
        return self._profiles[per_chip]

    def rows(self, per_chip: int, t, eff, overlap) -> list[dict]:
        """The study grid (scheme x chip_GBps x compression) for arrays of knob values."""
        t, eff, overlap = np.broadcast_arrays(np.asarray(t, float), np.asarray(eff, float),
                                              np.asarray(overlap, float))
        prof = self.profiles(per_chip)
        wu = {s: self.update_s(s, t, eff) for s in study.SCHEMES}
        cs = {}
        out = []
        for s, b, c in self.settings:
            if (s, c) not in cs:
                cs[s, c] = self.compress_s(s, c, eff)
            rs, ag = self.coll[s, b, c]
            st, exp = step_arrays(prof[s], rs, ag, wu[s], cs[s, c], overlap)
            out.append({"scheme": s, "chip_GBps": b, "compression": c,
                        "samples_per_s": prof[s].minibatch / st, "step_s": st,
                        "reduce_scatter_s": rs, "all_gather_s": ag, "weight_update_s": wu[s],
                        "compression_s": cs[s, c], "comm_fraction": exp / st})
        return out

    def metrics(self, per_chip, t, eff, overlap) -> dict:
        return published.paper_metrics(self.rows(per_chip, t, eff, overlap))

    def worst(self, m: dict):
        """Largest |accelsim - published| / tolerance over the fit's published numbers
        (:attr:`fit_rows`: all ten, :data:`hfp8_published.CALIBRATE_FIT_KEYS`)."""
        return np.max(np.stack(np.broadcast_arrays(*[
            np.abs(m[q.key] - q.value) / q.tolerance for q in self.fit_rows])), axis=0)

    # ---- search
    @staticmethod
    def _axis(name, lo=None, hi=None, n=None):
        b = BOUNDS[name]
        lo, hi = max(b.lo, b.lo if lo is None else lo), min(b.hi, b.hi if hi is None else hi)
        if n is not None:
            return np.linspace(lo, hi, n)
        st = FINE_STEP[name]
        k0, k1 = int(np.ceil(lo / st - 1e-9)), int(np.floor(hi / st + 1e-9))
        return np.round(np.arange(k0, k1 + 1) * st, 12)

    def coarse(self, per_chip: int, *, fixed_overlap: float | None = None):
        """Coarse grid over the bounds: (worst, t, eff, overlap) arrays (flattened)."""
        ax = [self._axis(k, n=COARSE_N[k]) for k in KNOBS]
        if fixed_overlap is not None:
            ax[2] = np.array([fixed_overlap])
        t, e, o = (a.ravel() for a in np.meshgrid(*ax, indexing="ij"))
        return self.worst(self.metrics(per_chip, t, e, o)), t, e, o

    def fine(self, per_chip: int, box: dict, *, fixed_overlap: float | None = None):
        ax = [self._axis(k, *box[k]) for k in KNOBS]
        if fixed_overlap is not None:
            ax[2] = np.array([fixed_overlap])
        t, e, o = (a.ravel() for a in np.meshgrid(*ax, indexing="ij"))
        w = np.empty_like(t)
        for i in range(0, t.size, 200_000):  # bounded memory
            sl = slice(i, i + 200_000)
            w[sl] = self.worst(self.metrics(per_chip, t[sl], e[sl], o[sl]))
        return w, t, e, o

    def search(self, per_chip_batches, *, fixed_overlap=None, log=print):
        """Coarse stage for every minibatch, fine stage around the promising region.
        Returns (best, points): best = (worst, per_chip, t, eff, overlap); points = list of
        (per_chip, worst, t, eff, overlap) arrays of the fine grids."""
        coarse = {}
        for k in per_chip_batches:
            w, t, e, o = self.coarse(k, fixed_overlap=fixed_overlap)
            coarse[k] = (w, t, e, o)
            i = int(np.argmin(w))
            log(f"  minibatch {k * self.system.chips:5d} ({k:2d}/chip): coarse best worst "
                f"deviation {w[i]:.3f} tol at t={t[i] * 1e6:.2f} us, eff={e[i]:.3f}, "
                f"overlap={o[i]:.2f}")
        best_w = min(float(v[0].min()) for v in coarse.values())
        steps = {k: (BOUNDS[k].hi - BOUNDS[k].lo) / (COARSE_N[k] - 1) for k in KNOBS}
        points, best = [], None
        for k, (w, t, e, o) in coarse.items():
            # fine stage where the coarse grid is feasible or close to the best found
            # (one coarse step moves the worst deviation by well under 0.3 tolerance)
            sel = w <= max(1.0, best_w) + 0.3
            if not sel.any():
                continue
            box = {name: (float(v[sel].min()) - steps[name], float(v[sel].max()) + steps[name])
                   for name, v in zip(KNOBS, (t, e, o))}
            fw, ft, fe, fo = self.fine(k, box, fixed_overlap=fixed_overlap)
            points.append((k, fw, ft, fe, fo))
            ok = fw <= 1.0
            for name, v in zip(KNOBS, (ft, fe, fo)):
                if fixed_overlap is not None and name == "overlap":
                    continue
                b = BOUNDS[name]
                edge = [x for x in (v.min(), v.max()) if b.lo < x < b.hi]
                if ok.any() and any(np.isclose(v[ok], x).any() for x in edge):
                    log(f"  WARNING: minibatch {k}/chip: in-tolerance set touches the fine "
                        f"search box in {name}; its range may be wider than reported")
            i = int(np.argmin(fw))
            if best is None or fw[i] < best[0]:
                best = (float(fw[i]), k, float(ft[i]), float(fe[i]), float(fo[i]))
        return best, points


# --------------------------------------------------------------------------- leave-one-out
def leave_one_out(system, workload, per_chip_batches, *, engine: str = "analytic",
                  log=lambda *a: None):
    """Refit the four knobs without each published number (the same coarse + fine minimax
    search over the same bounds, on the other nine) and predict the one left out.
    Returns one dict per number: key, published, tolerance, in-fit value, left-out value and
    the refit knobs."""
    full = Calibrator(system, workload, engine)
    best, _ = full.search(per_chip_batches, log=log)
    m_in = full.metrics(best[1], best[2], best[3], best[4])
    out = []
    for q in published.PUBLISHED:
        if q.key not in published.CALIBRATE_FIT_KEYS:
            continue
        cal = Calibrator.__new__(Calibrator)  # share the cached collectives and profiles
        cal.__dict__.update(full.__dict__)
        cal.fit_keys = published.CALIBRATE_FIT_KEYS - {q.key}
        cal.fit_rows = tuple(x for x in published.PUBLISHED if x.key in cal.fit_keys)
        b, _ = cal.search(per_chip_batches, log=log)
        m = cal.metrics(b[1], b[2], b[3], b[4])
        out.append({"metric": q.key, "published": q.value, "tolerance": q.tolerance,
                    "fit": float(m_in[q.key]), "loo": float(m[q.key]),
                    "loo_worst_others": b[0], "minibatch": b[1] * system.chips,
                    "per_tensor_overhead_s": b[2], "memory_efficiency": b[3], "overlap": b[4]})
    return out


# --------------------------------------------------------------------------- reporting
def residual_table(cal, fit, compromise):
    """One row per published number: fit, residual, tolerance, binding; the no-overlap
    compromise next to it."""
    import pandas as pd

    m = cal.metrics(fit[1], fit[2], fit[3], fit[4])
    m0 = cal.metrics(compromise[1], compromise[2], compromise[3], compromise[4])
    rows = []
    for q in published.PUBLISHED:
        d, d0 = float(m[q.key]) - q.value, float(m0[q.key]) - q.value
        rows.append({"metric": q.key, "label": published.paper_label(q.key),
                     "published": q.value, "tolerance": q.tolerance,
                     "fit": float(m[q.key]), "residual": d,
                     "binding": abs(d) / q.tolerance >= fit[0] - 0.02,
                     "no_overlap_fit": float(m0[q.key]), "no_overlap_residual": d0,
                     "no_overlap_binding": abs(d0) / q.tolerance >= compromise[0] - 0.02})
    return pd.DataFrame(rows)


def dgx1_arrays(cal, dgx1_path, t, eff, overlap):
    """Predicted DGX-1 images/s (1 and 8 V100s, NVIDIA's 256 per GPU) for arrays of knobs: the
    same pieces as ``hfp8_study.dgx1_table``."""
    out = {}
    for gpus, _ in published.DGX1_PUBLISHED:
        system = build_system(dgx1_path, single_chip_overrides() if gpus == 1 else {})
        p = schedule.TrainingParams(minibatch=published.DGX1_MINIBATCH_PER_GPU * gpus)
        prof = training.compute_profile(system, cal.workload, "fp16", p.minibatch)
        ph = engine_run.comm_phases(system, cal.workload, "fp16", p)
        wu = cal.update_s("fp16", t, eff, system=system, n_chips=system.chips)
        st, _ = step_arrays(prof, ph.reduce_scatter_s, ph.all_gather_s, wu, 0.0, overlap)
        out[gpus] = p.minibatch / st
    return out


def identifiability(cal, points, fit, dgx1_path):
    """Range of every knob over the in-tolerance set and the spread of every study figure.
    Returns (ranges DataFrame, per-point spread DataFrame, n_points)."""
    import pandas as pd

    sets = [(k, t[w <= 1.0], e[w <= 1.0], o[w <= 1.0]) for k, w, t, e, o in points]
    sets = [s for s in sets if s[1].size]
    n = sum(s[1].size for s in sets)
    rows = []
    if n == 0:
        return pd.DataFrame(rows), pd.DataFrame(), 0
    fit_rows = {(r["scheme"], r["chip_GBps"], r["compression"]): r
                for r in cal.rows(fit[1], fit[2], fit[3], fit[4])}
    lo, hi = {}, {}
    for k, t, e, o in sets:
        for r in cal.rows(k, t, e, o):
            key = (r["scheme"], r["chip_GBps"], r["compression"])
            for col in ("samples_per_s", "weight_update_s", "comm_fraction", "compression_s"):
                v = np.broadcast_to(r[col], t.shape)
                lo[key, col] = min(lo.get((key, col), np.inf), float(v.min()))
                hi[key, col] = max(hi.get((key, col), -np.inf), float(v.max()))
    chips = cal.system.chips
    allk = np.concatenate([np.full(s[1].size, s[0]) for s in sets])
    allv = {"per_tensor_overhead_s": np.concatenate([s[1] for s in sets]),
            "memory_efficiency": np.concatenate([s[2] for s in sets]),
            "overlap": np.concatenate([s[3] for s in sets])}

    def prm(name, value, a, unit, scale=1.0):
        b = BOUNDS.get(name)
        at = []
        if b is not None and a.min() <= b.lo + 1e-12:
            at.append("lower bound")
        if b is not None and a.max() >= b.hi - 1e-12:
            at.append("upper bound")
        rows.append({"group": "parameter", "quantity": name, "unit": unit,
                     "fit": value * scale, "low": float(a.min()) * scale,
                     "high": float(a.max()) * scale,
                     "spread_pct": float("nan"), "note": ", ".join(at) or "interior"})

    prm("minibatch", fit[1] * chips, allk * chips, "images")
    prm("per_tensor_overhead_s", fit[2], allv["per_tensor_overhead_s"], "us", 1e6)
    prm("memory_efficiency", fit[3], allv["memory_efficiency"], "")
    prm("overlap", fit[4], allv["overlap"], "")

    def fig(group, quantity, unit, keys, col, scale=1.0, note=None):
        f = np.array([float(fit_rows[k][col]) for k in keys])
        lo_, hi_ = np.array([lo[k, col] for k in keys]), np.array([hi[k, col] for k in keys])
        rel = np.maximum((f - lo_) / f, (hi_ - f) / f) if (f > 0).all() else np.zeros_like(f)
        j = int(np.argmax(rel))
        rows.append({"group": group, "quantity": quantity, "unit": unit,
                     "fit": f[j] * scale, "low": lo_[j] * scale, "high": hi_[j] * scale,
                     "spread_pct": 100.0 * float(rel[j]),
                     "note": note or f"largest at chip_GBps={keys[j][1]:g}, "
                                     f"compression={keys[j][2]:g}"})

    for s in study.SCHEMES:
        fig("Fig. 8 / compression sweep", f"{s} throughput", "kimages/s",
            [(s, b, c) for b in study.CHIP_GBPS for c in study.COMPRESSIONS], "samples_per_s", 1e-3)
    for s in study.SCHEMES:
        fig("Fig. 9", f"{s} weight update", "us",
            [(s, b, 1.0) for b in study.CHIP_GBPS], "weight_update_s", 1e6,
            note="the same at every chip_GBps and compression (RS and AG do not depend on "
                 "the parameters)")
    for s in study.SCHEMES:
        fig("Fig. 8", f"{s} exposed-communication share", "%",
            [(s, b, c) for b in study.CHIP_GBPS for c in study.COMPRESSIONS], "comm_fraction", 100)
    if dgx1_path is not None:
        f = dgx1_arrays(cal, dgx1_path, np.array([fit[2]]), np.array([fit[3]]), np.array([fit[4]]))
        d = dgx1_arrays(cal, dgx1_path, allv["per_tensor_overhead_s"], allv["memory_efficiency"],
                        allv["overlap"])
        for gpus, _ in published.DGX1_PUBLISHED:
            fv, a = float(f[gpus][0]), d[gpus]
            rows.append({"group": "DGX-1 check", "quantity": f"{gpus} x V100 FP16 throughput",
                         "unit": "images/s", "fit": fv, "low": float(a.min()),
                         "high": float(a.max()),
                         "spread_pct": 100 * max(fv - a.min(), a.max() - fv) / fv,
                         "note": "minibatch fixed by NVIDIA's benchmark"})
    spread = []
    for key, r in fit_rows.items():
        spread.append({"scheme": key[0], "chip_GBps": key[1], "compression": key[2],
                       **{f"{c}{suf}": v for c in ("samples_per_s", "weight_update_s",
                                                   "comm_fraction")
                          for suf, v in (("", float(r[c])), ("_low", lo[key, c]),
                                         ("_high", hi[key, c]))}})
    return pd.DataFrame(rows), pd.DataFrame(spread), n


def _fmt_fit(best):
    w, k, t, e, o = best
    return f"minibatch {k}/chip, per_tensor_overhead_s {t * 1e6:.2f} us, " \
           f"memory_efficiency {e:.4g}, overlap {o:.2f} (worst deviation {w:.3f} tolerance)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default=study.DEFAULT_SYSTEM)
    ap.add_argument("--workload", default=study.DEFAULT_WORKLOAD)
    ap.add_argument("--dgx1", default=study.DEFAULT_DGX1, help="'none' skips its spread")
    ap.add_argument("--engine", default="analytic", choices=("analytic", "des"))
    ap.add_argument("--per-chip-batches", default="3,4,5,6,7,8,9,10,12",
                    help="candidate images per chip for the minibatch")
    ap.add_argument("--loo", action="store_true",
                    help="also refit without each published number and predict it "
                    "(leave-one-out: ten more searches)")
    ap.add_argument("--out", default=None, metavar="DIR",
                    help="write calibration.csv, calibration_ranges.csv, calibration_spread.csv")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    system = load_system(resolve_input(args.system, "system")).with_boost_clock()
    workload = load_workload(resolve_input(args.workload, "workload"))
    dgx1 = None if args.dgx1.lower() == "none" else resolve_input(args.dgx1, "system")
    cal = Calibrator(system, workload, args.engine)
    batches = [int(x) for x in args.per_chip_batches.split(",")]
    print(f"system {system.name}: {system.chips} chips, memory {cal.mem / 1e9:.0f} GB/s per "
          f"chip; workload {workload.name}: {cal.n:,} params in {cal.nt} tensors; engine "
          f"{args.engine}; {len(published.PUBLISHED)} published numbers")
    print(f"fit rows ({len(cal.fit_rows)} published numbers, label 'fit' in the reports): "
          + ", ".join(q.key for q in cal.fit_rows))
    print("bounds:")
    for b in BOUNDS.values():
        print(f"  {b.name:<22} [{b.lo:g}, {b.hi:g}]  {b.source}")
    print("search with the overlap fitted:")
    best, points = cal.search(batches)
    print("search with the reduction fully exposed (overlap 0):")
    best0, _ = cal.search(batches, fixed_overlap=0.0)
    res = residual_table(cal, best, best0)
    w, k, t, e, o = best
    fit = dataclasses.replace(study.PAPER_SETUP, minibatch=k * system.chips, overlap=o,
                              per_tensor_overhead_s=float(f"{t:.3g}"),
                              memory_efficiency=float(f"{e:.4g}"))
    print()
    print("minimax fit (worst |accelsim - published| / tolerance):")
    print(f"  per_tensor_overhead_s = {fit.per_tensor_overhead_s:.3g}  ({t * 1e6:.2f} us per "
          f"tensor, {cal.nt * t * 1e6:.0f} us per update)")
    print(f"  memory_efficiency     = {fit.memory_efficiency:.4g}  ({e * cal.mem / 1e9:.0f} GB/s "
          "achieved by the update kernel)")
    print(f"  minibatch             = {fit.minibatch}  ({k} images per chip)")
    print(f"  overlap               = {fit.overlap:.2f}  (of the backward pass)")
    print(f"  worst deviation       = {w:.3f} tolerance "
          f"({'all within tolerance' if w <= 1 else 'NOT all within tolerance'})")
    print(f"  no-overlap compromise: {_fmt_fit(best0)}")
    print(f"{'metric':<40} {'published':>9} {'fit':>7} {'resid':>6} {'tol':>5}  "
          f"{'no-ovl':>7} {'resid':>6}")
    for r in res.itertuples(index=False):
        print(f"{r.metric:<40} {r.published:9.1f} {r.fit:7.2f} {r.residual:+6.2f} "
              f"{r.tolerance:5.1f}{' *' if r.binding else '  '} {r.no_overlap_fit:7.2f} "
              f"{r.no_overlap_residual:+6.2f}{' *' if r.no_overlap_binding else ''}")
    print("  * active constraint (deviation at the minimax value)")
    at_bound = [f"{n}={v:g} at its {'lower' if abs(v - BOUNDS[n].lo) < 1e-15 else 'upper'} bound"
                for n, v in (("per_tensor_overhead_s", t), ("memory_efficiency", e),
                             ("overlap", o))
                if abs(v - BOUNDS[n].lo) < 1e-15 or abs(v - BOUNDS[n].hi) < 1e-15]
    print("  active bounds: " + (", ".join(at_bound) if at_bound else "none"))
    ranges, spread, n = identifiability(cal, points, best, dgx1)
    print()
    print(f"identifiability: {n} grid points (steps {FINE_STEP}) inside the bounds have all "
          f"{len(published.PUBLISHED)} numbers within tolerance")
    if n:
        print(f"{'group':<28} {'quantity':<34} {'fit':>9} {'low':>9} {'high':>9} {'spread':>7}")
        for r in ranges.itertuples(index=False):
            sp = "" if np.isnan(r.spread_pct) else f"{r.spread_pct:6.1f}%"
            print(f"{r.group:<28} {r.quantity + (f' [{r.unit}]' if r.unit else ''):<34} "
                  f"{r.fit:9.4g} {r.low:9.4g} {r.high:9.4g} {sp:>7}  {r.note}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        meta = (f"PAPER_SETUP minibatch={fit.minibatch} overlap={fit.overlap:g} "
                f"per_tensor_overhead_s={fit.per_tensor_overhead_s:g} "
                f"memory_efficiency={fit.memory_efficiency:g}")
        res.assign(fit_params=meta).to_csv(out / "calibration.csv", index=False,
                                           float_format="%.6g")
        ranges.assign(n_points=n, fit_params=meta).to_csv(out / "calibration_ranges.csv",
                                                          index=False, float_format="%.6g")
        spread.to_csv(out / "calibration_spread.csv", index=False, float_format="%.6g")
        print(f"wrote {out / 'calibration.csv'}, {out / 'calibration_ranges.csv'}, "
              f"{out / 'calibration_spread.csv'}")
    if args.loo:
        print()
        print("leave-one-out: the same search without each number, then predict it")
        print(f"{'metric':<40} {'published':>9} {'in fit':>7} {'left out':>8} {'tol':>5}")
        for r in leave_one_out(system, workload, batches, engine=args.engine):
            print(f"{r['metric']:<40} {r['published']:9.1f} {r['fit']:7.2f} {r['loo']:8.2f} "
                  f"{r['tolerance']:5.1f}  (refit: minibatch {r['minibatch']}, "
                  f"{r['per_tensor_overhead_s'] * 1e6:.2f} us, eff {r['memory_efficiency']:.4g},"
                  f" overlap {r['overlap']:.2f})")
    print()
    print(f"PAPER_SETUP = TrainingParams(minibatch={fit.minibatch}, overlap={fit.overlap!r}, "
          f"per_tensor_overhead_s={fit.per_tensor_overhead_s!r}, "
          f"memory_efficiency={fit.memory_efficiency!r})")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
