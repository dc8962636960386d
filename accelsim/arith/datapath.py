"""The engine's datapaths: the float64 reference, and the choice between it and the fast twins.

``GeneralPath`` handles every ``EngineConfig`` in float64 with error-free transformations
(two_sum + round-to-odd, exact aligned integer sums); it is the reference the fast datapaths
(``accelsim.arith.fastpath``) are tested against bit for bit, and it is tested against the
``fractions.Fraction`` twin and the H100 bits. ``choose_path`` takes a fast datapath only where
its exactness conditions hold for the operands at hand.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.numerics import get_format

from ._fast import ZERO_EXP, cut_bits, field_exponents, floor_log2, round_fast, round_to_odd, two_sum
from .engine import EngineConfig
from .fastpath import AlignedPath, Facts, FmaPath, aligned_plan, fma_plan
from .kloop import Operands, tile_shape, tiles_of


def _work_dtype(cfg: EngineConfig):
    """float32 for aligned blocks when it is provably exact, else float64.

    float32 holds every product exactly when the two input significands total <= 24 bits and
    the products' exponents lie in float32's normal range; the cut terms are integers below
    2^(align_bits + 2) and their block sum stays below 2^24 when align_bits + 2 +
    ceil(log2(W + 1)) <= 24; terms scaled below 1 cut to 0 whether or not they underflow.
    """
    fa, fb = get_format(cfg.a_format), get_format(cfg.b_format)
    ok = (fa.mbits + fb.mbits + 2 <= 24
          and cfg.product_format is None
          and cfg.align_bits + 2 + math.ceil(math.log2(cfg.block_width + 1)) <= 24
          and fa.min_subnormal * fb.min_subnormal >= 2.0**-126
          and fa.max * fb.max * 2.0**(cfg.align_bits + 2) < 2.0**127
          and cfg.align_exponent == "field")
    return np.float32 if ok else np.float64


def _add_rounded_once(a, b, fmt, rounding, inexact: str):
    """a + b rounded once to ``fmt`` (float64 arrays; two_sum + round-to-odd); with ``fmt`` None
    the float64 sum must be exact, else ValueError(``inexact``)."""
    s, e = two_sum(a, b)
    if fmt is None:
        if np.any(e != 0):
            raise ValueError(inexact)
        return s
    return round_fast(round_to_odd(s, e), get_format(fmt), rounding)


def fma_step(inner, p, cfg: EngineConfig):
    """inner + p rounded once to the step format."""
    return _add_rounded_once(inner, p, cfg.step_format, cfg.step_rounding,
                             "step_format=None with an unaligned FMA step: the float64 running "
                             "sum became inexact for these operands; give a step_format")


def aligned_step(inner, p, e, cfg: EngineConfig):
    """One fused step: inner (T, N) joins the (T, W, N) products p with exponents e.

    p may be float32 (see ``_work_dtype``): then every product, its scaled and cut value and the
    block's integer sum are exact in float32 as well.
    """
    f = cfg.align_bits
    emax = np.maximum(e.max(axis=1), floor_log2(inner))
    emax[emax < ZERO_EXP // 2] = 0
    scale = np.ldexp(1.0, (f - emax).astype(np.int32))
    t = p * scale.astype(p.dtype)[:, None, :]
    cut = np.trunc if cfg.align_rounding == "rz" else np.rint
    cut(t, out=t)
    s = t.sum(axis=1).astype(np.float64)
    s += cut(inner * scale)
    s /= scale
    if cfg.step_bits is not None:
        s = cut_bits(s, cfg.step_bits, cfg.step_bits_rounding)
    if cfg.step_format is not None:
        s = round_fast(s, get_format(cfg.step_format), cfg.step_rounding)
    return s


def promote_step(outer, inner, cfg: EngineConfig):
    """outer + inner rounded once to the outer format."""
    return _add_rounded_once(outer, inner, cfg.outer_format, cfg.outer_rounding,
                             "outer_format=None: the float64 outer sum became inexact for these "
                             "operands; give an outer_format")


class GeneralPath:
    """Every engine, float64 with error-free transformations: the reference datapath."""

    dtype = np.float64

    def __init__(self, cfg: EngineConfig, A, B, paired: bool):
        self.cfg = cfg
        self.width = cfg.block_width
        aligned = cfg.align_bits is not None
        self.ops = Operands(A, B, paired, _work_dtype(cfg) if aligned else np.float64)
        self.exps = None
        if aligned and cfg.align_exponent == "field":
            fa, fb = get_format(cfg.a_format), get_format(cfg.b_format)
            self.exps = Operands(field_exponents(A, fa), field_exponents(B, fb), paired, np.int16)

    def tiles(self):
        N = self.ops.N
        W = self.width
        rows = max(1, ((1 << 20) // W if self.cfg.align_bits is not None else 1 << 15) // max(1, N))
        return tiles_of(self.ops.M, N, rows, max(1, N))

    def start(self, tile):
        return None

    def zeros(self, tile):
        return np.zeros(tile_shape(tile))

    def step(self, inner, tile, k0, k1, scratch):
        cfg = self.cfg
        rs, ns = tile
        p = self.ops.block(rs, ns, k0, k1)
        if cfg.product_format is not None:
            p = round_fast(p, get_format(cfg.product_format), cfg.product_rounding)
        if cfg.align_bits is None:
            return fma_step(inner, p[:, 0, :], cfg)
        e = self.exps.block(rs, ns, k0, k1, np.add) if self.exps is not None else floor_log2(p)
        return aligned_step(inner, p, e, cfg)

    def promote(self, outer, inner):
        return promote_step(outer, inner, self.cfg)


def choose_path(cfg: EngineConfig, A, B, paired: bool, fast: bool = True):
    """The datapath for finite operands A, B of a stepped engine (``fast=False``: the reference)."""
    if fast:
        facts = Facts(cfg, A, B, paired)
        plan = fma_plan(cfg, facts, A.shape[1])
        if plan is not None:
            return FmaPath(cfg, A, B, paired, plan)
        plan = aligned_plan(cfg, facts)
        if plan is not None:
            return AlignedPath(cfg, A, B, paired, plan)
    return GeneralPath(cfg, A, B, paired)
