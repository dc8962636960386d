"""The Pareto front of a design-space table over two metrics (e.g. samples_per_s against
samples_per_J): the points no other point beats in one metric without losing in the other.

Point ``a`` dominates ``b`` when ``a`` is at least as good in both metrics and strictly better
in one; the front is every point nothing dominates (exact comparisons: equal points are both on
it). :func:`pareto_front_reference` is the obvious O(n^2) definition, :func:`pareto_front` the
O(n log n) sweep used on tables; a test checks one against the other.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import InputError


def _as_maximized(x, y, maximize: tuple[bool, bool]) -> tuple[np.ndarray, np.ndarray]:
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise InputError(f"pareto: x and y must be 1-D of one length, got {xs.shape} and "
                         f"{ys.shape}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise InputError("pareto: x and y must be finite (drop infeasible rows first)")
    return (xs if maximize[0] else -xs), (ys if maximize[1] else -ys)


def pareto_front_reference(x, y, maximize: tuple[bool, bool] = (True, True)) -> np.ndarray:
    """Whether each point is on the front, straight from the definition (O(n^2))."""
    xs, ys = _as_maximized(x, y, maximize)
    on = np.ones(len(xs), dtype=bool)
    for i in range(len(xs)):
        for j in range(len(xs)):
            if xs[j] >= xs[i] and ys[j] >= ys[i] and (xs[j] > xs[i] or ys[j] > ys[i]):
                on[i] = False
                break
    return on


def pareto_front(x, y, maximize: tuple[bool, bool] = (True, True)) -> np.ndarray:
    """Whether each point is on the front (O(n log n)): sorted by x best first, a point is on
    the front when its y is the best of its x value and better than every y at a better x."""
    xs, ys = _as_maximized(x, y, maximize)
    on = np.zeros(len(xs), dtype=bool)
    if len(xs) == 0:
        return on
    order = np.lexsort((-ys, -xs))  # x descending, then y descending
    best_y_before = -np.inf  # best y among strictly better x
    k = 0
    while k < len(order):
        group_end = k
        while group_end < len(order) and xs[order[group_end]] == xs[order[k]]:
            group_end += 1
        top = ys[order[k]]  # best y of this x value
        if top > best_y_before:
            for idx in order[k:group_end]:
                on[idx] = ys[idx] == top
        best_y_before = max(best_y_before, top)
        k = group_end
    return on
