"""FP8 gradient all-reduce over N emulated data-parallel workers (FP8-LM, Peng et al., arXiv
2310.18313, Sec. 2.1 and Fig. 7): pre-scaling, post-scaling and the paper's auto-scaling.

Every worker holds a high-precision gradient g_i of the same tensor. All methods share FP8-LM's
scaling-factor handling: the per-worker power-of-two scale s'_i = pow2_scale(amax(g_i), fp_max)
is gathered and the global minimum s'_g = min_i s'_i is used by all workers (for a power of two
this is MS-AMP's all-reduce of amax with MAX). Then the wire tensor of worker i is

* ``pre``  : FP8(s'_g * g_i / N)  - divide before the sum (underflow for large N),
* ``post`` : FP8(s'_g * g_i)      - sum first, divide by N at the end (overflow for large N),
* ``auto`` : FP8(mu * s'_g * g_i) - FP8-LM auto-scaling; mu (:class:`~accelsim.train.scaling.
  AutoScaleMu`) halves when more than 0.001 % of the reduced values saturate and doubles after a
  quiet window; the collected gradient carries the scale s = N * s'_g (and mu is divided out),
* ``sqrt`` : FP8(s'_g * g_i / sqrt(N)) - MS-AMP's fixed pre-scale 1/sqrt(N) (msamp/nn/
  distributed.py), for reference.

The sum is a recursive-halving reduction in the wire format (partial i adds partial i + n//2, an
odd last partial is carried; log2 N levels as in a halving/doubling all-reduce), every partial
sum rounded to FP8 (saturating, so one overflow does not poison the tensor; it is counted). The result is
descaled in float64. Rates reported per reduction:

* underflow rate: fraction of non-zero g_i elements (over all workers) whose wire cast is 0;
* overflow rate: fraction of output elements whose wire cast or any partial sum exceeded fp_max;
* SNR (dB) of the reduced mean against the exact float64 mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelsim.numerics import get_format, quantize

from .scaling import AutoScaleMu, pow2_scale

METHODS: tuple[str, ...] = ("pre", "post", "auto", "sqrt")


@dataclass(frozen=True)
class AllReduceResult:
    """One emulated FP8 all-reduce of an (N, ...) gradient set."""

    mean: np.ndarray  # reduced gradient after descaling (estimate of the mean of g_i), float64
    wire_scale: float  # factor applied to every g_i before the FP8 cast (s'_g x 1/N, 1, mu or 1/sqrt N)
    shared_scale: float  # s'_g = min_i s'_i
    underflow_rate: float
    overflow_rate: float
    saturated_fraction: float  # fraction of output elements that hit fp_max (drives mu)
    snr_db: float


def _check_grads(grads) -> np.ndarray:
    g = np.asarray(grads, dtype=np.float64)
    if g.ndim < 2 or g.shape[0] < 1:
        raise ValueError(f"grads must have shape (n_workers, ...), got {g.shape}")
    if not np.isfinite(g).all():
        raise ValueError("grads must be finite (an INF/NaN step is the loss scaler's job)")
    return g.reshape(g.shape[0], -1)


def shared_scale(grads, fmt) -> float:
    """FP8-LM's global minimum scaling factor s'_g = min_i s'_i (Sec. 2.1, the shared scalar)."""
    g = _check_grads(grads)
    fmax = get_format(fmt).max
    amaxes = np.unique(np.abs(g).max(axis=1))  # per-worker amax; equal ones share one scale
    amaxes = amaxes[amaxes > 0]  # an all-zero gradient has no scale of its own
    return min((pow2_scale(float(a), fmax) for a in amaxes), default=1.0)


def _quantize_fast(x64: np.ndarray, fmt, rounding: str) -> np.ndarray:
    """``quantize(x64, fmt, rounding, saturate=True)``, taking numerics' float32 lookup path for
    the elements that float32 holds exactly (same result: one rounding from the exact value) and
    the general float64 path for the rest."""
    if rounding not in ("rne", "rna", "rz"):
        return quantize(x64, fmt, rounding, saturate=True)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        x32 = x64.astype(np.float32)
    # float64 out, as quantize(x64) gives: the reduction adds these in float64, where two FP8
    # values sum exactly (float32 would round some sums first)
    out = quantize(x32, fmt, rounding, saturate=True).astype(np.float64)
    inexact = x32 != x64
    if inexact.any():
        out[inexact] = quantize(x64[inexact], fmt, rounding, saturate=True)
    return out


def _tree_sum(wire: np.ndarray, fmt, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """Recursive-halving reduction over axis 0, every partial sum rounded (saturating) to ``fmt``.

    Returns the sum and a per-element flag: some partial sum exceeded the format's max.
    """
    fmax = get_format(fmt).max
    parts = wire
    over = np.zeros(wire.shape[1:], dtype=bool)
    while parts.shape[0] > 1:
        n = parts.shape[0]
        half = n // 2
        exact = parts[:half] + parts[half : 2 * half]  # exact in float64: two FP8 values
        over |= (np.abs(exact) > fmax).any(axis=0)
        summed = _quantize_fast(exact, fmt, rounding)
        parts = np.concatenate([summed, parts[2 * half :]]) if n % 2 else summed
    return parts[0], over


def fp8_allreduce(
    grads, method: str, *, fmt: str = "e5m2", mu: float = 1.0, rounding: str = "rne"
) -> AllReduceResult:
    """All-reduce (mean) of ``grads`` (shape (N, ...)) through ``fmt`` with the named ``method``.

    ``mu`` is only used by ``auto`` (pass the current ``AutoScaleMu.mu``).
    """
    if method not in METHODS:
        raise ValueError(f"unknown all-reduce method {method!r}; valid: {', '.join(METHODS)}")
    if not (isinstance(mu, (int, float)) and math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu must be a positive finite number, got {mu!r}")
    g = _check_grads(grads)
    f = get_format(fmt)
    n = g.shape[0]
    sg = shared_scale(g, f)
    factor = {"pre": 1.0 / n, "post": 1.0, "auto": float(mu), "sqrt": 1.0 / math.sqrt(n)}[method]
    w = sg * factor
    with np.errstate(over="ignore"):
        scaled = g * w
    wire = _quantize_fast(scaled, f, rounding)
    nonzero = g != 0
    n_nonzero = int(np.count_nonzero(nonzero))
    underflow = int(np.count_nonzero(nonzero & (wire == 0)))
    cast_over = (np.abs(scaled) > f.max).any(axis=0)
    total, sum_over = _tree_sum(wire, f, rounding)
    over = cast_over | sum_over
    sat = over | (np.abs(total) >= f.max)
    mean = total / (w * n)  # post: /N at the end; auto: final scale N * s'_g, mu divided out
    exact = g.mean(axis=0)
    err = float(np.sum((mean - exact) ** 2))
    sig = float(np.sum(exact**2))
    snr = math.inf if err == 0 else (10.0 * math.log10(sig / err) if sig > 0 else -math.inf)
    shape = np.asarray(grads).shape[1:]
    return AllReduceResult(
        mean=mean.reshape(shape),
        wire_scale=w,
        shared_scale=sg,
        underflow_rate=underflow / n_nonzero if n_nonzero else 0.0,
        overflow_rate=float(np.count_nonzero(over)) / over.size,
        saturated_fraction=float(np.count_nonzero(sat)) / sat.size,
        snr_db=snr,
    )


class FP8AllReducer:
    """Stateful all-reduce for a training loop: one per gradient tensor (or one shared), holding
    FP8-LM's auto-scaling factor across steps. ``reduce(grads)`` returns the
    :class:`AllReduceResult` and, for ``auto``, feeds its saturation to ``AutoScaleMu.update``
    so the next step uses the new mu."""

    def __init__(self, method: str = "auto", *, fmt: str = "e5m2", rounding: str = "rne",
                 mu: AutoScaleMu | None = None) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown all-reduce method {method!r}; valid: {', '.join(METHODS)}")
        self.method = method
        self.fmt = get_format(fmt).name
        self.rounding = rounding
        self.auto = mu if mu is not None else AutoScaleMu()

    @property
    def mu(self) -> float:
        return self.auto.mu if self.method == "auto" else 1.0

    def reduce(self, grads) -> AllReduceResult:
        r = fp8_allreduce(grads, self.method, fmt=self.fmt, mu=self.mu, rounding=self.rounding)
        if self.method == "auto":
            self.auto.update(r.saturated_fraction)
        return r


# ---------------------------------------------------------------- synthetic experiment
@dataclass(frozen=True)
class GradientModel:
    """Synthetic per-worker gradients of one tensor: g_ij = m_j (c z_j + sqrt(1 - c^2) e_ij).

    m_j = magnitude * 2^(log2_spread * u_j) spreads element magnitudes over binades (log-normal,
    drawn per step); z_j is the signal shared by all workers, e_ij each worker's mini-batch noise,
    all standard normal; ``correlation`` c is the share of signal. A modelling choice, not a fit:
    the script prints the rates for the defaults and the test checks the trend on them.
    """

    size: int = 4096
    log2_spread: float = 3.0
    correlation: float = 0.3
    magnitude: float = 1e-3

    def __post_init__(self) -> None:
        if not (isinstance(self.size, int) and self.size > 0):
            raise ValueError(f"GradientModel.size must be a positive int, got {self.size!r}")
        if not (0.0 <= self.correlation <= 1.0):
            raise ValueError(f"GradientModel.correlation must be in [0, 1], got {self.correlation!r}")
        if not (self.log2_spread >= 0.0 and self.magnitude > 0.0):
            raise ValueError("GradientModel: log2_spread must be >= 0 and magnitude > 0")

    def sample(self, rng: np.random.Generator, n_workers: int) -> np.ndarray:
        """(n_workers, size) float32 gradients of one step."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        m = self.magnitude * np.exp2(self.log2_spread * rng.standard_normal(self.size))
        z = rng.standard_normal(self.size)
        e = rng.standard_normal((n_workers, self.size))
        c = self.correlation
        # FP32 gradients, as a training step produces them
        return (m * (c * z + math.sqrt(1.0 - c * c) * e)).astype(np.float32)


def allreduce_rates(
    rng: np.random.Generator,
    n_workers: int,
    *,
    fmt: str = "e5m2",
    model: GradientModel = GradientModel(),
    steps: int = 24,
    warmup: int | None = None,
    methods: tuple[str, ...] = METHODS,
    mu_window: int = 1000,
) -> dict[str, dict[str, float]]:
    """Mean underflow/overflow rates and SNR of each method over ``steps`` fresh gradient sets.

    All methods see the same gradient sets. ``auto`` starts at mu = 1 and adapts step by step;
    the first ``warmup`` steps (default ceil(log2 N) + 2: enough halvings to settle) are left out
    of every method's averages. Returns {method: {underflow, overflow, sum, snr_db, mu_final}}.
    """
    if not (isinstance(n_workers, int) and n_workers >= 2):
        raise ValueError(f"n_workers must be an int >= 2, got {n_workers!r}")
    if warmup is None:
        warmup = math.ceil(math.log2(n_workers)) + 2
    if not (0 <= warmup < steps):
        raise ValueError(f"need 0 <= warmup < steps, got warmup={warmup}, steps={steps}")
    reducers = {m: FP8AllReducer(m, fmt=fmt, mu=AutoScaleMu(window=mu_window)) for m in methods}
    acc = {m: {"underflow": [], "overflow": [], "snr_db": []} for m in methods}
    for step in range(steps):
        g = model.sample(rng, n_workers)
        for m in methods:
            r = reducers[m].reduce(g)
            if step >= warmup:
                acc[m]["underflow"].append(r.underflow_rate)
                acc[m]["overflow"].append(r.overflow_rate)
                acc[m]["snr_db"].append(r.snr_db)
    out = {}
    for m, d in acc.items():
        u, o = float(np.mean(d["underflow"])), float(np.mean(d["overflow"]))
        out[m] = {"underflow": u, "overflow": o, "sum": u + o, "snr_db": float(np.mean(d["snr_db"]))}
        out[m]["mu_final"] = reducers[m].mu if m == "auto" else float("nan")
    return out


def allreduce_sweep(
    rng: np.random.Generator,
    ns=(8, 16, 32, 64, 128, 256, 512, 1024),
    fmts=("e5m2", "e4m3fn"),
    *,
    model: GradientModel = GradientModel(),
    measured_steps: int = 8,
    progress=None,
):
    """Tidy table (pandas DataFrame): one row per (format, N, method); every N runs
    ceil(log2 N) + 2 warm-up steps (mu settling) and then ``measured_steps`` measured ones.
    ``progress(fmt, n)`` is called before each point (e.g. to print)."""
    import pandas as pd

    rows = []
    for fmt in fmts:
        for n in ns:
            if progress is not None:
                progress(fmt, n)
            warmup = math.ceil(math.log2(n)) + 2
            res = allreduce_rates(rng, int(n), fmt=fmt, model=model, steps=warmup + measured_steps, warmup=warmup)
            for m, r in res.items():
                rows.append({"format": get_format(fmt).name, "n_workers": int(n), "method": m,
                             "measured_steps": measured_steps, "tensor_size": model.size, **r})
    return pd.DataFrame(rows)
