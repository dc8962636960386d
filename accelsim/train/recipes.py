"""Training recipes as data: which format each GEMM operand takes, which arith engine sums it,
how weights are updated and how the loss is scaled. One frozen dataclass per concept, presets
below, each citing the paper section it follows.

A layer's three GEMMs take their operands from three tensor roles: ``act`` (activations: fwd A,
wgrad A), ``weight`` (fwd B, bwd-data B) and ``grad`` (activation gradients: bwd-data A, wgrad
B). The engine preset gives the accumulation (chunk, partial-sum format, output format,
rounding); its operand formats are replaced per GEMM by the roles' formats.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from accelsim.arith import PRESET_NAMES as _SCALAR_ENGINES
from accelsim.arith import get_engine
from accelsim.arith.blockscaled import BLOCK_PRESETS
from accelsim.errors import check_int
from accelsim.numerics import BLOCK_FORMAT_NAMES, FORMAT_NAMES, ROUNDING_MODES

ENGINE_NAMES = _SCALAR_ENGINES + tuple(BLOCK_PRESETS)

ROLES = ("act", "weight", "grad")
SCALINGS = ("none", "s2fp8", "pts", "delayed", "int4-fp4")
LOSS_SCALINGS = ("none", "static", "dynamic", "als")
OPTIMIZERS = ("sgd", "adamw")
UPDATE_RULES = ("master", "roundoff")
ALLREDUCES = ("fp32", "pre", "post", "auto")


def _check(key, value, choices):
    if value not in choices:
        raise ValueError(f"{key}={value!r} is not one of {', '.join(map(str, choices))}")


@dataclass(frozen=True)
class Precision:
    """Operand formats, roundings and engine of one class of layers' GEMMs."""

    act: str
    weight: str
    grad: str
    engine: str
    act_rounding: str = "rne"
    weight_rounding: str = "rne"
    grad_rounding: str = "rne"
    # activations and weights saturate at the format's max (HFP8 app. B: a 1-4-3 overflow
    # saturates), in whichever GEMM they enter;
    # gradients saturate only with saturate_backward, else an overflow is an INF event for the
    # loss scaler (HFP8's 1-5-2 rule)
    saturate_forward: bool = False
    saturate_backward: bool = False
    scaling: str = "none"  # per-tensor scaling of every GEMM operand (see SCALINGS)
    # engine fields replaced on top of the preset, e.g. (("chunk", None),) for an HFP8 datapath
    # without chunk accumulation
    engine_overrides: tuple[tuple[str, object], ...] = ()
    # Block-scaled precisions (every role a block format of accelsim.numerics.BLOCK_FORMAT_NAMES,
    # the engine a block-scaled one): each operand is block-quantized along the GEMM's K axis.
    # weight_tile: weights quantized in tile x tile 2-D blocks instead (NVFP4 recipe's 16x16);
    # hadamard: random Hadamard transform of this size applied along K to both operands of the
    # GEMM kinds in hadamard_kinds before quantization (random signs from the Datapath's rng).
    weight_tile: int | None = None
    hadamard: int | None = None
    hadamard_kinds: tuple[str, ...] = ()

    def __post_init__(self):
        block = [getattr(self, role) in BLOCK_FORMAT_NAMES for role in ROLES]
        for role in ROLES:
            _check(f"{role}", getattr(self, role), BLOCK_FORMAT_NAMES if any(block) else FORMAT_NAMES)
            _check(f"{role}_rounding", getattr(self, f"{role}_rounding"), ROUNDING_MODES)
        _check("engine", self.engine, tuple(BLOCK_PRESETS) if any(block) else _SCALAR_ENGINES)
        get_engine(self.engine, **dict(self.engine_overrides))  # unknown or bad fields fail here
        _check("scaling", self.scaling, ("none",) if any(block) else SCALINGS)
        if not any(block) and (self.weight_tile is not None or self.hadamard is not None):
            raise ValueError("weight_tile and hadamard apply to block-scaled precisions only")
        if self.weight_tile is not None:
            check_int("weight_tile", self.weight_tile, 1)
        if self.hadamard is not None:
            check_int("hadamard", self.hadamard, 2)
            if self.hadamard & (self.hadamard - 1):
                raise ValueError(f"hadamard={self.hadamard!r} must be a power of two (Sylvester construction)")
        for kind in self.hadamard_kinds:
            _check("hadamard_kinds", kind, ("fwd", "bwd", "wgrad"))
        if bool(self.hadamard_kinds) != (self.hadamard is not None):
            raise ValueError("hadamard and hadamard_kinds must be set together")

    @property
    def block_scaled(self) -> bool:
        """True when the operands are block-scaled formats (``accelsim.numerics.block_quantize``)."""
        return self.act in BLOCK_FORMAT_NAMES

    def format(self, role: str) -> str:
        _check("role", role, ROLES)
        return getattr(self, role)

    def rounding(self, role: str) -> str:
        _check("role", role, ROLES)
        return getattr(self, f"{role}_rounding")


@dataclass(frozen=True)
class UpdatePrecision:
    """Optimizer precisions. ``master``: weights kept in ``weight`` (fp32 master copy), the GEMMs
    see them quantized; ``roundoff`` (HFP8 sec. 4.3): the stored weight is in ``weight`` and the
    round-off residual in ``residual`` carries what the narrow weight cannot hold."""

    rule: str = "master"
    weight: str = "fp32"
    grad: str = "fp32"
    momentum: str = "fp32"  # SGD momentum / Adam first moment
    second_moment: str = "fp32"  # Adam second moment
    residual: str | None = None
    rounding: str = "rne"

    def __post_init__(self):
        _check("rule", self.rule, UPDATE_RULES)
        for key in ("weight", "grad", "momentum", "second_moment"):
            _check(key, getattr(self, key), FORMAT_NAMES)
        _check("rounding", self.rounding, ROUNDING_MODES)
        if (self.rule == "roundoff") != (self.residual is not None):
            raise ValueError(f"update rule {self.rule!r}: residual must be set exactly for "
                             f"'roundoff', got residual={self.residual!r}")
        if self.residual is not None:
            _check("residual", self.residual, FORMAT_NAMES)


@dataclass(frozen=True)
class Recipe:
    """A low-precision training recipe: GEMM precisions, update precisions, loss scaling."""

    name: str
    source: str
    body: Precision
    edge: Precision | None = None  # first/last layer and 1x1 shortcut convs; None: as body
    update: UpdatePrecision = UpdatePrecision()
    optimizer: str = "sgd"
    loss_scaling: str = "none"
    init_loss_scale: float = 1.0
    scale_window: int = 2000  # clean steps before a dynamic scale doubles
    workers: int = 1  # emulated data-parallel workers (the minibatch is split between them)
    allreduce: str = "fp32"  # gradient all-reduce: fp32, or FP8-LM's pre / post / auto scaling

    def __post_init__(self):
        _check("optimizer", self.optimizer, OPTIMIZERS)
        _check("loss_scaling", self.loss_scaling, LOSS_SCALINGS)
        if not self.init_loss_scale > 0:
            raise ValueError(f"recipe {self.name!r}: init_loss_scale must be > 0, got {self.init_loss_scale!r}")
        _check("allreduce", self.allreduce, ALLREDUCES)
        check_int(f"recipe {self.name!r}: workers", self.workers)
        check_int(f"recipe {self.name!r}: scale_window", self.scale_window)

    def precision(self, tag: str) -> Precision:
        """Precision of a layer tagged ``body``, ``first``, ``last`` or ``shortcut``."""
        _check("layer tag", tag, ("body", "first", "last", "shortcut"))
        if tag == "body" or self.edge is None:
            return self.body
        return self.edge


_FP32 = Precision("fp32", "fp32", "fp32", "fp32-fma")
# HFP8 edge layers: DLFloat16 operands on the DLFloat16 accumulation engine (app. A/B).
_DLF = Precision("dlfloat16", "dlfloat16", "dlfloat16", "hfp8")

# Peng et al., "FP8-LM: Training FP8 Large Language Models", arXiv:2310.18313 (sec. 2, app. A):
# E4M3 forward, E5M2 backward, delayed per-tensor scaling (amax history, MS-AMP ScalingMeta;
# casts saturate, as Transformer Engine's FP8 casts do) on
# Hopper FP8 tensor cores (h100-fp8, operand formats per GEMM); FP8 (E4M3, scaled) weight
# gradients all-reduced over data-parallel workers with auto-scaling mu; AdamW with precision
# decoupling: FP16 master weights with scaling, FP8 first moment, FP16 second moment
# (MS-AMP LBAdamW: master_weight_qtype kfloat16, wgrad_qtype kfloat8_e4m3).
_FP8LM = Recipe(
    name="fp8-lm", source="Peng et al., arXiv:2310.18313, sec. 2.1-2.3",
    body=Precision("e4m3fn", "e4m3fn", "e5m2", "h100-fp8", saturate_forward=True,
                   saturate_backward=True, scaling="delayed"),
    update=UpdatePrecision(weight="fp16", grad="e4m3fn", momentum="e4m3fn", second_moment="fp16"),
    optimizer="adamw", workers=4, allreduce="auto",
)

# Block-scaled recipes (issue 25). Every one keeps FP32 master weights and SGD/AdamW state as
# stated; the GEMM operands are block-quantized along K by accelsim.numerics.block_quantize
# (bit-exact to the OCP MX v1.0 / NVFP4 / DeepSeek-V3 definitions). At the engine level the
# block-scaled GEMM golden models of accelsim.arith.blockscaled sum them (Blackwell MMA: exact
# block dots, FP32 accumulation per block; Hopper FP8 with promotion every 128 products); at the
# blas level the dequantized operands are multiplied in float32 BLAS.
_BF16 = Precision("bf16", "bf16", "bf16", "h100-bf16")

# Rouhani et al., "Microscaling Data Formats for Deep Learning", arXiv:2310.10537 (MXFP8
# training) on the OCP Microscaling Formats (MX) v1.0 spec: MXFP8 E4M3 weights and
# activations, MXFP8 E5M2 activation gradients, 32-element blocks with E8M0 (floor) scales, FP32
# master weights; the first and last layers (the embedding-side input layer and the LM head /
# classifier) in BF16, as Transformer Engine keeps them outside FP8 (an assumption for MX: with
# them in MXFP8 the char-GPT ends at val loss 3.08 vs fp32's 2.41, with them in BF16 at 2.41;
# measured 2026-11-25, seed 0, 300 steps, --gemm blas). Engine: b200-mxfp8 (Blackwell MMA
# semantics; operand formats per GEMM: E5M2 x E4M3 in bwd, E4M3 x E5M2 in wgrad).
_MXFP8 = Precision("mxfp8-e4m3", "mxfp8-e4m3", "mxfp8-e5m2", "b200-mxfp8")

# Tseng, Yu, Park, "Training LLMs with MXFP4", arXiv:2502.20586: MXFP4 GEMMs in the
# backward pass with stochastic rounding of the gradients (unbiased estimates) and a random
# Hadamard transform along the reduction axis bounding SR's variance; first and last layers in
# BF16 as for mxfp8 (an assumption). Here (as issue 25 asks) the
# forward GEMMs are MXFP4 too (weights and activations RNE; the paper keeps its forward in BF16),
# gradients SR with the Datapath's Generator, RHT of size 32 (one MX block; an assumption) on the
# bwd and wgrad GEMMs. Not modelled: a pre-scaling that keeps SR from clipping at E2M1's max
# (with floor scales an SR'd element can saturate at 6).
_MXFP4 = Precision("mxfp4", "mxfp4", "mxfp4", "b200-mxfp4", grad_rounding="sr",
                   hadamard=32, hadamard_kinds=("bwd", "wgrad"))

# NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149: NVFP4 (16
# E2M1 elements, E4M3 block scale, FP32 tensor scale) for all GEMM operands; weights in 16x16 2-D
# blocks (one scale per tile, so fwd and bwd see the same quantized weight); 16x16 random
# Hadamard transforms on the weight-gradient GEMM's inputs (along K, random signs); stochastic
# rounding of the gradients; a few layers in BF16 (here the first and the last: the paper keeps
# a small share of its 12B model's linear layers, about 16 %, in BF16). FP32 master weights.
_NVFP4 = Precision("nvfp4", "nvfp4", "nvfp4", "b200-nvfp4", grad_rounding="sr", weight_tile=16,
                   hadamard=16, hadamard_kinds=("wgrad",))

# DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437 (sec. 3.3.1-3.3.3): E4M3 for
# every GEMM operand, activations (and activation gradients) scaled per 1x128 tile along K,
# weights per 128x128 block, FP32 scales; Hopper FP8 tensor cores with promotion to FP32 CUDA
# cores every 128 products (the dsv3-fp8 engine); the embedding and output head in BF16 (here
# the first and last layers); FP32 master weights and gradients, AdamW moments in BF16.
_DSV3 = Precision("dsv3-fp8-act", "dsv3-fp8-weight", "dsv3-fp8-act", "dsv3-fp8")

PRESETS: dict[str, Recipe] = {r.name: r for r in (
    Recipe(
        # Reference: every operand in IEEE binary32, sequential FP32 FMA accumulation (the
        # fp32-fma engine with fp32 operands), FP32 SGD.
        name="fp32", source="IEEE 754 binary32 reference", body=_FP32,
    ),
    Recipe(
        # The fair baseline of AdamW recipes (FP8-LM): the fp32 datapath with AdamW
        # (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019), every
        # optimizer tensor in FP32.
        name="fp32-adamw", source="IEEE 754 binary32 reference; AdamW (Loshchilov & Hutter, ICLR 2019)",
        body=_FP32, optimizer="adamw",
    ),
    Recipe(
        # Micikevicius et al., "Mixed Precision Training", ICLR 2018: FP16 operands, FP32
        # accumulation and master weights, dynamic loss scaling (NVIDIA APEX: initial 2^16,
        # doubled after 2000 clean steps, halved and the step skipped on INF/NaN).
        name="fp16-amp", source="Micikevicius et al., ICLR 2018; NVIDIA APEX dynamic loss scaler",
        body=Precision("fp16", "fp16", "fp16", "h100-fp16"),
        loss_scaling="dynamic", init_loss_scale=2.0**16, scale_window=2000,
    ),
    Recipe(
        # Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", arXiv:1905.12322:
        # BF16 operands, FP32 accumulation and master weights; the dynamic scaler is kept as in
        # torch.cuda.amp (it rarely fires with BF16's FP32-sized range).
        name="bf16-amp", source="Kalamkar et al., arXiv:1905.12322; torch.cuda.amp GradScaler",
        body=Precision("bf16", "bf16", "bf16", "h100-bf16"),
        loss_scaling="dynamic", init_loss_scale=2.0**16, scale_window=2000,
    ),
    Recipe(
        # Sun et al., "Hybrid 8-bit Floating Point (HFP8) Training and Inference", NeurIPS 2019,
        # app. A/B: 1-4-3 (bias 11) weights and activations (forward overflow saturates), 1-5-2
        # activation gradients (overflow = INF event), DLFloat16 accumulation in chunks of 64
        # with 1-6-9 outputs (the hfp8 engine); first and last layer in 1-6-9; FP8 round-off
        # update (sec. 4.3): 1-4-3 weights, 1-6-9 gradients, momentum and residual; loss scaling.
        name="hfp8", source="Sun et al., NeurIPS 2019, sec. 4 and app. A/B",
        body=Precision("hfp8-143", "hfp8-143", "hfp8-152", "hfp8", saturate_forward=True),
        edge=_DLF,
        update=UpdatePrecision(rule="roundoff", weight="hfp8-143", grad="dlfloat16",
                               momentum="dlfloat16", residual="dlfloat16", rounding="rne"),
        loss_scaling="dynamic", init_loss_scale=2.0**10, scale_window=500,
    ),
    Recipe(
        # Cambier et al., "Shifted and Squeezed 8-bit Floating Point Format for Low-Precision
        # Training of Deep Neural Networks", ICLR 2020, sec. 3-4: per-tensor statistics (shift
        # and squeeze) of weights, activations and gradients into FP8 E5M2, FP32 accumulation,
        # FP32 master weights, no loss scaling.
        name="s2fp8", source="Cambier et al., ICLR 2020, sec. 3-4",
        body=Precision("e5m2", "e5m2", "e5m2", "fp32-fma", scaling="s2fp8"),
        edge=_FP32,
    ),
    Recipe(
        # The plain-FP8 baseline of Cambier et al. (ICLR 2020, sec. 2 and 5): every GEMM
        # operand (weights, activations, gradients, first/last layers too) rounded to E5M2, FP32
        # accumulation and master weights, no loss scaling -- the configuration S2FP8's
        # shift-and-squeeze exists to fix (gradients below E5M2's range flush to zero).
        name="fp8-e5m2", source="Cambier et al., ICLR 2020, sec. 2 and 5 (FP8 baseline)",
        body=Precision("e5m2", "e5m2", "e5m2", "fp32-fma"),
    ),
    Recipe(
        # As fp8-e5m2 with a fixed loss scale, the remedy Cambier et al. compare against
        # (sec. 5, "FP8 with loss scaling"). The value is an assumption: 2^10, inside the
        # constant scales of 8 to 32,768 Micikevicius et al. (ICLR 2018, sec. 3.2) report.
        name="fp8-e5m2-ls", source="Cambier et al., ICLR 2020, sec. 5; scale 2^10 assumed",
        body=Precision("e5m2", "e5m2", "e5m2", "fp32-fma"),
        loss_scaling="static", init_loss_scale=2.0**10,
    ),
    Recipe(
        # Luo et al., "Ascend HiFloat8 Format for Deep Learning", arXiv:2409.16626, sec. 4-5:
        # HiF8 operands forward and backward, TA rounding (ties away = rna) in both directions,
        # FP32 accumulation on the Cube unit, FP32 master weights; backward global loss scaling
        # (BLS, = the FP16 dynamic loss scaler, scaling.hif8_bls).
        name="hif8", source="Luo et al., arXiv:2409.16626, sec. 4.1",
        body=Precision("hif8", "hif8", "hif8", "fp32-fma", act_rounding="rna",
                       weight_rounding="rna", grad_rounding="rna"),
        loss_scaling="dynamic", init_loss_scale=2.0**16, scale_window=2000,
    ),
    Recipe(
        # HiF8 sec. 5.1 large-model recipe: hybrid rounding backward (TA for |E| < 4, SR14
        # elsewhere), adaptive loss scaling (ALS: windows {1, ..., 1000}, initial 2^32 / 20).
        name="hif8-als", source="Luo et al., arXiv:2409.16626, sec. 3 and 5.1",
        body=Precision("hif8", "hif8", "hif8", "fp32-fma", act_rounding="rna",
                       weight_rounding="rna", grad_rounding="hybrid"),
        loss_scaling="als", init_loss_scale=2.0**32,
    ),
    Recipe(
        # HiF8 sec. 5.1 with per-tensor scaling (PTS): power-of-two scales from the amax every
        # 10 iterations, descaled in high precision; ALS and hybrid backward as hif8-als.
        name="hif8-pts", source="Luo et al., arXiv:2409.16626, sec. 5.1",
        body=Precision("hif8", "hif8", "hif8", "fp32-fma", act_rounding="rna",
                       weight_rounding="rna", grad_rounding="hybrid", scaling="pts"),
        loss_scaling="als", init_loss_scale=2.0**32,
    ),
    Recipe(
        # Sun et al., "Ultra-Low Precision 4-bit Training of Deep Neural Networks", NeurIPS
        # 2020 (sec. 3-4, appendix): INT4 activations (PACT) and weights (SAWB), radix-4 FP4
        # activation gradients with GradScale and two-phase rounding (accelsim.train.lowbit);
        # first and last layer and the 1x1 shortcut convolutions in 1-6-9. The formats below
        # are the engine operand formats that hold the INT4 codes / FP4 powers of two exactly;
        # accumulation on the DLFloat16 chunk-64 engine of HFP8 (an assumption: the appendix's
        # FMA precision is not pinned here). FP32 master weights, no loss scaling.
        name="int4-fp4", source="Sun et al., NeurIPS 2020, sec. 3-4 and appendix",
        body=Precision("e4m3fn", "e4m3fn", "e5m2", "hfp8", scaling="int4-fp4"),
        edge=_DLF,
    ),
    _FP8LM,
    dataclasses.replace(
        # FP8-LM's ablation (sec. 2.3, Fig. 6): the Adam second moment in FP8 too
        _FP8LM, name="fp8-lm-v8", source="Peng et al., arXiv:2310.18313, sec. 2.3 ablation",
        update=dataclasses.replace(_FP8LM.update, second_moment="e4m3fn")),
    dataclasses.replace(
        # FP8-LM's ablation (sec. 2.3): FP8 master weights
        _FP8LM, name="fp8-lm-w8", source="Peng et al., arXiv:2310.18313, sec. 2.3 ablation",
        update=dataclasses.replace(_FP8LM.update, weight="e4m3fn")),
    Recipe(name="mxfp8", source="Rouhani et al., arXiv:2310.10537; OCP MX v1.0", body=_MXFP8,
           edge=_BF16),
    Recipe(name="mxfp4", source="Tseng et al., arXiv:2502.20586", body=_MXFP4, edge=_BF16),
    Recipe(name="nvfp4", source="NVIDIA, arXiv:2509.25149", body=_NVFP4, edge=_BF16),
    Recipe(name="deepseek-fp8", source="DeepSeek-AI, arXiv:2412.19437, sec. 3.3", body=_DSV3, edge=_BF16,
           update=UpdatePrecision(momentum="bf16", second_moment="bf16"), optimizer="adamw"),
)}
PRESET_NAMES = tuple(PRESETS)


def get_recipe(name: str, **overrides) -> Recipe:
    """A preset by name, fields replaced (e.g. ``get_recipe("hfp8", edge=None)``)."""
    if name not in PRESETS:
        raise ValueError(f"unknown recipe {name!r}; choose from {', '.join(PRESET_NAMES)}")
    fields = {f.name for f in dataclasses.fields(Recipe)} - {"name"}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown recipe field(s) {', '.join(map(repr, unknown))}; valid: {', '.join(sorted(fields))}")
    return dataclasses.replace(PRESETS[name], **overrides)
