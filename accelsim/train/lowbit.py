"""4-bit training quantizers (Sun et al., "Ultra-Low Precision 4-bit Training of Deep Neural
Networks", NeurIPS 2020, sec. 3-4 and appendix): INT4 activations by PACT, INT4 weights by SAWB,
radix-4 FP4 activation gradients with GradScale and two-phase rounding.

Each quantizer returns (integer-grid operand, descale): the GEMM sees the small integers (INT4
codes) or powers of two (FP4 values) exactly in an 8-bit engine operand format, and its output
is multiplied by the two descales in float64.

* PACT (Choi et al., arXiv:1805.06085): y = clip(x, 0, alpha), 15 uniform levels over
  [0, alpha]; alpha is learned: dL/dalpha = sum of dL/dy where x >= alpha (straight-through
  elsewhere, zero gradient above the clip).
* SAWB (Choi et al., SysML 2019): alpha_w = c1 sqrt(E[w^2]) - c2 E|w|, 7 levels each side;
  c1, c2 come from the SAWB procedure itself (:func:`sawb_coefficients`): regress the
  MSE-optimal clip of several distribution shapes on those two moments.
* Radix-4 FP4 (1-3-0): magnitudes 4^k (phase 0) or 2 x 4^k (phase 1), k = 0..-6, and 0.
  GradScale: a per-tensor power-of-two scale puts the tensor's amax at the top level; two-phase
  rounding (TPR): the bwd-data GEMM uses phase 0, the weight-gradient GEMM phase 1, so the
  two GEMMs see complementary grids. Rounding is to the nearest level (linear distance).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .scaling import pow2_scale

INT4_LEVELS = 15  # unsigned PACT levels 0..15
INT4_SIGNED = 7  # symmetric SAWB levels -7..7
FP4_EXPONENTS = 7  # radix-4 magnitudes 4^0 .. 4^-6 (3-bit exponent field, one code for zero)


def pact(x: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """(codes 0..15, descale alpha / 15) of non-negative activations."""
    if np.any(x < 0):
        raise ValueError("int4-fp4: PACT quantizes non-negative (post-ReLU) activations; this "
                         "GEMM's activation operand has negative values (use mlp or cnn)")
    codes = np.rint(np.clip(x, 0.0, alpha) * (INT4_LEVELS / alpha))
    return codes, alpha / INT4_LEVELS


def pact_alpha_grad(x: np.ndarray, dx: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """(dL/dx through the clip, dL/dalpha) given dL/dy of the quantized activation."""
    above = x >= alpha
    return np.where(above, 0.0, dx), float(dx[above].sum())


@lru_cache(maxsize=None)
def sawb_coefficients(levels: int = INT4_SIGNED, n: int = 20000) -> tuple[float, float]:
    """(c1, c2) of SAWB for symmetric ``levels``: least squares of the MSE-optimal clip
    alpha* = c1 sqrt(E w^2) - c2 E|w| over normal, Laplace, uniform and logistic shapes at
    unit scale (fixed generator: the fit is a constant of the method)."""
    rng = np.random.default_rng(20190331)
    samples = [rng.standard_normal(n), rng.laplace(size=n), rng.uniform(-1, 1, n), rng.logistic(size=n)]
    rows, target = [], []
    for w in samples:
        a = np.abs(w)
        grid = np.linspace(0.05, 1.0, 200) * a.max()
        mse = [np.mean((_sym(w, al, levels) - w) ** 2) for al in grid]
        rows.append([math.sqrt(float(np.mean(w * w))), -float(a.mean())])
        target.append(float(grid[int(np.argmin(mse))]))
    c, *_ = np.linalg.lstsq(np.array(rows), np.array(target), rcond=None)
    return float(c[0]), float(c[1])


def _sym(w, alpha, levels):
    d = alpha / levels
    return np.clip(np.rint(w / d), -levels, levels) * d


def sawb(w: np.ndarray) -> tuple[np.ndarray, float]:
    """(codes -7..7, descale alpha_w / 7) of a weight tensor."""
    c1, c2 = sawb_coefficients()
    alpha = c1 * math.sqrt(float(np.mean(w * w))) - c2 * float(np.mean(np.abs(w)))
    if not alpha > 0:
        alpha = float(np.max(np.abs(w))) or 1.0
    d = alpha / INT4_SIGNED
    return np.clip(np.rint(w / d), -INT4_SIGNED, INT4_SIGNED), d


def radix4(g: np.ndarray, phase: int) -> tuple[np.ndarray, float]:
    """(FP4 radix-4 values, descale) of a gradient tensor; ``phase`` 0 or 1 (TPR)."""
    if phase not in (0, 1):
        raise ValueError(f"two-phase rounding phase must be 0 or 1, got {phase!r}")
    top = 2.0**phase
    a = float(np.max(np.abs(g))) if g.size else 0.0
    s = pow2_scale(a, top) if math.isfinite(a) else 1.0
    levels = top * 4.0 ** -np.arange(FP4_EXPONENTS)[::-1]  # ascending
    grid = np.concatenate([[0.0], levels])
    mag = np.minimum(np.abs(g) * s, top)
    i = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
    lo, hi = grid[i - 1], grid[i]
    q = np.where(mag - lo < hi - mag, lo, hi)  # nearest level, ties up
    return np.copysign(q, g), 1.0 / s
