"""How a PyTorch run gets its 16-bit compute, decided once per plan: ``torch.autocast`` over
fp32 weights, or FSDP2's ``MixedPrecisionPolicy`` with no autocast (the one owner of that
choice; the kernel lists and the memory account take its answer as a typed argument).

* **Autocast** (``autocast=True``; the pytorch stacks on one GPU or DDP, and Composer's FSDP
  runs: ``precision: amp_bf16`` enters ``torch.autocast`` whatever FSDP's mixed precision):
  the fp32 weights are the compute copy; each forward casts every weight to 16 bits per op
  and keeps the copy for the backward pass, the residual stream and the norms stay fp32
  (:mod:`accelsim.engine.eager`).
* **FSDP's param dtype** (``autocast=False``, ``fsdp_param_dtype`` 16-bit): ``fully_shard(...,
  mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))``
  with no autocast, as torchtitan runs it (``maybe_enable_amp``: "FSDP handles mixed precision
  internally", a null context whenever FSDP is on; ``mixed_precision_param`` default
  ``bfloat16``, ``mixed_precision_reduce`` ``float32``: torchtitan ``config/job_config.py``).
  PyTorch's ``MixedPrecisionPolicy`` docstring: it "applies mixed precision at the module
  level, not op level, which means low-precision activations are saved for backward and
  high-to-low-precision casts are incurred only at module boundaries", and "FSDP does not
  require any extra memory to keep a high-precision copy of the parameters for the optimizer
  step" (``torch/distributed/fsdp/_fully_shard/_fsdp_api.py``). So: the sharded fp32
  parameters are the optimizer's, each unit's all-gather casts them to 16 bits, the whole
  forward and backward run in 16 bits (16-bit residual stream and saved activations, no
  per-op weight casts), the 16-bit gradients are reduce-scattered in ``reduce_dtype`` into the
  fp32 sharded gradients. The loss still runs over ``logits.float()`` (torchtitan's
  ``cross_entropy_loss`` and Hugging Face's models upcast the logits themselves).

Defaults (``Plan.autocast`` / ``Plan.fsdp_param_dtype`` None): FSDP gathers the run's compute
format (bf16 or fp16; 8-bit GEMMs: bf16, the weight each GEMM casts from; 32-bit runs: fp32)
and, on the pytorch stacks with a 16-bit parameter dtype, runs without autocast (torchtitan's
recipe); everything else runs as before (autocast on the pytorch stacks' 16-bit runs). The
torchao FP8 schemes keep autocast (their kernels are modelled over fp32 weights). The megatron
stack never runs ``torch.autocast`` (Megatron-LM keeps its own 16-bit working weights).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.arch.model import OPERAND_BYTES
from accelsim.arch.states import StateFormats
from accelsim.engine.plan import FSDP_PARAM_DTYPES, Plan
from accelsim.engine.stack import Stack
from accelsim.errors import InputError


@dataclass(frozen=True)
class MixedPrecision:
    """A run's resolved precision policy: ``autocast`` (whether ``torch.autocast`` wraps the
    forward pass) and ``fsdp_param_dtype`` (FSDP's gathered and compute parameter dtype; None
    without FSDP)."""

    autocast: bool
    fsdp_param_dtype: str | None = None

    @property
    def param_bytes(self) -> int:
        """Bytes of one gathered parameter (FSDP's ``param_dtype``; read under FSDP only)."""
        return FSDP_PARAM_DTYPES[self.fsdp_param_dtype or "fp32"]


def _compute_format(formats: StateFormats) -> str:
    """The dtype FSDP gathers by default: the GEMMs' 16-bit format, bf16 under 8-bit GEMMs
    (the weight each GEMM casts from), fp32 for a 32-bit run."""
    gp = formats.gemm_precision
    if OPERAND_BYTES[gp] >= 4:
        return "fp32"
    return gp if gp in FSDP_PARAM_DTYPES else "bf16"


def resolve(plan: Plan, formats: StateFormats, stack: Stack) -> MixedPrecision:
    """The plan's precision policy under ``formats`` (the scheme's, before the stack keeps
    them) on ``stack``; a combination PyTorch does not run, or that is not modelled, is an
    InputError naming the plan fields."""
    gp = formats.gemm_precision
    low = OPERAND_BYTES[gp] < 4  # GEMMs narrower than fp32: a mixed-precision run
    param = plan.fsdp_param_dtype
    if plan.fsdp:
        param = param or _compute_format(formats)
        if param != "fp32" and not low:
            raise InputError(f"plan fsdp_param_dtype {param}: FSDP's param dtype is the compute "
                             f"dtype, and scheme {formats.name} computes in "
                             f"{formats.gemm_precision} (use fsdp_param_dtype fp32)")
        if param != "fp32" and OPERAND_BYTES[formats.gemm_precision] == 2 \
                and param != formats.gemm_precision:
            raise InputError(f"plan fsdp_param_dtype {param}: scheme {formats.name} computes "
                             f"in {formats.gemm_precision}")
    if not stack.autocast:  # megatron: its own 16-bit working weights, no torch.autocast
        if plan.autocast:
            raise InputError(f"plan autocast on: autocast is the pytorch stacks' (stack "
                             f"{stack.name} keeps its own 16-bit weights)")
        return MixedPrecision(False, param)
    # torchao.float8: 8-bit GEMMs over fp32 weights, its kernels modelled under autocast
    torchao = OPERAND_BYTES[gp] < 2 and formats.weight_bytes >= 4
    default = low and (torchao or not plan.fsdp or param == "fp32")
    autocast = default if plan.autocast is None else plan.autocast
    _check(plan, formats, autocast, param, low, torchao)
    return MixedPrecision(autocast, param)


def _check(plan: Plan, formats: StateFormats, autocast: bool, param: str | None,
           low: bool, torchao: bool) -> None:
    """The explicit choices PyTorch does not run or that are not modelled."""
    name = formats.name
    if autocast and not low:
        raise InputError(f"plan autocast on: scheme {name} computes in "
                         f"{formats.gemm_precision} (autocast runs 16-bit GEMMs)")
    if autocast or not low:
        return
    if torchao:
        raise InputError(f"plan autocast off: scheme {name}'s torchao.float8 kernels are "
                         "modelled under autocast over fp32 weights (autocast on)")
    if not plan.fsdp:
        raise InputError(f"plan autocast off: scheme {name}'s 16-bit compute without autocast "
                         "is FSDP's param dtype (fsdp); one GPU or DDP runs autocast")
    if param == "fp32":
        raise InputError(f"plan autocast off with fsdp_param_dtype fp32 computes in fp32: "
                         f"scheme {name}'s {formats.gemm_precision} GEMMs need autocast or a "
                         "16-bit param dtype")
