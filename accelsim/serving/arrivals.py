"""The request stream a serving simulation is fed: Poisson (or gamma, ``burstiness``) arrivals at
a rate with fixed lengths or lengths drawn from a table, or a recorded stream read from a file.

Randomness comes from a :class:`numpy.random.Generator` passed in (one seed, one stream). Gamma
inter-arrivals of shape ``burstiness`` and mean ``1 / rate`` (vLLM's ``benchmark_serving.py
--burstiness``: 1 is Poisson, below 1 burstier, above 1 more regular).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.bounds import MAX_DIM
from accelsim.errors import InputError, check_int
from accelsim.paths import PACKAGE_DATA

#: most requests one simulation takes (each is a few objects and a row of the table)
MAX_REQUESTS = 1_000_000
#: shipped length tables, by name (accelsim/data/serve/NAME.csv)
SHIPPED_LENGTHS = ("conversation",)


@dataclass(frozen=True)
class Request:
    """One request: it arrives at ``arrival_s`` with a prompt of ``input_tokens`` and wants
    ``output_tokens`` tokens (the first from its prefill); ``prefix`` names a shared prompt
    prefix ("" none) of its first ``prefix_tokens`` tokens."""

    id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    prefix: str = ""
    prefix_tokens: int = 0


@dataclass(frozen=True)
class Lengths:
    """(input, output) token counts to draw from, uniformly (one row: fixed lengths)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    source: str = "fixed"

    def __post_init__(self) -> None:
        if not self.inputs or len(self.inputs) != len(self.outputs):
            raise InputError(f"{self.source}: lengths need as many input as output counts, "
                             "at least one")
        for name, vals in (("input_tokens", self.inputs), ("output_tokens", self.outputs)):
            for v in vals:
                check_int(f"{self.source}: {name}", v, 1, MAX_DIM)

    @classmethod
    def fixed(cls, input_tokens: int, output_tokens: int) -> Lengths:
        return cls((input_tokens,), (output_tokens,))

    @property
    def max_tokens(self) -> int:
        return max(i + o for i, o in zip(self.inputs, self.outputs))


def _rows(path: Path) -> list[dict]:
    """Rows of a CSV (header) or JSONL file as dicts of strings/numbers."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.startswith("#"))  # a provenance header
    if path.suffix.lower() in (".jsonl", ".json"):
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{n}: not a JSON object ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: each line must be a JSON object")
            out.append(row)
        return out
    return list(csv.DictReader(text.splitlines()))


def _int(path: Path, n: int, row: dict, key: str) -> int:
    if key not in row or row[key] in ("", None):
        raise InputError(f"{path}: row {n}: missing {key}")
    v = row[key]
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{path}: row {n}: {key} must be an integer, got {v!r}") from None
    if not f.is_integer():
        raise InputError(f"{path}: row {n}: {key} must be an integer, got {v!r}")
    return check_int(f"{path}: row {n}: {key}", int(f), 1, MAX_DIM)


def read_lengths(name_or_path: str | Path) -> Lengths:
    """A length table: a shipped name (``conversation``) or a CSV/JSONL file with columns
    ``input_tokens`` and ``output_tokens``."""
    if str(name_or_path) in SHIPPED_LENGTHS:
        path = PACKAGE_DATA / "serve" / f"{name_or_path}.csv"
    else:
        path = Path(name_or_path)
    rows = _rows(path)
    if not rows:
        raise InputError(f"{path}: no rows")
    ins = tuple(_int(path, n, r, "input_tokens") for n, r in enumerate(rows, 1))
    outs = tuple(_int(path, n, r, "output_tokens") for n, r in enumerate(rows, 1))
    return Lengths(ins, outs, str(path))


def read_arrivals(path: str | Path) -> tuple[Request, ...]:
    """A recorded stream: CSV/JSONL with ``arrival_s``, ``input_tokens``, ``output_tokens`` and
    optionally a ``prefix`` id with its length ``prefix_tokens`` (the prompt's first tokens,
    shared by every request naming that id), in any order (sorted by arrival here)."""
    path = Path(path)
    rows = _rows(path)
    if not rows:
        raise InputError(f"{path}: no requests")
    if len(rows) > MAX_REQUESTS:
        raise InputError(f"{path}: {len(rows):,} requests, more than {MAX_REQUESTS:,}")
    out = []
    for n, r in enumerate(rows, 1):
        try:
            t = float(r.get("arrival_s", ""))
        except (TypeError, ValueError):
            raise InputError(f"{path}: row {n}: arrival_s must be a number of seconds, got "
                             f"{r.get('arrival_s')!r}") from None
        if not (math.isfinite(t) and t >= 0):
            raise InputError(f"{path}: row {n}: arrival_s must be finite and >= 0, got {t!r}")
        inp = _int(path, n, r, "input_tokens")
        prefix = str(r.get("prefix") or "")
        pt = 0
        if prefix:
            pt = _int(path, n, r, "prefix_tokens")
            if pt > inp:
                raise InputError(f"{path}: row {n}: prefix_tokens {pt} is longer than the "
                                 f"prompt's {inp} input_tokens")
        elif r.get("prefix_tokens") not in (None, "", 0, "0"):
            raise InputError(f"{path}: row {n}: prefix_tokens without a prefix id")
        out.append((t, n, inp, _int(path, n, r, "output_tokens"), prefix, pt))
    out.sort()
    return tuple(Request(i, t, a, b, p, pt) for i, (t, _, a, b, p, pt) in enumerate(out))


def generate(rate: float, requests: int, lengths: Lengths, rng: np.random.Generator,
             burstiness: float = 1.0) -> tuple[Request, ...]:
    """``requests`` requests arriving at ``rate`` per second on average (gamma inter-arrivals
    of shape ``burstiness``; 1: Poisson), lengths drawn uniformly from ``lengths``'s rows."""
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise InputError(f"rate must be a positive number of requests per second, got {rate!r}")
    if not (isinstance(burstiness, int | float) and math.isfinite(burstiness)
            and 0 < burstiness <= 1e6):
        raise InputError(f"burstiness must be a positive number (1: Poisson), got "
                         f"{burstiness!r}")
    check_int("requests", requests, 1, MAX_REQUESTS)
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), requests)
    times = np.cumsum(gaps) - gaps[0]  # the first request arrives at 0
    pick = rng.integers(0, len(lengths.inputs), requests)
    return tuple(Request(i, float(times[i]), lengths.inputs[k], lengths.outputs[k])
                 for i, k in enumerate(pick.tolist()))
