"""The sweep journal at the edges: one writer at a time (the lock dies with its holder), bad lines
quarantined with a warning naming file and line (never a pandas tokenizer error), a full disk
that leaves no partial line, rows in sweep order once the sweep completes, values normalized
before the point_id, and size limits counted before anything is built."""

from __future__ import annotations

import csv
import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from accelsim.dse import sweep as sw
from accelsim.dse import sweep_journal as sj

REPO = Path(__file__).resolve().parents[1]


def mul(params):
    """Deterministic: the same point always gives the same row (so reruns compare exactly)."""
    if params["b"] == 0:
        raise sw.Infeasible(f"b is zero,\nso a={params['a']} cannot run")  # a comma and a newline
    return {"y": params["a"] * params["b"], "label": f'"{params["c"]}", ok'}


mul.columns = ("y", "label")

SPEC = sw.SweepSpec(base=(("c", "x"),), axes=(("a", (1, 2, 3, 4)), ("b", (0, 1, 2))))
IDS = [sw.point_id(p) for p in SPEC.points()]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _ids_in_file(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return [r["point_id"] for r in csv.DictReader(f)]


@pytest.fixture
def ref(tmp_path):
    """The complete, clean journal of SPEC and its table."""
    out = tmp_path / "ref.csv"
    table = sw.run_sweep(SPEC, mul, out, executor="serial", progress=False)
    return out.read_bytes(), table


def _resume(out: Path):
    return sw.run_sweep(SPEC, mul, out, executor="serial", progress=False)


# --------------------------------------------------------------------------- the lock
def test_second_writer_fails_naming_the_file(tmp_path):
    out = tmp_path / "t.csv"
    with sj.Journal(out, ("point_id", "a"), id_column="point_id"):
        with pytest.raises(sj.JournalLocked, match=rf"{out}.*another sweep \(pid {os.getpid()}@"):
            sw.run_sweep(SPEC, mul, out, executor="serial", progress=False)
    # released on close: the file is usable again and no lock file is left behind
    assert not (tmp_path / "t.csv.lock").exists()


def test_lock_is_released_when_its_holder_is_killed(tmp_path):
    out = tmp_path / "t.csv"
    code = textwrap.dedent(f"""
        import sys, time
        from accelsim.dse.sweep_journal import Journal
        j = Journal({str(out)!r}, ("point_id", "a"), id_column="point_id"); j.open()
        print("locked", flush=True); time.sleep(60)
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == b"locked"
        with pytest.raises(sj.JournalLocked, match=f"pid {holder.pid}@"):
            sj.Journal(out, ("point_id", "a"), id_column="point_id").open()
        holder.kill()
        holder.wait()
    finally:
        holder.kill()
        holder.stdout.close()
    # a stale lock file (pid of a dead process) is left, and does not block
    assert (tmp_path / "t.csv.lock").read_text().startswith(f"{holder.pid}@")
    with sj.Journal(out, ("point_id", "a"), id_column="point_id"):
        pass


def test_exclusive_file_fallback_detects_stale_locks_by_pid(tmp_path, monkeypatch):
    monkeypatch.setattr(sj, "fcntl", None)  # as on a platform without flock
    out = tmp_path / "t.csv"
    lock = tmp_path / "t.csv.lock"
    host = sj.socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    lock.write_text(f"{dead}@{host}\n")
    with sj.Journal(out, ("point_id", "a"), id_column="point_id"):  # stale: taken over
        assert lock.read_text().startswith(f"{os.getpid()}@")
        with pytest.raises(sj.JournalLocked, match=f"pid {os.getpid()}@"):
            sj.Journal(out, ("point_id", "a"), id_column="point_id").open()
    assert not lock.exists()
    lock.write_text(f"{os.getpid()}@{host}\n")  # a live holder
    with pytest.raises(sj.JournalLocked, match=str(out)):
        sj.Journal(out, ("point_id", "a"), id_column="point_id").open()


# --------------------------------------------------------------------------- bad lines
def _cut_inside_last_value(lines):
    line = lines[5]
    return lines[:5] + [line[:-5] + b"\n"] + lines[6:]


CORRUPTIONS = {
    "two extra columns": lambda ls: ls[:3] + [ls[3].rstrip(b"\n") + b",7,8\n"] + ls[4:],
    "one column missing": lambda ls: ls[:3] + [ls[3].rsplit(b",", 2)[0] + b"\n"] + ls[4:],
    "cut line ending in a newline": lambda ls: ls[:4] + [ls[4][:25] + b"\n"] + ls[5:],
    "cut inside the last value, newline kept": _cut_inside_last_value,
    "cut last line without newline": lambda ls: ls[:-1] + [ls[-1][:30]],
    "cut last line with newline": lambda ls: ls[:-1] + [ls[-1][:30] + b"\n"],
    "unbalanced quote": lambda ls: ls[:2] + [ls[2].replace(b",", b',"', 1)] + ls[3:],
    "not UTF-8": lambda ls: ls[:2] + [b"\xff\xfe" + ls[2]] + ls[3:],
    "a value changed": lambda ls: ls[:6] + [ls[6].replace(b",ok,,4,", b",ok,,5,")] + ls[7:],
    "a repeated line": lambda ls: ls + [ls[3]],
    "garbage line": lambda ls: ls[:2] + [b"hello world\n"] + ls[2:],
    "NUL bytes": lambda ls: ls[:2] + [b"\x00" * 40 + b"\n"] + ls[2:],
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_bad_lines_are_quarantined_with_a_warning_and_recomputed(tmp_path, ref, name):
    data, table = ref
    out = tmp_path / "t.csv"
    bad = b"".join(CORRUPTIONS[name](data.splitlines(keepends=True)))
    assert bad != data
    out.write_bytes(bad)
    with pytest.warns(sj.JournalWarning, match=rf"{out}: \d+ bad line.* line \d+: ") as rec:
        got = _resume(out)
    assert len(rec) == 1
    quarantine = (tmp_path / "t.csv.quarantine").read_bytes()
    assert quarantine.startswith(b"# ") and str(out).encode() in quarantine
    # every point exactly once, the same values as a clean run, the file byte for byte the same
    assert got.equals(table)
    assert out.read_bytes() == data


def test_a_repeated_point_keeps_the_first_line(tmp_path, ref):
    data, _ = ref
    out = tmp_path / "t.csv"
    lines = data.splitlines(keepends=True)
    out.write_bytes(b"".join(lines + [lines[2]]))
    with pytest.warns(sj.JournalWarning, match=rf"line {len(lines) + 1}: repeats point "
                                                rf"{IDS[1]} of line 3"):
        _resume(out)
    assert _ids_in_file(out) == IDS


def test_an_edited_parameter_no_longer_matches_its_point_id(tmp_path, ref):
    data, table = ref
    out = tmp_path / "t.csv"
    lines = data.splitlines(keepends=True)
    # rewrite the line with a = 9 and a fresh checksum: the CRC passes, the point_id does not
    cells = next(csv.reader([lines[4].decode()]))[:-1]
    cells[1] = "9"
    out.write_bytes(b"".join(lines[:4] + [sj.encode_line(cells)] + lines[5:]))
    with pytest.warns(sj.JournalWarning, match="line 5: a='9' is not the value its point_id"):
        assert _resume(out).equals(table)


def test_many_bad_lines_are_counted_not_listed(tmp_path, ref):
    data, _ = ref
    out = tmp_path / "t.csv"
    lines = data.splitlines(keepends=True)
    out.write_bytes(lines[0] + b"".join(ln.rstrip(b"\n") + b",x\n" for ln in lines[1:]))
    with pytest.warns(sj.JournalWarning, match=r"12 bad line.*; and 7 more"):
        assert len(_resume(out)) == 12


def test_journal_without_checksums_is_read_and_upgraded(tmp_path, ref):
    data, table = ref
    out = tmp_path / "t.csv"
    # the format before lines carried a CRC: same rows, no row_crc column
    legacy = [ln.rsplit(b",", 1)[0] + b"\n" for ln in data.splitlines(keepends=True)]
    out.write_bytes(b"".join(legacy))
    seen = []
    got = sw.run_sweep(SPEC, mul, out, executor="serial", progress=False, on_row=seen.append)
    assert seen == [] and got.equals(table) and out.read_bytes() == data


def test_header_problems(tmp_path):
    out = tmp_path / "t.csv"
    out.write_bytes(b"point_id,a,b,c,sta")  # a crash while the header was written
    assert len(_resume(out)) == 12
    out.write_bytes(b"\xff\xfe\n")
    with pytest.raises(sj.JournalError, match="line 1 is not a CSV header"):
        _resume(out)
    out.unlink()
    out.mkdir()
    with pytest.raises(sj.JournalError, match="is a directory"):
        _resume(out)


# --------------------------------------------------------------------------- a full disk
def test_full_disk_leaves_no_partial_line_and_resumes(tmp_path, ref, monkeypatch):
    data, table = ref
    out = tmp_path / "t.csv"
    real = sj._write_all
    budget = {"rows": 5}

    def disk_fills_up(fd, line):
        if budget["rows"] == 0:  # half the line reaches the disk, then ENOSPC
            os.write(fd, line[: len(line) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        budget["rows"] -= 1
        real(fd, line)

    monkeypatch.setattr(sj, "_write_all", disk_fills_up)
    with pytest.raises(OSError, match=r"cannot append a row \(No space left on device\); the 5 "
                                      r"rows already there are kept") as info:
        _resume(out)
    assert info.value.errno == errno.ENOSPC and info.value.__suppress_context__  # one error
    assert out.read_bytes().endswith(b"\n") and len(_lines(out)) == 1 + 5
    monkeypatch.setattr(sj, "_write_all", real)
    assert _resume(out).equals(table) and out.read_bytes() == data


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE as on Linux")
def test_file_size_limit_is_a_clean_error(tmp_path, ref):
    data, table = ref
    out = tmp_path / "t.csv"
    code = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_sweep_journal import SPEC, mul
        from accelsim.dse import sweep as sw
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
        try:
            sw.run_sweep(SPEC, mul, {str(out)!r}, executor="serial", progress=False)
        except OSError as exc:
            print(exc); sys.exit(3)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert r.returncode == 3, r.stderr
    assert "cannot append a row (File too large)" in r.stdout and "Traceback" not in r.stderr
    assert out.stat().st_size <= 600 and out.read_bytes().endswith(b"\n")
    assert _resume(out).equals(table) and out.read_bytes() == data


# --------------------------------------------------------------------------- order
def test_rows_are_in_sweep_order_when_the_sweep_completes(tmp_path, ref):
    data, table = ref
    out = tmp_path / "t.csv"
    # a journal in completion order (reversed), as a pool leaves it after an interruption
    lines = data.splitlines(keepends=True)
    out.write_bytes(lines[0] + b"".join(reversed(lines[1:7])))
    assert _ids_in_file(out) == IDS[:6][::-1]
    assert _resume(out).equals(table)
    assert _ids_in_file(out) == IDS and out.read_bytes() == data


def test_other_sweeps_rows_are_kept_after_this_sweeps(tmp_path, ref):
    data, _ = ref
    out = tmp_path / "t.csv"
    small = sw.SweepSpec(base=(("c", "x"),), axes=(("a", (2, 1)), ("b", (1,))))
    sw.run_sweep(SPEC, mul, out, executor="serial", progress=False)
    got = sw.run_sweep(small, mul, out, executor="serial", progress=False)
    want = [sw.point_id(p) for p in small.points()]
    assert list(got.point_id) == want
    ids = _ids_in_file(out)
    assert ids[:2] == want and sorted(ids) == sorted(IDS)


def test_in_memory_table_is_in_sweep_order():
    got = sw.run_sweep(SPEC, mul, None, executor="process", workers=2, progress=False,
                       group_by=("b",))
    assert list(got.point_id) == IDS


# --------------------------------------------------------------------------- values
def test_values_are_normalized_before_the_point_id():
    spec = sw.SweepSpec(base=(("flag", True), ("n", 1)),
                        axes=(("chips", (64.0, 8)), ("bw", (2.5, 1e300))))
    p = spec.points()[0]
    assert p == {"chips": 64, "bw": 2.5, "flag": True, "n": 1}
    assert type(p["chips"]) is int and type(p["flag"]) is bool
    assert sw.point_id(p) == sw.point_id({**p, "chips": 64})
    assert sw.point_id({"x": True}) != sw.point_id({"x": 1})
    assert spec.points()[1]["bw"] == 1e300 and type(spec.points()[1]["bw"]) is float
    np = pytest.importorskip("numpy")
    s2 = sw.SweepSpec(axes=(("n", (np.int64(3), np.float64(4.0), np.bool_(True), Path("a/b"))),))
    assert [v for _, vals in s2.axes for v in vals] == [3, 4, True, "a/b"]
    assert [type(v) for v in s2.axes[0][1]] == [int, int, bool, str]
    assert sw.parse_assignment("chips=64.0")[1] == (64.0,)
    assert sw.spec_from_assignments(axes=["chips=64.0,8"]).axes == (("chips", (64, 8)),)


def test_evaluator_sees_the_normalized_value(tmp_path):
    spec = sw.SweepSpec(axes=(("a", (2.0, 3)), ("b", (1,))), base=(("c", "x"),))
    got = sw.run_sweep(spec, _types, None, executor="serial", progress=False)
    assert list(got.y) == ["int", "int"]


def _types(params):
    return {"y": type(params["a"]).__name__}


_types.columns = ("y",)


def test_none_means_unset_and_survives_a_rerun(tmp_path):
    spec = sw.SweepSpec(base=(("c", None),), axes=(("a", (1, 2)), ("b", (1,))))
    out = tmp_path / "t.csv"
    first = sw.run_sweep(spec, mul, out, executor="serial", progress=False)
    seen = []
    again = sw.run_sweep(spec, mul, out, executor="serial", progress=False, on_row=seen.append)
    assert seen == [] and again.equals(first) and first.c.isna().all()


@pytest.mark.parametrize("bad", [[1, 2], {"a": 1}, (3,), "a\nb", "x\x1b[31m"])
def test_values_that_are_not_scalars_are_refused(bad):
    with pytest.raises(ValueError, match="sweep: link_GBps value"):
        sw.SweepSpec(axes=(("link_GBps", (1, bad)),))


def test_sweep_file_with_nested_lists_or_a_directory_is_a_clear_error(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("[axes]\nlink_GBps = [[1, 2], [3]]\n")
    with pytest.raises(ValueError, match=r"s.toml: sweep: link_GBps value \[1, 2\] is a list"):
        sw.load_sweep_file(f)
    with pytest.raises(ValueError, match="is a directory, not a sweep file"):
        sw.load_sweep_file(tmp_path)
    f.write_bytes(b"\xff\xfe[axes]")
    with pytest.raises(ValueError, match="not UTF-8"):
        sw.load_sweep_file(f)


# --------------------------------------------------------------------------- size limits
def test_a_range_too_long_is_refused_with_its_count_not_cut():
    with pytest.raises(ValueError, match=r"link_GBps.* has 1,000,000,000 values, over the limit "
                                         r"of 100,000"):
        sw.parse_assignment("link_GBps=1:1000000000:1")
    with pytest.raises(ValueError, match=r"more than 10\^18 values"):
        sw.parse_assignment("x=0:1e300:1e-300")
    assert len(sw.parse_assignment("x=1:200000:1", max_points=200_000)[1]) == 200_000
    with pytest.raises(ValueError, match="over the limit of 10"):
        sw.spec_from_assignments(axes=["x=1:11:1"], max_points=10)


def test_range_counts_match_the_values():
    assert sw.parse_assignment("c=32:512:x2")[1] == (32, 64, 128, 256, 512)
    assert sw.parse_assignment("c=1:1000:x10")[1] == (1, 10, 100, 1000)
    assert sw.parse_assignment("c=0.1:0.5:0.1")[1] == pytest.approx((0.1, 0.2, 0.3, 0.4, 0.5))
    assert sw.parse_assignment("c=1:10:4")[1] == (1, 5, 9)
    assert sw.parse_assignment("c=-3:3:3")[1] == (-3, 0, 3)
    for bad in ("c=0:8:x2", "c=1:nan:1", "c=1:inf:1", "c=5:1:1", "c=1:5:inf"):
        with pytest.raises(ValueError, match="sweep"):
            sw.parse_assignment(bad)


def test_a_billion_point_sweep_is_counted_not_built():
    thousand = tuple(range(1000))
    spec = sw.SweepSpec(axes=(("a", thousand), ("b", thousand), ("c", thousand)))
    assert spec.n_points == 10**9
    with pytest.raises(ValueError, match=r"1,000,000,000 points \(1,000 a x 1,000 b x 1,000 c\) "
                                         r"exceed the limit of 100,000"):
        spec.points()
    with pytest.raises(ValueError, match="exceed the limit"):
        sw.run_sweep(spec, mul, None, executor="serial", progress=False)
    assert next(spec.iter_points()) == {"a": 0, "b": 0, "c": 0}
    assert spec.check_size(10**9) == 10**9


# --------------------------------------------------------------------------- pool processes
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_workers_die_with_the_sweep_and_release_its_pipes(tmp_path):
    """After kill -9 of a sweep, its workers go too and its stdout reaches EOF (a ``| tee`` or a
    CI log does not wait forever); the journal resumes with nothing lost or repeated."""
    code = textwrap.dedent("""
        import os, sys, time
        from accelsim.dse import sweep as sw
        def slow(p):
            time.sleep(0.05)
            return {"y": p["a"] * p["b"], "pid": os.getpid()}
        slow.columns = ("y", "pid")
        spec = sw.SweepSpec(axes=(("a", tuple(range(40))), ("b", (1, 2))))
        print("start", flush=True)
        sw.run_sweep(spec, slow, sys.argv[1], executor="process", workers=2, progress=False)
    """)
    for sig in (signal.SIGKILL, signal.SIGTERM):
        out = tmp_path / f"{sig.name}.csv"
        proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert proc.stdout.readline() == b"start\n"
            deadline = time.monotonic() + 30
            while (not out.exists() or len(_lines(out)) < 4) and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(sig)
            proc.communicate(timeout=20)  # EOF on both pipes: no worker holds them
        finally:
            proc.kill()
        with out.open(newline="") as f:
            pids = {int(r["pid"]) for r in csv.DictReader(f)}
        assert pids and os.getpid() not in pids
        deadline = time.monotonic() + 10
        while any(_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_running(p) for p in pids), f"workers {pids} outlived the sweep"
        rows = _ids_in_file(out)
        assert len(rows) == len(set(rows)) < 80


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def grouped(params):
    return {"y": params["a"] * params["b"], "pid": os.getpid()}


grouped.columns = ("y", "pid")


def test_group_by_runs_each_group_in_one_worker(tmp_path):
    spec = sw.SweepSpec(axes=(("a", (1, 2, 3, 4, 5, 6)), ("b", (1, 2, 3, 4, 5))))
    got = sw.run_sweep(spec, grouped, tmp_path / "t.csv", executor="process", workers=2,
                       progress=False, group_by=("b",))
    assert list(got.point_id) == [sw.point_id(p) for p in spec.points()]
    assert (got.groupby("b").pid.nunique() == 1).all()
    by_fn = sw.run_sweep(spec, grouped, None, executor="process", workers=2, progress=False,
                         group_by=lambda p: p["a"] % 2)
    assert (by_fn.groupby(by_fn.a % 2).pid.nunique() == 1).all()
    all_but = sw.run_sweep(spec, grouped, None, executor="process", workers=2, progress=False,
                           group_by=sw.GroupAllBut("a"))
    assert (all_but.groupby("b").pid.nunique() == 1).all()
    with pytest.raises(ValueError, match=r"group_by names \['minibatch'\]"):
        sw.run_sweep(spec, grouped, None, executor="process", group_by=("b", "minibatch"))


def test_make_tasks():
    from accelsim.dse.sweep_executors import make_tasks

    pts = [{"g": g, "i": i} for i in range(3) for g in "abcab"]
    tasks = make_tasks(pts, 2, lambda p: p["g"])
    assert [len(t) for t in tasks] == [6, 6, 3] and [t[0]["g"] for t in tasks] == ["a", "b", "c"]
    assert sorted(map(str, (p for t in tasks for p in t))) == sorted(map(str, pts))
    # fewer groups than workers: the biggest is cut so no worker waits
    assert [len(t) for t in make_tasks(pts, 4, lambda p: p["g"])] == [6, 3, 3, 3]
    assert [len(t) for t in make_tasks(pts[:3], 8, lambda p: 0)] == [1, 1, 1]
    chunks = make_tasks(list(range(20)), 2)
    assert [len(t) for t in chunks] == [3] * 6 + [2] and sum(chunks, []) == list(range(20))
    assert make_tasks([], 2) == []


def dies(params):
    if params["a"] == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return mul(params)


dies.columns = ("y", "label")


def test_a_worker_killed_midway_stops_the_sweep_keeping_finished_rows(tmp_path, ref):
    _, table = ref
    out = tmp_path / "t.csv"
    with pytest.raises(RuntimeError, match=r"worker process \d+ died \(killed by SIGKILL\)"):
        sw.run_sweep(SPEC, dies, out, executor="process", workers=2, progress=False,
                     group_by=("a",))
    first = _ids_in_file(out)
    assert len(first) == len(set(first)) and 3 <= len(first) < 12
    got = sw.run_sweep(SPEC, mul, out, executor="process", workers=2, progress=False)
    assert got.equals(table) and _ids_in_file(out) == IDS


def boom(params):
    if params["a"] == 2:
        raise ZeroDivisionError("injected in a worker")
    return mul(params)


boom.columns = mul.columns


def test_worker_error_carries_the_worker_traceback(tmp_path):
    with pytest.raises(ZeroDivisionError, match="injected in a worker") as info:
        sw.run_sweep(SPEC, boom, tmp_path / "t.csv", executor="process", workers=2,
                     progress=False)
    assert "in boom" in str(info.value.__cause__)
