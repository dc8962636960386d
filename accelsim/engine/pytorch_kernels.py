"""The pytorch stacks' element-wise kernels for any dense decoder, one door: the GPT block's
(:mod:`accelsim.engine.eager`, measured kernel by kernel), every other dense decoder's
(:mod:`accelsim.engine.eager_llama`: RMSNorm, gated MLPs, rotary, grouped-query attention; MoE
layers' feed-forward blocks: :mod:`accelsim.engine.eager_moe`), under ``torch.compile`` the
fused groups (:mod:`accelsim.engine.compiled`) and torchao's FP8 casts
(:mod:`accelsim.engine.float8`) -- with what autograd keeps and what the stacks refuse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.arch.states import StateFormats
from accelsim.engine import compiled, eager, eager_llama, eager_moe, float8
from accelsim.engine.graph import ElementwiseOp
from accelsim.engine.plan import Plan
from accelsim.engine.eager import F32
from accelsim.engine.stack import Stack
from accelsim.errors import InputError
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder

KernelLists = tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]


def is_gpt_block(model: GptConfig | Decoder) -> bool:
    """Whether ``model`` is the GPT block whose eager kernels were measured
    (:func:`accelsim.engine.eager.gpt_block_differences`)."""
    return not eager.gpt_block_differences(model)


def check_model(model: GptConfig | Decoder) -> None:
    """InputError naming what neither kernel list expresses (MoE, MLA, a parallel residual,
    partial rotary: :func:`accelsim.engine.eager_llama.check_block`)."""
    if not is_gpt_block(model):
        eager_llama.check_block(model)


def check_plan(model: GptConfig | Decoder, plan: Plan, formats: StateFormats, stack: Stack
               ) -> None:
    """The model's check (:func:`check_model`), the plan's
    (:func:`accelsim.engine.eager.check_plan`), and an MoE model only eager, in 16 bits and
    without expert parallelism (the fused groups and torchao's grouped-GEMM FP8 of MoE and
    the expert-parallel dispatch's kernels are not modelled)."""
    check_model(model)
    recipe = float8.recipe_of(formats)
    eager.check_plan(model, plan, formats, recipe is not None)
    if not isinstance(model, GptConfig) and model.is_moe:
        odd = [what for what, bad in ((f"stack {stack.name}", stack.compiled),
                                      (f"scheme {formats.name}", recipe is not None),
                                      (f"ep {plan.ep}", plan.ep > 1)) if bad]
        if odd:
            raise InputError(f"{model.name}: MoE on the pytorch stacks is eager PyTorch on 16- "
                             f"or 32-bit GEMMs without expert parallelism; {', '.join(odd)} "
                             "is not modelled (use the megatron stack)")


def layer_kernels(stack: Stack, model: GptConfig | Decoder, micro_batch: int, precision: str,
                  recipe: str | None = None, moe: bool = False, *, autocast: bool = True
                  ) -> KernelLists:
    """(forward, backward) element-wise kernels of one (``moe``: MoE) layer and micro-batch on
    ``stack``, under ``autocast`` or not (the run's, :func:`accelsim.engine.mixed_precision.
    resolve`); under a torchao.float8 ``recipe`` (:mod:`accelsim.engine.float8`, autocast
    only) the 16-bit layer's kernels less autocast's weight casts, plus each linear layer's
    float8 kernels."""
    if recipe is not None:
        fwd, bwd = float8.without_weight_casts(layer_kernels(stack, model, micro_batch, "bf16"))
        T, _, _, e, _, _ = eager.sizes(model, micro_batch, "bf16")
        extra = float8.linear_kernels(linears(model), T, e, F32, recipe, stack.compiled)
        return tuple(fwd) + eager.flat(extra)[0], tuple(bwd) + eager.flat(extra)[1]
    if stack.compiled:
        check_model(model)
        return compiled.layer_kernels(model, micro_batch, precision, autocast)
    if is_gpt_block(model):
        return eager.layer_kernels(model, micro_batch, precision, autocast)
    check_model(model)
    T, _, _, e, _, c = eager.sizes(model, micro_batch, precision, autocast)
    mlp = eager_moe.moe_parts(model, T, e, c) if moe else None
    return eager.flat(eager_llama.layer_parts(model, T, e, c, mlp))


def linears(model: GptConfig | Decoder) -> list[tuple[str, int, int]]:
    """(name, in features, out features) of a layer's four linear layers (fused QKV and, gated,
    fused gate-up: the engine's GEMMs)."""
    from accelsim.engine.decoder import Decoder
    from accelsim.workload.transformer_parts import MlpKind

    d = Decoder.of(model)
    h, f, q, kv = d.hidden, d.ffn_size, d.heads * d.head_dim, d.kv_heads * d.head_dim
    width = (2 if d.config.mlp is not MlpKind.GELU else 1) * f
    return [("qkv", h, q + 2 * kv), ("proj", q, h), ("fc1", h, width), ("fc2", f, h)]


def activation_precision(formats: StateFormats) -> str:
    """The precision a run's activations take: bf16 under torchao.float8 (it casts to FP8 only
    inside each linear layer), else the GEMMs'."""
    return "bf16" if float8.recipe_of(formats) else formats.gemm_precision


def head_kernels(stack: Stack, model: GptConfig | Decoder, micro_batch: int, precision: str,
                 *, autocast: bool = True) -> KernelLists:
    """(forward, backward) element-wise kernels outside the layers, per micro-batch."""
    if stack.compiled:
        check_model(model)
        return compiled.head_kernels(model, micro_batch, precision, autocast)
    if is_gpt_block(model):
        return eager.head_kernels(model, micro_batch, precision, autocast)
    check_model(model)
    T, _, _, e, _, c = eager.sizes(model, micro_batch, precision, autocast)
    return eager.flat(eager_llama.head_parts(model, T, e, c))


def activation_bytes_per_layer(model: GptConfig | Decoder, micro_batch: int, precision: str,
                               moe: bool = False, *, autocast: bool = True) -> float:
    """What autograd saves for one (``moe``: MoE) layer's backward pass (bytes, one
    micro-batch)."""
    if is_gpt_block(model):
        return eager.activation_bytes_per_layer(model, micro_batch, precision, autocast)
    T, _, _, e, _, c = eager.sizes(model, micro_batch, precision, autocast)
    mlp = eager_moe.activation_bytes(model, T, e) if moe else None
    return eager_llama.activation_bytes_per_layer(model, T, e, c, mlp)


def activation_bytes(model: GptConfig | Decoder, plan: Plan, precision: str, *,
                     autocast: bool = True) -> float:
    """Saved activations of one GPU at the peak (every layer of every in-flight micro-batch,
    one micro-batch in flight without a pipeline, plus the head and loss). With activation
    checkpointing of every block (``recompute full``: ``checkpoint_wrapper``) each layer keeps
    its input (the residual stream: fp32 under autocast) and the layer being recomputed holds
    its saved tensors once. The compiled stack keeps what eager keeps (an upper bound:
    :mod:`accelsim.engine.compiled`)."""
    n_moe = 0 if isinstance(model, GptConfig) else model.config.n_moe_layers
    per = [activation_bytes_per_layer(model, plan.micro_batch, precision, moe,
                                      autocast=autocast)
           for moe in (False, True)[:1 + bool(n_moe)]]
    if plan.recompute == "full":
        T, h, _, _, r, _ = eager.sizes(model, plan.micro_batch, precision, autocast)
        kept = model.layers * T * h * r + max(per)
    else:
        kept = (model.layers - n_moe) * per[0] + n_moe * per[-1]
    return kept + eager.head_activation_bytes(model, plan.micro_batch, precision, autocast)
