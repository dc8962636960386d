"""The accelsim error family: what a user's input or request causes.

The CLI prints any :class:`AccelsimError` as one line (exit 2); any other exception is a bug in
accelsim and is reported as one (the traceback under ``ACCELSIM_DEBUG=1``). Library code raises
these for bad input, so a Python caller can catch the family in one ``except``. A shared module:
every room may import it, it imports nothing of accelsim.
"""

from __future__ import annotations

import numbers
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

E = TypeVar("E", bound=Enum)

__all__ = ["ABSENT", "MAX_COUNT", "AccelsimError", "BUG_REPORT", "ConfigError", "Infeasible", "InputError",
           "SizeError", "TOO_DEEP", "UserError", "check_int", "choose"]

#: Where a bug is reported (the one line the CLI prints for an exception outside the family).
BUG_REPORT = ("this is a bug in accelsim, not in your input: please report it to the accelsim "
              "issue tracker with the command line (rerun with ACCELSIM_DEBUG=1 for the traceback)")


class AccelsimError(Exception):
    """Base of every error a user's input or request causes; its message is one line that names
    the flag, key or file and the bad value."""


class InputError(AccelsimError, ValueError):
    """A bad value passed to the library or the command line (a ValueError too, so callers that
    caught ValueError before the family existed still do)."""


class UserError(InputError):
    """A bad command line: a flag value, a combination of flags, an unusable path."""


#: Largest count or size the models take unless a quantity states its own limit: every integer
#: up to 2^53 is exact in float64, the models' arithmetic (CLI flags, sweep keys)
MAX_COUNT = 2**53

#: why a JSON/TOML file whose arrays or tables nest beyond what its parser can recurse into
#: (Python's json and tomllib are recursive) is refused: a ConfigError, not a RecursionError
TOO_DEEP = ("arrays or tables nested too deeply to read (beyond Python's recursion limit; no "
            "config nests more than a few levels)")

#: "no value": a key that is absent from a config, shown without a ``(got ...)`` part.
ABSENT = object()


class ConfigError(InputError):
    """A bad config: ``file``, dotted ``key`` path and offending ``value``; one-line message."""

    def __init__(self, file: str | Path, key: str, value: Any, message: str):
        self.file = str(file)
        self.key = key
        self.value = value
        self.reason = message
        shown = "" if value is ABSENT else f" (got {value!r})"
        super().__init__(f"{self.file}: {key}: {message}{shown}".replace("\n", " "))


class Infeasible(AccelsimError):
    """Valid input that cannot run (e.g. does not fit in memory). A sweep records such a point as a
    row with ``status="infeasible"`` and ``reason=str(exc)`` and carries on; a single run reports
    it as one line."""


class SizeError(InputError, OverflowError):
    """A size or count whose arithmetic would not fit the number types used (int64 cycle or
    byte counts): refused with the size and the limit instead of wrapping to nonsense."""


def choose(vocabulary: type[E], value: Any, what: str) -> E:
    """The member of the closed ``vocabulary`` (a str-valued Enum) that ``value`` names, or an
    InputError naming ``what``, the value and the choices: strings die here, at the boundary."""
    try:
        return vocabulary(value)
    except ValueError:
        raise InputError(f"unknown {what} {value!r}; choose from "
                         f"{', '.join(m.value for m in vocabulary)}") from None


def check_int(name: str, value: Any, lo: int = 1, hi: int | None = None) -> int:
    """``value`` as an int when it is an integer (a Python or numpy integer, not a bool) in
    ``[lo, hi]``; else an InputError naming ``name``, the value and the range. The one check
    behind every "must be a positive integer" of the library."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) \
        and lo <= value and (hi is None or value <= hi)
    if not ok:
        if hi is not None:
            want = f"an integer in [{lo:,}, {hi:,}]"
        else:
            want = "a positive integer" if lo == 1 else f"an integer >= {lo:,}"
        raise InputError(f"{name} must be {want}, got {value!r}")
    return int(value)
