"""Loss-scale and tensor-scale controllers of low-precision training, as small stateful classes.

Every controller is a scripted rule from a paper or a framework, cited on the class, with its state
inspectable through ``state()`` (a plain dict) so tests can replay overflow sequences step by step.

Loss scalers (one global factor on the loss, gradients unscaled before the update) share one
interface, :class:`LossScaler`: ``scale`` (the factor to multiply the loss by now) and
``update(found_inf) -> bool`` (call once per step after the backward pass; True when the optimizer
step is applied, False when it is skipped):

* :class:`StaticLossScaler`   - constant scale (Micikevicius et al., ICLR 2018, Sec. 3.2).
* :class:`DynamicLossScaler`  - APEX / ``torch.cuda.amp.GradScaler``: x2 after ``growth_interval``
  clean steps, x0.5 and skip on INF/NaN.  HiF8's *BLS* (backward global loss scaling, Luo et al.,
  arXiv 2409.16626, Sec. 4.1) is this controller: :func:`hif8_bls`.
* :class:`AdaptiveLossScaler` - HiF8's *ALS* (Sec. 5.1): the growth window itself moves along
  {1, 20, 50, 100, 200, 500, 1000}.

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
from typing import Protocol

import numpy as np

from accelsim.numerics import get_format, quantize

__all__ = [
    "ALS_WINDOWS",
    "AdaptiveLossScaler",
    "AutoScaleMu",
    "DelayedScaler",
    "DynamicLossScaler",
    "HIF8_PTS_TARGET",
    "LossScaler",
    "PerTensorScaler",
    "StaticLossScaler",
    "amax",
    "default_target",
    "has_inf_or_nan",
    "hif8_bls",
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


def _check_pos(name: str, value, *, integer: bool = False) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "positive integer" if integer else "positive finite number"
        raise ValueError(f"{name} must be a {kind}, got {value!r}")


# ---------------------------------------------------------------- loss scalers
class LossScaler(Protocol):
    """Interface of every loss-scale controller."""

    @property
    def scale(self) -> float:  # factor to multiply the loss by in the coming step
        ...

    def update(self, found_inf: bool) -> bool:  # True: apply the step; False: skip it
        ...

    def state(self) -> dict:
        ...


class StaticLossScaler:
    """A constant loss scale (Micikevicius et al., "Mixed Precision Training", ICLR 2018, Sec. 3.2).

    ``update`` never changes the scale; a step whose gradients hold INF/NaN is skipped
    (``skip_on_inf=True``) or applied as is (``False``, the paper's plain constant scaling).
    """

    def __init__(self, scale: float = 1.0, *, skip_on_inf: bool = True) -> None:
        _check_pos("StaticLossScaler scale", scale)
        self._scale = float(scale)
        self.skip_on_inf = bool(skip_on_inf)
        self.steps = 0
        self.skipped = 0

    @property
    def scale(self) -> float:
        return self._scale

    def update(self, found_inf: bool) -> bool:
        self.steps += 1
        skip = bool(found_inf) and self.skip_on_inf
        self.skipped += skip
        return not skip

    def state(self) -> dict:
        return {"scale": self._scale, "steps": self.steps, "skipped": self.skipped}


class DynamicLossScaler:
    """Dynamic loss scaling as in NVIDIA APEX ``amp`` and ``torch.cuda.amp.GradScaler``.

    Rule (``torch._amp_update_scale_``; APEX ``apex/amp/scaler.py`` ``update_scale``): on a step
    with INF/NaN gradients the step is skipped, the scale is multiplied by ``backoff_factor`` and
    the clean-step counter resets; otherwise the counter counts up and, when it reaches
    ``growth_interval``, the scale is multiplied by ``growth_factor`` and the counter resets.
    Defaults are GradScaler's (init 2^16, x2, x0.5, 2000 steps). ``min_scale``/``max_scale``
    clamp the scale (APEX amp caps at 2^24; GradScaler has no cap: ``None``).
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        *,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        min_scale: float | None = None,
        max_scale: float | None = None,
    ) -> None:
        _check_pos("init_scale", init_scale)
        _check_pos("growth_interval", growth_interval, integer=True)
        if not (isinstance(growth_factor, numbers.Real) and growth_factor > 1.0 and math.isfinite(growth_factor)):
            raise ValueError(f"growth_factor must be > 1, got {growth_factor!r}")
        if not (isinstance(backoff_factor, numbers.Real) and 0.0 < backoff_factor < 1.0):
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor!r}")
        for name, v in (("min_scale", min_scale), ("max_scale", max_scale)):
            if v is not None:
                _check_pos(name, v)
        if min_scale is not None and max_scale is not None and min_scale > max_scale:
            raise ValueError(f"min_scale {min_scale!r} > max_scale {max_scale!r}")
        self._scale = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.min_scale = min_scale
        self.max_scale = max_scale
        self.growth_tracker = 0  # consecutive clean steps since the last change or overflow
        self.steps = 0
        self.skipped = 0

    @property
    def scale(self) -> float:
        return self._scale

    def _set(self, value: float) -> None:
        if self.max_scale is not None:
            value = min(value, float(self.max_scale))
        if self.min_scale is not None:
            value = max(value, float(self.min_scale))
        if math.isfinite(value):  # GradScaler keeps the old scale when growth would overflow
            self._scale = value

    def update(self, found_inf: bool) -> bool:
        """Advance one step; returns True when the optimizer step is applied."""
        self.steps += 1
        if found_inf:
            self.skipped += 1
            self._set(self._scale * self.backoff_factor)
            self.growth_tracker = 0
            return False
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            self._set(self._scale * self.growth_factor)
            self.growth_tracker = 0
        return True

    def state(self) -> dict:
        return {
            "scale": self._scale,
            "growth_tracker": self.growth_tracker,
            "growth_interval": self.growth_interval,
            "steps": self.steps,
            "skipped": self.skipped,
        }


def hif8_bls(init_scale: float = 2.0**16, growth_interval: int = 2000) -> DynamicLossScaler:
    """HiF8 BLS: "backward global loss-scaling ... inherited from FP16 mixed-precision training"
    (Luo et al., arXiv 2409.16626, Sec. 4.1 and 5.1), i.e. the GradScaler rule above; the
    paper's footnote 2 points at ``torch.cuda.amp.GradScaler`` for the scale window."""
    return DynamicLossScaler(init_scale, growth_interval=growth_interval)


ALS_WINDOWS: tuple[int, ...] = (1, 20, 50, 100, 200, 500, 1000)  # HiF8 paper Sec. 5.1


class AdaptiveLossScaler:
    """HiF8 adaptive loss scaling, ALS (Luo et al., arXiv 2409.16626, Sec. 5.1).

    "We first define an incremental list of scale window, such as {1, 20, 50, 100, 200, 500,
    1000}. Then the initial scale value and scale window are set to 2^32 and 20. During training,
    if the scale value increases three times, the scale window will increase once as per the list
    order. If the scale value decreases three times in a row, scale window will decrease once as
    per the list order."

    The scale itself follows :class:`DynamicLossScaler` with the current window as its growth
    interval (x2 after ``window`` clean steps; x0.5 and skip on INF/NaN). Counting, as in the
    MindFormers reference implementation (docs/feature_cards/Adaptive_loss_scale.md): every scale
    increase adds to ``increases``; at ``ups_to_widen`` (3) the window moves up one entry and the
    count resets. Every decrease adds to ``consecutive_decreases``, an increase resets it; at
    ``downs_to_narrow`` (3) the window moves down one entry (the paper; MindFormers instead jumps
    to the hidden window 1: ``drop_to_first=True``) and the count resets. The window stays at the
    ends of the list.
    """

    def __init__(
        self,
        windows: tuple[int, ...] = ALS_WINDOWS,
        *,
        init_scale: float = 2.0**32,
        init_window: int = 20,
        factor: float = 2.0,
        ups_to_widen: int = 3,
        downs_to_narrow: int = 3,
        drop_to_first: bool = False,
    ) -> None:
        windows = tuple(windows)
        if not windows or any(not isinstance(w, int) or w < 1 for w in windows):
            raise ValueError(f"ALS windows must be positive integers, got {windows!r}")
        if any(b <= a for a, b in zip(windows, windows[1:])):
            raise ValueError(f"ALS windows must be strictly increasing, got {windows!r}")
        if init_window not in windows:
            raise ValueError(f"ALS init_window {init_window!r} is not in the window list {windows!r}")
        _check_pos("init_scale", init_scale)
        _check_pos("ups_to_widen", ups_to_widen, integer=True)
        _check_pos("downs_to_narrow", downs_to_narrow, integer=True)
        if not (isinstance(factor, numbers.Real) and factor > 1.0 and math.isfinite(factor)):
            raise ValueError(f"ALS factor must be > 1, got {factor!r}")
        self.windows = windows
        self.window_index = windows.index(init_window)
        self._scale = float(init_scale)
        self.factor = float(factor)
        self.ups_to_widen = int(ups_to_widen)
        self.downs_to_narrow = int(downs_to_narrow)
        self.drop_to_first = bool(drop_to_first)
        self.clean_steps = 0
        self.increases = 0
        self.consecutive_decreases = 0
        self.steps = 0
        self.skipped = 0

    @property
    def scale(self) -> float:
        return self._scale

    @property
    def window(self) -> int:
        return self.windows[self.window_index]

    def update(self, found_inf: bool) -> bool:
        """Advance one step; returns True when the optimizer step is applied."""
        self.steps += 1
        if found_inf:
            self.skipped += 1
            self._scale /= self.factor
            self.clean_steps = 0
            self.consecutive_decreases += 1
            if self.consecutive_decreases == self.downs_to_narrow:
                self.window_index = 0 if self.drop_to_first else max(self.window_index - 1, 0)
                self.consecutive_decreases = 0
            return False
        self.clean_steps += 1
        if self.clean_steps >= self.window:
            grown = self._scale * self.factor
            if math.isfinite(grown):
                self._scale = grown
            self.clean_steps = 0
            self.consecutive_decreases = 0
            self.increases += 1
            if self.increases == self.ups_to_widen:
                self.window_index = min(self.window_index + 1, len(self.windows) - 1)
                self.increases = 0
        return True

    def state(self) -> dict:
        return {
            "scale": self._scale,
            "window": self.window,
            "clean_steps": self.clean_steps,
            "increases": self.increases,
            "consecutive_decreases": self.consecutive_decreases,
            "steps": self.steps,
            "skipped": self.skipped,
        }


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
    _check_pos("target", target)
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
        _check_pos("PTS interval", interval, integer=True)
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
        _check_pos("history_len", history_len, integer=True)
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
        _check_pos("init_mu", init_mu)
        _check_pos("window", window, integer=True)
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
