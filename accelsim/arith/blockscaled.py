"""Block-scaled GEMM golden models: Blackwell MX / NVFP4 MMA and Hopper FP8 with DeepSeek-V3 tiles.

* ``blackwell`` (PTX ISA 8.7+, ``mma``/``tcgen05.mma`` ``.kind::mxf8f6f4`` / ``.kind::mxf4nvf4``
  ``.block_scale``: D = (A x scale_A) * (B x scale_B) + C, one scale per 32 (MX) or 16 (NVFP4)
  elements of K per row of A / column of B). The PTX documentation does not state the internal
  accumulation, so this is a stated choice: each block pair's dot product of decoded elements is
  exact, multiplied exactly by the product of the two block scales, and added to an FP32
  accumulator with one rounding per block (``acc_rounding``, rne by default), blocks in K order.
  NVFP4's per-tensor scales are applied in the epilogue: D = acc / (s_enc_A * s_enc_B), rounded
  once to the output format.
* ``hopper-tiled`` (DeepSeek-V3, arXiv 2412.19437 sec. 3.3.2; DeepGEMM): E4M3 operands with a
  1x128 activation and a 128x128 weight scale; the tensor core accumulates ``promote`` products
  (the ``h100-fp8`` engine without promotion: 13-bit truncated alignment, pinned on H100 bits);
  on promotion the partial is dequantized by s = fp32(s_A * s_B) and added on the CUDA cores by
  one FP32 fused multiply-add: acc = fp32(acc + s * partial). ``promote`` must divide 128 (a
  partial never spans two scale tiles).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

import numpy as np

from accelsim.numerics import BlockQuantized, block_quantize, get_block_format, get_format
from accelsim.numerics.block import ScaleKind

from ._fast import round_fast, round_to_odd, two_sum
from .engine import get_engine
from .gemm import matmul

TILE = 128  # DeepSeek-V3 scale tile along K


class BlockScaledKind(enum.Enum):
    BLACKWELL = "blackwell"
    HOPPER_TILED = "hopper-tiled"


@dataclass(frozen=True)
class BlockScaledEngine:
    """A block-scaled GEMM datapath (module docstring). ``a_format``/``b_format`` are block
    formats (``accelsim.numerics.BLOCK_FORMAT_NAMES``); A is blocked along K per row, B along K
    per column (``dsv3-fp8-weight``: 128 x 128 tiles of B)."""

    name: str
    a_format: str
    b_format: str
    kind: BlockScaledKind
    acc_rounding: str = "rne"  # blackwell: each scaled block sum into the FP32 accumulator
    promote: int | None = None  # hopper-tiled: products per tensor-core partial (divides 128)
    out_format: str = "fp32"

    def __post_init__(self):
        if not isinstance(self.kind, BlockScaledKind):
            raise ValueError(f"kind must be a BlockScaledKind, got {self.kind!r}")
        fa, fb = get_block_format(self.a_format), get_block_format(self.b_format)
        if self.acc_rounding not in ("rne", "rz"):
            raise ValueError(f"acc_rounding={self.acc_rounding!r} is not one of rne, rz")
        if self.out_format not in ("fp32", "bf16"):
            raise ValueError(f"out_format={self.out_format!r} is not one of fp32, bf16")
        if self.kind is BlockScaledKind.BLACKWELL:
            if fa.scale is ScaleKind.FP32 or fb.scale is ScaleKind.FP32:
                raise ValueError(f"{self.name}: the Blackwell block-scaled MMA takes MX or NVFP4 operands, "
                                 f"got {fa.name} x {fb.name}")
            if fa.block != fb.block or fa.block[0] != 1:
                raise ValueError(f"{self.name}: A and B need the same 1-D scale block along K, got "
                                 f"{fa.name} {fa.block} x {fb.name} {fb.block}")
            if self.promote is not None:
                raise ValueError("promote applies to hopper-tiled engines only")
        else:
            # B: 128 x 128 weight tiles, or (the weight-gradient GEMM, both operands activation-
            # like) 128 x 1 tiles: dsv3-fp8-act blocked along K per column
            if fa.name != "dsv3-fp8-act" or fb.name not in ("dsv3-fp8-weight", "dsv3-fp8-act"):
                raise ValueError(f"{self.name}: hopper-tiled takes dsv3-fp8-act x dsv3-fp8-weight or "
                                 f"dsv3-fp8-act x dsv3-fp8-act, got {fa.name} x {fb.name}")
            p = self.promote
            if not isinstance(p, int) or isinstance(p, bool) or p < 32 or TILE % p:
                raise ValueError(f"promote={p!r}: the per-tile scales are applied on promotion, so it "
                                 f"must be a multiple of 32 (one wgmma) dividing {TILE}")


BLOCK_PRESETS: dict[str, BlockScaledEngine] = {
    "b200-mxfp8": BlockScaledEngine("b200-mxfp8", "mxfp8-e4m3", "mxfp8-e4m3", BlockScaledKind.BLACKWELL),
    "b200-mxfp6": BlockScaledEngine("b200-mxfp6", "mxfp6-e2m3", "mxfp6-e2m3", BlockScaledKind.BLACKWELL),
    "b200-mxfp4": BlockScaledEngine("b200-mxfp4", "mxfp4", "mxfp4", BlockScaledKind.BLACKWELL),
    "b200-nvfp4": BlockScaledEngine("b200-nvfp4", "nvfp4", "nvfp4", BlockScaledKind.BLACKWELL),
    "dsv3-fp8": BlockScaledEngine("dsv3-fp8", "dsv3-fp8-act", "dsv3-fp8-weight", BlockScaledKind.HOPPER_TILED,
                                  promote=TILE),
}
_FIELDS = tuple(f.name for f in dataclasses.fields(BlockScaledEngine) if f.name not in ("name", "kind"))


def get_block_engine(name: str, **overrides) -> BlockScaledEngine:
    """A block-scaled preset with fields replaced (``accelsim.arith.get_engine`` forwards here)."""
    base = BLOCK_PRESETS[name]
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown engine parameter(s) {', '.join(map(repr, unknown))}; valid: {', '.join(_FIELDS)}")
    return dataclasses.replace(base, **overrides)


def quantize_operands(a, b, engine: BlockScaledEngine, *, rounding: str = "rne",
                      rng: np.random.Generator | None = None) -> tuple[BlockQuantized, BlockQuantized]:
    """A (M, K) blocked along K per row; B (K, N) along K per column (or in 128 x 128 tiles)."""
    qa = block_quantize(a, engine.a_format, axis=-1, rounding=rounding, rng=rng)
    axis_b = -1 if get_block_format(engine.b_format).block[0] > 1 else 0
    qb = block_quantize(b, engine.b_format, axis=axis_b, rounding=rounding, rng=rng)
    return qa, qb


def block_scaled_matmul(a, b, engine: BlockScaledEngine, *, rounding: str = "rne",
                        rng: np.random.Generator | None = None) -> np.ndarray:
    """Quantize A and B to the engine's block formats and multiply as the engine does:
    (M, K) x (K, N) -> (M, N) float32."""
    qa, qb = quantize_operands(a, b, engine, rounding=rounding, rng=rng)
    return block_scaled_matmul_q(qa, qb, engine)


def _fp32_add(acc: np.ndarray, v: np.ndarray, mode: str) -> np.ndarray:
    """fp32(acc + v), one rounding of the exact sum (TwoSum + round-to-odd at 53 bits, then the
    fp32 rounding: innocuous, 53 >= 24 + 2)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(acc, v)
        return round_fast(round_to_odd(s, e), get_format("fp32"), mode)


def _block_dots_exact(ea: np.ndarray, eb: np.ndarray, fa, fb) -> bool:
    """True when every block's float64 dot product is exact: all products are multiples of the
    smallest nonzero product in the data and the block sums stay below 2^53 of them."""
    def span(x):
        nz = np.abs(x[(x != 0) & np.isfinite(x)])
        return (nz.min(), nz.max()) if nz.size else (1.0, 1.0)

    (amin, amax), (bmin, bmax) = span(ea), span(eb)
    qa, qb = amin / 2.0 ** fa.mbits, bmin / 2.0 ** fb.mbits  # a spacing that divides every value
    return amax * bmax * ea.shape[-1] / (qa * qb) < 2.0**53


def block_scaled_matmul_q(qa: BlockQuantized, qb: BlockQuantized, engine: BlockScaledEngine) -> np.ndarray:
    """The engine's GEMM of already block-quantized operands (``quantize_operands``)."""
    if not isinstance(engine, BlockScaledEngine):
        raise TypeError(f"engine must be a BlockScaledEngine, got {type(engine).__name__}")
    if (qa.format.name, qb.format.name) != (engine.a_format, engine.b_format):
        raise ValueError(f"operands are {qa.format.name} x {qb.format.name}; {engine.name} takes "
                         f"{engine.a_format} x {engine.b_format}")
    ea, eb = qa.elements, qb.elements
    if ea.ndim != 2 or eb.ndim != 2 or ea.shape[1] != eb.shape[0]:
        raise ValueError(f"shape mismatch: a is {ea.shape}, b is {eb.shape} (need (M, K) x (K, N))")
    M, K = ea.shape
    N = eb.shape[1]
    acc = np.zeros((M, N))
    if engine.kind is BlockScaledKind.BLACKWELL:
        B = qa.format.block[1]
        fa, fb = qa.format.element_format, qb.format.element_format
        exact = _block_dots_exact(ea, eb, fa, fb)
        for j, k0 in enumerate(range(0, K, B)):
            xa, xb = ea[:, k0:k0 + B], eb[k0:k0 + B]
            if exact:
                d = xa @ xb
            else:  # operand range too wide for one float64 sum: the exact engine (round-to-odd)
                from .exact import exact_sums

                d = exact_sums(xa, xb, get_engine("exact", a_format=fa.name, b_format=fb.name))
            with np.errstate(invalid="ignore"):
                v = d * (qa.scales[:, j][:, None] * qb.scales[j][None, :])  # exact: pow2 / 4 x 4 bits
            acc = _fp32_add(acc, v, engine.acc_rounding)
        if qa.tensor_scale != 1.0 or qb.tensor_scale != 1.0:
            with np.errstate(invalid="ignore", over="ignore"):
                acc = round_fast(acc / (qa.tensor_scale * qb.tensor_scale), get_format("fp32"), "rne")
    else:
        inner = get_engine("h100-fp8", fast_accum=True, out_format="fp32")
        # (K / 128, N): a weight tile's scale repeated over its 128 columns, or per column
        sbn = qb.scales if qb.format.block[0] == 1 else np.repeat(qb.scales, TILE, axis=1)[:, :N]
        fp32 = get_format("fp32")
        for k0 in range(0, K, engine.promote):
            t = k0 // TILE
            part = matmul(ea[:, k0:k0 + engine.promote], eb[k0:k0 + engine.promote], inner,
                          validate=False).astype(np.float64)
            with np.errstate(invalid="ignore"):
                s = round_fast(qa.scales[:, t][:, None] * sbn[t][None, :], fp32, "rne")
                acc = _fp32_add(acc, s * part, "rne")  # s * part exact: 24 x 14 bits
    out = round_fast(acc, get_format(engine.out_format), "rne") if engine.out_format != "fp32" else acc
    return out.astype(np.float32)
