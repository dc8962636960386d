"""Loss scalers of low-precision training: one global factor on the loss, gradients unscaled
before the update. They share one interface, :class:`LossScaler`: ``scale`` (the factor to multiply
the loss by now) and ``update(found_inf) -> bool`` (call once per step after the backward pass; True
when the optimizer step is applied, False when it is skipped). Every rule is cited on its class;
``state()`` returns a plain dict so tests can replay overflow sequences step by step.

* :class:`StaticLossScaler`   - constant scale (Micikevicius et al., ICLR 2018, Sec. 3.2).
* :class:`DynamicLossScaler`  - APEX / ``torch.cuda.amp.GradScaler``: x2 after ``growth_interval``
  clean steps, x0.5 and skip on INF/NaN.  HiF8's *BLS* (backward global loss scaling, Luo et al.,
  arXiv 2409.16626, Sec. 4.1) is this controller: :func:`hif8_bls`.
* :class:`AdaptiveLossScaler` - HiF8's *ALS* (Sec. 5.1): the growth window itself moves along
  {1, 20, 50, 100, 200, 500, 1000}.
"""

from __future__ import annotations

import math
import numbers
from typing import Protocol

from .scaling import check_positive as _check_pos

__all__ = ["ALS_WINDOWS", "AdaptiveLossScaler", "DynamicLossScaler", "LossScaler",
           "StaticLossScaler", "hif8_bls"]


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


