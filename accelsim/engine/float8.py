"""FP8 training on the pytorch stacks as ``torchao.float8`` runs it: ``Float8Linear`` (dynamic
scaling) in place of every linear layer of the decoder, the LM head kept in bf16 (torchtitan's
float8 converter filters the ``output`` layer), with the kernels it adds around each GEMM.

Two recipes, each its own scheme (``accelsim/arch/schemes.py``): ``torchao-fp8-tensorwise``
(``Float8LinearRecipeName.TENSORWISE``, torchao's default: one scale per tensor, cuBLAS's
tensorwise FP8 GEMM) and ``torchao-fp8-rowwise`` (``ROWWISE``: one scale per row, CUTLASS's
rowwise kernel, scales rounded down to a power of two). Per linear layer of ``M`` tokens,
``K`` inputs and ``N`` outputs, torchao's ``matmul_with_hp_or_float8_args`` casts the input
(``M K``) and the weight (``K N``) forward and, backward, the output gradient twice (for the
input and the weight gradients), the weight and the input again; it saves the high-precision
input and weight, so the saved activations stay 16-bit. ``torch._scaled_mm`` takes its first
operand row-major and its second column-major: the backward's weight, output-gradient and
input FP8 copies are transposed (``addmm_float8_unwrapped``'s ``.t().contiguous()``, ``2 n``
bytes each). Under autocast ``Float8Linear`` casts the input to bf16 and reads the fp32 weight
itself: autocast's weight cast (:func:`accelsim.engine.eager.linear_kernels`) does not run; its
gradient's cast back to fp32 does.

Eager (``pytorch``), one cast of ``n`` elements of ``s`` bytes as ``torchao/float8/
float8_utils.py`` writes it: tensorwise ``torch.max(torch.abs(x))`` (abs: ``2 s n``; the
reduction: ``s n``), ``amax_to_scale``'s four scalar kernels (to fp64, clamp, divide, to fp32),
then ``x.to(float32)`` (``(s + 4) n``; none for fp32), ``* scale`` (``8 n``, and 4 bytes per
scale), ``clamp`` (``8 n``), ``.to(float8)`` (``5 n``); rowwise on a 16-bit tensor first ``abs(x).to(float32)``
(``2 s n``, ``(s + 4) n``), then ``amax(abs(x), dim)`` (``8 n``; ``4 n``) and seven kernels on the
``rows`` scales (the four above and the power-of-two rounding's log2, floor, exp2), then the
same four casting kernels. A scale kernel moves ``16`` bytes per scale (an assumption: they are
floor-bound).

Compiled (``pytorch-compile``; torchtitan: "``--compile.enable`` required: fuses float8
scaling/casting kernels"): torchao's own roofline of the casts under ``torch.compile``
(``torchao/float8/roofline_utils.py``, ``get_tensor_memory_traffic_ovhd_s`` with fusion
modelling: the activation's and the output gradient's first read fused into the kernel before
them). Tensorwise: the input one kernel (read ``s``, write FP8 row- and column-major: ``(s + 2)
n``) after the amax's second stage (a scalar kernel); the weight an amax pass (``s n``), the
second stage, a cast forward and one backward (``(s + 1) n`` each); the output gradient as the
input. Rowwise: the input ``(1 + 2) n`` (FP8 row-major and a 16-bit transposed copy) and
``(2 + 1) n`` (its column-major cast, backward); the weight ``(s + 1) n`` forward, a transpose
(``2 s n``) and a cast (``(s + 1) n``) backward; the output gradient as the input. Bandwidths:
a cast at a plain copy's, a transpose at the strided copy's, an amax at a reduction's
(assumptions, as :mod:`accelsim.engine.compiled`'s).
"""

from __future__ import annotations

from accelsim.arch.states import StateFormats
from accelsim.engine.eager import F32, Kernels
from accelsim.engine.graph import ElementwiseOp
from accelsim.engine.stack import EagerKernel as K

Op = ElementwiseOp

#: the schemes that run torchao.float8 and their scaling recipe
RECIPES = {"torchao-fp8-tensorwise": "tensorwise", "torchao-fp8-rowwise": "rowwise"}
#: bytes a scalar (scale) kernel moves per scale: an assumption (floor-bound)
SCALE_BYTES = 16
#: scalar kernels per cast in eager: amax_to_scale's four; rowwise adds the power-of-two
#: rounding's three
SCALE_KERNELS = {"tensorwise": 4, "rowwise": 7}


def recipe_of(formats: StateFormats) -> str | None:
    """The torchao.float8 recipe ``formats`` run (None: not a torchao scheme)."""
    return RECIPES.get(formats.name)


def eager_cast(name: str, n: int, rows: int, s: int, recipe: str) -> list[Op]:
    """One ``hp_tensor_to_float8_dynamic`` of ``n`` elements of ``s`` bytes in ``rows`` rows,
    eager (module docstring)."""
    if recipe == "tensorwise":
        amax = [Op(f"{name}_abs", n * 2 * s, kind=K.ADD), Op(f"{name}_amax", n * s, kind=K.REDUCE)]
        scales = 1
    else:
        amax = [Op(f"{name}_abs", n * 2 * s, kind=K.ADD)]
        if s < F32:
            amax.append(Op(f"{name}_abs_float", n * (s + F32), kind=K.CAST_UP))
        amax += [Op(f"{name}_abs2", n * 2 * F32, kind=K.ADD),
                 Op(f"{name}_amax", n * F32 + rows * F32, kind=K.REDUCE)]
        scales = rows
    scale = [Op(f"{name}_scale{i}", scales * SCALE_BYTES) for i in range(SCALE_KERNELS[recipe])]
    cast = [Op(f"{name}_float", n * (s + F32), kind=K.CAST_UP)] if s < F32 else []
    cast += [Op(f"{name}_mul", n * 2 * F32 + scales * F32, kind=K.ADD),
             Op(f"{name}_clamp", n * 2 * F32, kind=K.ADD),
             Op(f"{name}_to_fp8", n * (F32 + 1), kind=K.CAST_DOWN)]
    return amax + scale + cast


def eager_linear(name: str, M: int, Kin: int, N: int, e: int, w: int, recipe: str) -> Kernels:
    """What torchao.float8 adds around one linear layer's GEMMs in eager mode: its casts
    (``e``-byte activations and gradients, ``w``-byte weights) and the backward's transposed
    FP8 copies (module docstring)."""
    fwd = eager_cast(f"{name}_fp8_input", M * Kin, M, e, recipe) \
        + eager_cast(f"{name}_fp8_weight", Kin * N, N, w, recipe)
    bwd = eager_cast(f"{name}_fp8_grad_out", M * N, M, e, recipe) \
        + eager_cast(f"{name}_fp8_weight_bwd", Kin * N, Kin, w, recipe) \
        + eager_cast(f"{name}_fp8_grad_out_t", M * N, N, e, recipe) \
        + eager_cast(f"{name}_fp8_input_t", M * Kin, Kin, e, recipe) \
        + [Op(f"{name}_fp8_{x}_transpose", n * 2, kind=K.PERMUTE)
           for x, n in (("weight", Kin * N), ("grad_out", M * N), ("input", M * Kin))]
    return fwd, bwd


def compiled_linear(name: str, M: int, Kin: int, N: int, e: int, w: int, recipe: str
                    ) -> Kernels:
    """What torchao.float8 adds around one linear layer's GEMMs under torch.compile
    (torchao's roofline, module docstring)."""
    a, g, wt = M * Kin, M * N, Kin * N
    if recipe == "tensorwise":
        fwd = [Op(f"{name}_fp8_input_amax2", SCALE_BYTES),
               Op(f"{name}_fp8_input", a * (e + 2)),
               Op(f"{name}_fp8_weight_amax", wt * w, kind=K.REDUCE),
               Op(f"{name}_fp8_weight_amax2", SCALE_BYTES),
               Op(f"{name}_fp8_weight", wt * (w + 1))]
        bwd = [Op(f"{name}_fp8_weight_bwd", wt * (w + 1)),
               Op(f"{name}_fp8_grad_out_amax2", SCALE_BYTES),
               Op(f"{name}_fp8_grad_out", g * (e + 2))]
        return fwd, bwd
    fwd = [Op(f"{name}_fp8_input", a * (1 + e)), Op(f"{name}_fp8_weight", wt * (w + 1))]
    bwd = [Op(f"{name}_fp8_input_t", a * (e + 1), kind=K.PERMUTE),
           Op(f"{name}_fp8_weight_transpose", wt * 2 * w, kind=K.PERMUTE),
           Op(f"{name}_fp8_weight_t", wt * (w + 1)),
           Op(f"{name}_fp8_grad_out", g * (1 + e)),
           Op(f"{name}_fp8_grad_out_t", g * (e + 1), kind=K.PERMUTE)]
    return fwd, bwd


def linear_kernels(linears: list[tuple[str, int, int]], M: int, e: int, w: int, recipe: str,
                   compiled: bool) -> list[Kernels]:
    """The float8 kernels of each ``(name, K, N)`` linear layer on ``M`` tokens."""
    one = compiled_linear if compiled else eager_linear
    return [one(name, M, k, n, e, w, recipe) for name, k, n in linears]


def without_weight_casts(kernels: Kernels) -> Kernels:
    """``kernels`` less autocast's forward weight casts (``*_weight_cast``), which a
    ``Float8Linear`` does not run (it casts the fp32 weight to FP8 itself)."""
    fwd, bwd = kernels
    return [k for k in fwd if not k.name.endswith("_weight_cast")], bwd
