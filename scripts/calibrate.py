"""Fit the step model's few global knobs to the HFP8 paper's published ratios and print the fit.

Fitted (one value each, for every figure; nothing per point):

* ``per_tensor_overhead_s`` -- fixed cost per parameter tensor per optimizer step on a chip.
  A sharded (HFP8) update still visits a slice of every tensor, so this is the part of the
  weight update that HFP8 does NOT divide by N; it sets how much HFP8 saves at high bandwidth.
* ``memory_efficiency`` -- fraction of peak chip memory bandwidth a streaming update reaches;
  sets the full-model (FP16/FP8) update time.
* ``minibatch`` -- global minibatch (multiple of the chip count); sets compute vs communication,
  hence the FP8-over-FP16 and HFP8-over-FP8 gains.

Not fitted: ``overlap`` stays 0 (gradient reduction after back-propagation). The paper's
FP8-over-FP16 +31 %, HFP8-over-FP8 +28 % and the 32 % communication cut at 32 GB/s are mutually
consistent only if the communication is fully exposed (section printed below).

Each knob is fitted against the observables it controls: the two weight-update knobs against
the four published communication cuts (which do not depend on compute), then the minibatch
against all seven published numbers (in practice the two throughput gains and the comm share).

Run: ``python scripts/calibrate.py``. Paste the printed ``PAPER_SETUP`` into
``accelsim/dse/training.py`` if it changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from accelsim.arch import load_system  # noqa: E402
from accelsim.dse import training as tr  # noqa: E402
from accelsim.netsim import UpdateParams, compression_cost, weight_update_cost  # noqa: E402
from accelsim.netsim.system import chip_rates  # noqa: E402
from accelsim.workload import load_workload  # noqa: E402



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", default=tr.DEFAULT_SYSTEM)
    ap.add_argument("--workload", default=tr.DEFAULT_WORKLOAD)
    ap.add_argument("--engine", default="analytic", choices=("analytic", "des"))
    ap.add_argument("--per-chip-batches", default="1,2,3,4,5,6,8,10,12,16,24,32",
                    help="candidate images per chip for the minibatch fit")
    args = ap.parse_args()
    t0 = time.perf_counter()
    system = load_system(tr.resolve_path(args.system))
    workload = load_workload(tr.resolve_path(args.workload))
    n, nt = int(workload.n_params), tr.n_param_tensors(workload)
    mem, vec = chip_rates(system)
    base = tr.TrainingParams(minibatch=system.chips)

    # Collective (network) times do not depend on the knobs: compute them once per setting.
    settings = [(32.0, 1.0), (64.0, 1.0), (128.0, 1.0), (32.0, 256.0)]
    coll = {}
    for s in tr.SCHEMES:
        for link, comp in settings:
            c = tr.comm_phases(system, workload, s, base, link_GBps=link, compression=comp,
                               engine=args.engine)
            coll[s, link, comp] = (c.reduce_scatter_s, c.all_gather_s)

    def knobs(t, eff):
        return UpdateParams(memory_efficiency=eff, per_tensor_overhead_s=t)

    def wu(scheme, t, eff):
        return weight_update_cost(n, scheme, system.chips, memory_Bps=mem, vector_ops_per_s=vec,
                                  n_tensors=nt, params=knobs(t, eff)).time_s

    def comp_s(scheme, comp, eff):
        return compression_cost(n, scheme, comp, memory_Bps=mem, vector_ops_per_s=vec,
                                params=knobs(0.0, eff)).time_s

    def metrics(profiles, t, eff):
        rows = []
        for s in tr.SCHEMES:
            w = wu(s, t, eff)
            for link, comp in settings:
                rs, ag = coll[s, link, comp]
                st = tr.combine(profiles[s], tr.CommPhases(rs, ag, w, comp_s(s, comp, eff)))
                rows.append({"scheme": s, "link_GBps": link, "compression": comp,
                             "images_per_s": st.images_per_s, "reduce_scatter_s": rs,
                             "all_gather_s": ag, "weight_update_s": w,
                             "comm_fraction": st.comm_fraction})
        return tr.paper_metrics(rows)

    def cost(m):
        return sum(((m[q.key] - q.value) / q.tolerance) ** 2 for q in tr.PUBLISHED)

    # 1) The two weight-update knobs against the communication cuts they control (the cuts do
    #    not depend on compute): coarse grid, then a fine grid around the best.
    cut_keys = [q for q in tr.PUBLISHED if q.key.startswith("hfp8_comm_cut")]
    any_mb = system.chips
    dummy = {s: tr.ComputeProfile(s, any_mb, 1e-3, 1e-3, 1e-3, 1.0, 1.0) for s in tr.SCHEMES}

    def cut_cost(t, e):
        m = metrics(dummy, t, e)
        return sum(((m[q.key] - q.value) / q.tolerance) ** 2 for q in cut_keys)

    grid = [(t, e) for t in np.linspace(0, 20e-6, 81) for e in np.linspace(0.05, 1.0, 96)]
    _, t_b, e_b = min((cut_cost(t, e), t, e) for t, e in grid)
    grid = [(t, e) for t in np.linspace(max(0, t_b - 0.25e-6), t_b + 0.25e-6, 26)
            for e in np.linspace(max(0.01, e_b - 0.01), min(1.0, e_b + 0.01), 21)]
    _, t_b, e_b = min((cut_cost(t, e), t, e) for t, e in grid)
    t_fit, e_fit = float(f"{t_b:.2g}"), float(f"{e_b:.2g}")
    print(f"  weight-update knobs from the cuts: per_tensor_overhead_s={t_fit:.2g}, "
          f"memory_efficiency={e_fit:.2g}")

    # 2) The minibatch against everything (in practice: the two gains and the comm share).
    best = None
    for k in [int(x) for x in args.per_chip_batches.split(",")]:
        mb = k * system.chips
        profiles = {s: tr.compute_profile(system, workload, s, mb) for s in tr.SCHEMES}
        m = metrics(profiles, t_fit, e_fit)
        c = cost(m)
        print(f"  minibatch {mb:5d} ({k:2d}/chip): cost {c:8.3f}  "
              + "  ".join(f"{q.key.removesuffix('_pct')}={m[q.key]:.1f}" for q in tr.PUBLISHED))
        if best is None or c < best[0]:
            best = (c, mb, m)
    c, mb, m = best
    fit = dataclasses.replace(tr.PAPER_SETUP, minibatch=mb, overlap=0.0,
                              per_tensor_overhead_s=t_fit, memory_efficiency=e_fit)
    print()
    print(f"system {system.name}: {system.chips} chips, memory {mem / 1e9:.0f} GB/s per chip; "
          f"workload {workload.name}: {n:,} params in {nt} tensors; engine {args.engine}")
    print("fit (weighted least squares, residual / tolerance):")
    print(f"  per_tensor_overhead_s = {t_fit:.3g}  ({t_fit * 1e6:.2f} us per tensor, "
          f"{nt * t_fit * 1e6:.0f} us per update)")
    print(f"  memory_efficiency     = {e_fit:.3g}  ({e_fit * mem / 1e9:.0f} GB/s achieved by the "
          f"update kernel)")
    print(f"  minibatch             = {mb}  ({mb // system.chips} images per chip)")
    print(f"  overlap               = 0.0 (not fitted)")
    print(f"  weighted cost         = {c:.3f} over {len(tr.PUBLISHED)} published numbers")
    print(f"{'metric':<34} {'published':>9} {'fit':>8} {'diff':>7} {'tol':>5}")
    for q in tr.PUBLISHED:
        print(f"{q.key:<34} {q.value:9.1f} {m[q.key]:8.2f} {m[q.key] - q.value:+7.2f} "
              f"{q.tolerance:5.1f}")
    print()
    print(f"PAPER_SETUP = TrainingParams(minibatch={fit.minibatch}, overlap={fit.overlap}, "
          f"per_tensor_overhead_s={fit.per_tensor_overhead_s!r}, "
          f"memory_efficiency={fit.memory_efficiency!r})")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
