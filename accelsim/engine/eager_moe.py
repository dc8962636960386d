"""What eager PyTorch launches for an MoE layer's feed-forward block on the ``pytorch`` stack:
torchtitan's token-choice MoE (``torchtitan/models/moe``: ``TokenChoiceTopKRouter``,
``TokenReorderer``, grouped-GEMM experts, ``scatter_add`` combine) run one op at a time under
autocast, with the HBM bytes of each kernel and what autograd saves. The attention half of the
layer and the norms are the dense block's (:mod:`accelsim.engine.eager_llama`).

Per layer on ``T`` tokens of hidden ``h`` (16-bit: ``e`` bytes), ``E`` experts, top ``k``,
``n = T k`` routed rows, of which the local experts take ``R`` rows (the engine's
``expert_tokens``: ``m_e`` per expert x the local experts; ``R = n`` on one GPU), expert FFN
``f``:

* router: the gate GEMM's scores to fp32 (``T E (e + 4)``), softmax (``8 T E``), ``topk``
  (read ``4 T E``, write the fp32 scores and int64 indices ``12 n``), ``histc`` of the
  indices (``8 n``), the stable ``argsort`` (``16 n``; one pass: an assumption, CUB's radix
  sort makes several), the scores gathered in that order (``16 n``) and the indices divided by
  ``k`` (``16 n``);
* dispatch: ``torch.gather`` of the ``n`` rows (``2 n h e``, a row gather);
* the experts' activation on ``R`` rows (:func:`accelsim.engine.eager_llama.glu_kernels`), the
  scores applied in fp32 (``to(float32)`` ``R h (e + 4)``, the product ``8 R h + 4 R``, back to
  16 bits ``R h (4 + e)``);
* combine: the output initialised (zeros, ``T h e``; or the shared experts' output), copied by
  the out-of-place ``scatter_add`` (``2 T h e``) and the ``n`` rows added in (``3 n h e``);
* backward: the combine's gather of the gradient (``2 n h e``), the score product's two
  gradients (``8 R h + 4 R``; its product with the routed output ``12 R h`` and the row sum
  ``4 R h + 4 R``) and the two casts', the experts' activation backward, the dispatch's
  ``scatter_add`` into zeros (``T h e`` fill, ``3 n h e``), the sorted scores' and topk's
  scatters into zeros (``4 n`` + ``16 n``; ``4 T E`` + ``16 n``), softmax's (``12 T E``), the
  cast's (``T E (4 + e)``) and the input's two gradients summed (router and experts:
  ``3 T h e``).

Shared experts run as a dense gated MLP on all ``T`` tokens. Bandwidths as the dense block's
assumptions (pointwise at the add's, a row gather or scatter at the strided copy's, sort and
index arithmetic at a plain copy's, a row reduction at LayerNorm's, softmax at the measured
log-softmax's). Under ``pytorch-compile`` and torchao.float8 MoE is refused (not modelled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.engine import eager
from accelsim.engine.eager import F32, Kernels
from accelsim.engine.eager_llama import glu_kernels
from accelsim.engine.graph import ElementwiseOp
from accelsim.engine.stack import EagerKernel as K

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder

Op = ElementwiseOp
#: bytes of one int64 index
I64 = 8


def router_kernels(T: int, E: int, n: int, e: int) -> Kernels:
    """The router after its gate GEMM and the token reordering (module docstring)."""
    fwd = [Op("router_float", T * E * (e + F32), kind=K.CAST_UP),
           Op("router_softmax", T * E * 2 * F32, kind=K.SOFTMAX),
           Op("router_topk", T * E * F32 + n * (F32 + I64), kind=K.REDUCE),
           Op("router_histc", n * I64, kind=K.REDUCE),
           Op("router_argsort", n * 2 * I64), Op("router_scores_sorted", n * (I64 + 2 * F32)),
           Op("router_index_div", n * 2 * I64)]
    bwd = [Op("router_scores_sorted_bwd_fill", n * F32, kind=K.FILL),
           Op("router_scores_sorted_bwd", n * (I64 + 2 * F32)),
           Op("router_topk_bwd_fill", T * E * F32, kind=K.FILL),
           Op("router_topk_bwd", n * (F32 + I64 + F32)),
           Op("router_softmax_bwd", T * E * 3 * F32, kind=K.SOFTMAX_BWD),
           Op("router_float_bwd", T * E * (F32 + e), kind=K.CAST_DOWN)]
    return fwd, bwd


def routing_kernels(T: int, h: int, n: int, R: int, e: int, shared: bool) -> Kernels:
    """Dispatch, the scores applied and combine (module docstring)."""
    fwd = [Op("dispatch_gather", 2 * n * h * e, kind=K.PERMUTE),
           Op("score_float", R * h * (e + F32), kind=K.CAST_UP),
           Op("score_mul", R * h * 2 * F32 + R * F32, kind=K.ADD),
           Op("score_cast", R * h * (F32 + e), kind=K.CAST_DOWN)]
    if not shared:
        fwd.append(Op("combine_zeros", T * h * e, kind=K.FILL))
    fwd += [Op("combine_copy", 2 * T * h * e), Op("combine_scatter_add", 3 * n * h * e,
                                                  kind=K.PERMUTE)]
    bwd = [Op("combine_bwd_gather", 2 * n * h * e, kind=K.PERMUTE),
           Op("score_cast_bwd", R * h * (e + F32), kind=K.CAST_UP),
           Op("score_mul_bwd", R * h * 2 * F32 + R * F32, kind=K.ADD),
           Op("score_grad_mul", R * h * 3 * F32, kind=K.ADD),
           Op("score_grad_sum", R * h * F32 + R * F32, kind=K.LAYERNORM),
           Op("score_float_bwd", R * h * (F32 + e), kind=K.CAST_DOWN),
           Op("dispatch_bwd_fill", T * h * e, kind=K.FILL),
           Op("dispatch_bwd_scatter_add", 3 * n * h * e, kind=K.PERMUTE),
           Op("moe_input_grad_add", 3 * T * h * e, kind=K.ADD)]
    return fwd, bwd


def routed_rows(model: Decoder, T: int) -> tuple[int, int, int]:
    """(``n`` routed rows, ``R`` rows the local experts take, local experts) on one GPU
    without expert parallelism (:func:`accelsim.engine.decoder.expert_tokens`)."""
    from accelsim.engine.decoder import expert_tokens

    m_e, local = expert_tokens(model, T, 1)
    return T * model.config.moe.top_k, m_e * local, local


def moe_parts(model: Decoder, T: int, e: int, c: int) -> list[Kernels]:
    """An MoE layer's feed-forward kernels, replacing the dense MLP's (module docstring), with
    the autocast casts of its router, experts and shared experts' weights."""
    m, h = model.config.moe, model.hidden
    n, R, local = routed_rows(model, T)
    f, shared = m.expert_ffn_size, m.n_shared_experts * m.expert_ffn_size
    parts = [router_kernels(T, m.n_experts, n, e), glu_kernels("experts", R, f, e),
             routing_kernels(T, h, n, R, e, bool(shared)),
             eager.linear_kernels("router", T, h * m.n_experts, m.n_experts * m.router_bias,
                                  e, c),
             eager.linear_kernels("experts", R, local * 3 * h * f, 0, e, c)]
    if shared:
        parts += [glu_kernels("shared", T, shared, e),
                  eager.linear_kernels("shared", T, 3 * h * shared, 0, e, c)]
    return parts


def activation_bytes(model: Decoder, T: int, e: int) -> float:
    """What autograd saves for an MoE feed-forward block on ``T`` tokens (bytes), in place of
    the dense MLP's: the softmax output (fp32), topk's indices and the sorted scores, the
    dispatched rows (the experts' input), per expert row the gate and up outputs, the
    activation's output and the down projection's input (16-bit), the fp32 routed output the
    scores multiply; shared experts as a dense gated MLP."""
    m, h = model.config.moe, model.hidden
    n, R, _ = routed_rows(model, T)
    f, shared = m.expert_ffn_size, m.n_shared_experts * m.expert_ffn_size
    router = T * m.n_experts * F32 + n * (I64 + F32)
    experts = R * (h * e + 4 * f * e + h * F32)
    return router + experts + T * (shared and (h * e + 4 * shared * e))
