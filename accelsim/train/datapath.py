"""The datapath every GEMM of a training step runs through: quantize the two operands to the
recipe's formats (with the recipe's per-tensor scaling), sum them on the recipe's arith engine.

This is the single place where the HFP8/4-bit appendices' "quantization-enabled" framework
lives: a layer only says which GEMM it runs (fwd, bwd, wgrad), which tensor roles its operands
have (act, weight, grad) and its tag (first, last, body, shortcut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.arith import EngineConfig, dot, get_engine, matmul
from accelsim.numerics import decode, encode, get_format, quantize, s2fp8_quantize

from .lowbit import pact, pact_alpha_grad, radix4, sawb
from .recipes import Precision, Recipe
from .scaling import DelayedScaler, PerTensorScaler

GEMM_KINDS = ("fwd", "bwd", "wgrad")


@dataclass(frozen=True)
class GemmRecord:
    """What one GEMM saw (kept only when the datapath runs with ``check=True``)."""

    kind: str
    tag: str
    a_role: str
    b_role: str
    engine: EngineConfig
    a_format: str
    b_format: str
    a_representable: bool  # decode(encode(A)) == A in a_format (NaN-aware)
    b_representable: bool


class Datapath:
    """Runs the GEMMs of a training step as ``recipe`` prescribes.

    ``rng`` feeds stochastic rounding (only used when a recipe asks for ``sr``).
    ``reference=True`` skips quantization and the engines (plain float64 matmul): the
    independent oracle the finite-difference and float64 checks use.
    """

    def __init__(self, recipe: Recipe, rng: np.random.Generator, *, check: bool = False,
                 reference: bool = False):
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.recipe = recipe
        self.rng = rng
        self.check = check
        self.reference = reference
        self.records: list[GemmRecord] = []
        self.inf_events = 0  # gradient values that overflowed to +-inf when quantized
        self.saturated = 0  # activation/weight values clipped at the format's max
        self._engines: dict[tuple, EngineConfig] = {}
        self._tensor_scalers: dict = {}  # (site, kind, role) -> PerTensorScaler / DelayedScaler
        self.pact_alpha: dict = {}  # site -> PACT clip of the layer's input activations
        self.pact_grad: dict = {}  # site -> dL/dalpha of the current step (loss-scaled)

    # ------------------------------------------------------------------ engines
    def engine(self, prec: Precision, a_format: str, b_format: str) -> EngineConfig:
        """The arith engine of ``prec`` with the GEMM's operand formats."""
        key = (prec.engine, prec.engine_overrides, a_format, b_format)
        eng = self._engines.get(key)
        if eng is None:
            eng = self._engines[key] = get_engine(prec.engine, **dict(prec.engine_overrides),
                                                  a_format=a_format, b_format=b_format)
        return eng

    # ------------------------------------------------------------------ operands
    def quantize(self, x: np.ndarray, role: str, tag: str, site=None,
                 kind: str = "fwd") -> tuple[np.ndarray, str, float]:
        """(operand values, engine operand format, scale) of tensor ``x`` in ``role``: the GEMM
        sees ``x * scale`` in the format; its output is divided by the scales (float64)."""
        prec = self.recipe.precision(tag)
        fmt, mode = prec.format(role), prec.rounding(role)
        rng = self.rng if mode == "sr" else None
        if prec.scaling == "s2fp8":
            # the GEMM sees X' = shift-and-squeeze round trip, held in fp32 (Cambier et al.
            # sec. 4: the FP8 tensors are expanded for an FP32 GEMM)
            xq = s2fp8_quantize(x, mode, fmt=fmt, rng=rng).values
            return quantize(xq, "fp32", "rne"), "fp32", 1.0
        if prec.scaling == "int4-fp4":
            return self._quantize_4bit(x, role, fmt, site, kind)
        scale = 1.0
        if prec.scaling in ("pts", "delayed"):
            if site is None:
                raise ValueError(f"per-tensor scaling {prec.scaling!r} needs a GEMM site key")
            key = (site, kind, role)
            scaler = self._tensor_scalers.get(key)
            if scaler is None:
                # delayed: one amax of history, as MS-AMP's ScalingMeta (FP8-LM's implementation)
                scaler = self._tensor_scalers[key] = (PerTensorScaler(fmt) if prec.scaling == "pts"
                                                       else DelayedScaler(fmt, history_len=1))
            with np.errstate(invalid="ignore"):
                scale = scaler.scale_for(x)
        # forward tensors (activations, weights) saturate as the recipe says in every GEMM they
        # enter; activation gradients have their own rule
        saturate = prec.saturate_backward if role == "grad" else prec.saturate_forward
        with np.errstate(over="ignore", invalid="ignore"):
            xs = x * scale if scale != 1.0 else x  # power of two: exact
            q = quantize(xs, fmt, mode, saturate=saturate, rng=rng)
        if role == "grad" and not saturate:
            self.inf_events += int(np.count_nonzero(np.isinf(q) & np.isfinite(xs)))
        elif saturate:
            self.saturated += int(np.count_nonzero(np.abs(xs) > get_format(fmt).max))
        return q, fmt, scale

    def _quantize_4bit(self, x, role, fmt, site, kind):
        if site is None:
            raise ValueError("int4-fp4 needs a GEMM site key (PACT keeps a clip per layer)")
        if role == "act":
            alpha = self.pact_alpha.get(site)
            if alpha is None:  # PACT clip starts at the first batch's amax
                alpha = self.pact_alpha[site] = float(np.max(x)) or 1.0
            q, d = pact(x, alpha)
        elif role == "weight":
            q, d = sawb(x)
        else:
            q, d = radix4(x, 0 if kind == "bwd" else 1)  # two-phase rounding
        return q, fmt, 1.0 / d

    def input_grad(self, site, tag: str, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """dL/d(layer input) through the recipe's activation quantizer (PACT's clip: zero
        above alpha, whose gradient collects it); other recipes pass dx through."""
        if self.reference or self.recipe.precision(tag).scaling != "int4-fp4" or site not in self.pact_alpha:
            return dx
        dx, g = pact_alpha_grad(x, dx, self.pact_alpha[site])
        self.pact_grad[site] = self.pact_grad.get(site, 0.0) + g
        return dx

    def pact_step(self, lr: float, inv_scale: float, apply: bool) -> None:
        """SGD step of the PACT clips (alpha kept >= 1e-3), then clear their gradients."""
        if apply:
            for site, g in self.pact_grad.items():
                self.pact_alpha[site] = max(1e-3, self.pact_alpha[site] - lr * g * inv_scale)
        self.pact_grad.clear()

    def gemm(self, kind: str, a: np.ndarray, a_role: str, b: np.ndarray, b_role: str,
             tag: str, site=None) -> np.ndarray:
        """``a @ b`` as the recipe's datapath computes it (float64 array of the output values).

        ``site``: a hashable naming this GEMM in the network (per-tensor scalers keep state per
        site and operand)."""
        if kind not in GEMM_KINDS:
            raise ValueError(f"GEMM kind {kind!r} is not one of {', '.join(GEMM_KINDS)}")
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.ndim != b.ndim or a.ndim not in (2, 3) or a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
            raise ValueError(f"GEMM {kind}: shapes {a.shape} and {b.shape} do not multiply")
        if self.reference:
            return a @ b
        aq, fa, sa = self.quantize(a, a_role, tag, site, kind)
        bq, fb, sb = self.quantize(b, b_role, tag, site, kind)
        descale = 1.0 / (sa * sb)
        eng = self.engine(self.recipe.precision(tag), fa, fb)
        if self.check:
            self.records.append(GemmRecord(kind, tag, a_role, b_role, eng, fa, fb, _representable(aq, fa),
                                           _representable(bq, fb)))
        if a.ndim == 2:
            return matmul(aq, bq, eng, validate=False).astype(np.float64) * descale
        # a batch of GEMMs (attention): every output is one row-paired dot product on the same
        # engine, so the bits are those of a per-sample matmul, in one vectorized call
        nb, m, k = aq.shape
        n = bq.shape[2]
        rows_a = np.broadcast_to(aq[:, :, None, :], (nb, m, n, k)).reshape(-1, k)
        rows_b = np.broadcast_to(bq.transpose(0, 2, 1)[:, None, :, :], (nb, m, n, k)).reshape(-1, k)
        return dot(rows_a, rows_b, eng).astype(np.float64).reshape(nb, m, n) * descale


def _representable(x: np.ndarray, fmt: str) -> bool:
    with np.errstate(invalid="ignore", over="ignore"):
        back = decode(encode(x, fmt), fmt)
    return bool(np.all((back == x) | (np.isnan(back) & np.isnan(x))))
