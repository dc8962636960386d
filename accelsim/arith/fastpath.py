"""Fast datapaths of the engine: native float32/float64 arithmetic where it is provably
bit-identical to the float64 reference (``accelsim.arith.datapath.GeneralPath``).

* ``FmaPath`` (``block_width=1``, no alignment): running sums in float32 (or float64), one
  native add per step. fp32 steps with RNE need nothing else (IEEE: one correctly rounded add).
  Narrower step/outer formats round on the bit pattern, correct when the working-precision sum is
  exact or rounds innocuously (``_add_ok``); every value provably stays inside the format's
  range (``fma_plan``), so no range test runs per step.
* ``AlignedPath`` (H100-style fused blocks aligned on field exponents): float32 products scaled
  by a power of two, cut with trunc/rint and summed in float32, where every value is an integer
  below 2^24 (exact in any order).

A plan function returns None when it cannot prove its conditions for the operands at hand; the
reference runs then. Tests: tests/test_arith_fastpaths.py (fast == reference, hypothesis).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from accelsim.numerics import FloatFormat, get_format

from ._fast import ZERO_EXP, field_exponents
from .engine import EngineConfig
from .kloop import Operands, tile_shape, tiles_of

_NEAREST = ("rne", "rna")


_WORK = {np.float32: (24, 2.0**-126, float(np.finfo(np.float32).max), np.int32),
         np.float64: (53, 2.0**-1022, float(np.finfo(np.float64).max), np.int64)}


def _quantum(f: FloatFormat) -> float:
    """Smallest spacing of the format: its subnormal step, or min_normal without subnormals."""
    return f.min_subnormal if f.has_subnormals else f.min_normal


def _bits(f: FloatFormat) -> int:
    return f.mbits + 1


class _Rounder:
    """Round float32/float64 arrays in place on their bit patterns to ``mbits`` fraction bits
    below each value's leading bit (rne/rna/rz; sign-magnitude, so no sign handling needed).

    Used only where the proofs allow: for a format, values in its normal range, or multiples of
    its smallest spacing (those are representable and the rounding leaves them alone); no
    overflow, no NaN.
    """

    def __init__(self, mbits: int, mode: str, dtype):
        p1, _, _, ity = _WORK[dtype]
        self.drop = p1 - 1 - mbits
        self.ity = ity
        self.mode = mode
        self.half = ity(1 << (self.drop - 1))
        self.keep = ity(~((1 << self.drop) - 1))

    def __call__(self, x, tmp=None):
        """Round ``x`` in place; ``tmp``: an integer scratch array of x's shape (rne only)."""
        v = x.view(self.ity)
        if self.mode == "rne":
            t = np.right_shift(v, self.drop, out=tmp)
            t &= 1
            t += self.half - 1
            v += t
        elif self.mode == "rna":
            v += self.half
        v &= self.keep
        return x


def _sum_bound(a, b, paired: bool) -> float:
    """An upper bound on sum_k |a_ik b_kj| over all outputs, from |A| and |B| (float64 sums
    of nonnegative terms, widened by a safety factor far above their rounding error)."""
    if a.size == 0 or b.size == 0:
        return 0.0
    if paired:
        s = float(np.einsum("ij,ij->i", a, b).max())
    else:
        s = min(float(a.sum(axis=1).max()) * float(b.max()), float(a.max()) * float(b.sum(axis=0).max()))
    return s * (1 + 2.0**-30)


def _floor_log2(v: float) -> int:
    return math.frexp(v)[1] - 1


def _lsb_min(a, f: FloatFormat) -> float:
    """A power of two dividing every operand (``a`` holds their magnitudes): the spacing at the
    smallest nonzero magnitude.

    A value v of the format is a multiple of max(s, 2^(floor(log2 v) - mbits)), s the smallest
    spacing of the format (its subnormal step; 2^(emin - mbits) without subnormals); fewer
    fraction bits, as in HiF8's tapered layout, only make that larger. The bound grows with v,
    so the smallest nonzero |v| gives it for all.
    """
    v = float(np.min(a, initial=np.inf, where=a > 0))
    if v == math.inf:
        return math.inf
    s = f.min_subnormal if f.has_subnormals else 2.0 ** (f.emin - f.mbits)
    return max(s, 2.0 ** (_floor_log2(v) - f.mbits))


class Facts:
    """What the fast paths' proofs need to know about the operands of one call, each computed on
    first use (a plan that fails on the formats never pays for the data's passes)."""

    def __init__(self, cfg: EngineConfig, A, B, paired: bool):
        self.fa, self.fb = get_format(cfg.a_format), get_format(cfg.b_format)
        self.A, self.B, self.paired = A, B, paired
        self.prod_bits = _bits(self.fa) + _bits(self.fb)  # significant bits of any product

    @cached_property
    def _abs(self):
        return np.abs(self.A), np.abs(self.B)

    @cached_property
    def q(self) -> float:
        """Every product is a multiple of q."""
        a, b = self._abs
        return _lsb_min(a, self.fa) * _lsb_min(b, self.fb)

    @cached_property
    def pmax(self) -> float:
        a, b = self._abs
        return float(a.max()) * float(b.max()) if a.size and b.size else 0.0

    @cached_property
    def bound(self) -> float:
        """>= every exact partial sum of |products|."""
        return _sum_bound(*self._abs, self.paired)

    @cached_property
    def ea(self):
        """(lowest, highest) exponent field of the nonzero A operands; None if all zero."""
        return _field_range(self._abs[0], self.fa)

    @cached_property
    def eb(self):
        return _field_range(self._abs[1], self.fb)


def products_fit_step(cfg: EngineConfig) -> bool:
    """Do products of the operand formats have no more significant bits than the step format?
    Where they have more (fp32 x fp32 into fp32 steps), ``fma_plan`` holds only for operands
    whose every running sum is exact -- rare for real data -- so a caller with another exact
    route may skip the proof (a speed choice: every route gives the same bits)."""
    if cfg.step_format is None:
        return True
    fs = get_format(cfg.step_format)
    return _bits(get_format(cfg.a_format)) + _bits(get_format(cfg.b_format)) <= _bits(fs)


def _field_range(a, f: FloatFormat):
    """(min, max) of max(floor(log2 |v|), emin) over nonzero magnitudes ``a``; None if all zero."""
    lo = float(np.min(a, initial=np.inf, where=a > 0))
    if lo == math.inf:
        return None
    return max(_floor_log2(lo), f.emin), max(_floor_log2(float(a.max())), f.emin)


def _growth(bits: int, roundings: int) -> float:
    """How much ``roundings`` round-to-nearest steps of ``bits`` bits can inflate a magnitude."""
    return math.exp(roundings * math.log1p(2.0 ** (1 - bits)))


def _add_ok(p1: int, mode: str, target_bits: int, operand_bits: int, span_bits: float) -> bool:
    """Is a working-precision (p1-bit) sum of two values, rounded again to the target, a single
    correct rounding of the exact sum?

    Either every sum is exact (``span_bits``: the bits from the common quantum up to the largest
    possible sum fit in p1), or the mode is to nearest, both operands lie on the target grid
    (``operand_bits <= target_bits``) and p1 >= 2 target_bits + 3: an inexact sum a + b (|a| >=
    |b|) needs |b| < 2^(msb(a) + bits(b) + 1 - p1), so it and its p1-bit rounding lie strictly
    closer to a than the nearest target midpoint, 2^(msb(a) - target_bits - 1) away, and round
    to the same target value (Figueroa, "When is double rounding innocuous?", SIGNUM 1995).
    """
    return span_bits <= p1 or (mode in _NEAREST and operand_bits <= target_bits
                               and p1 >= 2 * target_bits + 3)


def fma_plan(cfg: EngineConfig, facts: Facts, K: int):
    """(dtype, step rounder or None, promote rounder or None) for FmaPath, or None.

    Invariant behind the plan: every product is a multiple of q; a sum of two multiples of q is
    one; rounding it to a format whose smallest spacing is <= q keeps it one (a value of fewer
    than p_target bits above q is representable and stays put; a larger one rounds to multiples
    of its own ulp >= q). So no nonzero value falls below q, and when q >= the format's smallest
    spacing nothing lands between grid points of the subnormal range. Overflow is excluded by
    the data bound: |value| <= sum|products| inflated by every rounding on the way.
    """
    if cfg.block_width != 1 or cfg.align_bits is not None or cfg.product_format is not None:
        return None
    if cfg.step_format is None:  # float64 running sums that must stay exact
        if cfg.chunk is not None and cfg.outer_format is not None:
            return None
        p1, wmin, wmax, _ = _WORK[np.float64]
        if facts.prod_bits > p1 or facts.q < wmin or facts.pmax >= wmax:
            return None
        span = math.log2(2 * max(facts.bound, facts.q)) - math.log2(facts.q)
        return (np.float64, None, None) if span <= p1 else None  # native adds, provably exact
    if cfg.chunk is not None and cfg.outer_format is None:
        return None
    fs = get_format(cfg.step_format)
    fo = get_format(cfg.outer_format) if cfg.chunk is not None else None
    if fs.layout == "hif8" or (fo is not None and fo.layout == "hif8"):
        return None  # tapered precision: no fixed number of bits to round to
    pt = _bits(fs)
    inner_steps = min(K, cfg.chunk or K)
    promotions = 0 if cfg.chunk is None else -(-K // cfg.chunk)
    for dtype in (np.float32, np.float64):
        p1, wmin, wmax, _ = _WORK[dtype]
        if facts.prod_bits > p1 or facts.q < wmin or facts.pmax >= wmax:
            continue  # products not exact in this dtype (nor normal)
        if fs.name == "fp32" and cfg.step_rounding == "rne" and dtype is np.float32:
            step = None  # native IEEE add: one correct rounding, subnormals and overflow included
            inner_bound = math.inf
        else:
            bound = facts.bound * _growth(pt, inner_steps + promotions)
            if pt >= p1 or facts.q < _quantum(fs) or facts.q < wmin or bound > fs.max or bound >= wmax:
                continue
            span = math.log2(2 * max(bound, facts.q)) - math.log2(facts.q)
            if not _add_ok(p1, cfg.step_rounding, pt, facts.prod_bits, span):
                continue
            step = _Rounder(fs.mbits, cfg.step_rounding, dtype)
            inner_bound = bound
        promote = None
        if fo is not None:
            if fo.name == "fp32" and cfg.outer_rounding == "rne" and dtype is np.float32 and pt <= 24:
                promote = None  # native add of two float32 values
            else:
                po = _bits(fo)
                bound = facts.bound * _growth(min(pt, po), inner_steps + promotions)
                if (step is None or pt > po or po >= p1 or facts.q < _quantum(fo) or bound > fo.max
                        or bound >= wmax or inner_bound > fo.max):
                    continue
                span = math.log2(2 * max(bound, facts.q)) - math.log2(facts.q)
                if not _add_ok(p1, cfg.outer_rounding, po, pt, span):
                    continue
                promote = _Rounder(fo.mbits, cfg.outer_rounding, dtype)
        return dtype, step, promote
    return None


class FmaPath:
    """block_width=1 engines on native float32/float64 adds (conditions: ``fma_plan``)."""

    width = 1

    def __init__(self, cfg: EngineConfig, A, B, paired: bool, plan):
        self.dtype, self.round_step, self.round_promote = plan
        self.ops = Operands(A, B, paired, self.dtype, by_column=True)

    def tiles(self):
        N = self.ops.N
        cols = max(1, min(N, 512))
        rows = max(1, (1 << 16) // cols)  # inner + products: 512 KiB of float32, in L2
        return tiles_of(self.ops.M, N, rows, cols)

    def start(self, tile):
        shape = tile_shape(tile)
        return np.empty(shape, self.dtype), np.empty(shape, _WORK[self.dtype][3])

    def zeros(self, tile):
        return np.zeros(tile_shape(tile), self.dtype)

    def step(self, inner, tile, k0, k1, scratch):
        products, tmp = scratch
        inner += self.ops.column(tile[0], tile[1], k0, products)
        if self.round_step is not None:
            self.round_step(inner, tmp)
        return inner

    def promote(self, outer, inner):
        outer += inner
        if self.round_promote is not None:
            self.round_promote(outer)
        return outer


# ---- fast aligned-block datapath --------------------------------------------------------------------

_Z8 = -64  # zero operand's exponent code in int8 (a zero term never sets the block maximum)


# (significand bits, exponent bias, exponent field mask, integer view) of the working dtypes
_LAYOUT = {np.float32: (24, 127, 0xFF, np.int32), np.float64: (53, 1023, 0x7FF, np.int64)}


def aligned_plan(cfg: EngineConfig, facts: Facts):
    """(working dtype, exponent dtype, zero code, exponent floor) for AlignedPath, or None.

    The working dtype (float32, else float64) is exact throughout when: products have <= p bits
    and are normal; p * 2^(f - emax) stays normal (truncating it is then the exact cut); the
    block sum of W + 1 integers below 2^(f+1) (f+2 for products) fits in p bits; every inner
    value (a p-bit integer times 2^(emax - f)) is normal; the scale 2^(f - emax) is normal. A
    promotion into fp32 (RNE) is a native add in float32; in float64 it adds two values of the
    fp32 grid (inner cut to <= 23 fraction bits) and rounds once more, an innocuous double
    rounding (``_add_ok``: 53 >= 2 * 24 + 3).
    """
    if (cfg.block_width is None or cfg.align_bits is None or cfg.align_exponent != "field"
            or cfg.product_format is not None or cfg.step_format is not None):
        return None
    if cfg.chunk is not None and (cfg.outer_format != "fp32" or cfg.outer_rounding != "rne"):
        return None
    if facts.ea is None or facts.eb is None:
        return None  # an all-zero operand: nothing to gain
    f = cfg.align_bits
    (ea_lo, ea_hi), (eb_lo, eb_hi) = facts.ea, facts.eb  # field exponents found in the data
    e_lo = ea_lo + eb_lo
    e_hi = max(_floor_log2(max(facts.bound, 1.0)) + 2, ea_hi + eb_hi + 1)
    # emax runs from e_lo - f (an inner value left by cancellation; it never gets smaller) to
    # e_hi; low floors it when everything is zero (any scale gives 0 then)
    low = e_lo - f - 1
    for dtype, (p, bias, _, _) in _LAYOUT.items():
        emin, emax_d = 1 - bias, bias
        if cfg.step_bits is not None and cfg.step_bits > p - 2:
            continue  # the cut must drop at least one bit of the working significand
        if f + 2 + math.ceil(math.log2(cfg.block_width + 1)) > p or facts.prod_bits > p:
            continue
        if facts.q < 2.0**emin or facts.q * 2.0 ** (f - e_hi) < 2.0**emin or e_lo - f < emin:
            continue  # products, scaled products or inner values not normal
        if e_hi + 8 > emax_d or f - low > emax_d or f - e_hi < emin:
            continue  # inner values or the scale out of range
        if cfg.chunk is not None and dtype is np.float64 and (
                cfg.step_bits is None or cfg.step_bits > 23 or e_lo - f < -126 or e_hi + 8 > 127):
            continue  # inner values must lie on the fp32 grid
        # A term with a zero factor has exponent code zero + e_other <= zero + max(hi): it must
        # stay below low, under every real term (>= e_lo) and every nonzero inner value
        # (>= e_lo - f), so the block maximum needs no mask. int8 when the codes fit.
        if (_Z8 + max(ea_hi, eb_hi) <= low and _Z8 + min(ea_lo, eb_lo) >= -128
                and ea_hi + eb_hi <= 127):
            return dtype, np.int8, _Z8, low
        return dtype, np.int16, ZERO_EXP, low
    return None


class AlignedPath:
    """Fused blocks aligned on field exponents in float32 or float64 (conditions: ``aligned_plan``)."""

    def __init__(self, cfg: EngineConfig, A, B, paired: bool, plan):
        self.dtype, edtype, zero, self.low = plan
        self.cfg = cfg
        self.width = cfg.block_width
        p, self.bias, self.mask, self.ity = _LAYOUT[self.dtype]
        self.mant = p - 1
        fa, fb = get_format(cfg.a_format), get_format(cfg.b_format)
        self.ops = Operands(A, B, paired, self.dtype)
        self.exps = Operands(field_exponents(A, fa, zero, edtype), field_exponents(B, fb, zero, edtype),
                             paired, edtype)
        self.cut = None
        if cfg.step_bits is not None:
            self.cut = _Rounder(cfg.step_bits, cfg.step_bits_rounding, self.dtype)

    def tiles(self):
        N = self.ops.N
        cols = max(1, min(N, 512))
        elems = (1 << 18) if self.dtype is np.float32 else (1 << 17)  # (rows, W, cols): 1 MiB, one L2
        rows = max(1, elems // (cols * self.width))
        return tiles_of(self.ops.M, N, rows, cols)

    def start(self, tile):
        T, Nt = tile_shape(tile)
        W = self.width
        return np.empty((T, W, Nt), self.dtype), np.empty((T, W, Nt), self.exps.A.dtype)

    def zeros(self, tile):
        return np.zeros(tile_shape(tile), self.dtype)

    def step(self, inner, tile, k0, k1, scratch):
        rs, ns = tile
        w = k1 - k0
        P, E = (x[:, :w] for x in scratch)
        self.exps.block(rs, ns, k0, k1, np.add, out=E)
        emax = inner.view(self.ity) >> self.mant  # inner: a normal value or 0 (exponent -bias)
        emax &= self.mask
        emax -= self.bias
        np.maximum(emax, E.max(axis=1), out=emax)  # zero terms sit below low (aligned_plan)
        np.maximum(emax, self.low, out=emax)
        np.subtract(self.cfg.align_bits + self.bias, emax, out=emax)
        emax <<= self.mant
        scale = emax.view(self.dtype)  # 2^(f - emax)
        self.ops.block(rs, ns, k0, k1, out=P)
        P *= scale[:, None, :]  # exact: a power of two, products stay normal
        cut = np.trunc if self.cfg.align_rounding == "rz" else np.rint
        cut(P, out=P)
        r = P.sum(axis=1)  # integers, every partial sum below 2^p: exact in any order
        t = inner * scale
        r += cut(t, out=t)
        if self.cut is not None:
            self.cut(r)
        r /= scale
        return r

    def promote(self, outer, inner):
        outer += inner  # float32: fp32 RNE of two float32 values
        if self.dtype is not np.float32:  # two fp32-grid values: round the float64 sum once more
            outer[...] = outer.astype(np.float32)
        return outer
