"""The error-free building blocks of the exact paths (arith/_fast.py) against Fraction:
``two_sum`` (a + b = s + e exactly, s the float64 sum, for ANY magnitudes -- Knuth's TwoSum,
not Fast2Sum, which needs |a| >= |b|) and ``round_to_odd`` (s + e rounded to 53 bits by
round-to-odd: truncate, set the last bit when inexact). Mutation testing found both unguarded
by the engine-level tests (scripts/mutation_test.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arith._fast import round_to_odd, two_sum
from fraction_oracles import round_odd53


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-2.0**900,
                   max_value=2.0**900)


def _pairs():
    # a small value next to a large one (either order) is where Fast2Sum and round-to-odd fail
    near = st.builds(lambda x, k, sgn: sgn * x * 2.0 ** -k, st.floats(1.0, 2.0), st.integers(0, 80),
                     st.sampled_from([1.0, -1.0]))
    return st.tuples(st.one_of(finite, near), st.one_of(finite, near))


@given(st.lists(_pairs(), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_two_sum_is_error_free_in_any_order(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    with np.errstate(invalid="ignore"):
        s, e = two_sum(a, b)
    for x, y, ss, ee in zip(a, b, s, e):
        assert ss == x + y
        assert Fraction(ss) + Fraction(ee) == Fraction(x) + Fraction(y), (x, y, ss, ee)


@given(st.lists(_pairs(), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_round_to_odd_of_a_two_sum_is_round_to_odd_of_the_exact_sum(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    with np.errstate(invalid="ignore"):
        s, e = two_sum(a, b)
    got = round_to_odd(s, e)
    for x, y, g in zip(a, b, got):
        assert g == round_odd53(Fraction(x) + Fraction(y)), (x, y, g)


def test_hand_cases():
    u = 2.0 ** -52
    # 1 + 2^-60: inexact, 1.0 is even -> bumped to 1 + 2^-52; (1 + 2^-52) + 2^-60: already odd
    for x, y in ((1.0, 2.0 ** -60), (1.0 + u, 2.0 ** -60), (2.0 ** -60, 1.0 + u),
                 (-(1.0 + u), -(2.0 ** -60)), (1.0, -(2.0 ** -60)), (3.0, 2.0 ** 60)):
        s, e = two_sum(np.array([x]), np.array([y]))
        assert Fraction(s[0]) + Fraction(e[0]) == Fraction(x) + Fraction(y)
        assert round_to_odd(s, e)[0] == round_odd53(Fraction(x) + Fraction(y)), (x, y)
