"""Tensor-scale controllers of low-precision training, as small stateful classes, and the scaling
helpers they and the loss scalers (:mod:`accelsim.train.loss_scaling`) share. Every controller is
a scripted rule from a paper or a framework, cited on the class, with its state inspectable
through ``state()``.

Tensor scalers (one power-of-two factor per GEMM operand, descaled in high precision afterwards):

* :class:`PerTensorScaler` - HiF8's *PTS* (Sec. 5.1): amax every 10 iterations.
* :class:`DelayedScaler`   - FP8-LM / MS-AMP / Transformer Engine delayed scaling (amax history).
* :class:`AutoScaleMu`     - FP8-LM's gradient auto-scaling factor mu (Peng et al., arXiv
  2310.18313, Sec. 2.1): halved on >0.001 % saturation, doubled after a quiet window.

:func:`pow2_scale` is the single owner of "largest power of two that keeps amax inside a target".
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from accelsim.numerics import get_format, quantize

__all__ = [
    "AutoScaleMu",
    "DelayedScaler",
    "HIF8_PTS_TARGET",
    "PerTensorScaler",
    "amax",
    "check_positive",
    "default_target",
    "has_inf_or_nan",
    "pow2_scale",
    "saturation_fraction",
    "scaled_quantize",
]


# ---------------------------------------------------------------- shared helpers
def has_inf_or_nan(*arrays) -> bool:
    """True when any element of any array is INF or NaN (the overflow test of every loss scaler)."""
    return any(not np.isfinite(np.asarray(a, dtype=np.float64)).all() for a in arrays)


def amax(x) -> float:
    """max |x| over the finite elements (0.0 for an empty or all-non-finite array)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def pow2_scale(amax_value: float, target: float, *, margin: int = 0, fallback: float = 1.0) -> float:
    """Largest 2^k with ``amax_value * 2^k <= target``, then divided by 2^margin.

    This is MS-AMP's ``compute_scaling_factor`` (``exp = floor(log2(fp_max / amax)) - margin``,
    scale ``2^exp``; msamp/common/tensor/meta.py), computed exactly: the exponent from
    ``math.frexp`` is checked by an exact power-of-two multiplication instead of trusting a
    rounded ``log2``. A zero or non-finite amax keeps ``fallback`` (MS-AMP keeps the old scale).
    """
    if not (isinstance(target, numbers.Real) and math.isfinite(target) and target > 0):
        raise ValueError(f"pow2_scale: target must be a positive finite number, got {target!r}")
    if not math.isfinite(amax_value) or amax_value <= 0.0:
        return float(fallback)
    _, e = math.frexp(target / amax_value)  # target/amax = m 2^e, 0.5 <= m < 1
    k = e - 1
    while math.ldexp(amax_value, k) > target:  # rounding of the quotient can overshoot by one
        k -= 1
    while math.ldexp(amax_value, k + 1) <= target:
        k += 1
    return math.ldexp(1.0, min(max(k - int(margin), -1074), 1023))  # stay a finite float64


def scaled_quantize(x, fmt, scale: float, rounding: str | None = None, *, saturate: bool = False, rng=None):
    """``quantize(x * scale, fmt)``: the operand as stored in ``fmt`` (still scaled).

    With a power-of-two ``scale`` the multiplication is exact; the caller descales the GEMM output
    by ``1 / (scale_a * scale_b)`` in high precision (HiF8 PTS, Sec. 5.1; FP8-LM Sec. 2.1).
    """
    return quantize(np.asarray(x, dtype=np.float64) * scale, fmt, rounding, saturate=saturate, rng=rng)


def saturation_fraction(xq, fmt) -> float:
    """Fraction of elements of a quantized tensor at or beyond the format's largest finite value
    (|x| >= max, INF and NaN included): FP8-LM's 'ratio of the maximum value' (Sec. 2.1)."""
    a = np.abs(np.asarray(xq, dtype=np.float64))
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        sat = (a >= get_format(fmt).max) | ~np.isfinite(a)
    return float(np.count_nonzero(sat)) / a.size


def check_positive(name: str, value, *, integer: bool = False) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "positive integer" if integer else "positive finite number"
        raise ValueError(f"{name} must be a {kind}, got {value!r}")


# ---------------------------------------------------------------- tensor scalers
HIF8_PTS_TARGET = 2.0**4  # top of HiF8's 3-mantissa-bit band |E| <= 3 (arXiv 2409.16626, Table 1)


def default_target(fmt) -> float:
    """Where a tensor scaler puts amax by default: the format's largest finite value, except for
    tapered HiF8, whose precision falls from 3 to 1 mantissa bits above 2^4: there amax goes to
    2^4 so the bulk of the tensor sits in the 3-bit band (a choice made here; the HiFloat8 paper
    leaves PTS's update rule open)."""
    f = get_format(fmt)
    return HIF8_PTS_TARGET if f.layout == "hif8" else f.max


def _target(fmt, target: float | None) -> float:
    if target is None:
        return default_target(fmt)
    check_positive("target", target)
    return float(target)


class PerTensorScaler:
    """HiF8 per-tensor scaling, PTS (Luo et al., arXiv 2409.16626, Sec. 5.1).

    "The initial scale factors are all set to 1. Then every 10 iterations, we compute the maximum
    absolute value (Amax) of each tensor, and update the corresponding scale factor ... the scale
    factors are restricted to integer powers of 2 ... scale and descale operations are all carried
    out in high-precision formats." The paper leaves the update rule open; this uses the
    Transformer-Engine / MS-AMP rule :func:`pow2_scale` (amax lands at or below ``target``,
    default :func:`default_target`, minus ``margin`` binades).

    Call :meth:`scale_for` once per iteration with the tensor about to be cast: iterations
    ``interval, 2*interval, ...`` (1-based) recompute the scale from that tensor's amax before it
    is used; the others reuse the held scale.
    """

    def __init__(self, fmt, *, interval: int = 10, margin: int = 0, target: float | None = None) -> None:
        check_positive("PTS interval", interval, integer=True)
        self.fmt = get_format(fmt).name
        self.interval = int(interval)
        self.margin = int(margin)
        self.target = _target(fmt, target)
        self._scale = 1.0
        self.iteration = 0
        self.last_amax: float | None = None

    @property
    def scale(self) -> float:
        return self._scale

    def scale_for(self, x) -> float:
        self.iteration += 1
        if self.iteration % self.interval == 0:
            self.last_amax = amax(x)
            self._scale = pow2_scale(self.last_amax, self.target, margin=self.margin, fallback=self._scale)
        return self._scale

    def state(self) -> dict:
        return {"scale": self._scale, "iteration": self.iteration, "last_amax": self.last_amax}


class DelayedScaler:
    """FP8-LM delayed per-tensor scaling (Peng et al., arXiv 2310.18313, App. A.2: "selecting
    the scaling factor based on the maximum absolute values observed in a certain number of
    preceding iterations"), as MS-AMP implements it (``ScalingMeta``: an amax history window,
    scale ``pow2_scale(max(history), fp_max, margin)``).

    :meth:`scale_for` returns the scale for ``x`` computed from the history of *earlier* tensors,
    then records ``amax(x)``. With an empty history the scale is just-in-time (from ``x`` itself),
    as MS-AMP does while warming up. ``history_len`` defaults to 1024, Transformer Engine's
    ``DelayedScaling.amax_history_len`` default (MS-AMP uses 1).
    """

    def __init__(self, fmt, *, history_len: int = 1024, margin: int = 0, target: float | None = None) -> None:
        check_positive("history_len", history_len, integer=True)
        self.fmt = get_format(fmt).name
        self.history_len = int(history_len)
        self.margin = int(margin)
        self.target = _target(fmt, target)
        self.history: list[float] = []
        self._scale = 1.0

    @property
    def scale(self) -> float:
        """Scale the next tensor gets (1.0 until something was observed)."""
        return self._scale

    def scale_for(self, x) -> float:
        a = amax(x)
        if not self.history:
            self._scale = pow2_scale(a, self.target, margin=self.margin, fallback=self._scale)
        used = self._scale
        self.observe(a)
        return used

    def observe(self, amax_value: float) -> None:
        """Record one amax and recompute the scale the next tensor gets."""
        self.history.append(float(amax_value))
        del self.history[: -self.history_len]
        self._scale = pow2_scale(max(self.history), self.target, margin=self.margin, fallback=self._scale)

    def state(self) -> dict:
        return {"scale": self._scale, "history": list(self.history)}


class AutoScaleMu:
    """FP8-LM's automatic gradient scaling factor mu (Peng et al., arXiv 2310.18313, Sec. 2.1).

    g'_i = mu * g_i. "If the ratio of the maximum value exceeds a specified threshold, i.e.
    0.001 %, mu is set to 1/2 in the subsequent training step ... when the ratio consistently
    remains [below] the threshold, we opt to exponentially increase mu to 2 over the span of 1,000
    training steps." Read here (as issue 14 states it) as: a saturated step halves mu and resets
    the quiet counter; ``window`` (1000) consecutive quiet steps double mu. mu stays a power of two
    so the scaling is exact. ``update`` takes the saturation fraction of the step
    (:func:`saturation_fraction`) and returns the mu for the next step.
    """

    def __init__(self, *, init_mu: float = 1.0, threshold: float = 1e-5, window: int = 1000, factor: float = 2.0):
        check_positive("init_mu", init_mu)
        check_positive("window", window, integer=True)
        if not (isinstance(threshold, numbers.Real) and 0.0 <= threshold < 1.0):
            raise ValueError(f"threshold must be a fraction in [0, 1), got {threshold!r}")
        if not (isinstance(factor, numbers.Real) and factor > 1.0 and math.isfinite(factor)):
            raise ValueError(f"factor must be > 1, got {factor!r}")
        self._mu = float(init_mu)
        self.threshold = float(threshold)
        self.window = int(window)
        self.factor = float(factor)
        self.quiet_steps = 0
        self.steps = 0

    @property
    def mu(self) -> float:
        return self._mu

    @property
    def scale(self) -> float:
        return self._mu

    def update(self, saturated_fraction: float) -> float:
        if not (isinstance(saturated_fraction, numbers.Real) and 0.0 <= saturated_fraction <= 1.0):
            raise ValueError(f"saturated_fraction must be in [0, 1], got {saturated_fraction!r}")
        self.steps += 1
        if saturated_fraction > self.threshold:
            self._mu /= self.factor
            self.quiet_steps = 0
        else:
            self.quiet_steps += 1
            if self.quiet_steps == self.window:
                self._mu *= self.factor
                self.quiet_steps = 0
        return self._mu

    def state(self) -> dict:
        return {"mu": self._mu, "quiet_steps": self.quiet_steps, "steps": self.steps}
