"""Slow scalar reference engine: exact ``fractions.Fraction`` arithmetic, one step at a time.

The obvious twin of :mod:`accelsim.arith.gemm` (tested against it across presets): every
product, alignment cut, step rounding and promotion is written out on exact rationals, with no
float64 exactness argument anywhere. Finite operands only; an overflow becomes ``inf``/``nan``
and stays so (IEEE-style propagation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from accelsim.numerics import get_format

from .engine import EngineConfig


def floor_log2(v: Fraction) -> int:
    """floor(log2 v) for v > 0, exactly."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    return e


def _int_round(q: Fraction, mode: str) -> int:
    """Round a rational to an integer: rz, rne or rna."""
    n = math.floor(abs(q))
    frac = abs(q) - n
    if mode == "rz":
        up = False
    elif mode == "rna":
        up = frac >= Fraction(1, 2)
    elif mode == "rne":
        up = frac > Fraction(1, 2) or (frac == Fraction(1, 2) and n % 2 == 1)
    else:
        raise ValueError(f"unknown rounding {mode!r}")
    n += int(up)
    return -n if q < 0 else n


def round_fraction(x, fmt_name: str, mode: str):
    """Round an exact rational to a format: Fraction result, or float inf/nan on overflow."""
    if isinstance(x, float):  # inf / nan already
        return x if not math.isinf(x) or get_format(fmt_name).has_inf else math.nan
    f = get_format(fmt_name)
    if x == 0:
        return Fraction(0)
    e = max(floor_log2(abs(x)), f.emin)
    quantum = Fraction(2) ** (e - f.mbits)
    r = _int_round(x / quantum, mode) * quantum
    if abs(r) > Fraction(f.max):
        if mode == "rz":
            return Fraction(f.max) * (1 if x > 0 else -1)
        return math.copysign(math.inf, x) if f.has_inf else math.nan
    if not f.has_subnormals and abs(r) < Fraction(f.min_normal):
        return Fraction(0)
    return r


def _cut(x: Fraction, quantum: Fraction, mode: str) -> Fraction:
    return _int_round(x / quantum, mode) * quantum


def _field_exp(v: Fraction, fmt_name: str) -> int:
    return max(floor_log2(abs(v)), get_format(fmt_name).emin)


def _add(x, y):
    if isinstance(x, float) or isinstance(y, float):
        return float(x) + float(y)
    return x + y


def _step(acc, a_blk, b_blk, cfg: EngineConfig):
    """One hardware step: acc joins the products of the block."""
    if isinstance(acc, float):
        return acc
    prods = []
    for x, y in zip(a_blk, b_blk):
        p = Fraction(x) * Fraction(y)
        if cfg.product_format is not None:
            p = round_fraction(p, cfg.product_format, cfg.product_rounding)
            if isinstance(p, float):
                return p
        prods.append((p, x, y))
    if cfg.align_bits is None:  # FMA: exact acc + product
        s = acc + sum(p for p, _, _ in prods)
    else:
        exps = []
        for p, x, y in prods:
            if p == 0:
                continue
            if cfg.align_exponent == "field":
                exps.append(_field_exp(Fraction(x), cfg.a_format) + _field_exp(Fraction(y), cfg.b_format))
            else:
                exps.append(floor_log2(abs(p)))
        if acc != 0:
            exps.append(floor_log2(abs(acc)))
        if not exps:
            s = Fraction(0)
        else:
            quantum = Fraction(2) ** (max(exps) - cfg.align_bits)
            s = _cut(acc, quantum, cfg.align_rounding)
            for p, _, _ in prods:
                s += _cut(p, quantum, cfg.align_rounding)
    if cfg.step_bits is not None and s != 0:
        s = _cut(s, Fraction(2) ** (floor_log2(abs(s)) - cfg.step_bits), cfg.step_bits_rounding)
    if cfg.step_format is not None:
        s = round_fraction(s, cfg.step_format, cfg.step_rounding)
    return s


def _run(a, b, cfg: EngineConfig, trace=None):
    K = len(a)
    if cfg.block_width is None:
        return sum((Fraction(x) * Fraction(y) for x, y in zip(a, b)), Fraction(0))
    inner, outer = Fraction(0), Fraction(0)
    W = cfg.block_width
    for k0 in range(0, K, W):
        k1 = min(K, k0 + W)
        inner = _step(inner, a[k0:k1], b[k0:k1], cfg)
        promoted = cfg.chunk is not None and (k1 % cfg.chunk == 0 or k1 == K)
        if promoted:
            outer = _add(outer, inner)
            if cfg.outer_format is not None:
                outer = round_fraction(outer, cfg.outer_format, cfg.outer_rounding)
            inner = Fraction(0)
        if trace is not None:
            trace.append((k1, inner, outer if cfg.chunk is not None else None))
    return outer if cfg.chunk is not None else inner


def dot_reference(a: Iterable[float], b: Iterable[float], cfg: EngineConfig,
                  trace: list[tuple[int, Fraction, Fraction | None]] | None = None
                  ) -> Fraction | float:
    """Exact-arithmetic dot product of two finite 1-D sequences: Fraction, or float inf/nan.

    The value is the engine's output-format value (the sign of a zero is not modelled).
    """
    a, b = [float(x) for x in a], [float(y) for y in b]
    if len(a) != len(b):
        raise ValueError(f"length mismatch: {len(a)} vs {len(b)}")
    if cfg.split_k == 1 or not a:
        r = _run(a, b, cfg, trace)
    else:
        parts, extra = divmod(len(a), cfg.split_k)
        r, start = Fraction(0), 0
        for i in range(cfg.split_k):
            stop = start + parts + (1 if i < extra else 0)
            part = round_fraction(_run(a[start:stop], b[start:stop], cfg), "fp32", "rne")
            r = round_fraction(_add(r, part), "fp32", "rne")
            start = stop
    return round_fraction(r, cfg.out_format, cfg.out_rounding)
