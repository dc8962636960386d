"""Block-scaled formats: OCP Microscaling (MX), NVIDIA NVFP4 and DeepSeek-V3 fine-grained FP8.

A block of elements shares one scale; ``block_quantize`` returns the element codes, the block
scales (and NVFP4's per-tensor scale) in a frozen :class:`BlockQuantized`. Sources:
* OCP Microscaling Formats (MX) v1.0 spec (Sept. 2023), sec. 5 (formats) and 6.3 (conversion):
  k = 32 elements share X = 2^(floor(log2(max|V_i|)) - emax_elem), stored in E8M0;
  P_i = V_i / X rounded to the element format, clamped to +-max (saturating).
* NVFP4: NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149, sec. 2 and
  app. B) and the Blackwell NVFP4 blog (2025): 16 E2M1 elements share an E4M3 block scale; a
  per-tensor FP32 encode scale s_enc = 6 * 448 / amax(tensor) maps the largest block scale to 448;
  S_b = E4M3(amax_b / 6 * s_enc), P_i = E2M1(V_i * s_enc / S_b), V_i ~ P_i * S_b / s_enc.
* DeepSeek-V3 technical report (arXiv 2412.19437, sec. 3.3.2): E4M3 elements, FP32 scale
  amax / 448 per 1x128 activation tile (``dsv3-fp8-act``) or 128x128 weight block
  (``dsv3-fp8-weight``, tiling the last two axes).

Stated choices where the sources are silent (each tested):
* A last block shorter than the block size (the axis length not a multiple) is a block of its own.
* MX: an all-zero block gets the smallest scale 2^-127 (E8M0 code 0; the exponent of 0 clamps
  there, as torchao's FLOOR mode does); a block holding NaN or +-inf gets the NaN scale 0xFF and
  element codes 0, so every element dequantizes to NaN (spec sec. 6.3: X = NaN makes the block
  NaN); a shared exponent above 127 (only from float64 inputs beyond float32's range) is NaN too,
  below -127 clamps to -127. ``mxint8``: emax_elem = 0, elements saturate symmetrically at
  +-127/64 (microxcaling's choice).
* NVFP4 and DeepSeek scales are computed in exact arithmetic from float32 inputs (float64 input
  is rounded to float32 first: both recipes quantize bf16/fp32 tensors): each quantity the sources
  define is rounded once (s_enc and the DeepSeek scale to FP32 by RNE, S_b to E4M3 by
  ``scale_rounding``, elements by ``rounding``). FP32 kernels that compute V_i * (s_enc / S_b)
  round twice and may differ on element ties. A block whose scale is 0 (all-zero, or S_b
  underflowing E4M3) has element codes 0; NaN/inf make the block's scale NaN (E4M3 code 0x7F;
  the tensor amax is taken over finite values). An all-zero or non-finite tensor has s_enc = 1;
  s_enc is clamped to FP32's max (TransformerEngine's clamp).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from accelsim.errors import InputError

from accelsim.bounds import MAX_DIM
from accelsim.errors import InputError, check_int

from .codec import decode, encode, quantize
from .fast import round_to_odd32
from .formats import FloatFormat, get_format
from .rounding import check_mode

_FP32_MAX = float(np.finfo(np.float32).max)


class ScaleKind(enum.Enum):
    """How a block's scale is made and stored."""

    E8M0 = "e8m0"  # OCP MX: a power of two 2^(floor(log2 amax) - emax_elem)
    E4M3_TENSOR = "e4m3+fp32"  # NVFP4: E4M3 block scale under a per-tensor FP32 scale
    FP32 = "fp32"  # DeepSeek-V3: FP32 scale amax / max_elem


#: The scale roundings each kind implements (what ``scale_rounding`` can change): E8M0's floor
#: (the MX spec) or ceil; the E4M3 rounding of NVFP4's block scale; DeepSeek's FP32 RNE.
SCALE_ROUNDINGS: dict[ScaleKind, tuple[str, ...]] = {
    ScaleKind.E8M0: ("floor", "ceil"),
    ScaleKind.E4M3_TENSOR: ("rne", "rz", "rna"),
    ScaleKind.FP32: ("rne",),
}
#: NVFP4's two-level scale is defined for E2M1 elements (its 6 = E2M1's largest value)
_E4M3_TENSOR_ELEMENT = "e2m1"


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format: element format, block shape (rows, cols) and scale kind.

    ``block = (1, k)``: k consecutive elements along the quantized axis; ``(r, c)`` with r > 1:
    r x c tiles of the last two axes."""

    name: str
    element: str
    block: tuple[int, int]
    scale: ScaleKind
    scale_roundings: tuple[str, ...]  # accepted ``scale_rounding`` values, the default first
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"BlockFormat.name must be a non-empty string, got {self.name!r}")
        try:
            get_format(self.element)
        except (ValueError, TypeError) as exc:
            raise InputError(f"BlockFormat {self.name!r}: element: {exc}") from None
        b = self.block
        if not isinstance(b, tuple) or len(b) != 2:
            raise InputError(f"BlockFormat {self.name!r}: block must be a (rows, cols) tuple, "
                             f"got {b!r}")
        for what, v in zip(("rows", "cols"), b):
            check_int(f"BlockFormat {self.name!r}: block {what}", v, 1, MAX_DIM)
        if not isinstance(self.scale, ScaleKind):
            raise InputError(f"BlockFormat {self.name!r}: scale must be a ScaleKind "
                             f"({', '.join(k.name for k in ScaleKind)}), got {self.scale!r}")
        valid = SCALE_ROUNDINGS[self.scale]
        sr = self.scale_roundings
        if not isinstance(sr, tuple) or not sr or any(r not in valid for r in sr):
            raise InputError(f"BlockFormat {self.name!r}: scale_roundings must be a non-empty "
                             f"tuple of {', '.join(valid)} (the {self.scale.name} scale's), "
                             f"got {sr!r}")
        if self.scale is ScaleKind.E4M3_TENSOR and self.element != _E4M3_TENSOR_ELEMENT:
            raise InputError(f"BlockFormat {self.name!r}: an {self.scale.name} scale is defined "
                             f"for {_E4M3_TENSOR_ELEMENT} elements (NVFP4), got {self.element!r}")

    @property
    def element_format(self) -> FloatFormat:
        return get_format(self.element)

    @property
    def block_size(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def emax_elem(self) -> int:
        """Exponent of the element format's largest binade (OCP MX emax_elem)."""
        return self.element_format.emax

    @property
    def scale_bits_per_element(self) -> float:
        """Stored scale bits per element (8 per block; DeepSeek's FP32 scales 32)."""
        return (32 if self.scale is ScaleKind.FP32 else 8) / self.block_size

    @property
    def bits_per_element(self) -> float:
        """Element plus amortized scale bits (the per-tensor FP32 scale of NVFP4 not counted)."""
        return self.element_format.bits + self.scale_bits_per_element


_MX = ("floor", "ceil")
_PRESETS = (
    BlockFormat("mxfp8-e4m3", "e4m3fn", (1, 32), ScaleKind.E8M0, _MX, "OCP MXFP8, E4M3 elements"),
    BlockFormat("mxfp8-e5m2", "e5m2", (1, 32), ScaleKind.E8M0, _MX, "OCP MXFP8, E5M2 elements"),
    BlockFormat("mxfp6-e2m3", "e2m3", (1, 32), ScaleKind.E8M0, _MX, "OCP MXFP6, E2M3 elements"),
    BlockFormat("mxfp6-e3m2", "e3m2", (1, 32), ScaleKind.E8M0, _MX, "OCP MXFP6, E3M2 elements"),
    BlockFormat("mxfp4", "e2m1", (1, 32), ScaleKind.E8M0, _MX, "OCP MXFP4, E2M1 elements"),
    BlockFormat("mxint8", "int8-mx", (1, 32), ScaleKind.E8M0, _MX, "OCP MXINT8"),
    BlockFormat("nvfp4", "e2m1", (1, 16), ScaleKind.E4M3_TENSOR, ("rne", "rz", "rna"),
                "NVIDIA NVFP4: E2M1 x E4M3 block scale x FP32 tensor scale"),
    BlockFormat("dsv3-fp8-act", "e4m3fn", (1, 128), ScaleKind.FP32, ("rne",),
                "DeepSeek-V3 activations: 1x128 tiles, FP32 scale amax/448"),
    BlockFormat("dsv3-fp8-weight", "e4m3fn", (128, 128), ScaleKind.FP32, ("rne",),
                "DeepSeek-V3 weights: 128x128 blocks, FP32 scale amax/448"),
)
BLOCK_FORMATS: dict[str, BlockFormat] = {b.name: b for b in _PRESETS}
BLOCK_FORMAT_NAMES: tuple[str, ...] = tuple(BLOCK_FORMATS)


def get_block_format(fmt: str | BlockFormat) -> BlockFormat:
    """The preset block format called ``fmt`` (:data:`BLOCK_FORMAT_NAMES`; a
    :class:`BlockFormat` is returned unchanged)."""
    if isinstance(fmt, BlockFormat):
        return fmt
    if not isinstance(fmt, str) or fmt not in BLOCK_FORMATS:
        raise InputError(f"unknown block format {fmt!r}; valid: {', '.join(BLOCK_FORMAT_NAMES)}")
    return BLOCK_FORMATS[fmt]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class BlockQuantized:
    """Result of :func:`block_quantize` (arrays read-only).

    ``elements``: the element values (float64, unscaled, input shape; their codes are
    :attr:`codes`). ``scales``: float64 value of each block's
    scale (NaN for a NaN block), ``scale_codes``: their E8M0/E4M3 codes (None for FP32 scales);
    both have the input's shape with the blocked axis (axes) cut to the block count.
    ``tensor_scale``: NVFP4's FP32 encode scale s_enc (1.0 otherwise): x ~ P * S_b / s_enc."""

    format: BlockFormat
    axis: int
    elements: np.ndarray
    scales: np.ndarray
    scale_codes: np.ndarray | None
    tensor_scale: float

    @property
    def shape(self) -> tuple[int, ...]:
        return self.elements.shape

    @property
    def codes(self) -> np.ndarray:
        """Element codes (uint8), input shape (exact: every element value is representable)."""
        return encode(self.elements, self.format.element)

    def expanded_scales(self) -> np.ndarray:
        """The block scale of every element (input shape), float64."""
        return _expand(self.scales, self.format, self.axis, self.shape)

    def dequantize(self) -> np.ndarray:
        """float64 values P_i * S_b / tensor_scale (NaN in NaN blocks). Exact for MX and DeepSeek
        (power-of-two or FP32 scale times a short element); NVFP4: one float64 rounding of the
        division by s_enc."""
        with np.errstate(invalid="ignore"):
            v = self.elements * self.expanded_scales()
        return v if self.tensor_scale == 1.0 else v / self.tensor_scale


# ---------------------------------------------------------------- block layout
def _blocked(x: np.ndarray, bf: BlockFormat, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """View of ``x`` with its blocks as axes (zero padding where the axis is not a multiple),
    and the block grid shape: 1-D blocks (..., nblocks, k) with ``axis`` moved last; r x c tiles
    (..., mb, r, nb, c) in place (no transpose: reductions and broadcasts run on the view)."""
    r, c = bf.block
    if r == 1:
        xm = np.moveaxis(x, axis, -1)
        n = xm.shape[-1]
        nb = -(-n // c)
        if nb * c != n:
            xm = np.concatenate([xm, np.zeros(xm.shape[:-1] + (nb * c - n,), xm.dtype)], axis=-1)
        grid = xm.shape[:-1] + (nb,)
        return xm.reshape(grid + (c,)), grid
    m, n = x.shape[-2:]
    mb, nb = -(-m // r), -(-n // c)
    if (mb * r, nb * c) != (m, n):
        x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, mb * r - m), (0, nb * c - n)])
    return x.reshape(x.shape[:-2] + (mb, r, nb, c)), x.shape[:-2] + (mb, nb)


def _per_block(v: np.ndarray, bf: BlockFormat) -> np.ndarray:
    """A per-block array (grid shape) broadcastable against the blocked view."""
    return v[..., None] if bf.block[0] == 1 else v[..., :, None, :, None]


def _block_axes(bf: BlockFormat) -> int | tuple[int, int]:
    return -1 if bf.block[0] == 1 else (-3, -1)


def _unblocked(v: np.ndarray, bf: BlockFormat, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of ``_blocked`` for per-element arrays (padding dropped)."""
    r, c = bf.block
    if r == 1:
        moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
        flat = v.reshape(v.shape[:-2] + (-1,))[..., : shape[axis]]
        return np.moveaxis(flat.reshape(moved), -1, axis)
    full = v.reshape(v.shape[:-4] + (v.shape[-4] * r, v.shape[-2] * c))
    return full[..., : shape[-2], : shape[-1]]


def _expand(scales: np.ndarray, bf: BlockFormat, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    r, c = bf.block
    if r == 1:
        e = np.repeat(scales, c, axis=axis)
        return np.take(e, np.arange(shape[axis]), axis=axis)
    e = np.repeat(np.repeat(scales, r, axis=-2), c, axis=-1)
    return e[..., : shape[-2], : shape[-1]]


def _grid_to_input_layout(g: np.ndarray, bf: BlockFormat, axis: int) -> np.ndarray:
    """Block grid (blocked axis last for 1-D blocks) -> the input's axis order."""
    return np.moveaxis(g, -1, axis) if bf.block[0] == 1 else g


# ---------------------------------------------------------------- scale rules
def _fp32_rne(q: Fraction) -> float:
    """One RNE rounding of an exact positive rational to float32 (as a float)."""
    if q == 0:
        return 0.0
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    step = Fraction(2) ** (max(e, -126) - 23)
    n, rem = divmod(q, step)
    n = int(n)
    if rem * 2 > step or (rem * 2 == step and n % 2):
        n += 1
    v = n * step
    return math.inf if v > Fraction(_FP32_MAX) else float(v)


def _floor_log2(a: np.ndarray) -> np.ndarray:
    """floor(log2 a) for positive finite float64, exact (frexp)."""
    return np.frexp(a)[1].astype(np.int64) - 1


def _amax(blocks: np.ndarray, grid: tuple[int, ...], bf: BlockFormat) -> np.ndarray:
    """float64 max |x| per block (NaN if the block holds one). |x| is the bit pattern with the
    sign cleared; NaN patterns sort above inf as integers, so an integer max finds both (about
    2x faster than a float max over the short block axis, and no |x| float temporary)."""
    if blocks.size == 0:
        return np.zeros(grid)
    ut, mask = (np.uint32, 0x7FFFFFFF) if blocks.dtype == np.float32 else (np.uint64, 0x7FFFFFFFFFFFFFFF)
    a = np.ascontiguousarray(blocks).view(ut) & ut(mask)
    with np.errstate(invalid="ignore"):
        return a.max(axis=_block_axes(bf)).view(blocks.dtype).astype(np.float64)  # NaN patterns stay NaN


def _mx_scales(amax: np.ndarray, bf: BlockFormat, scale_rounding: str):
    """(E8M0 codes, scale exponents) per block; exponents of NaN blocks are 0 (unused)."""
    finite = np.isfinite(amax)
    pos = finite & (amax > 0)
    a = np.where(pos, amax, 1.0)
    e = _floor_log2(a)
    if scale_rounding == "ceil":  # smallest power of two with amax / X <= 2^emax_elem
        e = e + (a != np.ldexp(1.0, e))
    s = np.where(pos, e - bf.emax_elem, -127)
    nan = ~finite | (s > 127)
    s = np.clip(s, -127, 127)
    codes = np.where(nan, 0xFF, s + 127).astype(np.uint8)
    return codes, np.where(nan, 0, s)


def block_quantize(
    x: npt.ArrayLike,
    fmt: str | BlockFormat,
    axis: int = -1,
    *,
    rounding: str = "rne",
    scale_rounding: str | None = None,
    rng: np.random.Generator | None = None,
) -> BlockQuantized:
    """Quantize ``x`` to a block-scaled format along ``axis`` (1-D blocks) or over its last two
    axes (``dsv3-fp8-weight``; ``axis`` must then be -1 or ndim - 1).

    ``rounding``: the elements' rounding mode (``rne``; ``sr`` with ``rng``, a
    numpy.random.Generator; any mode of :func:`accelsim.numerics.quantize`), always saturating.
    ``scale_rounding``: MX ``floor`` (the spec) or ``ceil`` (a power of two with amax / X within
    the element range: no element saturates); NVFP4 the E4M3 rounding of S_b (``rne``, ``rz``,
    ``rna``); DeepSeek ``rne`` (FP32). See the module docstring for edge blocks."""
    bf = get_block_format(fmt)
    mode = check_mode(rounding, rng)
    sr = bf.scale_roundings[0] if scale_rounding is None else scale_rounding
    if sr not in bf.scale_roundings:
        raise InputError(f"scale_rounding {scale_rounding!r} is not valid for {bf.name}; valid: "
                         f"{', '.join(bf.scale_roundings)}")
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"block_quantize expects a real numeric array, got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise InputError("block_quantize needs at least a 1-D array")
    if not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise InputError(f"axis {axis!r} out of range for a {arr.ndim}-D array")
    axis = int(axis) % arr.ndim
    if bf.block[0] > 1:
        if arr.ndim < 2:
            raise InputError(f"{bf.name} tiles the last two axes: needs a >= 2-D array, got shape {arr.shape}")
        if axis != arr.ndim - 1:
            raise InputError(f"{bf.name} tiles the last two axes: axis must be -1, got {axis}")
    elem = bf.element_format
    tensor_scale, scale_codes = 1.0, None
    if bf.scale is ScaleKind.E8M0:
        # power-of-two scaling is exact in float32 too: a product can only lose bits below 2^-126,
        # far under half the smallest element (2^-17 and up in scaled units), where it rounds to 0
        work = arr if arr.dtype in (np.float32, np.float64) else arr.astype(np.float64)
        blocks, grid = _blocked(work, bf, axis)
        amax = _amax(blocks, grid, bf)
        scale_codes, s = _mx_scales(amax, bf, sr)
        bad = scale_codes == 0xFF
        scales = np.where(bad, np.nan, np.ldexp(1.0, s))
        scaled = blocks * _per_block(np.ldexp(1.0, -s).astype(work.dtype), bf)
    else:  # NVFP4 / DeepSeek: defined on float32 data (stated in the module docstring)
        with np.errstate(over="ignore"):
            x32 = arr if arr.dtype == np.float32 else arr.astype(np.float32)
        blocks32, grid = _blocked(x32, bf, axis)
        amax = _amax(blocks32, grid, bf)
        bad = ~np.isfinite(amax)
        amax[bad] = 0.0
        if bf.scale is ScaleKind.E4M3_TENSOR:
            tmax = float(amax.max()) if amax.size else 0.0
            tensor_scale = min(_fp32_rne(6 * 448 / Fraction(tmax)), _FP32_MAX) if tmax > 0 else 1.0
            # amax_b * s_enc is exact in float64 (24 x 24 bits); / 6 then one E4M3 rounding is
            # one correct rounding (a float64 quotient cannot land on a 5-bit midpoint inexactly)
            scale_codes = encode(amax * tensor_scale / 6.0, "e4m3fn", sr, saturate=True)
            scale_codes[bad] = 0x7F
            scales = decode(scale_codes, "e4m3fn")
            scaled = np.multiply(blocks32, tensor_scale, dtype=np.float64)  # exact (24 x 24 bits)
        else:
            scales = _fp32_of(amax / elem.max, amax, elem.max)
            scales[bad] = np.nan
        den = _per_block(np.where(scales == 0, np.inf, scales), bf)  # zero scale: elements -> 0
        if bf.scale is ScaleKind.FP32 and mode in ("rne", "rna", "rz"):
            scaled = _quotient32(blocks32, den)
        else:
            # one float64 division, then one rounding to the element: a quotient of a <= 48-bit
            # and a <= 24-bit significand cannot land on an element midpoint inexactly
            with np.errstate(invalid="ignore"):  # (a float32 operand is widened on the fly)
                scaled = np.divide(scaled if bf.scale is ScaleKind.E4M3_TENSOR else blocks32, den,
                                   dtype=np.float64, out=scaled if bf.scale is ScaleKind.E4M3_TENSOR else None)
    if bad.any():
        scaled = np.where(_per_block(bad, bf), 0.0, scaled)
    # float64 elements as documented (quantize keeps a float32 input's dtype)
    values = np.asarray(quantize(scaled, elem, mode, saturate=True, rng=rng), dtype=np.float64)
    values = _unblocked(values, bf, axis, arr.shape)
    return BlockQuantized(
        format=bf, axis=axis, elements=_readonly(values),
        scales=_readonly(_grid_to_input_layout(scales, bf, axis)),
        scale_codes=None if scale_codes is None else _readonly(_grid_to_input_layout(scale_codes, bf, axis)),
        tensor_scale=float(tensor_scale),
    )


def _quotient32(x32: np.ndarray, den: np.ndarray) -> np.ndarray:
    """float32 patterns that round to 8-bit elements like the exact x / den (x, den float32):
    the float32 quotient (RNE) where it cannot mislead, x / den rounded to odd at 24 bits where
    its low 16 bits are all zero (it may sit on an element midpoint or grid point: a double
    rounding there could differ; round-to-odd at >= 2 spare bits cannot). The float64 quotient
    rounded to odd equals the exact one rounded to odd: a quotient of two 24-bit significands is
    never within 2^-53 of a 24-bit value it does not equal."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q = np.divide(x32, den.astype(np.float32), dtype=np.float32)
    u = q.reshape(-1).view(np.uint32)
    idx = np.flatnonzero(((u & np.uint32(0xFFFF)) == 0) & ((u & np.uint32(0x7FFFFFFF)) != 0))
    if idx.size:
        num = np.broadcast_to(x32, q.shape).reshape(-1)[idx].astype(np.float64)
        d = np.broadcast_to(den, q.shape).reshape(-1)[idx]
        with np.errstate(invalid="ignore"):
            u[idx] = round_to_odd32(num / d)
    return q


def _fp32_of(ratio: np.ndarray, amax: np.ndarray, emax_val: float) -> np.ndarray:
    """float32 RNE of amax / emax_val, one rounding: float64's quotient is RNE'd to 53 bits, and a
    second RNE to 24 bits errs only where it landed exactly on a float32 midpoint; those (rare)
    are redone exactly."""
    f32 = ratio.astype(np.float32).astype(np.float64)
    u = ratio.view(np.uint64)
    mid = (u & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)  # dropped 29 bits = exactly half
    mid |= (ratio > 0) & (ratio < 2.0**-126)  # float32 subnormal results: fewer kept bits
    for i in zip(*np.nonzero(mid)):
        f32[i] = _fp32_rne(Fraction(float(amax[i])) / Fraction(emax_val))
    return f32
