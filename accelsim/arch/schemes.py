"""Training precision schemes as data: what each gradient-reduction phase sends and updates.

Models the three schemes compared in the HFP8 paper (Sun et al., NeurIPS 2019, Sec. 5 and
appendix D):

* ``fp16`` -- FP16 compute; gradients reduce-scattered and all-gathered in 16 bits; every chip
  then updates the whole (replicated) model with FP16 master weights.
* ``fp8``  -- FP8 compute (first and last layer kept in FP16); communication as ``fp16``; every
  chip updates the whole model in FP16 and writes an 8-bit copy of the weights for compute
  (Wang et al., NeurIPS 2018: FP16 master weights and updates).
* ``hfp8`` -- hybrid FP8 compute (1-4-3 forward, 1-5-2 backward: the chip's ``hfp8`` datapath);
  gradients reduce-scattered in 16 bits; each chip updates only the 1/N shard it owns, keeping
  8-bit weights plus an FP16 round-off residual for that shard, then all-gathers the *updated
  8-bit weights*.

Beside them, ``bf16``, ``tf32`` and ``fp32`` (what GPUs train in: BF16 mixed precision, TF32
tensor cores with FP32 storage, plain FP32) reduce gradients exactly as ``fp16`` does, at their
byte widths (2, 4, 4). A scheme also carries a precision policy: whether the first and last GEMM
layers run in ``high_precision`` (the FP8 practice; switchable) and per-layer overrides, applied
by :func:`accelsim.perf.layer_precisions`; :func:`with_policy` derives a scheme with another one.

Per-element byte counts are the schemes' storage precisions; the weight-update cost model that
uses them lives in :mod:`accelsim.netsim.update`.

**The optimizer is part of the plan, not of the scheme name.** The fields above are the recipe
under SGD (with momentum: one state tensor at ``optimizer_state_bytes``), as the HFP8 paper
trains. Under AdamW a scheme keeps its mixed-precision AdamW formats (``adamw``, a
:class:`accelsim.arch.states.StateFormats`: Megatron-LM / Transformer Engine / FP8-LM bytes per
state and per communicated tensor); :meth:`Scheme.for_optimizer` gives the recipe a plan runs.
Schemes that LLM training papers define (``te-fp8``, ``fp8-lm``, ``hif8``, ``hfp8-gemm``) live in
the same registry; a scheme without formats for an optimizer refuses it by name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from enum import StrEnum

from accelsim.arch.model import OPERAND_BYTES, PRECISIONS
from accelsim.arch.states import BF16, FP8_LM, FP32, HFP8_GEMM, HIF8, TE_FP8, StateFormats
from accelsim.errors import InputError, choose


# Closed vocabularies of a scheme, resolved once when a Scheme is built (str-valued: a member
# prints and compares as its string, so tables and the "->"-joined phase order are unchanged).
class CommPhase(StrEnum):
    """A phase of the gradient reduction and weight update around a training step."""

    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    WEIGHT_UPDATE = "weight_update"


class Placement(StrEnum):
    """Where the optimizer step runs: every chip on the whole model after the all-gather, or
    each chip on its 1/N shard between reduce-scatter and all-gather."""

    REPLICATED = "replicated"
    SHARDED = "sharded"


class AllGatherPayload(StrEnum):
    """What the all-gather carries: reduced gradients or updated weights."""

    GRADIENTS = "gradients"
    WEIGHTS = "weights"


PHASES: tuple[CommPhase, ...] = tuple(CommPhase)
#: optimizers a plan can name: (state tensors, vector ops per updated element); the update cost
#: model (:mod:`accelsim.netsim.update`) reads them from here
OPTIMIZERS = {
    "sgd": (0, 2.0),
    "sgd-momentum": (1, 4.0),
    "adamw": (2, 12.0),
}


@dataclass(frozen=True)
class Scheme:
    """One training-precision scheme.

    Byte counts are per model parameter (element).  ``update_placement`` says where the optimizer
    step runs: ``"replicated"`` (every chip updates the whole model after the gradient all-gather)
    or ``"sharded"`` (each of the N chips updates its 1/N shard between reduce-scatter and
    all-gather).
    """

    name: str
    description: str
    compute_precision: str  # precision of the GEMMs (one of PRECISIONS; used by accelsim.perf)
    first_last_fp16: bool  # first and last GEMM layers in high_precision (FP8/HFP8 practice)
    phase_order: tuple[CommPhase, ...]
    reduce_scatter_bytes_per_elem: float  # gradient payload of the reduce-scatter
    all_gather_bytes_per_elem: float  # payload of the all-gather
    all_gather_payload: AllGatherPayload
    update_placement: Placement
    gradient_bytes: float  # reduced gradient as stored for the update
    master_weight_bytes: float  # the weight copy the optimizer reads and writes
    residual_bytes: float  # round-off residual read and written per updated element (0 = none)
    optimizer_state_bytes: float  # bytes of ONE optimizer state tensor (momentum; Adam has two)
    compute_copy_bytes: float  # extra low-precision weight copy written for compute (0 = none)
    residual_ops_per_elem: float  # extra vector ops per updated element for the residual split
    compressible_phases: tuple[CommPhase, ...] = (CommPhase.REDUCE_SCATTER,)  # compression applies
    high_precision: str = "fp16"  # precision of the first/last layers when first_last_fp16
    layer_overrides: tuple[tuple[str, str], ...] = ()  # (layer name, precision) pairs
    policy_source: str = ""  # where the overrides came from (file or flag), for error messages
    adamw: StateFormats | None = None  # mixed-precision AdamW formats (None: AdamW undefined)
    sgd: bool = True  # the fields above define the SGD recipes (False: AdamW only)

    def __post_init__(self) -> None:
        where = f"scheme {self.name!r}: "
        resolved = {
            "phase_order": tuple(choose(CommPhase, p, where + "phase") for p in self.phase_order),
            "compressible_phases": tuple(choose(CommPhase, p, where + "compressible phase")
                                         for p in self.compressible_phases),
            "all_gather_payload": choose(AllGatherPayload, self.all_gather_payload,
                                         where + "all_gather_payload"),
            "update_placement": choose(Placement, self.update_placement,
                                       where + "update_placement")}
        for f, v in resolved.items():
            object.__setattr__(self, f, v)
        if sorted(self.phase_order) != sorted(PHASES):
            raise InputError(f"scheme {self.name!r}: phase_order {self.phase_order} must be a "
                             f"permutation of {PHASES}")
        for what, prec in (("compute_precision", self.compute_precision),
                           ("high_precision", self.high_precision),
                           *((f"layer override {n!r}", p) for n, p in self.layer_overrides)):
            if prec not in PRECISIONS:
                where = f"{self.policy_source}: " if self.policy_source else ""
                raise InputError(f"{where}scheme {self.name!r}: {what} {prec!r} not in "
                                 f"{PRECISIONS}")
        # Sharded update must sit between the two collectives, replicated after both.
        wu = self.phase_order.index(CommPhase.WEIGHT_UPDATE)
        ag = self.phase_order.index(CommPhase.ALL_GATHER)
        if self.update_placement is Placement.SHARDED and not wu < ag:
            raise InputError(f"scheme {self.name!r}: a sharded update must precede the all-gather")
        if self.update_placement is Placement.REPLICATED and not wu > ag:
            raise InputError(f"scheme {self.name!r}: a replicated update must follow the "
                             "all-gather")
        if (self.all_gather_payload is AllGatherPayload.WEIGHTS) \
                != (self.update_placement is Placement.SHARDED):
            raise InputError(f"scheme {self.name!r}: all-gathering weights requires a sharded "
                             "update (and gradients a replicated one)")
        for f in ("reduce_scatter_bytes_per_elem", "all_gather_bytes_per_elem", "gradient_bytes",
                  "master_weight_bytes"):
            if not getattr(self, f) > 0:
                raise InputError(f"scheme {self.name!r}: {f} must be > 0, got {getattr(self, f)}")
        for f in ("residual_bytes", "optimizer_state_bytes", "compute_copy_bytes",
                  "residual_ops_per_elem"):
            if getattr(self, f) < 0:
                raise InputError(f"scheme {self.name!r}: {f} must be >= 0, got {getattr(self, f)}")
        for ph in self.compressible_phases:
            if ph is CommPhase.WEIGHT_UPDATE:
                raise InputError(f"scheme {self.name!r}: compressible phase {ph!r} is not a "
                                 "collective")

    @property
    def sharded_update(self) -> bool:
        return self.update_placement is Placement.SHARDED

    @property
    def optimizers(self) -> tuple[str, ...]:
        """The optimizers this scheme defines state formats for."""
        return (("sgd", "sgd-momentum") if self.sgd else ()) + (("adamw",) if self.adamw else ())

    def formats(self, optimizer: str) -> StateFormats:
        """The per-parameter state and communication formats under ``optimizer``: the AdamW
        formats, or the SGD recipe's for SGD, per parameter as
        :func:`accelsim.engine.memory.layer_memory_bytes` counts a GEMM layer's: the weight at
        the compute precision's storage bytes beside the master weight (plus residual), the
        gradient, one state per momentum, the compute copy as a cached copy (the same tensor may
        be counted twice where the weight is its own master: a conservative account, kept
        identical on both paths)."""
        check_optimizer(self, optimizer)
        if optimizer == "adamw":
            return self.adamw
        n_state = OPTIMIZERS[optimizer][0]
        return StateFormats(
            self.name, self.compute_precision, OPERAND_BYTES[self.compute_precision],
            self.gradient_bytes,
            self.master_weight_bytes + self.residual_bytes,
            n_state * self.optimizer_state_bytes, self.reduce_scatter_bytes_per_elem,
            self.all_gather_bytes_per_elem if self.all_gather_payload == "weights"
            else self.master_weight_bytes,
            2, 2, 2, self.description, fp8_weight_cache_bytes=self.compute_copy_bytes)

    def for_optimizer(self, optimizer: str) -> Scheme:
        """The data-parallel recipe under ``optimizer``: this scheme for SGD; for AdamW the
        gradient reduction, update and states at the AdamW formats (gradients all-reduced at
        ``grad_comm_bytes``, a replicated update of the master weight and both moments, the
        working weight written back at ``weight_bytes`` plus any cached low-precision copy)."""
        return _for_optimizer(self, optimizer)  # cached: plan searches ask it per plan

    def _derive_for_optimizer(self, optimizer: str) -> Scheme:
        check_optimizer(self, optimizer)
        if optimizer != "adamw":
            return self
        f = self.adamw
        master = f.master_bytes or f.weight_bytes  # no separate master: the weight is updated
        copy = (f.weight_bytes if f.master_bytes else 0.0) + f.fp8_weight_cache_bytes
        return replace(self, phase_order=("reduce_scatter", "all_gather", "weight_update"),
                       reduce_scatter_bytes_per_elem=f.grad_comm_bytes,
                       all_gather_bytes_per_elem=f.grad_comm_bytes,
                       all_gather_payload="gradients", update_placement="replicated",
                       gradient_bytes=f.grad_bytes, master_weight_bytes=master,
                       residual_bytes=0.0, optimizer_state_bytes=f.moment_bytes / 2,
                       compute_copy_bytes=copy, residual_ops_per_elem=0.0)


@functools.lru_cache(maxsize=1024)
def _for_optimizer(scheme: Scheme, optimizer: str) -> Scheme:
    return scheme._derive_for_optimizer(optimizer)


def check_optimizer(scheme: Scheme, optimizer: str) -> None:
    """Raise ValueError unless ``scheme`` defines formats for ``optimizer``."""
    if optimizer not in OPTIMIZERS:
        raise InputError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPTIMIZERS)}")
    if optimizer not in scheme.optimizers:
        others = [n for n, sc in _SCHEMES.items() if optimizer in sc.optimizers
                  and (n.startswith(f"{scheme.name}-")
                       or sc.compute_precision == scheme.compute_precision)]
        hint = f" (schemes that do, at its precision: {', '.join(others)})" if others else ""
        raise InputError(f"scheme {scheme.name!r} defines no {optimizer} recipe; it defines "
                         f"{', '.join(scheme.optimizers)}{hint}")


_SCHEMES: dict[str, Scheme] = {
    "fp16": Scheme(
        name="fp16",
        description="FP16 compute; 16-bit gradient reduce-scatter and all-gather; "
        "replicated full-model update with FP16 master weights",
        compute_precision="fp16",
        first_last_fp16=False,  # everything is FP16 already
        phase_order=("reduce_scatter", "all_gather", "weight_update"),
        reduce_scatter_bytes_per_elem=2.0,
        all_gather_bytes_per_elem=2.0,
        all_gather_payload="gradients",
        update_placement="replicated",
        gradient_bytes=2.0,
        master_weight_bytes=2.0,
        residual_bytes=0.0,
        optimizer_state_bytes=2.0,
        compute_copy_bytes=0.0,
        residual_ops_per_elem=0.0,
    ),
    "fp8": Scheme(
        name="fp8",
        description="FP8 compute (first/last layer FP16); 16-bit gradient reduce-scatter and "
        "all-gather; replicated full-model FP16 update plus an 8-bit weight copy for compute",
        compute_precision="fp8",
        first_last_fp16=True,
        phase_order=("reduce_scatter", "all_gather", "weight_update"),
        reduce_scatter_bytes_per_elem=2.0,
        all_gather_bytes_per_elem=2.0,
        all_gather_payload="gradients",
        update_placement="replicated",
        gradient_bytes=2.0,
        master_weight_bytes=2.0,
        residual_bytes=0.0,
        optimizer_state_bytes=2.0,
        compute_copy_bytes=1.0,
        residual_ops_per_elem=0.0,
    ),
    "hfp8": Scheme(
        name="hfp8",
        description="hybrid FP8 compute (first/last layer FP16); 16-bit gradient reduce-scatter; "
        "1/N sharded update of 8-bit weights with an FP16 round-off residual; 8-bit weight "
        "all-gather",
        compute_precision="hfp8",  # the HFP8 unit (1-4-3 forward, 1-5-2 backward)
        first_last_fp16=True,
        phase_order=("reduce_scatter", "weight_update", "all_gather"),
        reduce_scatter_bytes_per_elem=2.0,
        all_gather_bytes_per_elem=1.0,
        all_gather_payload="weights",
        update_placement="sharded",
        gradient_bytes=2.0,
        master_weight_bytes=1.0,
        residual_bytes=2.0,
        optimizer_state_bytes=2.0,
        compute_copy_bytes=0.0,
        # w = w8 + r ; update ; w8' = q(w) ; r' = w - w8'  -> add, quantize, subtract
        residual_ops_per_elem=3.0,
    ),
}


def _like_fp16(name: str, precision: str, nbytes: float, what: str) -> Scheme:
    """A scheme with fp16's gradient reduction and replicated update at ``nbytes`` per element."""
    return Scheme(
        name=name,
        description=f"{what}; {8 * int(nbytes)}-bit gradient reduce-scatter and all-gather; "
        f"replicated full-model update with {8 * int(nbytes)}-bit master weights",
        compute_precision=precision,
        first_last_fp16=False,
        phase_order=("reduce_scatter", "all_gather", "weight_update"),
        reduce_scatter_bytes_per_elem=nbytes,
        all_gather_bytes_per_elem=nbytes,
        all_gather_payload="gradients",
        update_placement="replicated",
        gradient_bytes=nbytes,
        master_weight_bytes=nbytes,
        residual_bytes=0.0,
        optimizer_state_bytes=nbytes,
        compute_copy_bytes=0.0,
        residual_ops_per_elem=0.0,
    )


_SCHEMES["bf16"] = replace(_like_fp16("bf16", "bf16", 2.0, "BF16 compute"), adamw=BF16)
_SCHEMES["tf32"] = replace(_like_fp16("tf32", "tf32", 4.0, "TF32 tensor-core compute, FP32 storage"),
                           adamw=replace(FP32, name="tf32", gemm_precision="tf32"))
_SCHEMES["fp32"] = replace(_like_fp16("fp32", "fp32", 4.0, "FP32 compute"), adamw=FP32)
# AdamW under the paper's fp16 / fp8 compute: the bf16 formats at 16-bit fp16 (FP16 AMP), plus
# the 8-bit compute copy for fp8. hfp8 (8-bit weights, sharded update) has no AdamW recipe: the
# LLM papers' HFP8 GEMMs with 16-bit states are ``hfp8-gemm``.
_SCHEMES["fp16"] = replace(_SCHEMES["fp16"], adamw=replace(BF16, name="fp16",
                                                            gemm_precision="fp16"))
_SCHEMES["fp8"] = replace(_SCHEMES["fp8"], adamw=replace(BF16, name="fp8", gemm_precision="fp8",
                                                          fp8_weight_cache_bytes=1))
# The two OCP FP8 formats alone (e.g. FP8 with E5M2 everywhere, the HFP8 paper's baseline):
# fp8's recipe on the e4m3 / e5m2 datapath where a chip rates it apart (its fp8 one otherwise)
for _name in ("e4m3", "e5m2"):
    _SCHEMES[_name] = replace(
        _SCHEMES["fp8"], name=_name, compute_precision=_name,
        adamw=replace(_SCHEMES["fp8"].adamw, name=_name, gemm_precision=_name),
        description=f"FP8 {_name.upper()} compute (first/last layer FP16); otherwise as fp8")
# The LLM papers' schemes (states and communication as bf16 under SGD, for te-fp8 and hif8)
for _f in (TE_FP8, HIF8, HFP8_GEMM):
    _SCHEMES[_f.name] = replace(_like_fp16(_f.name, _f.gemm_precision, 2.0, _f.description),
                                adamw=_f)
_SCHEMES["fp8-lm"] = replace(_like_fp16("fp8-lm", "fp8", 2.0, FP8_LM.description), adamw=FP8_LM,
                             sgd=False)  # FP8-LM defines its formats for AdamW only
# torchao.float8 on the pytorch stacks (accelsim/engine/float8.py: its cast kernels per recipe):
# FP8 GEMMs inside each Float8Linear, everything else as autocast keeps it -- fp32 weights that
# are the master copy, fp32 gradients, moments and reduction, 16-bit activations and saved linear
# inputs (torchao saves the high-precision input), no cached FP8 weight; one scheme per scaling
# recipe (torchao's Float8LinearRecipeName TENSORWISE, ROWWISE), AdamW only
for _recipe in ("tensorwise", "rowwise"):
    _name = f"torchao-fp8-{_recipe}"
    _what = (f"torchao.float8 {_recipe}-scaled FP8 GEMMs (dynamic scaling; LM head bf16) over "
             "fp32 master weights, bf16 activations (the pytorch stacks)")
    _SCHEMES[_name] = replace(
        _like_fp16(_name, "fp8", 4.0, _what), sgd=False,
        adamw=replace(FP32, name=_name, gemm_precision="fp8", act_gather_bytes=2,
                      act_reduce_bytes=2, saved_linear_input_bytes=2, description=_what))

# ---- block-scaled schemes (issue 25): FP8's gradient reduction and replicated FP16 update, block-
# scaled GEMMs (first/last layers in bf16), the compute copy of the weights in the block format
# (elements plus scales, accelsim.arch.model.OPERAND_BYTES). Sources: OCP MX v1.0 (MXFP8, MXFP6,
# MXFP4); NVIDIA, "Pretraining LLMs with NVFP4", arXiv 2509.25149 (NVFP4, a few layers kept in
# BF16).
for _name, _what in (("mxfp8", "OCP MXFP8 (E4M3 x 32-element E8M0 blocks)"),
                     ("mxfp6", "OCP MXFP6 (E3M2 or E2M3 x 32-element E8M0 blocks)"),
                     ("mxfp4", "OCP MXFP4 (E2M1 x 32-element E8M0 blocks)"),
                     ("nvfp4", "NVIDIA NVFP4 (E2M1 x 16-element E4M3 blocks, FP32 tensor scale)")):
    _SCHEMES[_name] = replace(
        _SCHEMES["fp8"], name=_name, compute_precision=_name, high_precision="bf16",
        compute_copy_bytes=OPERAND_BYTES[_name],
        adamw=replace(BF16, name=_name, gemm_precision=_name,
                      fp8_weight_cache_bytes=OPERAND_BYTES[_name]),
        description=f"{_what} GEMMs (first/last layer BF16); 16-bit gradient reduce-scatter and "
        "all-gather; replicated full-model FP16 update plus a block-format weight copy for compute")

SCHEME_NAMES: tuple[str, ...] = tuple(_SCHEMES)


def with_policy(scheme: str | Scheme, *, first_last_high: bool | None = None,
                high_precision: str | None = None,
                overrides: dict[str, str] | None = None, source: str = "") -> Scheme:
    """``scheme`` with another precision policy: first/last GEMM layers in ``high_precision``
    on or off (None: keep), per-layer precision ``overrides`` (layer name -> precision; the
    names are checked against a workload by :func:`accelsim.perf.layer_precisions`)."""
    sc = get_scheme(scheme)
    kw: dict = {}
    if first_last_high is not None:
        kw["first_last_fp16"] = bool(first_last_high)
    if high_precision is not None:
        kw["high_precision"] = high_precision
    if overrides:
        kw["layer_overrides"] = tuple(sorted(overrides.items()))
        kw["policy_source"] = source
    return replace(sc, **kw) if kw else sc


def get_scheme(name: str | Scheme) -> Scheme:
    """The preset scheme called ``name`` (a :class:`Scheme` is returned unchanged)."""
    if isinstance(name, Scheme):
        return name
    try:
        return _SCHEMES[str(name).lower()]
    except KeyError:
        raise InputError(f"unknown scheme {name!r}; known schemes: {', '.join(SCHEME_NAMES)}") \
            from None
