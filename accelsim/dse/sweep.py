"""Sweeps as a first-class feature: the cartesian product of config values, evaluated in parallel,
each finished point appended to one tidy table at once, resumable after an interruption.

A sweep is data (:class:`SweepSpec`: fixed ``base`` values plus ``axes`` of values to vary), built
from the command line (:func:`parse_assignment`) or a TOML file (:func:`load_sweep_file`). Every
point gets a stable ``point_id`` (a hash of its parameters), which is how a resumed sweep knows what
is already done. The evaluator is any picklable top-level function ``params -> {column: value}``
that declares its output ``columns``; it raises :class:`Infeasible` for a point that cannot run
(recorded as a row with the reason) and any other exception for a genuine error (the sweep stops,
keeps every finished row and can be resumed).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Columns every sweep table starts with / carries, in this order around the parameters.
ID_COLUMN = "point_id"
STATUS_COLUMNS = ("status", "reason")
EXECUTORS = ("serial", "process", "dask")


class Infeasible(Exception):
    """Raised by an evaluator for a point that is valid input but cannot run (e.g. does not fit).

    The sweep records it as a row with ``status="infeasible"`` and ``reason=str(exc)``."""


@dataclass(frozen=True)
class SweepSpec:
    """Fixed ``base`` parameters plus ``axes`` (name, values) whose cartesian product is swept."""

    base: tuple[tuple[str, Any], ...] = ()
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def __post_init__(self) -> None:
        names = [k for k, _ in self.base] + [k for k, _ in self.axes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"sweep: parameter(s) given twice (base and/or axes): {', '.join(dup)}")
        for name, values in self.axes:
            if len(values) == 0:
                raise ValueError(f"sweep: axis {name!r} has no values")
            if len(set(map(_canonical, values))) != len(values):
                raise ValueError(f"sweep: axis {name!r} repeats a value: {list(values)}")
        reserved = {ID_COLUMN, *STATUS_COLUMNS}
        bad = sorted(set(names) & reserved)
        if bad:
            raise ValueError(f"sweep: parameter name(s) {bad} are reserved for sweep bookkeeping")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.axes) + tuple(k for k, _ in self.base)

    @property
    def n_points(self) -> int:
        n = 1
        for _, values in self.axes:
            n *= len(values)
        return n

    def points(self) -> list[dict[str, Any]]:
        """All points in a deterministic order (first axis slowest)."""
        base = dict(self.base)
        names = [k for k, _ in self.axes]
        out = []
        for combo in itertools.product(*(v for _, v in self.axes)):
            p = dict(zip(names, combo))
            p.update(base)
            out.append(p)
        return out

    def with_base(self, **values: Any) -> SweepSpec:
        """A copy with extra fixed parameters (existing names are replaced)."""
        base = dict(self.base)
        base.update(values)
        axes = tuple((k, v) for k, v in self.axes if k not in values)
        return SweepSpec(base=tuple(base.items()), axes=axes)


# --------------------------------------------------------------------------- building a spec
def parse_value(text: str) -> Any:
    """``"32"`` -> 32, ``"2.5"`` -> 2.5, ``"true"`` -> True, anything else stays a string."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def parse_assignment(text: str) -> tuple[str, tuple[Any, ...]]:
    """``"link_GBps=32,64,128"`` -> ``("link_GBps", (32, 64, 128))``.

    A numeric range is ``start:stop:step`` (inclusive stop) or ``start:stop:xF`` (geometric, factor
    F), e.g. ``compression=32:512:x2`` -> 32, 64, 128, 256, 512."""
    if "=" not in text:
        raise ValueError(f"sweep: expected KEY=VALUE[,VALUE...], got {text!r}")
    key, _, rhs = text.partition("=")
    key = key.strip()
    if not key:
        raise ValueError(f"sweep: empty key in {text!r}")
    if rhs.strip() == "":
        raise ValueError(f"sweep: no value for key {key!r} in {text!r}")
    if rhs.count(":") == 2 and "," not in rhs:
        return key, _parse_range(key, rhs)
    return key, tuple(parse_value(v) for v in rhs.split(","))


def _parse_range(key: str, rhs: str) -> tuple[Any, ...]:
    a, b, step = (s.strip() for s in rhs.split(":"))
    start, stop = parse_value(a), parse_value(b)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, stop)):
        raise ValueError(f"sweep: range for {key!r} needs numeric start and stop, got {rhs!r}")
    geometric = step.startswith("x")
    s = parse_value(step[1:] if geometric else step)
    if not isinstance(s, int | float) or isinstance(s, bool) or (s <= 1 if geometric else s <= 0):
        raise ValueError(f"sweep: bad range step {step!r} for {key!r} (need >0, or xF with F>1)")
    vals: list[Any] = []
    v = start
    while v <= stop * (1 + 1e-12) and len(vals) < 100_000:
        vals.append(v)
        v = v * s if geometric else v + s
    if not vals:
        raise ValueError(f"sweep: range {rhs!r} for {key!r} is empty")
    return tuple(vals)


def spec_from_assignments(
    axes: Iterable[str] = (), base: Iterable[str] = (), *, defaults: Mapping[str, Any] | None = None
) -> SweepSpec:
    """Build a spec from ``KEY=V1,V2`` strings (axes) and ``KEY=V`` strings (fixed values).

    ``defaults`` are fixed values used for keys not given either way."""
    axis_items = [parse_assignment(a) for a in axes]
    axis_names = {k for k, _ in axis_items}
    base_items = {k: v for k, v in (defaults or {}).items() if k not in axis_names}
    for b in base:
        k, vals = parse_assignment(b)
        if len(vals) != 1:
            raise ValueError(f"sweep: --set {k} takes one value, got {list(vals)} (use --axis)")
        if k in axis_names:
            raise ValueError(f"sweep: {k!r} is given both as a fixed value and as an axis")
        base_items[k] = vals[0]
    return SweepSpec(base=tuple(base_items.items()), axes=tuple(axis_items))


def load_sweep_file(path: str | os.PathLike, *, defaults: Mapping[str, Any] | None = None) -> SweepSpec:
    """Read a TOML sweep file with tables ``[base]`` (fixed values) and ``[axes]`` (lists).

    Example::

        [base]
        system = "arch_configs/hfp8-64chip.toml"
        minibatch = 512
        [axes]
        scheme = ["fp16", "fp8", "hfp8"]
        link_GBps = [32, 64, 128]
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"sweep file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"base", "axes"})
    if unknown:
        raise ValueError(f"{p}: unknown table(s) {unknown}; a sweep file has [base] and [axes]")
    base = dict(defaults or {})
    raw_base = data.get("base", {})
    if not isinstance(raw_base, dict):
        raise ValueError(f"{p}: 'base' must be a table")
    for k, v in raw_base.items():
        if isinstance(v, list | dict):
            raise ValueError(f"{p}: base.{k} must be a single value, got {v!r} (put lists in [axes])")
        base[k] = v
    raw_axes = data.get("axes", {})
    if not isinstance(raw_axes, dict):
        raise ValueError(f"{p}: 'axes' must be a table")
    axes = []
    for k, v in raw_axes.items():
        if not isinstance(v, list):
            raise ValueError(f"{p}: axes.{k} must be a list of values, got {v!r}")
        axes.append((k, tuple(v)))
        if k not in raw_base:  # an axis replaces a default fixed value
            base.pop(k, None)
    try:
        return SweepSpec(base=tuple(base.items()), axes=tuple(axes))
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None


# --------------------------------------------------------------------------- identity of a point
def _canonical(v: Any) -> str:
    # 32 and 32.0 are the same point; keep strings distinct from numbers.
    if isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, int | float):
        f = float(v)
        return repr(int(f)) if f.is_integer() else repr(f)
    return json.dumps(str(v))


def point_id(params: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit id of a parameter set (order of keys and 32 vs 32.0 do not matter)."""
    text = "{" + ",".join(f"{json.dumps(k)}:{_canonical(params[k])}" for k in sorted(params)) + "}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- the table on disk
class _CsvJournal:
    """Append-only CSV: one complete line per finished point, flushed at once.

    A line cut short by a crash (no trailing newline) is dropped on reopen, so its point is simply
    recomputed; every complete line is kept."""

    def __init__(self, path: Path, header: Sequence[str]):
        self.path = path
        self.header = list(header)
        self.done: set[str] = set()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > 0:
            self._repair_tail()
            with path.open(newline="") as f:
                reader = csv.reader(f)
                existing = next(reader, None)
                if existing is not None and existing != self.header:
                    raise ValueError(
                        f"{path}: existing sweep table has columns {existing}, this sweep writes "
                        f"{self.header}; use another --out or delete the file"
                    )
                idx = self.header.index(ID_COLUMN)
                for row in reader:
                    if len(row) == len(self.header):
                        self.done.add(row[idx])
        fresh = not path.exists() or path.stat().st_size == 0
        self._f = path.open("a", newline="")
        if fresh:
            self._write(self.header)

    def _repair_tail(self) -> None:
        with self.path.open("rb+") as f:
            data = f.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            f.truncate(cut)

    def _write(self, values: Sequence[Any]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(values)
        self._f.write(buf.getvalue())
        self._f.flush()

    def append(self, row: Mapping[str, Any]) -> None:
        self._write([_cell(row.get(c)) for c in self.header])
        self.done.add(row[ID_COLUMN])

    def close(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


# --------------------------------------------------------------------------- running
def evaluate_one(evaluate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
                 params: Mapping[str, Any]) -> dict[str, Any]:
    """One sweep row: the parameters, ``status``/``reason`` and the evaluator's outputs."""
    row: dict[str, Any] = {ID_COLUMN: point_id(params), **params}
    try:
        out = evaluate(params)
    except Infeasible as exc:
        row.update(status="infeasible", reason=str(exc))
        return row
    row.update(status="ok", reason="")
    row.update(out)
    return row


def _columns_of(evaluate: Callable, columns: Sequence[str] | None) -> tuple[str, ...]:
    cols = columns if columns is not None else getattr(evaluate, "columns", None)
    if cols is None:
        raise ValueError(
            f"sweep: evaluator {getattr(evaluate, '__name__', evaluate)!r} declares no output "
            "columns; pass columns=... or set evaluate.columns"
        )
    return tuple(cols)


def run_sweep(
    spec: SweepSpec,
    evaluate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    out: str | os.PathLike | None = None,
    *,
    columns: Sequence[str] | None = None,
    executor: str = "process",
    workers: int | None = None,
    progress: bool = True,
    dask_address: str | None = None,
    on_row: Callable[[Mapping[str, Any]], None] | None = None,
):
    """Evaluate every point of ``spec`` not already in ``out`` and append each row as it finishes.

    ``executor``: ``"serial"`` (in this process), ``"process"`` (stdlib ProcessPoolExecutor with
    ``workers`` processes) or ``"dask"`` (a ``dask.distributed`` client: ``dask_address`` of a
    running scheduler, else a local cluster). ``out`` ending in ``.csv`` is the journal itself;
    ending in ``.parquet`` keeps the journal beside it (``<out>.journal.csv``) and writes the
    Parquet file when the sweep completes (needs pyarrow). Returns the whole table (pandas), old
    rows included, in the spec's point order. An evaluator error or an interrupt stops the sweep
    after saving every row that had finished; rerunning the same call resumes."""
    import pandas as pd
    from tqdm.auto import tqdm

    if executor not in EXECUTORS:
        raise ValueError(f"sweep: unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ValueError(f"sweep: workers must be >= 1, got {workers}")
    out_cols = _columns_of(evaluate, columns)
    params_cols = spec.param_names
    clash = sorted(set(out_cols) & ({ID_COLUMN, *STATUS_COLUMNS} | set(params_cols)))
    if clash:
        raise ValueError(f"sweep: evaluator output column(s) {clash} clash with parameters/bookkeeping")
    header = (ID_COLUMN, *params_cols, *STATUS_COLUMNS, *out_cols)

    parquet_out = None
    journal_path = None
    if out is not None:
        out = Path(out)
        if out.suffix == ".parquet":
            parquet_out = out
            journal_path = out.with_name(out.name + ".journal.csv")
        elif out.suffix == ".csv":
            journal_path = out
        else:
            raise ValueError(f"sweep: output {out} must end in .csv or .parquet")
        if parquet_out is not None:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise ValueError(f"sweep: writing {out} needs pyarrow (pip install pyarrow); "
                                 "or use a .csv output") from None

    points = spec.points()
    ids = [point_id(p) for p in points]
    rows_mem: list[dict[str, Any]] = []
    journal = _CsvJournal(journal_path, header) if journal_path is not None else None
    done = journal.done if journal is not None else set()
    todo = [p for p, i in zip(points, ids) if i not in done]

    def record(row: Mapping[str, Any], notify: bool = True) -> None:
        if journal is not None:
            if row[ID_COLUMN] in journal.done:  # never write a point twice
                return
            journal.append(row)
        else:
            rows_mem.append(dict(row))
        bar.update(1)
        if notify and on_row is not None:
            on_row(row)

    bar = tqdm(total=len(points), initial=len(points) - len(todo), disable=not progress,
               desc="sweep", unit="pt", leave=False)
    try:
        if executor == "serial" or not todo:
            for p in todo:
                record(evaluate_one(evaluate, p))
        elif executor == "process":
            _run_pool(ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1),
                      evaluate, todo, record)
        else:
            _run_dask(evaluate, todo, record, workers=workers, address=dask_address)
    finally:
        bar.close()
        if journal is not None:
            journal.close()

    if journal_path is not None:
        table = pd.read_csv(journal_path, keep_default_na=False, na_values=[""])
        order = {i: k for k, i in enumerate(ids)}
        table = (table[table[ID_COLUMN].isin(order)]
                 .assign(_o=lambda d: d[ID_COLUMN].map(order)).sort_values("_o")
                 .drop(columns="_o").reset_index(drop=True))
        if parquet_out is not None and len(table) == len(points):
            table.to_parquet(parquet_out, index=False)
        return table
    return pd.DataFrame(rows_mem, columns=list(header))


def _run_pool(pool: ProcessPoolExecutor, evaluate, todo, record) -> None:
    futures: list[Future] = []
    written: set[Future] = set()
    try:
        futures = [pool.submit(evaluate_one, evaluate, p) for p in todo]
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                row = f.result()  # re-raises an evaluator error here
                record(row)
                written.add(f)
    except BaseException:
        # Keep every row that finished before the error/interrupt, then stop the rest
        # (no waiting for queued points: they are cancelled and recomputed on resume).
        for f in futures:
            f.cancel()
        for f in futures:
            if f not in written and f.done() and not f.cancelled() and f.exception() is None:
                record(f.result(), notify=False)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_dask(evaluate, todo, record, *, workers: int | None, address: str | None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ValueError("sweep: executor 'dask' needs dask.distributed "
                         "(pip install 'accelsim[dask]')") from None
    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    futures = []
    written = set()
    try:
        futures = client.map(evaluate_one, [evaluate] * len(todo), todo, pure=False)
        for fut in as_completed(futures):
            record(fut.result())
            written.add(fut.key)
    except BaseException:
        for fut in futures:
            if fut.key not in written and fut.status == "finished":
                record(fut.result(), notify=False)
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
