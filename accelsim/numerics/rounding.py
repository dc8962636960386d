"""Rounding rules: choose between the two neighbouring grid points of a scaled magnitude.

Every mode works on ``s = |x| / 2^q`` (q: exponent of the local grid spacing) and decides whether
to add one to ``floor(s)``. HiF8's simplified stochastic modes follow Luo et al. (arXiv 2409.16626,
Sec. 3): SR14 compares the 14 most significant discarded bits of an FP32 source with the source's
14 least significant mantissa bits; SR2 is the 2-bit variant for 16-bit (here bf16) sources;
hybrid uses TA (ties away) where the source exponent |E| < 4 and SR14 elsewhere.
"""

from __future__ import annotations

import numpy as np

ROUNDING_MODES: tuple[str, ...] = ("rne", "rna", "rz", "sr", "sr14", "sr2", "hybrid")
NEEDS_RNG = frozenset({"sr"})
SOURCE_ROUNDED = frozenset({"sr14", "sr2", "hybrid"})  # round to an FP32/bf16 source first

# (discarded bits compared, source mantissa bits) for the simplified SR modes.
_SIMPLIFIED_SR = {"sr14": (14, 23), "sr2": (2, 7)}
HYBRID_TA_EXPONENT = 4  # hybrid rounding: TA where |E| < 4, SR14 elsewhere


def check_mode(rounding: str, rng) -> str:
    """Validate a rounding-mode name and the generator it needs."""
    if not isinstance(rounding, str) or rounding not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding mode {rounding!r}; valid modes: {', '.join(ROUNDING_MODES)}")
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator or None, got {type(rng).__name__} {rng!r:.40}")
    if rounding in NEEDS_RNG and rng is None:
        raise ValueError(f"rounding {rounding!r} is stochastic: pass rng=numpy.random.default_rng(seed)")
    return rounding


def pow2(k: np.ndarray) -> np.ndarray:
    """2.0**k for integer arrays with -1022 <= k <= 1023, built from the bits (exact, fast)."""
    return ((np.asarray(k, dtype=np.int64) + 1023) << 52).view(np.float64)


def _source_significand_lsbs(a: np.ndarray, e: np.ndarray, src_mbits: int, nbits: int) -> np.ndarray:
    """The ``nbits`` least significant bits of |x|'s ``src_mbits``-bit fraction (|x| in binade e)."""
    sig = a * pow2(np.clip(src_mbits - e, -1022, 1023))  # integer significand, exact
    return sig.astype(np.int64) & (2**nbits - 1)


def round_up(
    s: np.ndarray,
    fl: np.ndarray,
    lo_even: np.ndarray,
    mode: str,
    *,
    rng: np.random.Generator | None,
    a: np.ndarray,
    e: np.ndarray,
    draws: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean array: round ``s`` up to ``fl + 1`` (True) or down to ``fl`` (False).

    ``a``: |x| (already rounded to the source format for sr14/sr2/hybrid), ``e``: floor(log2 a).
    ``draws``: uniform draws in [0, 1) for ``sr`` taken by the caller (else ``rng.random``).
    """
    frac = s - fl
    if mode == "rz":
        return np.zeros(s.shape, dtype=bool)
    if mode == "rna":
        return frac >= 0.5
    if mode == "rne":
        return (frac > 0.5) | ((frac == 0.5) & ~lo_even)
    if mode == "sr":
        # P(up) = frac for frac on the 2^-53 grid of the uniform draw.
        return (rng.random(s.shape) if draws is None else draws) < frac
    if mode in _SIMPLIFIED_SR or mode == "hybrid":
        nbits, src_m = _SIMPLIFIED_SR.get(mode, _SIMPLIFIED_SR["sr14"])
        disc = np.floor(frac * 2**nbits)  # top nbits of the discarded fraction
        lsbs = _source_significand_lsbs(a, e, src_m, nbits)
        up = lsbs < disc
        if mode == "hybrid":
            up = np.where(np.abs(e) < HYBRID_TA_EXPONENT, frac >= 0.5, up)
        return up
    raise ValueError(f"unknown rounding mode {mode!r}")  # pragma: no cover - checked earlier
