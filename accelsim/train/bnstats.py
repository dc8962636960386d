"""BatchNorm statistics under trans-precision inference (HFP8, Sun et al., NeurIPS 2019, App. C):
the expected BN-output error when a network trained in high precision runs in 8 bits, with the
BN statistics preserved from training versus re-tuned on the quantized network.

Model (the appendix's setting as this module reads it). A BN input channel X (any distribution,
mean mu, variance sigma^2) is perturbed by quantization into X + Q, Q independent of X with mean
m_Q and variance Var[Q]. The reference output is y = (X - mu) / sigma (gamma = 1, beta = 0; the
errors below scale by gamma^2).

* preserved statistics: y_p = (X + Q - mu) / sigma, so
      E[(y_p - y)^2] = (Var[Q] + m_Q^2) / sigma^2                                     (eq. 2)
* re-tuned statistics mu' = mu + m_Q, sigma'^2 = sigma^2 + Var[Q]: y_r = (X + Q - mu') / sigma',
      E[(y_r - y)^2] = 2 (1 - sigma / sigma') = 2 (1 - 1 / sqrt(1 + r)),  r = Var[Q] / sigma^2
                                                                                        (eq. 10)
  (expand y_r - y = (X - mu)(1/sigma' - 1/sigma) + (Q - m_Q)/sigma' and take expectations).

Re-tuning removes the bias m_Q entirely and saturates at 2 as Var[Q] grows, while the preserved
error grows linearly; for small r both are r to first order (re-tuned: r - 3 r^2 / 4 + ...).
The two closed forms are derived in this module (derivation above) and labelled with the
appendix's equation numbers (issue 26 reports them checked against appendix C); :func:`monte_carlo`
checks them by sampling, independent of the derivation. The end-to-end experiment (a BN network
trained in fp32, run in 1-4-3, statistics preserved or re-tuned) is ``accelsim ptq``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DISTRIBUTIONS = ("normal", "uniform", "laplace")


def _check(var_q: float, sigma2: float) -> None:
    if not (math.isfinite(var_q) and var_q >= 0.0):
        raise ValueError(f"var_q must be a finite number >= 0, got {var_q!r}")
    if not (math.isfinite(sigma2) and sigma2 > 0.0):
        raise ValueError(f"sigma2 must be a finite number > 0, got {sigma2!r}")


def preserved_error(var_q: float, sigma2: float = 1.0, mean_q: float = 0.0) -> float:
    """Eq. 2: E[(y_preserved - y)^2] = (Var[Q] + E[Q]^2) / sigma^2."""
    _check(var_q, sigma2)
    return (var_q + mean_q * mean_q) / sigma2


def retuned_error(var_q: float, sigma2: float = 1.0) -> float:
    """Eq. 10: E[(y_retuned - y)^2] = 2 (1 - 1/sqrt(1 + Var[Q]/sigma^2)) (independent of E[Q])."""
    _check(var_q, sigma2)
    r = var_q / sigma2
    # 2 (1 - 1/sqrt(1+r)) written without cancellation for small r
    s = math.sqrt(1.0 + r)
    return 2.0 * r / (s * (s + 1.0))


def _draw(rng: np.random.Generator, dist: str, mean: float, var: float, n: int) -> np.ndarray:
    """n samples with the given mean and variance from a named standardized distribution."""
    sd = math.sqrt(var)
    if dist == "normal":
        z = rng.standard_normal(n)
    elif dist == "uniform":  # quantization noise is close to uniform
        z = rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), n)
    elif dist == "laplace":
        z = rng.laplace(0.0, 1.0 / math.sqrt(2.0), n)
    else:
        raise ValueError(f"unknown distribution {dist!r}; valid: {', '.join(DISTRIBUTIONS)}")
    return mean + sd * z


@dataclass(frozen=True)
class MCResult:
    """Monte-Carlo estimates of both expected errors with their standard errors."""

    var_q: float
    preserved: float
    preserved_se: float
    retuned: float
    retuned_se: float
    n: int


def monte_carlo(
    rng: np.random.Generator,
    var_q: float,
    *,
    n: int = 200_000,
    mu: float = 0.0,
    sigma2: float = 1.0,
    mean_q: float = 0.0,
    x_dist: str = "normal",
    q_dist: str = "uniform",
) -> MCResult:
    """Sample X and Q, apply BN with preserved and with re-tuned statistics, and average the
    squared output error. The re-tuned statistics are the population ones (mu + E[Q],
    sigma^2 + Var[Q]), i.e. re-tuning on an unbounded calibration set. The standard error of
    each mean is the sample standard deviation of the squared errors over sqrt(n)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    _check(var_q, sigma2)
    if not (isinstance(n, int) and n >= 2):
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    x = _draw(rng, x_dist, mu, sigma2, n)
    q = _draw(rng, q_dist, mean_q, var_q, n) if var_q > 0 else np.full(n, float(mean_q))
    sd = math.sqrt(sigma2)
    y = (x - mu) / sd
    e_p = ((x + q - mu) / sd - y) ** 2
    e_r = ((x + q - (mu + mean_q)) / math.sqrt(sigma2 + var_q) - y) ** 2
    root = math.sqrt(n)
    return MCResult(
        var_q=float(var_q),
        preserved=float(e_p.mean()),
        preserved_se=float(e_p.std(ddof=1)) / root,
        retuned=float(e_r.mean()),
        retuned_se=float(e_r.std(ddof=1)) / root,
        n=n,
    )


def bn_error_table(
    rng: np.random.Generator,
    var_ratios=tuple(float(v) for v in np.logspace(-3, 1, 13)),
    *,
    n: int = 200_000,
    mean_q: float = 0.0,
    x_dist: str = "normal",
    q_dist: str = "uniform",
):
    """Tidy table (pandas DataFrame): closed forms and Monte-Carlo (with standard errors) of both
    errors for each Var[Q] / sigma^2 (sigma^2 = 1)."""
    import pandas as pd

    rows = []
    for r in var_ratios:
        mc = monte_carlo(rng, float(r), n=n, mean_q=mean_q, x_dist=x_dist, q_dist=q_dist)
        rows.append({
            "var_ratio": float(r),
            "preserved_closed": preserved_error(float(r), 1.0, mean_q),
            "preserved_mc": mc.preserved,
            "preserved_se": mc.preserved_se,
            "retuned_closed": retuned_error(float(r), 1.0),
            "retuned_mc": mc.retuned,
            "retuned_se": mc.retuned_se,
            "n": n,
            "mean_q": mean_q,
            "x_dist": x_dist,
            "q_dist": q_dist,
        })
    return pd.DataFrame(rows)
