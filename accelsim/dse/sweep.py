"""Sweeps as a first-class feature: the cartesian product of config values, evaluated in parallel,
each finished point appended to one tidy table at once, resumable after an interruption.

A sweep is data (:class:`SweepSpec`: fixed ``base`` values plus ``axes`` of values to vary), built
from the command line (:func:`parse_assignment`) or a TOML file (:func:`load_sweep_file`). Values
are normalized on the way in (64.0 is the point 64; bools stay bools) and every point gets a
stable ``point_id`` (a hash of its parameters), which is how a resumed sweep knows what is already
done. The evaluator is any picklable top-level function ``params -> {column: value}`` that
declares its output ``columns``; it raises :class:`Infeasible` for a point that cannot run
(recorded as a row with the reason) and any other exception for a genuine error (the sweep stops,
keeps every finished row and can be resumed). The journal (locking, validation, quarantine) is
:mod:`accelsim.dse.sweep_journal`; where points run is :mod:`accelsim.dse.sweep_executors`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
import os
import tomllib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.dse.sweep_executors import EXECUTORS, default_workers, make_tasks, run_tasks
from accelsim.dse.sweep_journal import (
    CRC_COLUMN,
    Journal,
    JournalError,
    JournalIOError,
    JournalLocked,
    JournalWarning,
    cell_text,
)

#: Columns every sweep table starts with / carries, in this order around the parameters.
ID_COLUMN = "point_id"
STATUS_COLUMNS = ("status", "reason")
#: Most points a sweep (or one range) may have unless the caller raises the limit: counted before
#: anything is built, so a typo such as ``1:1000000000:1`` is refused at once, not cut or run.
MAX_POINTS = 100_000

__all__ = ["CRC_COLUMN", "EXECUTORS", "ID_COLUMN", "MAX_POINTS", "STATUS_COLUMNS", "GroupAllBut",
           "Infeasible", "JournalError", "JournalIOError", "JournalLocked", "JournalWarning",
           "SweepSpec", "evaluate_one", "load_sweep_file", "normalize_value", "parse_assignment",
           "parse_value", "point_id", "run_sweep", "spec_from_assignments"]


class Infeasible(Exception):
    """Raised by an evaluator for a point that is valid input but cannot run (e.g. does not fit).

    The sweep records it as a row with ``status="infeasible"`` and ``reason=str(exc)``."""


@dataclass(frozen=True)
class SweepSpec:
    """Fixed ``base`` parameters plus ``axes`` (name, values) whose cartesian product is swept."""

    base: tuple[tuple[str, Any], ...] = ()
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def __post_init__(self) -> None:
        # Normalized once here, so the point_id, the journal and the evaluator see one value.
        object.__setattr__(self, "base", tuple((k, normalize_value(k, v)) for k, v in self.base))
        object.__setattr__(self, "axes", tuple(
            (k, tuple(normalize_value(k, v) for v in values)) for k, values in self.axes))
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

    def check_size(self, max_points: int = MAX_POINTS) -> int:
        """The number of points; ValueError naming it and the limit when it is over
        ``max_points`` (counted, nothing built)."""
        n = self.n_points
        if n > max_points:
            sizes = " x ".join(f"{len(v):,} {k}" for k, v in self.axes)
            raise ValueError(f"sweep: {n:,} points ({sizes}) exceed the limit of "
                             f"{max_points:,}; narrow the axes, or raise the limit "
                             "(--max-points) if you mean it")
        return n

    def iter_points(self) -> Iterator[dict[str, Any]]:
        """The points one at a time, in :meth:`points` order, without building the list."""
        base = dict(self.base)
        names = [k for k, _ in self.axes]
        for combo in itertools.product(*(v for _, v in self.axes)):
            p = dict(zip(names, combo))
            p.update(base)
            yield p

    def points(self, max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
        """All points in a deterministic order (first axis slowest); refused over
        ``max_points`` before any is built."""
        self.check_size(max_points)
        return list(self.iter_points())

    def with_base(self, **values: Any) -> SweepSpec:
        """A copy with extra fixed parameters (existing names are replaced)."""
        base = dict(self.base)
        base.update(values)
        axes = tuple((k, v) for k, v in self.axes if k not in values)
        return SweepSpec(base=tuple(base.items()), axes=axes)


# --------------------------------------------------------------------------- values
def normalize_value(key: str, v: Any) -> Any:
    """A sweep value as the evaluator sees it: a bool stays a bool, None stays None; an integral
    number becomes an int (64.0 is the point 64, evaluated as 64); other numbers are floats;
    paths become strings.
    Anything else (a list, a table, a date) or a string with control characters is a ValueError
    naming the key."""
    if getattr(v, "shape", None) == () and hasattr(v, "item"):  # a numpy scalar
        v = v.item()
    if v is None or isinstance(v, bool):  # None: "not set, use the evaluator's default"
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isfinite(f) and f.is_integer() and abs(f) <= 2**53:  # exactly that integer
            return int(f)
        return f
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        if any(ord(c) < 32 or ord(c) == 127 for c in v):
            raise ValueError(f"sweep: {key} value {v!r} contains control characters")
        return v
    raise ValueError(f"sweep: {key} value {v!r} is a {type(v).__name__}; sweep values are "
                     "numbers, strings or booleans")


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


def parse_assignment(text: str, *, max_points: int = MAX_POINTS) -> tuple[str, tuple[Any, ...]]:
    """``"link_GBps=32,64,128"`` -> ``("link_GBps", (32, 64, 128))``.

    A numeric range is ``start:stop:step`` (inclusive stop) or ``start:stop:xF`` (geometric, factor
    F), e.g. ``compression=32:512:x2`` -> 32, 64, 128, 256, 512. A range of more than
    ``max_points`` values is refused with its count (counted, not built)."""
    if "=" not in text:
        raise ValueError(f"sweep: expected KEY=VALUE[,VALUE...], got {text!r}")
    key, _, rhs = text.partition("=")
    key = key.strip()
    if not key:
        raise ValueError(f"sweep: empty key in {text!r}")
    if rhs.strip() == "":
        raise ValueError(f"sweep: no value for key {key!r} in {text!r}")
    if rhs.count(":") == 2 and "," not in rhs:
        return key, _parse_range(key, rhs, max_points)
    return key, tuple(parse_value(v) for v in rhs.split(","))


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def range_count(start: float, stop: float, step: float, geometric: bool) -> float:
    """How many values ``start:stop:step`` (or ``:xstep``) has (stop inclusive, with the same
    relative slack of 1e-12 as the values); may be ``inf``."""
    if geometric:
        if stop < start:
            return 0
        return math.floor(math.log(stop / start) / math.log(step) + 1e-9) + 1
    if all(isinstance(v, int) for v in (start, stop, step)):
        return max(0, (stop - start) // step + 1)
    span = (stop + abs(stop) * 1e-12 - start) / step
    if not math.isfinite(span):
        return math.inf
    return math.floor(span) + 1 if span >= 0 else 0


def _parse_range(key: str, rhs: str, max_points: int = MAX_POINTS) -> tuple[Any, ...]:
    a, b, step = (s.strip() for s in rhs.split(":"))
    start, stop = parse_value(a), parse_value(b)
    if not all(_is_number(v) and math.isfinite(v) for v in (start, stop)):
        raise ValueError(f"sweep: range for {key!r} needs finite numeric start and stop, "
                         f"got {rhs!r}")
    geometric = step.startswith("x")
    s = parse_value(step[1:] if geometric else step)
    if not _is_number(s) or not math.isfinite(s) or (s <= 1 if geometric else s <= 0):
        raise ValueError(f"sweep: bad range step {step!r} for {key!r} (need >0, or xF with F>1)")
    if geometric and start <= 0:
        raise ValueError(f"sweep: geometric range {rhs!r} for {key!r} needs a start > 0")
    n = range_count(start, stop, s, geometric)
    if n == 0:
        raise ValueError(f"sweep: range {rhs!r} for {key!r} is empty")
    if n > max_points:
        count = "more than 10^18" if n > 10**18 else f"{int(n):,}"
        raise ValueError(f"sweep: range {rhs!r} for {key!r} has {count} values, over the limit "
                         f"of {max_points:,}; use a coarser step, or raise the limit "
                         "(--max-points) if you mean it")
    if geometric:
        vals: list[Any] = [start]
        while len(vals) < n:
            vals.append(vals[-1] * s)
        return tuple(vals)
    return tuple(start + k * s for k in range(int(n)))


def spec_from_assignments(
    axes: Iterable[str] = (), base: Iterable[str] = (), *,
    defaults: Mapping[str, Any] | None = None, max_points: int = MAX_POINTS,
) -> SweepSpec:
    """Build a spec from ``KEY=V1,V2`` strings (axes) and ``KEY=V`` strings (fixed values).

    ``defaults`` are fixed values used for keys not given either way. A range longer than
    ``max_points`` is refused (see :func:`parse_assignment`)."""
    axis_items = [parse_assignment(a, max_points=max_points) for a in axes]
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
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a sweep file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not UTF-8 text, not a sweep file") from None
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


def _same_value(cell: str, value: Any) -> bool:
    """Whether a journal cell holds ``value`` (numbers by value: "32.0" is 32)."""
    if value is None or isinstance(value, str):
        return cell == cell_text(value)
    return _canonical(parse_value(cell)) == _canonical(value)


def _row_checker(ids: Mapping[str, Mapping[str, Any]], out_cols: Sequence[str]):
    """A journal line's meaning: a known status; an infeasible row has no outputs; the
    parameters of a point of this sweep are those its point_id stands for."""
    def check(row: Mapping[str, str]) -> str | None:
        status = row["status"]
        if status not in ("ok", "infeasible"):
            return f"status {status!r} is neither 'ok' nor 'infeasible'"
        if status == "infeasible" and any(row[c] != "" for c in out_cols):
            return "an infeasible row with output values"
        params = ids.get(row[ID_COLUMN])
        for k, v in (params or {}).items():
            if not _same_value(row[k], v):
                return f"{k}={row[k]!r} is not the value its point_id stands for ({v!r})"
        return None

    return check


class GroupAllBut:
    """A ``group_by`` key: every parameter except ``names`` (those that do not change the shared
    set-up, e.g. the training model's communication knobs ``link_GBps``, ``compression``), so
    config overrides such as ``chips`` or ``rows`` also separate groups."""

    def __init__(self, *names: str):
        self.names = frozenset(names)

    def __call__(self, p: Mapping[str, Any]) -> Hashable:
        return tuple((k, _canonical(v)) for k, v in sorted(p.items()) if k not in self.names)


def _group_key(spec: SweepSpec, group_by) -> Callable[[Mapping[str, Any]], Hashable] | None:
    if group_by is None or callable(group_by):
        return group_by
    names = (group_by,) if isinstance(group_by, str) else tuple(group_by)
    unknown = [n for n in names if n not in spec.param_names]
    if unknown:
        raise ValueError(f"sweep: group_by names {unknown} that are not sweep parameters "
                         f"({', '.join(spec.param_names)})")
    return lambda p: tuple(_canonical(p[n]) for n in names)


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
    group_by: Sequence[str] | str | Callable[[Mapping[str, Any]], Hashable] | None = None,
    max_points: int = MAX_POINTS,
):
    """Evaluate every point of ``spec`` not already in ``out`` and append each row as it finishes.

    ``executor``: ``"serial"`` (in this process), ``"process"`` (``workers`` worker processes that
    exit with this one) or ``"dask"`` (a ``dask.distributed`` client: ``dask_address`` of a
    running scheduler, else a local cluster). ``group_by``: parameter names (or a function of a
    point, such as :class:`GroupAllBut`) whose equal values mark points that share expensive
    set-up; each group runs in one worker, so its caches hit (without it, workers take contiguous
    runs of the sweep order).
    ``max_points``: a larger sweep is refused before anything is built.

    ``out`` ending in ``.csv`` is the journal itself; ending in ``.parquet`` keeps the journal
    beside it (``<out>.journal.csv``) and writes the Parquet file when the sweep completes (needs
    pyarrow). The journal is locked while the sweep runs (a second sweep on it fails at once),
    checked when reopened (bad lines are quarantined with a warning), and put in sweep order once
    every point is in. Returns the whole table (pandas), old rows included, in the spec's point
    order. An evaluator error or an interrupt stops the sweep after saving every row that had
    finished; rerunning the same call resumes."""
    import pandas as pd
    from tqdm.auto import tqdm

    if executor not in EXECUTORS:
        raise ValueError(f"sweep: unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"sweep: workers must be an integer >= 1, got {workers!r}")
    out_cols = _columns_of(evaluate, columns)
    params_cols = spec.param_names
    clash = sorted(set(out_cols) & ({ID_COLUMN, CRC_COLUMN, *STATUS_COLUMNS} | set(params_cols)))
    if clash:
        raise ValueError(f"sweep: evaluator output column(s) {clash} clash with parameters/bookkeeping")
    header = (ID_COLUMN, *params_cols, *STATUS_COLUMNS, *out_cols)
    key = _group_key(spec, group_by)

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

    points = spec.points(max_points)
    by_id = {point_id(p): p for p in points}
    order = {i: k for k, i in enumerate(by_id)}
    rows_mem: dict[str, dict[str, Any]] = {}
    journal = None
    if journal_path is not None:
        journal = Journal(journal_path, header, id_column=ID_COLUMN,
                          check_row=_row_checker(by_id, out_cols))
        journal.open()
    try:
        done = journal.done if journal is not None else rows_mem.keys()
        todo = [p for i, p in by_id.items() if i not in done]
        n_workers = workers or default_workers()
        if executor == "serial":
            tasks = [todo] if todo else []
        else:
            tasks = make_tasks(todo, n_workers, key)
        bar = tqdm(total=len(points), initial=len(points) - len(todo), disable=not progress,
                   desc="sweep", unit="pt", leave=False)

        def record(row: Mapping[str, Any], notify: bool = True) -> None:
            pid = row[ID_COLUMN]
            if pid in done:  # never write a point twice
                return
            if journal is not None:
                journal.append([row.get(c) for c in header])
            else:
                rows_mem[pid] = dict(row)
            bar.update(1)
            if notify and on_row is not None:
                on_row(row)

        try:
            run_tasks(_PointRunner(evaluate), tasks, record, executor=executor,
                      workers=n_workers, salvage=lambda r: record(r, notify=False),
                      close_fds=journal.fds() if journal is not None else (),
                      dask_address=dask_address)
        finally:
            bar.close()
        if journal is None:
            return pd.DataFrame([rows_mem[i] for i in by_id], columns=list(header))
        journal.finish(order)
        table = pd.read_csv(journal_path, keep_default_na=False, na_values=[""],
                            dtype={ID_COLUMN: str}).drop(columns=CRC_COLUMN)
        table = table[table[ID_COLUMN].isin(order)].reset_index(drop=True)
        if parquet_out is not None:
            tmp = parquet_out.with_name(parquet_out.name + ".tmp")
            try:  # whole or not at all: a reader never sees half a Parquet file
                table.to_parquet(tmp, index=False)
                os.replace(tmp, parquet_out)
            finally:
                tmp.unlink(missing_ok=True)
        return table
    finally:
        if journal is not None:
            journal.close()


class _PointRunner:
    """``evaluate_one`` bound to an evaluator, picklable for worker processes."""

    def __init__(self, evaluate: Callable[[Mapping[str, Any]], Mapping[str, Any]]):
        self.evaluate = evaluate

    def __call__(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return evaluate_one(self.evaluate, params)
