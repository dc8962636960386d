"""A small mutation-testing harness over accelsim's core physics and arithmetic (not in CI: each
mutant runs its tests; the whole list takes ~10-20 minutes on 2 cores).

    python scripts/mutation_test.py                 # every mutant
    python scripts/mutation_test.py --only gemm,exact --list

Each mutant is one small, plausible edit of one line (an off-by-one, a floor for a ceiling, a
dropped guard bit, a flipped tie rule), with the test files that should notice it. For each
mutant the harness copies the repository (without .git) to a scratch folder once, applies the
edit there, runs ``pytest -x -q`` on the mutant's tests with that copy first on the path, and
restores the file: the working tree is never touched. A mutant is *killed* when a test fails,
*survived* when all pass; a mutant whose original text is not found is an error (the list is
stale). Prints one line per mutant, the kill rate and the survivors. docs/validation.md has the
last measured kill rate and what each survivor means.

Exit status 0 only when every mutant ran and every survivor is one marked ``equivalent`` (it
computes the same result: no test can kill it); 1 when any other mutant survived, could not be
applied (stale), errored or timed out; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    group: str
    path: str  # relative to the repository root
    old: str  # exact text, found exactly once
    new: str
    tests: tuple[str, ...]
    why: str  # what the edit would mean physically
    equivalent: str = ""  # why no test can kill it (it computes the same): survival expected


_GEMM_TESTS = ("tests/test_perf_gemm.py", "tests/test_perf_gemm_edges.py")
_SYS_TESTS = ("tests/test_perf_systolic.py",)
_EXACT_TESTS = ("tests/test_arith_exact.py", "tests/test_arith_exact_wide.py",
                "tests/test_arith_exact_boundaries.py")
_FAST_TESTS = ("tests/test_arith_exact.py", "tests/test_arith_fastpaths.py",
               "tests/test_arith_error_free.py")
_ROUND_TESTS = ("tests/test_numerics_reference.py", "tests/test_numerics_edges.py")
_STEP_TESTS = ("tests/test_training_step.py",)
_NET_TESTS = ("tests/test_netsim_engines.py", "tests/test_netsim_symmetric.py")
_UPDATE_TESTS = ("tests/test_netsim_phases.py", "tests/test_training_step.py")

MUTANTS: tuple[Mutant, ...] = (
    # ---- perf/gemm.py: tile counts, waves, traffic
    Mutant("gemm", "accelsim/perf/gemm.py", "tiles = _cdiv(M[:, None], tm) * _cdiv",
           "tiles = (M[:, None] // tm) * _cdiv", _GEMM_TESTS, "partial M tiles are free"),
    Mutant("gemm", "accelsim/perf/gemm.py", "* _cdiv(N[:, None], tn) * count[:, None]",
           "* (N[:, None] // tn) * count[:, None]", _GEMM_TESTS, "partial N tiles are free"),
    Mutant("gemm", "accelsim/perf/gemm.py", "waves = _cdiv(tiles, chip.cores)",
           "waves = tiles // chip.cores", _GEMM_TESTS, "a partial last wave is free"),
    Mutant("gemm", "accelsim/perf/gemm.py", "waves = _cdiv(tiles, chip.cores)",
           "waves = tiles // chip.cores + 1", _GEMM_TESTS,
           "one wave too many when the tiles fill whole waves"),
    Mutant("gemm", "accelsim/perf/gemm.py",
           "return cnt * ((Mx * Kx * a_u[:, None] * _cdiv(Nx, bn) + Kx * Nx * _cdiv(Mx, bm)) * b_in",
           "return cnt * ((Mx * Kx * a_u[:, None] * _cdiv(Nx, bn) + Kx * Nx) * b_in",
           _GEMM_TESTS, "B is read once, whatever the number of row blocks"),
    Mutant("gemm", "accelsim/perf/gemm.py", '"time_s": pick(roof) + chip.kernel_launch_s,',
           '"time_s": pick(roof),', _GEMM_TESTS, "kernels start for free"),
    # ---- perf/systolic.py: cycles of one fold
    Mutant("systolic", "accelsim/perf/systolic.py",
           "            total += preload + t + rows + cols - 2",
           "            total += preload + t + rows + cols - 1", _SYS_TESTS,
           "one cycle too many per fold (scalar)"),
    Mutant("systolic", "accelsim/perf/systolic.py",
           "    cycles = folds * (preload + t + rows + cols - 2)",
           "    cycles = folds * (preload + t + rows + cols - 3)", _SYS_TESTS,
           "one cycle too few per fold (vectorized twin)"),
    Mutant("systolic", "accelsim/perf/systolic.py",
           "    folds = (-(-s_r // rows)) * (-(-s_c // cols))\n    cycles = folds",
           "    folds = (-(-s_r // rows)) * (s_c // cols + 1)\n    cycles = folds", _SYS_TESTS,
           "an extra column fold when columns divide evenly"),
    Mutant("systolic", "accelsim/perf/systolic.py", "    k_eff = -(-K // macs_per_pe)\n    s_r, s_c, t = mp.dims(M, N, k_eff)\n    folds = -(-s_r // rows)",
           "    k_eff = K // macs_per_pe or 1\n    s_r, s_c, t = mp.dims(M, N, k_eff)\n    folds = -(-s_r // rows)",
           _SYS_TESTS, "a partial multi-MAC step is free (scalar)"),
    # ---- arith/exact.py: the span rules
    Mutant("exact", "accelsim/arith/exact.py", "    one = 53 - math.ceil(math.log2(K + 1))",
           "    one = 54 - math.ceil(math.log2(K + 1))", _EXACT_TESTS,
           "one BLAS product taken for spans one bit too wide"),
    Mutant("exact", "accelsim/arith/exact.py",
           "return math.frexp(big)[1], max(math.frexp(small)[1] - 1 - f.mbits",
           "return math.frexp(big)[1], max(math.frexp(small)[1] - f.mbits", _EXACT_TESTS,
           "the lowest product bit read one too high"),
    Mutant("exact", "accelsim/arith/exact.py",
           "    beta = (53 - math.ceil(math.log2(A.shape[1] + 1))) // 2",
           "    beta = (54 - math.ceil(math.log2(A.shape[1] + 1))) // 2", _EXACT_TESTS,
           "operand slices one bit too wide"),
    Mutant("exact", "accelsim/arith/exact.py",
           "        w = 52 - math.ceil(math.log2(K + 1))",
           "        w = 53 - math.ceil(math.log2(K + 1))", _EXACT_TESTS,
           "limbs one bit wider", equivalent="K limbs below 2^w still sum below K 2^w < 2^53; "
           "the 52 keeps a spare bit"),
    Mutant("exact", "accelsim/arith/exact.py",
           "        split = low + one\n",
           "        split = low + one + 1\n", _EXACT_TESTS, "two-limb split one bit high"),
    # ---- arith/_fast.py: error-free transforms and roundings
    Mutant("fast", "accelsim/arith/_fast.py", "    e = (a - (s - bb)) + (b - bb)",
           "    e = (a - s) + b", _FAST_TESTS, "Fast2Sum without the magnitude branch"),
    Mutant("fast", "accelsim/arith/_fast.py",
           "    fix = ((sv.view(np.int64) & 1) == 0) & np.isfinite(sv) & ~np.isnan(ev)",
           "    fix = np.isfinite(sv) & ~np.isnan(ev)", _FAST_TESTS,
           "round-to-odd bumps odd results too"),
    Mutant("fast", "accelsim/arith/_fast.py", "        t &= 1\n        t += add\n        r += t",
           "        t &= 0\n        t += add\n        r += t", _FAST_TESTS,
           "ties round up instead of to even"),
    # ---- numerics/rounding.py
    Mutant("rounding", "accelsim/numerics/rounding.py",
           "        return (frac > 0.5) | ((frac == 0.5) & ~lo_even)",
           "        return (frac > 0.5) | ((frac == 0.5) & lo_even)", _ROUND_TESTS,
           "round half to odd instead of to even"),
    Mutant("rounding", "accelsim/numerics/rounding.py", "        return frac >= 0.5",
           "        return frac > 0.5", _ROUND_TESTS, "ties-away rounds ties down"),
    # ---- engine/schedule.py: the one overlap rule
    Mutant("step", "accelsim/engine/schedule.py", "        - min(max(hidden_s, 0.0), reduce_scatter_s)",
           "        - max(hidden_s, 0.0)", _STEP_TESTS,
           "overlap hides more than the reduce-scatter"),
    Mutant("step", "accelsim/engine/schedule.py",
           "    step = profile.compute_s + comm.compression_s + exposed",
           "    step = profile.compute_s + exposed", _STEP_TESTS, "compression pass is free"),
    # ---- netsim: collective closed form, update cost
    Mutant("netsim", "accelsim/ring.py",
           "        f = np.where(p > 1, BUS_KINDS[key] * (p - 1) / p, 0.0)",
           "        f = np.where(p > 1, BUS_KINDS[key] * (p - 1) / p if key == \"all-reduce\" "
           "else 1.0, 0.0)", _NET_TESTS, "bus bandwidth factor of RS/AG taken as 1"),
    Mutant("netsim", "accelsim/netsim/symmetric.py",
           "        total += len(lv.hops) * (lv.p - 1) * per",
           "        total += len(lv.hops) * lv.p * per", _NET_TESTS,
           "a ring pass of p steps instead of p - 1"),
    Mutant("netsim", "accelsim/netsim/update.py",
           "    elems = -(-n_params // n_chips) if sc.sharded_update else n_params",
           "    elems = n_params // n_chips if sc.sharded_update else n_params", _UPDATE_TESTS,
           "the sharded update drops the remainder elements"),
    Mutant("netsim", "accelsim/netsim/update.py",
           "                     params.memory_efficiency, n_tensors * params.per_tensor_overhead_s)",
           "                     params.memory_efficiency, params.per_tensor_overhead_s)",
           _UPDATE_TESTS, "per-tensor overhead paid once instead of per tensor"),
)


def _copy_repo(dst: Path) -> None:
    ignore = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis",
                                    ".venv", "*.pyc", ".mutation")
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)


def run_mutant(m: Mutant, work: Path, timeout_s: float) -> tuple[str, float, str]:
    """('killed' | 'survived' | 'error' | 'timeout', seconds, detail)."""
    target = work / m.path
    text = target.read_text(encoding="utf-8")
    n = text.count(m.old)
    if n != 1:
        return "error", 0.0, f"original text found {n} times in {m.path}"
    target.write_text(text.replace(m.old, m.new), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(work), MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            *m.tests], cwd=work, env=env, capture_output=True, text=True,
                           timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0, ""
    finally:
        target.write_text(text, encoding="utf-8")
    dt = time.perf_counter() - t0
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode == 1:
        return "killed", dt, last
    if r.returncode == 0:
        return "survived", dt, last
    return "error", dt, f"pytest exit {r.returncode}: {last}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated groups (gemm, systolic, exact, "
                    "fast, rounding, step, netsim)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    args = ap.parse_args(argv)
    groups = {g for g in args.only.split(",") if g}
    known = {m.group for m in MUTANTS}
    if groups - known:
        print(f"--only: unknown group(s) {', '.join(sorted(groups - known))}; "
              f"known: {', '.join(sorted(known))}", file=sys.stderr)
        return 2
    mutants = [m for m in MUTANTS if not groups or m.group in groups]
    if args.list:
        for i, m in enumerate(mutants, 1):
            print(f"{i:2d} [{m.group}] {m.path}: {m.why}")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="accelsim_mutation_") as tmp:
        work = Path(tmp) / "repo"
        _copy_repo(work)
        for i, m in enumerate(mutants, 1):
            status, dt, detail = run_mutant(m, work, args.timeout)
            results.append((m, status))
            print(f"{i:2d}/{len(mutants)} {status:8s} {dt:6.1f} s [{m.group}] {m.path}: {m.why}"
                  f"  ({detail})", flush=True)
    decided = [s for _, s in results if s in ("killed", "survived")]
    killed = decided.count("killed")
    print(f"\nkill rate: {killed}/{len(decided)}"
          + (f" ({100 * killed / len(decided):.0f} %)" if decided else "")
          + f"; errors/timeouts: {len(results) - len(decided)}")
    surv = [m for m, s in results if s == "survived"]
    if surv:
        print("survivors:")
        for m in surv:
            tag = f" [equivalent: {m.equivalent}]" if m.equivalent else ""
            print(f"  [{m.group}] {m.path}: {m.old.strip()!r} -> {m.new.strip()!r} ({m.why})"
                  f"{tag}")
    bad = [m for m, s in results if s not in ("killed", "survived")
           or (s == "survived" and not m.equivalent)]
    if bad:
        print(f"FAILED: {len(bad)} mutant(s) survived unexpectedly, could not be applied or did "
              "not finish", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
