"""Where sweep points run: in this process, in worker processes that die with the sweep, or on a
Dask cluster.

Points are handed out as *tasks* (lists of points). Points that share expensive set-up (the
training model's compute profile: system, workload, scheme, minibatch) go to one worker as one
task, so that worker's caches hit as they do in a serial run; without a grouping key, tasks are
contiguous runs of the sweep order. A worker sends each row back the moment it is computed, so
rows are journalled one by one whatever the task size.

Pool workers exit with their parent (Linux: ``PR_SET_PDEATHSIG``; elsewhere a watchdog thread) and
do not keep the parent's stdin/stdout/stderr open, so ``accelsim sweep ... | tee log`` ends when
the sweep ends, even after kill -9 of the sweep.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from accelsim.errors import InputError

#: ``auto`` is resolved by :func:`choose_executor` before anything runs
EXECUTORS = ("auto", "serial", "process", "dask")

Point = Mapping[str, Any]
Row = Mapping[str, Any]
#: Tasks per worker when points are cut into contiguous runs (load balance vs cache reuse).
CHUNKS_PER_WORKER = 4


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_executor(executor: str) -> None:
    """Refuse an unknown executor, or one whose optional dependency is missing, before anything
    runs (no journal, no progress bar): one line naming the extra to install."""
    if executor not in EXECUTORS:
        raise InputError(f"sweep: unknown executor {executor!r}; "
                         f"choose from {', '.join(EXECUTORS)}")
    if executor == "dask":
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            raise InputError(DASK_MISSING) from None


#: ``auto`` starts a process pool only for a grouped sweep with at least this many groups (points
#: that share an expensive set-up, e.g. one compute profile) per worker. Measured on the README's
#: 2-core container (``accelsim sweep``, 3 runs each, machine shared): a pool start-up costs
#: 0.5-1 s; with 1, 2, 4 or 6 compute profiles over 2 workers the pool ran at 0.5-0.9x serial,
#: with 12 at 0.9-1.7x (bench_sweep, idle: 1.74x). Ungrouped points have no known cost and each
#: row crosses a pipe: the LLM plan search (13,824 plans of ~0.2-0.3 ms) ran at 0.64-0.96x serial
#: on 2 loaded cores (bench_llm), so ``auto`` runs them serially.
MIN_GROUPS_PER_WORKER = 6


def idle_cores() -> float:
    """Usable cores minus the 1-minute load average (what other processes keep busy); the
    usable cores where the platform has no load average."""
    cores = default_workers()
    try:
        return max(0.0, cores - os.getloadavg()[0])
    except (AttributeError, OSError):  # no load average (Windows)
        return float(cores)


def choose_executor(points: Sequence[Point], workers: int,
                    group_key: Callable[[Point], Hashable] | None = None, *,
                    idle: float | None = None) -> str:
    """``"process"`` where a pool of ``workers`` can beat one process, else ``"serial"``.

    The rule: at least 2 workers and 2 idle cores (``idle``, default :func:`idle_cores`: on a
    busy machine a pool only adds start-up and contention: bench_sweep at load 10 on 2 cores ran
    the grouped 12-profile sweep at 0.38-1.10x serial), a ``group_key`` (points of one group
    share set-up, so a group is the unit of work whose cost pays for the pool), and at least
    :data:`MIN_GROUPS_PER_WORKER` distinct groups per worker. Ask for ``"process"`` by name to
    run a pool anyway; the rows are the same whichever runs them."""
    if workers < 2 or not points or group_key is None:
        return "serial"
    if (idle_cores() if idle is None else idle) < 2:
        return "serial"
    groups = len({group_key(p) for p in points})
    return "process" if groups >= MIN_GROUPS_PER_WORKER * workers else "serial"


#: the one message for a Dask run without the dask extra
DASK_MISSING = ("sweep: executor 'dask' needs dask.distributed, which is not installed: "
                "pip install 'accelsim[dask]'")


def make_tasks(points: Sequence[Point], workers: int,
               group_key: Callable[[Point], Hashable] | None = None) -> list[list[Point]]:
    """Cut ``points`` into tasks for ``workers`` workers.

    With ``group_key``: one task per distinct key (points keep their order inside it), biggest
    first so the last task to start is a small one; while there are fewer tasks than workers the
    biggest is cut in two (its set-up then runs twice, at the same time, on a core that would
    otherwise wait). Without: contiguous runs of about
    ``len(points) / (CHUNKS_PER_WORKER * workers)`` points."""
    if not points:
        return []
    if group_key is not None:
        groups: dict[Hashable, list[Point]] = {}
        for p in points:
            groups.setdefault(group_key(p), []).append(p)
        tasks = sorted(groups.values(), key=len, reverse=True)
        while len(tasks) < workers and len(tasks[0]) > 1:
            big = tasks.pop(0)
            half = (len(big) + 1) // 2
            tasks = sorted([*tasks, big[:half], big[half:]], key=len, reverse=True)
        return tasks
    size = max(1, math.ceil(len(points) / (CHUNKS_PER_WORKER * max(1, workers))))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


def run_tasks(fn: Callable[[Point], Row], tasks: Sequence[Sequence[Point]],
              record: Callable[[Row], None], *, executor: str, workers: int,
              salvage: Callable[[Row], None] | None = None, close_fds: Sequence[int] = (),
              dask_address: str | None = None) -> None:
    """Run ``fn`` on every point of every task and ``record`` each row as it arrives.

    ``fn`` must be picklable for the process and Dask executors. On an error (``fn`` raising, a
    worker dying, ``record`` raising, Ctrl-C) rows that had finished are passed to ``salvage``
    (default ``record``), the workers are stopped, and the error is re-raised here.
    ``close_fds``: descriptors of this process that forked workers must not keep (the journal and
    its lock)."""
    check_executor(executor)
    if executor == "auto":
        raise ValueError("run_tasks: resolve executor 'auto' with choose_executor() first")
    salvage = salvage or record
    if executor == "serial" or not tasks:
        for task in tasks:
            for p in task:
                record(fn(p))
    elif executor == "process":
        _run_pool(fn, tasks, record, salvage, workers=workers, close_fds=close_fds)
    else:
        _run_dask(fn, tasks, record, salvage, workers=workers, address=dask_address)


# --------------------------------------------------------------------------- worker processes
class _RemoteTraceback(Exception):
    """The worker's traceback, attached as the re-raised error's cause."""

    def __str__(self) -> str:
        return self.args[0]


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker exit when the sweep process does, however it ends."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        else:
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(1)
            return

    def watch() -> None:  # elsewhere: poll the parent
        import time

        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="accelsim-sweep-watchdog").start()


def _detach(close_fds: Sequence[int]) -> None:
    """Let go of everything the parent's caller may be waiting on: stdio and the journal."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def _worker(parent_pid, fn, tasks, counter, writer, wlock, close_fds) -> None:
    _die_with_parent(parent_pid)
    _detach(close_fds)

    def send(msg) -> None:
        with wlock:
            writer.send(msg)

    while True:
        i = counter.take(len(tasks))
        if i is None:
            return
        for p in tasks[i]:
            try:
                send(("row", i, fn(p)))  # pickled before anything is written
            except BaseException as exc:  # noqa: BLE001 - every error goes back to the parent
                send(("error", i, (_picklable(exc), traceback.format_exc())))
                return
        send(("done", i, None))


class _Counter:
    """The index of the next task nobody has taken, shared by the workers. Under fork it lives in
    an anonymous shared mapping (no file, so a full disk or a file-size limit cannot stop the pool
    from starting); elsewhere in a multiprocessing Value."""

    def __init__(self, ctx):
        self.lock = ctx.Lock()
        if ctx.get_start_method() == "fork":
            import mmap

            self._mem = mmap.mmap(-1, 8)
            self._value = None
        else:
            self._mem = None
            self._value = ctx.RawValue("q", 0)

    def take(self, limit: int) -> int | None:
        """The next index below ``limit`` (taking it), or None when all are taken."""
        with self.lock:
            i = self.get()
            if i >= limit:
                return None
            self.set(i + 1)
            return i

    def get(self) -> int:
        if self._mem is not None:
            return int.from_bytes(self._mem[:8], "little")
        return self._value.value

    def set(self, v: int) -> None:
        if self._mem is not None:
            self._mem[:8] = v.to_bytes(8, "little")
        else:
            self._value.value = v


def _mp_context():
    import multiprocessing as mp

    # fork: workers start in milliseconds and inherit the imported model (Linux only: macOS
    # frameworks are not fork-safe).
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context()


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _run_pool(fn, tasks, record, salvage, *, workers: int, close_fds: Sequence[int]) -> None:
    from multiprocessing.connection import wait

    ctx = _mp_context()
    reader, writer = ctx.Pipe(duplex=False)
    wlock = ctx.Lock()
    counter = _Counter(ctx)
    procs = [ctx.Process(target=_worker, name=f"accelsim-sweep-{k}", daemon=True,
                         args=(os.getpid(), fn, tasks, counter, writer, wlock, tuple(close_fds)))
             for k in range(max(1, min(workers, len(tasks))))]
    ok = False
    receiving = False  # an interrupt inside recv() leaves a half-read message: read no more
    try:
        # Workers are born ignoring Ctrl-C (it is the parent's to handle): set before the fork,
        # so no window exists in which a worker could print a KeyboardInterrupt traceback.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            for p in procs:
                p.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        writer.close()  # only the workers write; EOF once they are all gone
        alive = {p.sentinel: p for p in procs}
        n_done = 0
        while n_done < len(tasks):
            ready = wait([reader, *alive])
            if reader in ready:
                try:
                    receiving = True
                    kind, _, payload = reader.recv()
                    receiving = False
                except EOFError:
                    # all write ends closed: say which worker died, if one did (its sentinel may
                    # not have been seen yet)
                    raise _exit_error(procs) from None
                if kind == "row":
                    record(payload)
                elif kind == "done":
                    n_done += 1
                else:
                    exc, tb = payload
                    exc.__cause__ = _RemoteTraceback(tb)
                    raise exc
                continue  # read everything sent before looking at who exited
            for s in ready:
                p = alive.pop(s)
                p.join()
                if p.exitcode != 0:
                    raise _exit_error([p])
            if not alive and not reader.poll():
                raise _exit_error(procs)
        ok = True
    finally:
        with counter.lock:
            counter.set(len(tasks))  # hand out nothing more
        if not ok and not receiving:
            _salvage(reader, salvage)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        reader.close()


def _exit_error(procs) -> RuntimeError:
    """Why the workers stopped early: the first that died, else that they all exited."""
    for p in procs:
        p.join(timeout=5)
        if p.exitcode not in (0, None):
            return RuntimeError(f"sweep: worker process {p.pid} died ({_exit_text(p.exitcode)}); "
                                "finished rows are saved, rerun to resume")
    return RuntimeError("sweep: every worker process exited before the sweep finished")


def _salvage(reader, salvage) -> None:
    """Keep the rows already sent back before the workers are stopped."""
    try:
        while reader.poll(0):
            kind, _, payload = reader.recv()
            if kind == "row":
                salvage(payload)
    except (EOFError, OSError):
        pass


# --------------------------------------------------------------------------- dask
def _run_task(fn, task):
    """One task on a Dask worker: (rows that finished, the error that stopped it or None)."""
    rows = []
    for p in task:
        try:
            rows.append(fn(p))
        except Exception as exc:  # noqa: BLE001 - returned, re-raised by the sweep
            return rows, _picklable(exc)
    return rows, None


def _run_dask(fn, tasks, record, salvage, *, workers: int, address: str | None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ValueError(DASK_MISSING) from None
    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    futures = []
    taken = set()
    try:
        futures = client.map(_run_task, [fn] * len(tasks), tasks, pure=False)
        for fut in as_completed(futures):
            rows, exc = fut.result()
            taken.add(fut.key)
            for r in rows:
                record(r)
            if exc is not None:
                raise exc
    except BaseException:
        for fut in futures:
            if fut.key not in taken and fut.status == "finished":
                for r in fut.result()[0]:
                    salvage(r)
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
