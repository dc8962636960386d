"""What a decoder layer launches under ``torch.compile`` (TorchInductor, the default mode): the
element-wise kernels of the ``pytorch-compile`` stack
(:data:`accelsim.engine.stack.PYTORCH_COMPILE`), as fused groups.

Inductor's main optimisation is fusion: a chain of pointwise ops becomes one generated kernel
that reads its inputs once and writes its outputs once ("we can turn 2 reads and 2 writes
into 1 read and 1 write", PyTorch's torch.compiler "Getting Started" page); a reduction (a
norm's statistics) fuses with the pointwise ops before and after it (Ansel et al., "PyTorch 2",
ASPLOS 2024, section 5: Inductor's scheduler fuses pointwise and reduction nodes that share
their iteration space). GEMMs and SDPA stay library calls (cuBLAS, cuDNN/flash), so the groups
lie between them. Which ops land in one group is this module's assumption, stated per group
(``T`` tokens, hidden ``h``, ``a`` query and ``kv`` key/value heads of ``d``, FFN ``f``; ``e``
bytes per 16-bit element, ``r`` per residual element, fp32 under autocast (else ``e``); ``s`` the norm's
saved statistics, 4 T per statistic: RMSNorm 1, LayerNorm 2):

* ``add_norm`` (twice a layer): a residual add with the norm after it (the attention branch's
  add with the MLP's norm; the MLP branch's with the next layer's norm, or the final norm):
  read the residual and the branch output, write the new residual and the 16-bit normed
  output (autocast's cast fused), ``Th (2r + 2e) + s``; backward ``add_norm_bwd``, the norm's
  input gradient with the residual gradient's add and the branch gradient's cast fused:
  ``Th (2e + 3r)`` (read the normed output's gradient, the input, the residual gradient; write
  it and its 16-bit copy), and the weight gradient's reduction over tokens, ``Th (e + r) + 4h``
  (a LayerNorm's bias gradient in the same reduction);
* ``qkv_prep``: rotary on Q and K (cos and sin, ``2 T d e``), ``repeat_kv`` and the layout
  SDPA takes, in one kernel reading the QKV projection's output once and writing Q, K, V at
  ``a`` heads each, ``T ((a + 2 kv) + 3 a) d e``; backward the reverse (the repeats summed in
  it), the same bytes; ``attn_out`` SDPA's output to the projection's layout (``2 T a d e``),
  backward the same;
* the MLP activation: GELU ``2 Tf e`` (backward ``3 Tf e``), a gated one in one kernel from
  the fused gate-up GEMM's output ``3 Tf e`` (backward: read the gradient, gate and up, write
  both gradients, ``5 Tf e``);
* outside the layers: the embedding gather (and position add) with the first norm
  (``Th (2r + e) + s``, learned positions ``+ r Th``), the cross-entropy over
  ``logits.float()`` as two passes over the 16-bit logits forward (max, then the sum of
  exponentials: ``2 N e`` for ``N`` logits, the log-sum-exp ``4 T`` written) and one backward
  (read the logits, write their gradient: ``2 N e``; the NLL gradient's fill and scatter fused);
  the first norm's backward (``Th (e + 3r)``) and its weight gradient.

Kept as the eager stack runs them (:mod:`accelsim.engine.eager`): autocast's weight casts and
their gradients' (one kernel per parameter: they are graph inputs with no neighbour to fuse
with), linear bias gradients, the embedding table's gradient. Bandwidths: a norm group at the
measured eager LayerNorm's (forward) and LayerNorm backward's, a weight-gradient reduction at
the bias gradient's, layout copies at the strided copy's (``permute``), every other group at a
plain copy's (``stream``): assumptions (Inductor's generated kernels were not measured here).
Activations: as the eager stack keeps them (an upper bound: Inductor's min-cut partitioner
recomputes cheap pointwise ops in backward rather than saving them; not modelled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.engine import eager
from accelsim.engine.eager import F32, Kernels
from accelsim.engine.graph import ElementwiseOp
from accelsim.engine.stack import EagerKernel as K
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder

Op = ElementwiseOp


def _shape(model: Decoder) -> tuple[int, int, int, bool, bool, bool, bool]:
    """(a, kv, d, rms, rotary, gated, learned positions) of a dense decoder."""
    from accelsim.workload.transformer_parts import MlpKind, NormKind, PositionKind

    c = model.config
    return (model.heads, model.kv_heads, model.head_dim, c.norm is NormKind.RMSNORM,
            c.positions is PositionKind.ROTARY, c.mlp is not MlpKind.GELU,
            c.positions is PositionKind.LEARNED)


def norm_groups(name: str, T: int, h: int, e: int, r: int, stats: int, first: bool = False
                ) -> Kernels:
    """A norm with the residual add before it (``first``: the embedding's output instead, no
    add; module docstring)."""
    s = stats * T * F32
    fwd = [Op(name, T * h * ((2 * r + e) if first else (2 * r + 2 * e)) + s, kind=K.LAYERNORM)]
    bwd = [Op(f"{name}_bwd", T * h * ((e + 3 * r) if first else (2 * e + 3 * r)) + s,
              kind=K.LAYERNORM_BWD),
           Op(f"{name}_weight_grad", T * h * (e + r) + h * F32, kind=K.REDUCE)]
    return fwd, bwd


def layer_parts(model: GptConfig | Decoder, micro_batch: int, precision: str,
                autocast: bool = True) -> list[Kernels]:
    """Each fused group's (forward, backward) kernels of one layer, in order (module
    docstring), with the linear layers' eager kernels (weight casts, bias gradients)."""
    from accelsim.engine.decoder import Decoder

    T, h, f, e, r, c = eager.sizes(model, micro_batch, precision, autocast)
    model = Decoder.of(model)
    a, kv, d, rms, rotary, gated, _ = _shape(model)
    stats = 1 if rms else 2
    cs = 2 * T * d * e if rotary else 0
    prep = T * ((a + 2 * kv) + 3 * a) * d * e + cs
    out = 2 * T * a * d * e
    act = ([Op("glu", 3 * T * f * e)], [Op("glu_bwd", 5 * T * f * e)]) if gated else (
        [Op("gelu", 2 * T * f * e)], [Op("gelu_bwd", 3 * T * f * e)])
    cfg = model.config
    width = (2 if gated else 1) * f
    parts = [([Op("qkv_prep", prep, kind=K.PERMUTE)], [Op("qkv_prep_bwd", prep, kind=K.PERMUTE)]),
             ([Op("attn_out", out, kind=K.PERMUTE)], [Op("attn_out_bwd", out, kind=K.PERMUTE)]),
             norm_groups("add_norm1", T, h, e, r, stats), act,
             norm_groups("add_norm2", T, h, e, r, stats)]
    parts += [eager.linear_kernels(name, T, nw, nb, e, c) for name, nw, nb in (
        ("qkv", (a + 2 * kv) * d * h, (a + 2 * kv) * d * cfg.qkv_bias),
        ("proj", a * d * h, h * cfg.out_bias), ("fc1", h * width, width * cfg.mlp_bias),
        ("fc2", f * h, h * cfg.mlp_bias))]
    return parts


def head_parts(model: GptConfig | Decoder, micro_batch: int, precision: str,
               autocast: bool = True) -> list[Kernels]:
    """The fused groups outside the layers, per micro-batch (module docstring), and the
    embedding table's and LM head's eager kernels."""
    from accelsim.engine.decoder import Decoder

    T, h, f, e, r, c = eager.sizes(model, micro_batch, precision, autocast)
    model = Decoder.of(model)
    _, _, _, rms, _, _, learned = _shape(model)
    N, tied = T * model.vocab, model.config.tied_embeddings
    fwd, bwd = norm_groups("embedding_norm1", T, h, e, r, 1 if rms else 2, first=True)
    if learned:
        fwd = [Op(fwd[0].name, fwd[0].bytes + T * h * r, kind=fwd[0].kind)]
    parts = [(fwd, bwd),
             ([Op("cross_entropy", 2 * N * e + T * F32)],
              [Op("cross_entropy_bwd", 2 * N * e + T * F32)]),
             eager.table_kernels(T, h, model.vocab * h, e, c, tied=tied)]
    if not tied:
        parts.append(eager.linear_kernels("lm_head", T, model.vocab * h, 0, e, c))
    return parts


def layer_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str,
                  autocast: bool = True
                  ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) fused kernels of one layer and micro-batch."""
    return eager.flat(layer_parts(model, micro_batch, precision, autocast))


def head_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str,
                 autocast: bool = True
                 ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) fused kernels outside the layers, per micro-batch."""
    return eager.flat(head_parts(model, micro_batch, precision, autocast))
