"""S2FP8: shifted and squeezed FP8 (Cambier et al., ICLR 2020, Sec. 3).

Per tensor: mu = mean(log2|x|) and m = max(log2|x|) over the non-zeros, alpha = 15 / (m - mu),
beta = -alpha * mu; the stored FP8 value is round(2^beta |x|^alpha) and the tensor seen by the
arithmetic is X' = [2^-beta * round(2^beta |x|^alpha)]^(1/alpha), signs kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .codec import _as_float64, quantize

TARGET_LOG2_MAX = 15.0  # the squeezed maximum lands on 2^15 (E5M2 max is 1.75 x 2^15)


@dataclass(frozen=True)
class S2FP8Result:
    values: np.ndarray  # X', float64, same shape as the input
    alpha: float  # squeeze
    beta: float  # shift


def s2fp8_stats(x: npt.ArrayLike) -> tuple[float, float]:
    """(alpha, beta) of a tensor. Degenerate tensors (no non-zero, or all |x| equal): alpha = 1
    and beta = -mu, i.e. a pure shift that puts the common magnitude at 1."""
    a = np.abs(_as_float64(x))
    nz = a[(a > 0) & np.isfinite(a)]
    if nz.size == 0:
        return 1.0, 0.0
    lg = np.log2(nz)
    mu, m = float(lg.mean()), float(lg.max())
    if m - mu <= 0.0:
        return 1.0, -mu
    alpha = TARGET_LOG2_MAX / (m - mu)
    return alpha, -alpha * mu


def s2fp8_quantize(x: npt.ArrayLike, rounding: str | None = None, *, fmt: str = "e5m2",
                   rng: np.random.Generator | None = None) -> S2FP8Result:
    """Shift-and-squeeze ``x``, round to ``fmt`` (FP8 E5M2 in the paper) with ``rounding``
    (default: the format's own, RNE for E5M2), and map back."""
    x64 = _as_float64(x)
    alpha, beta = s2fp8_stats(x64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        a = np.abs(x64)
        y = np.exp2(beta + alpha * np.log2(a))  # 2^beta |x|^alpha; |x| = 0 -> 0
        r = quantize(y, fmt, rounding, rng=rng)
        back = np.exp2((np.log2(r) - beta) / alpha)
    back = np.where(r == 0, 0.0, back)
    return S2FP8Result(np.copysign(back, x64), alpha, beta)
