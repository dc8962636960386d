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

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from accelsim.dse.sweep_executors import (EXECUTORS, check_executor, choose_executor,
                                           default_workers, make_tasks, run_tasks)
from accelsim.dse.sweep_spec import (
    ID_COLUMN,
    MAX_POINTS,
    STATUS_COLUMNS,
    Infeasible,
    SweepSpec,
    canonical,
    load_sweep_file,
    normalize_value,
    parse_assignment,
    parse_value,
    point_id,
    spec_from_assignments,
)
from accelsim.dse.sweep_journal import (
    CRC_COLUMN,
    Journal,
    JournalError,
    JournalIOError,
    JournalLocked,
    JournalWarning,
    cell_text,
)
from accelsim.errors import check_int

__all__ = ["CRC_COLUMN", "EXECUTORS", "ID_COLUMN", "MAX_POINTS", "STATUS_COLUMNS", "GroupAllBut",
           "Infeasible", "JournalError", "JournalIOError", "JournalLocked", "JournalWarning",
           "SweepSpec", "check_executor", "choose_executor", "evaluate_one", "load_sweep_file", "normalize_value", "parse_assignment",
           "parse_value", "point_id", "run_sweep", "spec_from_assignments"]

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
    return canonical(parse_value(cell)) == canonical(value)


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
        return tuple((k, canonical(v)) for k, v in sorted(p.items()) if k not in self.names)


def _group_key(spec: SweepSpec, group_by) -> Callable[[Mapping[str, Any]], Hashable] | None:
    if group_by is None or callable(group_by):
        return group_by
    names = (group_by,) if isinstance(group_by, str) else tuple(group_by)
    unknown = [n for n in names if n not in spec.param_names]
    if unknown:
        raise ValueError(f"sweep: group_by names {unknown} that are not sweep parameters "
                         f"({', '.join(spec.param_names)})")
    return lambda p: tuple(canonical(p[n]) for n in names)


def run_sweep(
    spec: SweepSpec,
    evaluate: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    out: str | os.PathLike | None = None,
    *,
    columns: Sequence[str] | None = None,
    executor: str = "auto",
    workers: int | None = None,
    progress: bool = True,
    dask_address: str | None = None,
    on_row: Callable[[Mapping[str, Any]], None] | None = None,
    group_by: Sequence[str] | str | Callable[[Mapping[str, Any]], Hashable] | None = None,
    max_points: int = MAX_POINTS,
):
    """Evaluate every point of ``spec`` not already in ``out`` and append each row as it finishes.

    ``executor``: ``"auto"`` (default: a process pool where one can win, else serial; the rule is
    :func:`~accelsim.dse.sweep_executors.choose_executor`), ``"serial"`` (in this process),
    ``"process"`` (``workers`` worker processes that exit with this one) or ``"dask"`` (a ``dask.distributed`` client: ``dask_address`` of a
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

    check_executor(executor)  # before the journal and the bar: a missing extra fails at once
    if workers is not None:
        check_int("sweep: workers", workers)
    out_cols = _columns_of(evaluate, columns)
    # columns in a canonical order: the same sweep with its axes given in another order is the
    # same table (and resumes into it)
    params_cols = tuple(sorted(spec.param_names))
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
        if executor == "auto":
            executor = choose_executor(todo, n_workers, key)
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
