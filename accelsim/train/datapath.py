"""The datapath every GEMM of a training step runs through: quantize the two operands to the
recipe's formats (with the recipe's per-tensor scaling), sum them on the recipe's arith engine.

This is the single place where the HFP8/4-bit appendices' "quantization-enabled" framework
lives: a layer only says which GEMM it runs (fwd, bwd, wgrad), which tensor roles its operands
have (act, weight, grad) and its tag (first, last, body, shortcut).

Two emulation levels (:class:`GemmLevel`): ``engine`` sums every GEMM on the recipe's bit-exact
arith engine; ``blas`` quantizes operands and the output as the recipe says but multiplies and
sums in float32 BLAS (the cast-only emulation of most papers and of QPyTorch).

Block-scaled precisions (``Precision.block_scaled``: mxfp8, mxfp4, nvfp4, deepseek-fp8) quantize
A along K per row (axis -1) and B along K per column (axis -2) with
``accelsim.numerics.block_quantize`` (weights in 2-D tiles where the recipe says), optionally
after a random Hadamard transform along K; ``engine`` feeds the BlockQuantized operands to
``accelsim.arith.blockscaled.block_scaled_matmul_q``, ``blas`` multiplies their dequantized
values in float32 BLAS.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

import numpy as np

from accelsim.arith import EngineConfig, get_engine, matmul, round_finite
from accelsim.arith.blockscaled import BlockScaledEngine, block_scaled_matmul_q
from accelsim.numerics import (BlockQuantized, block_quantize, decode, encode, get_block_format, get_format,
                               quantize, s2fp8_quantize)

from .lowbit import pact, pact_alpha_grad, radix4, sawb
from .recipes import Precision, Recipe
from .scaling import DelayedScaler, PerTensorScaler

GEMM_KINDS = ("fwd", "bwd", "wgrad")


class GemmLevel(enum.Enum):
    """How a GEMM's products and sums are emulated (operands are quantized either way)."""

    ENGINE = "engine"  # the recipe's arith engine: every step's rounding, bit-exact
    BLAS = "blas"  # float32 BLAS, the output rounded to the engine's output format

    @classmethod
    def parse(cls, value: "GemmLevel | str") -> "GemmLevel":
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"gemm level {value!r} is not one of "
                             f"{', '.join(m.value for m in cls)}") from None


GEMM_LEVELS = tuple(m.value for m in GemmLevel)


def round_to(x: np.ndarray, fmt: str, mode: str, *, saturate: bool = False, rng=None) -> np.ndarray:
    """``numerics.quantize(x, fmt, mode, saturate=saturate, rng=rng)`` (float64 values), through
    the compiled rounding where it applies (finite values, no overflow, rne/rna/rz: the same
    bits, tested in tests/test_arith_jit_fma.py), else quantize itself."""
    if rng is None:
        q = round_finite(x, fmt, mode)
        if q is not None:
            return q
    with np.errstate(over="ignore", invalid="ignore"):
        return quantize(x, fmt, mode, saturate=saturate, rng=rng)


@dataclass(frozen=True)
class GemmRecord:
    """What one GEMM saw (kept only when the datapath runs with ``check=True``)."""

    kind: str
    tag: str
    a_role: str
    b_role: str
    engine: EngineConfig | BlockScaledEngine
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
                 reference: bool = False, gemm: GemmLevel = GemmLevel.ENGINE):
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if not isinstance(gemm, GemmLevel):
            raise TypeError(f"gemm must be a GemmLevel, got {type(gemm).__name__}")
        self.recipe = recipe
        self.rng = rng
        self.check = check
        self.reference = reference
        self.level = gemm
        self.records: list[GemmRecord] = []
        self.inf_events = 0  # gradient values that overflowed to +-inf when quantized
        self.saturated = 0  # activation/weight values clipped at the format's max
        self._engines: dict[tuple, EngineConfig] = {}
        self._precisions: dict[str, Precision] = {}
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
        prec = self._precision(tag)
        fmt, mode = prec.format(role), prec.rounding(role)
        if fmt == "fp32" and mode == "rne" and prec.scaling == "none":
            # float32's own cast is this rounding (IEEE RNE, subnormals, overflow to inf): the
            # answer unless an overflow must saturate or be counted as a gradient's INF event
            q = x.astype(np.float32)
            if (role == "grad" or prec.saturate_forward) and not np.isfinite(q).all():
                return self._quantize_general(x, role, prec, fmt, mode, 1.0, None), fmt, 1.0
            return q, fmt, 1.0
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
        return self._quantize_general(x, role, prec, fmt, mode, scale, rng), fmt, scale

    def _quantize_general(self, x, role, prec, fmt, mode, scale, rng) -> np.ndarray:
        """``x * scale`` quantized as the recipe says; counts INF events and clipped values."""
        saturate = prec.saturate_backward if role == "grad" else prec.saturate_forward
        if scale != 1.0:
            with np.errstate(over="ignore", invalid="ignore"):
                xs = x * scale  # power of two: exact
        else:
            xs = x
        if rng is None:
            q = round_finite(xs, fmt, mode)
            if q is not None:  # finite, nothing rounded past the format's max: no INF event
                if saturate:  # values above max that rounded down to it still count as clipped
                    self.saturated += int(np.count_nonzero(np.abs(xs) > get_format(fmt).max))
                return q
        with np.errstate(over="ignore", invalid="ignore"):
            q = quantize(xs, fmt, mode, saturate=saturate, rng=rng)
            if role == "grad" and not saturate:
                self.inf_events += int(np.count_nonzero(np.isinf(q) & np.isfinite(xs)))
            elif saturate:
                self.saturated += int(np.count_nonzero(np.abs(xs) > get_format(fmt).max))
        return q

    def _precision(self, tag: str) -> Precision:
        prec = self._precisions.get(tag)
        if prec is None:
            prec = self._precisions[tag] = self.recipe.precision(tag)
        return prec

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
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != b.ndim or a.ndim not in (2, 3) or a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
            raise ValueError(f"GEMM {kind}: shapes {a.shape} and {b.shape} do not multiply")
        if self.reference:
            return a.astype(np.float64, copy=False) @ b.astype(np.float64, copy=False)
        if self._precision(tag).block_scaled:
            return self._block_gemm(kind, a, a_role, b, b_role, tag)
        aq, fa, sa = self.quantize(a, a_role, tag, site, kind)
        bq, fb, sb = self.quantize(b, b_role, tag, site, kind)
        descale = 1.0 / (sa * sb)
        eng = self.engine(self._precision(tag), fa, fb)
        if self.check:
            self.records.append(GemmRecord(kind, tag, a_role, b_role, eng, fa, fb, _representable(aq, fa),
                                           _representable(bq, fb)))
        if self.level is GemmLevel.BLAS:
            # operand values are exact in float32 (every recipe format fits it); products and
            # sums are float32 BLAS's, the output is rounded to the engine's output format
            y = np.matmul(aq.astype(np.float32, copy=False), bq.astype(np.float32, copy=False))
            if eng.out_format != "fp32" or eng.out_rounding != "rne":
                y = round_to(y.astype(np.float64), eng.out_format, eng.out_rounding)
            else:
                y = y.astype(np.float64)
        elif a.ndim == 2:
            y = matmul(aq, bq, eng, validate=False).astype(np.float64)
        else:
            # a batch of GEMMs (attention): one engine matmul per sample
            y = np.stack([matmul(aq[i], bq[i], eng, validate=False) for i in range(aq.shape[0])]).astype(np.float64)
        return y * descale if descale != 1.0 else y

    # ------------------------------------------------------------------ block-scaled GEMMs
    def hadamard(self, n: int) -> np.ndarray:
        """A random orthogonal n x n Hadamard transform R = diag(s) H / sqrt(n): H the Sylvester
        Hadamard matrix, s random signs drawn from the Datapath's Generator (fresh per call)."""
        h = np.ones((1, 1))
        while h.shape[0] < n:
            h = np.block([[h, h], [h, -h]])
        signs = self.rng.choice(np.array([-1.0, 1.0]), size=n)
        return signs[:, None] * h / np.sqrt(n)

    def block_operand(self, x: np.ndarray, role: str, prec: Precision, axis: int) -> BlockQuantized:
        """``x`` in ``role`` block-quantized along ``axis`` (the GEMM's K: -1 for A, -2 for B),
        or, for 2-D weight blocks (``dsv3-fp8-weight``; ``prec.weight_tile``), in tiles of the
        last two axes (a tile of W^T is the transpose of a tile of W: both GEMMs see one weight)."""
        fmt, mode = get_block_format(prec.format(role)), prec.rounding(role)
        rng = self.rng if mode == "sr" else None
        if role == "weight" and prec.weight_tile is not None:
            t = prec.weight_tile
            fmt = dataclasses.replace(fmt, name=f"{fmt.name}-{t}x{t}", block=(t, t))
        if fmt.block[0] > 1:
            axis = -1
        return block_quantize(x, fmt, axis=axis, rounding=mode, rng=rng)

    def _block_gemm(self, kind: str, a: np.ndarray, a_role: str, b: np.ndarray, b_role: str,
                    tag: str) -> np.ndarray:
        prec = self._precision(tag)
        if kind in prec.hadamard_kinds:
            # (A R)(R^T B) = A B for block-diagonal orthogonal R along K (K zero-padded to n)
            n = prec.hadamard
            k = a.shape[-1]
            pad = -k % n
            if pad:
                a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,))], axis=-1)
                b = np.concatenate([b, np.zeros(b.shape[:-2] + (pad, b.shape[-1]))], axis=-2)
            r = self.hadamard(n)
            kb = (k + pad) // n
            a = (a.reshape(a.shape[:-1] + (kb, n)) @ r).reshape(a.shape)
            bt = np.swapaxes(b, -1, -2)
            b = np.swapaxes((bt.reshape(bt.shape[:-1] + (kb, n)) @ r).reshape(bt.shape), -1, -2)
        qa = self.block_operand(a, a_role, prec, -1)
        qb = self.block_operand(b, b_role, prec, -2)
        fa, fb = prec.format(a_role), prec.format(b_role)
        key = (prec.engine, prec.engine_overrides, fa, fb)
        eng = self._engines.get(key)
        if eng is None:
            eng = self._engines[key] = get_engine(prec.engine, **dict(prec.engine_overrides), a_format=fa, b_format=fb)
        if self.check:
            self.records.append(GemmRecord(kind, tag, a_role, b_role, eng, fa, fb,
                                           _representable(qa.elements, qa.format.element),
                                           _representable(qb.elements, qb.format.element)))
        if self.level is GemmLevel.BLAS:
            # the dequantized operands (exact for MX; one float32 rounding of P * S for NVFP4 /
            # DeepSeek scales) multiplied and summed in float32 BLAS
            y = np.matmul(qa.dequantize().astype(np.float32), qb.dequantize().astype(np.float32))
            return y.astype(np.float64)
        qb = _as_k_blocks(qb, fb)
        if a.ndim == 2:
            return block_scaled_matmul_q(qa, qb, eng).astype(np.float64)
        # a batch of GEMMs (attention): quantized as one tensor (NVFP4's tensor scale is the
        # batch's), one engine GEMM per sample
        return np.stack([block_scaled_matmul_q(_sample(qa, i), _sample(qb, i), eng)
                         for i in range(a.shape[0])]).astype(np.float64)


def _sample(q: BlockQuantized, i: int) -> BlockQuantized:
    """Sample ``i`` of a batched (3-D, 1-D blocks) BlockQuantized."""
    return BlockQuantized(format=q.format, axis=q.axis - 1, elements=q.elements[i], scales=q.scales[i],
                          scale_codes=None if q.scale_codes is None else q.scale_codes[i],
                          tensor_scale=q.tensor_scale)


def _as_k_blocks(q: BlockQuantized, fmt: str) -> BlockQuantized:
    """A B operand quantized in r x r tiles (``weight_tile``) as the engine's 1 x r blocks along
    K: the same elements, each tile's scale repeated over its r columns (every 1 x r block of a
    tile carries the tile's scale: the values are unchanged, the engine sees them exactly)."""
    bf = get_block_format(fmt)
    if q.format.block[0] == 1 or bf.block[0] > 1:
        return q
    r, c = q.format.block
    if (1, r) != bf.block or q.elements.ndim != 2:
        raise ValueError(f"{q.format.name} tiles cannot feed an engine taking {bf.name}")
    n = q.elements.shape[1]
    rep = lambda v: None if v is None else np.repeat(v, c, axis=1)[:, :n]  # noqa: E731
    return BlockQuantized(format=bf, axis=0, elements=q.elements, scales=rep(q.scales),
                          scale_codes=rep(q.scale_codes), tensor_scale=q.tensor_scale)


def _representable(x: np.ndarray, fmt: str) -> bool:
    with np.errstate(invalid="ignore", over="ignore"):
        back = decode(encode(x, fmt), fmt)
    return bool(np.all((back == x) | (np.isnan(back) & np.isnan(x))))
