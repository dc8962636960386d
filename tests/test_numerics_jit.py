"""The numba kernels (``numerics._jit``, extra ``jit``) against the exact general path, bit for bit:
codes and float64 values, every mode x saturate x nan_to_zero, float32 and float64 input, on every
rounding boundary (grid points, ties, a hair beside them where rounding float64 through float32
errs), subnormals, signed zeros, the overflow and saturation edges, inf and NaN payloads, blocks
with specials at their ends; hypothesis over bit patterns. The boundary sets run with the kernels
on and off (``ACCELSIM_JIT``), so the numpy/ml_dtypes twins stay covered where numba is installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.numerics import FloatFormat, decode, encode, get_format, quantize
from accelsim.numerics import fast
from accelsim.numerics.general import encode_general, quantize_general
from accelsim.numerics.codec import fits

pytest.importorskip("numba", reason="the 'jit' extra (numba) is part of the 'test' extra")
from accelsim.numerics import _jit  # noqa: E402 (after the importorskip)

ROOT = Path(__file__).resolve().parents[1]
MODES = ["rne", "rna", "rz"]
CASTS = [("bf16", np.float32), ("bf16", np.float64), ("fp16", np.float32), ("fp16", np.float64),
         ("fp32", np.float64)]


@pytest.fixture(autouse=True)
def _kernels_on(monkeypatch):
    """The kernels on, whatever ACCELSIM_JIT the suite runs under (the ``jit`` fixture overrides)."""
    monkeypatch.setenv("ACCELSIM_JIT", "1")


@pytest.fixture(params=["1", "0"], ids=["jit", "numpy"])
def jit(request, monkeypatch):
    monkeypatch.setenv("ACCELSIM_JIT", request.param)
    return request.param == "1"


def _check(x, name, mode, saturate=False, ntz=False, jit=True):
    """encode and quantize equal the general path bit for bit (values compared as uint64, so NaN
    signs and payloads and -0.0 count), and the kernels are the path taken when ``jit``."""
    f = get_format(name)
    if jit and x.dtype in (np.float32, np.float64):
        assert fast.jit_for(x.dtype, f, mode) is _jit
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    what = f"{name}/{mode}/{x.dtype}/sat={saturate}/ntz={ntz}/jit={jit}"
    ours = encode(x, name, mode, saturate=saturate, nan_to_zero=ntz)
    ref = encode_general(x64.reshape(-1), f, mode, saturate=saturate, rng=None, nan_to_zero=ntz).reshape(x.shape)
    assert ours.dtype == ref.dtype and ours.shape == x.shape
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, f"{what}: {bad.size} codes differ; x={x.reshape(-1)[bad[:4]]!r} ours={ours.reshape(-1)[bad[:4]]} ref={ref.reshape(-1)[bad[:4]]}"
    q = quantize(x, name, mode, saturate=saturate, nan_to_zero=ntz)
    # float32/float16 in -> the same dtype out where it holds every value of the format (exact)
    assert q.dtype == (x.dtype if x.dtype.itemsize < 8 and fits(f, x.dtype) else np.float64)
    q = q.astype(np.float64)
    qref = quantize_general(x64.reshape(-1), f, mode, saturate=saturate, rng=None, nan_to_zero=ntz).reshape(x.shape)
    bad = np.flatnonzero(q.view(np.uint64) != qref.view(np.uint64))
    assert bad.size == 0, f"{what}: {bad.size} values differ; x={x.reshape(-1)[bad[:4]]!r} ours={q.reshape(-1)[bad[:4]]} ref={qref.reshape(-1)[bad[:4]]}"


# ------------------------------------------------------------------ boundary sets
def _float32_boundaries(name) -> np.ndarray:
    """float32 patterns: each kept-bit pattern (sign, exponent, kept fraction) of the target with
    the dropped bits at 0, 1, half-1, half, half+1, all ones. fp16: the float32 exponents from
    below its subnormals to beyond its overflow (elsewhere nothing changes)."""
    f = get_format(name)
    sh = 23 - f.mbits
    half = 1 << (sh - 1)
    if f.ebits == 8:
        kept = np.arange(1 << (32 - sh), dtype=np.uint64)
    else:
        exps = np.arange(127 + f.emin - f.mbits - 3, 127 + f.emax + 3, dtype=np.uint64)
        exps = np.concatenate([np.array([0, 1, 255], np.uint64), exps])
        fr = np.arange(1 << f.mbits, dtype=np.uint64)
        pos = ((exps[:, None] << np.uint64(f.mbits)) | fr[None, :]).reshape(-1)
        kept = np.concatenate([pos, pos | np.uint64(1 << (31 - sh))])
    lows = np.array([0, 1, half - 1, half, half + 1, (1 << sh) - 1], dtype=np.uint64)
    return ((kept[:, None] << np.uint64(sh)) | lows[None, :]).astype(np.uint32).reshape(-1).view(np.float32)


def _float64_boundaries(name) -> np.ndarray:
    """float64: every non-negative value and midpoint of the format (bf16/fp16: all; fp32: those
    of 20,000 random float32 and of the range ends), exact and a hair beside: the next float64
    either way and x(1 +- 2^-30): float32(x) then lands on the midpoint and a second rounding would
    go the wrong way. Plus the values beyond float32's range, and both signs."""
    f = get_format(name)
    if f.bits == 16:
        t = decode(np.arange(1 << 15), name)
        v = t[np.isfinite(t)]
    else:
        rng = np.random.default_rng(1)
        b = np.concatenate([rng.integers(0, 0x7F800000, 20_000), np.arange(40), 0x7F7FFFFF - np.arange(40),
                            0x00800000 + np.arange(-20, 20)]).astype(np.uint32)
        v = np.unique(b.view(np.float32).astype(np.float64))
    v = np.concatenate([v, [f.max + 2.0 ** (f.emax - f.mbits)]])  # the virtual value above max
    mids = (v[1:] + v[:-1]) / 2
    pts = np.concatenate([v, mids])
    x = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, 0.0), pts * (1 + 2.0**-30),
                        pts * (1 - 2.0**-30), [0.0, 5e-324, 1e-300, 1e-46, 3.5e38, 3.4028235677973366e38,
                                               1e300, np.finfo(np.float64).max, np.inf, np.nan]])
    return np.concatenate([x, -x])


def _specials(dtype) -> np.ndarray:
    """Zeros, infs, NaNs with payloads (quiet, signalling, all ones) of both signs."""
    if dtype == np.float32:
        b = np.array([0, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FA00000, 0x7FFFFFFF, 1, 0x7F7FFFFF], np.uint32)
        b = np.concatenate([b, b | np.uint32(0x80000000)])
    else:
        b = np.array([0, 0x7FF0000000000000, 0x7FF0000000000001, 0x7FF8000000000000, 0x7FF4000000000000,
                      0x7FFFFFFFFFFFFFFF, 1, 0x7FEFFFFFFFFFFFFF], np.uint64)
        b = np.concatenate([b, b | np.uint64(1 << 63)])
    return b.view(dtype)


def _edges(name, dtype) -> np.ndarray:
    """Around max, the overflow tie and threshold, min normal, min subnormal (and half of it)."""
    f = get_format(name)
    v = np.array([f.max, f.min_normal, f.min_subnormal, 1.0], dtype=np.float64)
    over = f.max + 2.0 ** (f.emax - f.mbits - 1)  # the tie between max and the virtual next value
    v = np.concatenate([v, v * 1.5, v * 0.75, v / 2, [over, over * 2, f.min_subnormal / 2]])
    with np.errstate(over="ignore"):
        v = v.astype(dtype)
    big = np.asarray(np.inf, dtype)
    v = np.concatenate([v, np.nextafter(v, big), np.nextafter(v, np.zeros((), dtype)), _specials(dtype)])
    return np.concatenate([v, -v])


@pytest.mark.parametrize("name,dtype", CASTS, ids=[f"{n}-{d.__name__}" for n, d in CASTS])
@pytest.mark.parametrize("mode", MODES)
def test_every_boundary(name, dtype, mode, jit):
    x = _float32_boundaries(name) if dtype == np.float32 else _float64_boundaries(name)
    _check(x, name, mode, jit=jit)


@pytest.mark.parametrize("name,dtype", CASTS, ids=[f"{n}-{d.__name__}" for n, d in CASTS])
def test_saturate_nan_to_zero_on_the_edges(name, dtype, jit):
    e = _edges(name, dtype)
    alone = np.full((e.size, _jit.BLOCK), 1.5, dtype)  # each edge alone in a block of ordinary values
    alone[np.arange(e.size), np.arange(e.size) % _jit.BLOCK] = e
    for x in (e, alone):
        for mode in MODES:
            for saturate in (False, True):
                for ntz in (False, True):
                    _check(x, name, mode, saturate, ntz, jit=jit)


def test_float64_one_rounding_where_ml_dtypes_rounds_twice():
    """x a hair above a bf16 midpoint whose lower neighbour is even: float32(x) is the midpoint and
    the second RNE goes down (ml_dtypes' answer); one rounding goes up. The kernel rounds once."""
    import ml_dtypes

    lo = np.array([1.0, 15.75, 2.0**-126, 3.0e38], dtype=np.float32).astype(np.float64)
    lo = np.array([decode(encode(v, "bf16", "rz"), "bf16") for v in lo])  # bf16 values, even codes
    lo = lo[(encode(lo, "bf16") & 1) == 0]
    ulp = np.ldexp(1.0, np.frexp(lo)[1] - 8)  # bf16 keeps 8 significant bits
    x = lo + ulp / 2 + ulp * 2.0**-30  # above the midpoint, inside float32's rounding reach
    assert np.all(x.astype(np.float32).astype(np.float64) == lo + ulp / 2)
    ours = encode(x, "bf16")
    assert np.all(ours == encode(lo, "bf16") + 1)  # up: one correct rounding
    assert np.all(x.astype(ml_dtypes.bfloat16).view(np.uint16) == encode(lo, "bf16"))  # twice: down
    _check(x, "bf16", "rne")


# ------------------------------------------------------------------ blocks, layouts, shapes
def test_blocks_with_specials_at_their_ends():
    """The kernels round a block of ``_jit.BLOCK`` elements by the short formula, then redo the
    block if anything fell outside its range: specials at the first/last element of some blocks,
    clean blocks between, zeros (ReLU-like) everywhere, a short last block."""
    rng = np.random.default_rng(3)
    b = _jit.BLOCK
    n = 6 * b + 7
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(n) * np.exp2(rng.uniform(-12, 8, n))).astype(dtype)
        x[rng.random(n) < 0.4] = 0.0
        x[[0, b - 1, 2 * b, 4 * b - 1, n - 1]] = np.array([np.nan, -np.inf, 1e-41, -3.4e38, np.nan], dtype)
        x[3 * b + 5] = -0.0
        x[5 * b + 2] = 5e38 if dtype == np.float64 else 3.39e38  # overflows fp32 / bf16, alone in its block
        for name in ("bf16", "fp16", "fp32"):
            if dtype == np.float32 and name == "fp32":
                continue
            for mode in MODES:
                for saturate in (False, True):
                    _check(x, name, mode, saturate, ntz=saturate)


def test_shapes_and_layouts():
    """0-d, empty, non-contiguous, Fortran-ordered, read-only and unaligned inputs: the shape is
    kept, the input untouched."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal((40, 31)) * 1e3
    frozen = base.copy()
    frozen.setflags(write=False)
    unaligned = np.zeros(4 * 301 + 1, np.uint8)[1:].view(np.float32)
    unaligned[:] = np.linspace(-70000, 70000, 301)
    cases = [np.float64(1.00390625 + 2.0**-40), np.float32(-0.0), np.zeros(0), np.zeros((0, 3), np.float32),
             base[::3, ::2], np.asfortranarray(base).astype(np.float32), base[:, 5].astype(np.float32)[::-2],
             frozen, unaligned]
    for x in cases:
        x = np.asarray(x)
        before = x.copy()
        for name in ("bf16", "fp16"):
            _check(x, name, "rne")
        assert np.array_equal(x, before) and x.dtype == before.dtype


def test_custom_ieee_formats_use_the_kernels_and_agree():
    """The kernels are generic over IEEE formats with subnormals: a 16-bit 1-6-9 and bf16 with bias 126
    (whose range passes float32's top: only float64 input may take the kernels)."""
    e6m9 = FloatFormat("e6m9", 16, 6, 9, 31, True, "ieee")
    b126 = FloatFormat("e8m7-b126", 16, 8, 7, 126, True, "ieee")
    assert _jit.handles(np.float32, e6m9, "rne") and not _jit.handles(np.float32, b126, "rne")
    assert _jit.handles(np.float64, b126, "rne") and not _jit.handles(np.float64, e6m9, "sr")
    assert not _jit.handles(np.float64, get_format("dlfloat16"), "rna")  # no subnormals: numpy paths
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(3000) * np.exp2(rng.uniform(-140, 130, 3000)))
    for g, dtype in ((e6m9, np.float64), (b126, np.float64), (e6m9, np.float32)):
        with np.errstate(over="ignore"):
            xx = np.concatenate([x.astype(dtype), _specials(dtype)])
        for mode in MODES:
            for sat in (False, True):
                k = _jit.params(np.dtype(dtype), g, mode, sat, False)[0]
                codes = np.empty(xx.size, np.uint16)
                _jit.encode_into(xx.view(np.uint64 if dtype == np.float64 else np.uint32), codes, k)
                with np.errstate(invalid="ignore"):
                    ref = encode_general(xx.astype(np.float64), g, mode, saturate=sat, rng=None, nan_to_zero=False)
                assert np.array_equal(codes, ref), (g.name, dtype, mode, sat)


# ------------------------------------------------------------------ hypothesis over bit patterns
def _patterns(name, dtype):
    """Input bit patterns aimed at the target's edges: exponent fields near its subnormal range,
    min normal, max and the input's ends; fractions with the dropped bits at the tie patterns (or
    any); either sign."""
    f = get_format(name)
    fb, bias_in, sign = (23, 127, 31) if dtype == np.float32 else (52, 1023, 63)
    sh = fb - f.mbits
    half = 1 << (sh - 1)
    near = [0, 1, 2 * bias_in, 2 * bias_in + 1]
    for e in (f.emin - f.mbits - 2, f.emin - f.mbits, f.emin - 1, f.emin, f.emax, f.emax + 1):
        near += [bias_in + e + d for d in (-1, 0, 1)]
    exp = st.sampled_from(sorted({e for e in near if 0 <= e <= 2 * bias_in + 1})) | st.integers(0, 2 * bias_in + 1)
    low = st.sampled_from([0, 1, half - 1, half, half + 1, (1 << sh) - 1]) | st.integers(0, (1 << sh) - 1)
    frac = st.builds(lambda k, lo: (k << sh) | lo, st.integers(0, (1 << f.mbits) - 1), low) | st.integers(0, (1 << fb) - 1)
    return st.builds(lambda s, e, m: (s << sign) | (e << fb) | m, st.integers(0, 1), exp, frac)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), cast=st.sampled_from(CASTS), mode=st.sampled_from(MODES), saturate=st.booleans(),
       ntz=st.booleans(), n=st.integers(0, 2 * _jit.BLOCK + 3), stride=st.sampled_from([1, 1, 2]))
def test_kernels_equal_general_hypothesis(data, cast, mode, saturate, ntz, n, stride):
    name, dtype = cast
    udt = np.uint32 if dtype == np.float32 else np.uint64
    pats = data.draw(st.lists(_patterns(name, dtype), min_size=min(n, 40), max_size=min(n, 40)))
    bits = np.array(pats, dtype=udt)
    if n > bits.size:  # the rest: ordinary values, so most blocks take the short formula
        fill = np.random.default_rng(n).standard_normal(n - bits.size) * 2.0 ** data.draw(st.integers(-20, 20))
        bits = np.concatenate([bits, fill.astype(dtype).view(udt)])
        bits = bits[np.random.default_rng(n + 1).permutation(bits.size)]
    x = np.repeat(bits.view(dtype), stride)[::stride] if stride > 1 else bits.view(dtype)
    _check(x, name, mode, saturate, ntz)


# ------------------------------------------------------------------ the switch and the fallback
def test_switch_off_gives_the_same_bits(monkeypatch):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(5000) * np.exp2(rng.uniform(-140, 130, 5000)), _specials(np.float64)])
    on = {}
    for name, dtype in CASTS:
        with np.errstate(all="ignore"):
            xx = x.astype(dtype)
        for mode in MODES:
            on[name, dtype, mode] = (encode(xx, name, mode), quantize(xx, name, mode).astype(np.float64).view(np.uint64))
    monkeypatch.setenv("ACCELSIM_JIT", "0")
    for (name, dtype, mode), (codes, values) in on.items():
        assert fast.jit_for(np.dtype(dtype), get_format(name), mode) is None
        with np.errstate(all="ignore"):
            xx = x.astype(dtype)
        assert np.array_equal(encode(xx, name, mode), codes)
        assert np.array_equal(quantize(xx, name, mode).astype(np.float64).view(np.uint64), values)
    monkeypatch.setenv("ACCELSIM_JIT", "yes")
    with pytest.raises(ValueError, match="ACCELSIM_JIT must be 0 or 1, got 'yes'"):
        encode(x, "bf16")


_PROBE = """
import json, sys
import numpy as np
if sys.argv[1] == "blocked":
    sys.modules["numba"] = None  # as if the extra were not installed: importing it fails
from accelsim.numerics import encode, quantize
x = np.array([1.0 + 2.0**-8 + 2.0**-40, np.nan, -3e38, 1e-41, -0.0, 70000.0])
light = [encode(x, "e4m3fn").tolist(), encode(x.astype(np.float32), "fp16", "sr", rng=np.random.default_rng(0)).tolist()]
before = "numba" in sys.modules and sys.modules["numba"] is not None
heavy = [encode(x, "bf16").tolist(), encode(x, "fp16", "rz", saturate=True).tolist(),
         encode(x, "fp32", "rna").tolist(), quantize(x, "bf16").view(np.uint64).tolist()]
print(json.dumps({"before": before, "after": sys.modules.get("numba") is not None, "light": light, "heavy": heavy}))
"""


def test_numba_imported_only_for_its_casts_and_missing_numba_falls_back():
    """Other casts never import numba; the first cast the kernels cover does. With numba missing the
    numpy paths give the same bits, silently."""
    runs = {}
    for how in ("installed", "blocked"):
        r = subprocess.run([sys.executable, "-c", _PROBE, how], cwd=ROOT, capture_output=True, text=True,
                           env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
        runs[how] = json.loads(r.stdout)
    assert runs["installed"]["before"] is False and runs["installed"]["after"] is True
    assert runs["blocked"]["after"] is False
    assert runs["blocked"]["light"] == runs["installed"]["light"]
    assert runs["blocked"]["heavy"] == runs["installed"]["heavy"]
