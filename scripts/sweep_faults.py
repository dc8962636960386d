"""Fault injection for the sweep journal (issue 13, "Must show"): a small sweep on the process pool
is killed with SIGKILL and SIGTERM at several moments, written by two sweeps at once, corrupted by
hand, and run out of disk (a file-size rlimit, and a writer that fails with ENOSPC half-way through
a line); after each, it is resumed, and the journal is compared with a clean serial run: rows
lost / duplicated / different must be 0 / 0 / 0 (and no worker may outlive a killed sweep or keep
its stdout open).

Run: ``python scripts/sweep_faults.py`` (about a minute; ``--seed`` picks the random kill times).
Exit status 0 only when every scenario has 0 / 0 / 0 and every check passed.
"""

from __future__ import annotations

import argparse
import csv
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from accelsim.dse import sweep as sw  # noqa: E402
from accelsim.dse import sweep_journal as sj  # noqa: E402

DELAY_S = 0.01  # per point: wide enough windows to kill inside
SPEC = sw.SweepSpec(base=(("c", "x"),), axes=(("a", tuple(range(30))), ("b", (0, 1, 2, 3, 4))))
N = SPEC.n_points


def evaluate(params):
    """Deterministic, so a point computed twice gives the same row."""
    time.sleep(DELAY_S)
    a, b = params["a"], params["b"]
    if b == 0:
        raise sw.Infeasible(f"b is zero, a={a}")
    return {"y": a * b, "z": a / b, "label": f'a="{a}", b={b}'}


evaluate.columns = ("y", "z", "label")


# --------------------------------------------------------------------------- the sweep child
def child(out: str, fsize: int | None, enospc_after: int | None, delay: float | None) -> int:
    """One sweep as the CLI runs it: errors are one line on stderr and exit status 2."""
    global DELAY_S
    if delay is not None:
        DELAY_S = delay
    if fsize is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if enospc_after is not None:
        real, left = sj._write_all, [enospc_after]

        def failing(fd, data):
            if left[0] == 0:
                os.write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            left[0] -= 1
            real(fd, data)

        sj._write_all = failing
    print(f"sweep pid {os.getpid()}", flush=True)
    try:
        sw.run_sweep(SPEC, evaluate, out, executor="process", workers=2, progress=False)
    except (OSError, ValueError) as exc:
        print(f"accelsim: error: {exc}", file=sys.stderr)
        return 2
    print("done", flush=True)
    return 0


# --------------------------------------------------------------------------- the parent
def _rows_in(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def _survivors(out: Path) -> list[int]:
    """Processes still running this sweep's child command line (the sweep or its workers)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if b"--child" in cmd and str(out).encode() in cmd and state not in ("Z", "X"):
            found.append(int(d.name))
    return found


class Run:
    """A sweep child; optionally killed once its journal holds ``kill_at_rows`` rows (or after
    ``kill_after_s``)."""

    def __init__(self, out: Path, *extra: str):
        self.out = out
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", str(out), *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)

    def kill_at(self, rows: int | None = None, after_s: float | None = None,
                sig: int = signal.SIGKILL) -> bool:
        t0 = time.monotonic()
        while self.proc.poll() is None:
            if rows is not None and _rows_in(self.out) >= rows:
                break
            if after_s is not None and time.monotonic() - t0 >= after_s:
                break
            time.sleep(0.002)
        if self.proc.poll() is not None:
            return False  # finished first
        self.proc.send_signal(sig)
        return True

    def finish(self, problems: list[str], what: str) -> tuple[int, str, str]:
        try:  # EOF on both pipes: nobody (no orphaned worker) holds them
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            problems.append(f"{what}: the sweep's stdout/stderr stayed open 30 s after it ended")
            self.proc.kill()
            out, err = self.proc.communicate()
        deadline = time.monotonic() + 10
        while _survivors(self.out) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _survivors(self.out)
        if left:
            problems.append(f"{what}: processes {left} outlived the sweep")
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        if "Traceback" in err.decode(errors="replace"):
            problems.append(f"{what}: a traceback on stderr: {err.decode()[-300:]}")
        return self.proc.returncode, out.decode(), err.decode()


def _resume(out: Path, problems: list[str], what: str) -> None:
    code, _, err = Run(out).finish(problems, what)
    if code != 0:
        problems.append(f"{what}: the resume failed ({code}): {err.strip()[-300:]}")


def compare(out: Path, ref: dict[str, list[str]], order: list[str]) -> tuple[int, int, int, bool]:
    """(rows lost, rows duplicated, rows different) against the clean run; in sweep order?"""
    with out.open(newline="") as f:
        rows = list(csv.reader(f))[1:]
    ids = [r[0] for r in rows]
    counts = Counter(ids)
    lost = sum(1 for i in ref if i not in counts)
    duplicated = sum(c - 1 for c in counts.values()) + sum(1 for i in counts if i not in ref)
    seen: dict[str, list[str]] = {}
    for r in rows:
        seen.setdefault(r[0], r)
    different = sum(1 for i, r in seen.items() if i in ref and r != ref[i])
    return lost, duplicated, different, ids == order


def corrupt(path: Path, rng: np.random.Generator) -> list[str]:
    """Damage a journal the ways a crash, an editor or a second writer can."""
    lines = path.read_bytes().splitlines(keepends=True)
    body = lines[1:]
    k = rng.choice(len(body) - 2, size=7, replace=False)
    done = []
    body[k[0]] = body[k[0]].rstrip(b"\n") + b",7,8\n"
    done.append("two extra columns")
    body[k[1]] = body[k[1]][: len(body[k[1]]) // 2] + b"\n"
    done.append("a line cut, ending in a newline")
    body[k[2]] = body[k[2]].replace(b",", b',"', 1)
    done.append("an unbalanced quote")
    body[k[3]] = b"\xff\xfe" + body[k[3]]
    done.append("bytes that are not UTF-8")
    line = body[k[4]]
    digit = next(i for i in range(20, len(line)) if line[i:i + 1].isdigit())
    body[k[4]] = line[:digit] + bytes([48 + (line[digit] - 47) % 10]) + line[digit + 1:]
    done.append("one digit changed")
    body.insert(int(k[5]), body[k[5]])
    done.append("a line repeated")
    body.insert(int(k[6]), b"garbage, not a row\n")
    done.append("a garbage line")
    body[-1] = body[-1][: len(body[-1]) // 3]
    done.append("last line cut without a newline")
    path.write_bytes(lines[0] + b"".join(body))
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--fsize", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--enospc-after", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--delay", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.fsize, args.enospc_after, args.delay)

    rng = np.random.default_rng(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="sweep_faults_"))
    ref_path = tmp / "reference.csv"
    sw.run_sweep(SPEC, evaluate, ref_path, executor="serial", progress=False)
    with ref_path.open(newline="") as f:
        ref_rows = list(csv.reader(f))[1:]
    ref = {r[0]: r for r in ref_rows}
    order = [r[0] for r in ref_rows]
    full_size = ref_path.stat().st_size
    results = []

    def scenario(name: str, events: str, out: Path, problems: list[str]) -> None:
        lost, dup, diff, in_order = compare(out, ref, order)
        if not in_order:
            problems.append("rows not in sweep order after the sweep completed")
        results.append((name, events, lost, dup, diff, problems))

    # 1. kill -9 (and SIGTERM) at several moments, resuming after each
    for sig in (signal.SIGKILL, signal.SIGTERM):
        out = tmp / f"kill_{sig.name}.csv"
        problems: list[str] = []
        moments = []
        for target in (None, 1, N // 4, N // 2, (9 * N) // 10):
            r = Run(out)
            killed = (r.kill_at(after_s=0.3, sig=sig) if target is None
                      else r.kill_at(rows=target, sig=sig))
            r.finish(problems, f"{sig.name} at {target} rows")
            moments.append(f"{_rows_in(out)}" if killed else "done")
        _resume(out, problems, f"resume after {sig.name}")
        scenario(f"{sig.name} at 5 moments", "rows when killed: " + ", ".join(moments), out,
                 problems)

    # 2. kill -9 at random moments until a run gets through
    out = tmp / "chaos.csv"
    problems = []
    kills = 0
    for _ in range(8):  # at a random row count or a random time (start-up included)
        r = Run(out)
        now = _rows_in(out)
        if now < N - 1 and rng.random() < 0.5:
            killed = r.kill_at(rows=int(rng.integers(now + 1, N)))
        else:
            killed = r.kill_at(after_s=float(rng.uniform(0.05, 0.8)))
        r.finish(problems, f"chaos kill {kills + 1}")
        kills += killed
    _resume(out, problems, "resume after chaos")
    scenario("SIGKILL at random times", f"{kills} kills, seed {args.seed}", out, problems)

    # 3. two writers on one journal
    out = tmp / "two_writers.csv"
    problems = []
    first = Run(out, "--delay", "0.1")  # slow enough to still run when the second starts
    while _rows_in(out) < 5 and first.proc.poll() is None:
        time.sleep(0.002)
    code2, _, err2 = Run(out).finish(problems, "second writer")
    code1, _, _ = first.finish(problems, "first writer")
    if code1 != 0:
        problems.append(f"the first writer failed ({code1})")
    if code2 == 0 or "is being written by another sweep" not in err2:
        problems.append(f"the second writer did not fail clearly: {code2} {err2.strip()!r}")
    said = "'is being written by another sweep'" if "another sweep" in err2 else repr(err2)
    scenario("two writers at once", f"second writer: exit {code2}, {said}", out, problems)

    # 4. a corrupted journal
    out = tmp / "corrupt.csv"
    problems = []
    r = Run(out)
    r.kill_at(rows=(2 * N) // 3)
    r.finish(problems, "run before corruption")
    damage = corrupt(out, rng)
    _resume(out, problems, "resume after corruption")
    qpath = out.with_name(out.name + ".quarantine")
    quarantined = sum(1 for ln in qpath.read_bytes().splitlines()
                      if ln.startswith(b"# ") and b" line " in ln) if qpath.exists() else 0
    if quarantined < len(damage):
        problems.append(f"only {quarantined} lines quarantined for {len(damage)} damages")
    scenario("corrupted journal", f"{len(damage)} damages, {quarantined} lines quarantined", out,
             problems)

    # 5. a full disk: a file-size limit, then a writer failing with ENOSPC mid-line
    for name, extra in (("file-size rlimit", ["--fsize", str(full_size // 3)]),
                        ("ENOSPC mid-line", ["--enospc-after", str(N // 2)])):
        out = tmp / f"full_{extra[0][2:]}.csv"
        problems = []
        code, _, err = Run(out, *extra).finish(problems, name)
        if code != 2 or "cannot append a row" not in err or len(err.strip().splitlines()) != 1:
            problems.append(f"{name}: not a one-line error: exit {code}, {err.strip()!r}")
        if not out.read_bytes().endswith(b"\n"):
            problems.append(f"{name}: a partial line was left in the journal")
        kept = _rows_in(out)
        _resume(out, problems, f"resume after {name}")
        why = re.search(r"cannot append a row \(([^)]*)\)", err)
        scenario(f"full disk ({name})", f"exit {code}, one line: cannot append a row "
                 f"({why.group(1) if why else '?'}), {kept} rows kept", out, problems)

    print(f"sweep fault injection: {N} points, 2 workers, {DELAY_S * 1e3:.0f} ms a point; "
          f"reference: a clean serial run ({tmp})")
    print(f"{'scenario':<28} {'lost':>5} {'dup':>5} {'diff':>5}  events")
    bad = False
    for name, events, lost, dup, diff, problems in results:
        print(f"{name:<28} {lost:>5} {dup:>5} {diff:>5}  {events}")
        for p in problems:
            print(f"    !! {p}")
        bad |= bool(lost or dup or diff or problems)
    print("FAILED (files kept in the directory above)" if bad else
          "all scenarios: 0 rows lost, 0 duplicated, 0 different; no orphaned worker, no open "
          "pipe, no traceback")
    if not bad:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
