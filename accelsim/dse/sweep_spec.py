"""Sweep specifications: a sweep is data (:class:`SweepSpec`: fixed ``base`` values plus ``axes``
of values to vary), built from the command line (:func:`parse_assignment`) or a TOML file
(:func:`load_sweep_file`). Values are normalized on the way in (64.0 is the point 64; bools stay
bools), sizes are counted before anything is built, and every point gets a stable ``point_id``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.errors import TOO_DEEP
from accelsim.errors import Infeasible  # noqa: F401 - re-exported: sweeps import it from here

#: Columns every sweep table starts with / carries, in this order around the parameters.
ID_COLUMN = "point_id"
STATUS_COLUMNS = ("status", "reason")
#: Most points a sweep (or one range) may have unless the caller raises the limit: counted before
#: anything is built, so a typo such as ``1:1000000000:1`` is refused at once, not cut or run.
MAX_POINTS = 100_000


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
            if len(set(map(canonical, values))) != len(values):
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
        data = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a BOM is not TOML
    except FileNotFoundError:
        raise FileNotFoundError(f"sweep file not found: {p}") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a sweep file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not UTF-8 text, not a sweep file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"{p}: invalid sweep file: {TOO_DEEP}") from None
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
def canonical(v: Any) -> str:
    """The text a value is identified by (32 and 32.0 are one point; strings stay strings)."""
    # 32 and 32.0 are the same point; keep strings distinct from numbers.
    if isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, int | float):
        f = float(v)
        return repr(int(f)) if f.is_integer() else repr(f)
    return json.dumps(str(v))


def point_id(params: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit id of a parameter set (order of keys and 32 vs 32.0 do not matter)."""
    text = "{" + ",".join(f"{json.dumps(k)}:{canonical(params[k])}" for k in sorted(params)) + "}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]
