"""Rounding oracles written from the definitions in exact rational arithmetic, shared by the
arithmetic tests (one copy: an oracle that drifts between files proves nothing)."""

from __future__ import annotations

import math
from fractions import Fraction


def round_odd53(X: Fraction) -> float:
    """X rounded to 53 significant bits by round-to-odd: truncate toward zero, then set the last
    bit when anything was cut off."""
    if X == 0:
        return 0.0
    a = abs(X)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (e - 52)
    n, rem = divmod(a, q)
    n = int(n) | (1 if rem else 0)
    return math.copysign(float(n * q), X)
