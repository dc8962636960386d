"""Post-training quantization of a whole trained model (HiFloat8 paper, Luo et al.,
arXiv:2409.16626, sec. 4.2 and Tables 6-8): an inference datapath that runs every GEMM of the
model's forward pass with both operands in the PTQ format, by one of three methods:

* ``direct``: cast activations and weights to the format (its own rounding, saturating);
* ``pts``: per-tensor power-of-two scales 2^Ea, 2^Ew per Linear GEMM, calibrated once on a
  calibration batch by Algorithm 1 (``ptq.calibrate_linear``: the pair in [-4, 5]^2 with the
  least output MSE; the reference is the layer's float64 output for the calibration pass's own,
  already quantized input -- the chain of Algorithm 1, one layer at a time);
* ``smoothquant`` (Xiao et al., ICML 2023, eq. 4): per input channel j, s_j = max|X_j|^alpha /
  max|W_j|^(1 - alpha) (alpha 0.5) from the calibration batch; X diag(s)^-1 and diag(s) W cast.

GEMMs with two activation operands (attention scores and values) are direct casts in every
method (Algorithm 1 and SmoothQuant are defined for activation x weight layers). Products and
sums in float64: the study is of the operand format, not of an accumulator.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import InputError
from accelsim.numerics import quantize

from .ptq import calibrate_linear, quantized_linear

PTQ_METHODS = ("direct", "pts", "smoothquant")


class PTQDatapath:
    """The ``gemm`` a model's forward pass calls, quantizing as ``method`` says. Set
    ``calibrating = True`` for one forward pass over a calibration batch, then evaluate."""

    def __init__(self, method: str, fmt: str = "hif8", alpha: float = 0.5):
        if method not in PTQ_METHODS:
            raise InputError(f"PTQ method {method!r} is not one of {', '.join(PTQ_METHODS)}")
        self.method, self.fmt, self.alpha = method, fmt, float(alpha)
        self.calibrating = False
        self.sites: dict = {}  # site -> (ea, ew) for pts, the smoothing vector for smoothquant

    def _cast(self, x):
        return quantize(np.asarray(x, dtype=np.float64), self.fmt, None, saturate=True)

    def gemm(self, kind, a, a_role, b, b_role, tag, site=None):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        linear = a.ndim == 2 and a_role == "act" and b_role == "weight" and site is not None
        if linear and self.method == "pts":
            if self.calibrating:
                r = calibrate_linear(a, b, fmt=self.fmt)
                self.sites[site] = (r.ea, r.ew)
            ea, ew = self.sites.get(site, (0, 0))
            return quantized_linear(a, b, ea, ew, fmt=self.fmt)
        if linear and self.method == "smoothquant":
            if self.calibrating:
                self.sites[site] = smoothing(a, b, self.alpha)
            s = self.sites.get(site)
            if s is not None:
                return self._cast(a / s) @ self._cast(b * s[:, None])
        return self._cast(a) @ self._cast(b)


def smoothing(x: np.ndarray, w: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """SmoothQuant's per-input-channel factors s_j = max|X_j|^alpha / max|W_j|^(1-alpha) (1
    where a channel is all zero)."""
    ax = np.abs(x).max(axis=0)
    aw = np.abs(w).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = ax**alpha / aw ** (1.0 - alpha)
    return np.where(np.isfinite(s) & (s > 0), s, 1.0)
