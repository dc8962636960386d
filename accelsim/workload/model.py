"""DNN training workloads as frozen data: layers with exact shapes, lowered per phase to GEMMs
(forward, backward-data, weight-gradient) and to non-GEMM element-wise work.

Lowering conventions (per training step for a minibatch of ``batch`` samples):

* conv (implicit GEMM / im2col), per group (``Gemm.count = groups``):
  fwd      M = batch*Ho*Wo, N = Cout/g,        K = Cin/g*kh*kw
  bwd_data M = batch*Ho*Wo, N = Cin/g*kh*kw,   K = Cout/g      (then col2im; same FLOPs as fwd)
  wgrad    M = Cin/g*kh*kw, N = Cout/g,        K = batch*Ho*Wo
* linear on ``tokens`` rows per sample (tokens = 1 for a CNN classifier, the sequence length
  in a Transformer): fwd M = batch*tokens, N = out, K = in; bwd_data M = batch*tokens, N = in,
  K = out; wgrad M = in, N = out, K = batch*tokens.
* matmul (activation x activation, e.g. attention Q.K^T and P.V), ``count`` per sample
  (the heads), C[m,n] = A[m,k] B[k,n]: fwd (m, n, k); bwd_data = dA (m, k, n); wgrad = dB
  (k, n, m) -- for a parameter-free matmul "wgrad" is the gradient of the second operand; it
  has no weights, so it adds no gradient-reduction traffic (``n_params`` is 0).
* The first layer of a workload has ``input_grad = False``: no bwd_data GEMM (nobody needs
  the gradient of the input image / token ids).

Shape modes for conv and pooling: ``"torch"`` (PyTorch: out = floor((in + 2p - k)/s) + 1) and
``"scalesim"`` (SCALE-Sim v3, ``scalesim/topology_utils.py``: no padding,
out = ceil((in - k + s)/s), which rounds strided outputs *up*, e.g. 56 -> 29 for k=1, s=2).

Non-GEMM work is counted in elements read, elements written and elementary operations per phase
(an FMA counts as 2 ops, an exp or divide as 1); multiply elements by the bytes per element of
the precision in use to get bytes moved. The per-kind counts are documented estimates of a fused
implementation; see :func:`Layer.elementwise`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

# largest layer dimension accepted (channels, features, sizes, tokens, counts): one of the
# shared bounds (re-exported here, its old home)
from accelsim.bounds import MAX_DIM  # noqa: F401
from accelsim.errors import check_int, choose
GEMM_KINDS = ("conv", "linear", "matmul")
ELEMENTWISE_KINDS = ("batchnorm", "layernorm", "relu", "gelu", "tanh", "add", "maxpool",
                     "avgpool", "softmax", "embedding")
#: scaled dot-product attention as one op (an SDPA node): a software stack's attention kernel
#: times it (accelsim.engine.stack_ops), not perf's per-layer GEMM model
ATTENTION_KINDS = ("attention",)
KINDS = GEMM_KINDS + ELEMENTWISE_KINDS + ATTENTION_KINDS


class Phase(StrEnum):
    """A GEMM's training phase: forward, backward to the data, weight gradient (a member prints
    and compares as its string: table columns keep "fwd"/"bwd_data"/"wgrad")."""

    FWD = "fwd"
    BWD_DATA = "bwd_data"
    WGRAD = "wgrad"


PHASES: tuple[Phase, ...] = tuple(Phase)
SHAPE_MODES = ("torch", "scalesim")


@dataclass(frozen=True)
class Gemm:
    """``count`` independent GEMMs C[M,N] += A[M,K] B[K,N]."""

    M: int
    N: int
    K: int
    count: int = 1

    @property
    def macs(self) -> int:
        return self.M * self.N * self.K * self.count

    @property
    def flops(self) -> int:
        return 2 * self.macs


@dataclass(frozen=True)
class Elementwise:
    """Non-GEMM work of one layer in one phase: elements read/written and elementary ops."""

    elements_read: int
    elements_written: int
    ops: int

    def bytes_moved(self, bytes_per_element: float) -> float:
        return (self.elements_read + self.elements_written) * bytes_per_element


def conv_out(size: int, kernel: int, stride: int, pad: int, mode: str) -> int:
    """Output size of a convolution / pooling window along one dimension."""
    if mode == "torch":
        return (size + 2 * pad - kernel) // stride + 1
    if mode == "scalesim":
        if pad:
            raise ValueError("scalesim shape mode has no padding")
        return math.ceil((size - kernel + stride) / stride)
    raise ValueError(f"unknown shape mode {mode!r}; expected one of {', '.join(SHAPE_MODES)}")


@dataclass(frozen=True)
class Layer:
    """One layer; which fields matter depends on ``kind`` (unused fields stay 0/empty).

    conv:     in_channels, out_channels, in_h, in_w, kernel_h, kernel_w, stride_h, stride_w,
              pad_h, pad_w, groups, bias, shape_mode
    linear:   in_features, out_features, tokens, bias
    matmul:   m, n, k, count (per sample)
    maxpool/avgpool: shape = (C, H, W) input, kernel_*, stride_*, pad_*, shape_mode
    embedding: vocab, dim, tokens
    attention: heads, kv_heads (0: heads), head_dim, tokens (the sequence: queries = keys),
       causal, flash_attention (the kernel keeps no score matrix; as GptConfig's)
    batchnorm/layernorm/relu/gelu/tanh/add/softmax: shape = the per-sample tensor shape
       (batchnorm: (C, H, W); layernorm/softmax normalize over the last dimension).
    """

    name: str
    kind: str
    in_channels: int = 0
    out_channels: int = 0
    in_h: int = 0
    in_w: int = 0
    kernel_h: int = 0
    kernel_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    groups: int = 1
    bias: bool = False
    shape_mode: str = "torch"
    in_features: int = 0
    out_features: int = 0
    tokens: int = 1
    m: int = 0
    n: int = 0
    k: int = 0
    count: int = 1
    vocab: int = 0
    dim: int = 0
    shape: tuple[int, ...] = field(default_factory=tuple)
    input_grad: bool = True
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    causal: bool = False
    flash_attention: bool = False

    # ---- shapes -------------------------------------------------------------------------
    @property
    def out_h(self) -> int:
        h = self.shape[1] if self.kind in ("maxpool", "avgpool") else self.in_h
        return conv_out(h, self.kernel_h, self.stride_h, self.pad_h, self.shape_mode)

    @property
    def out_w(self) -> int:
        w = self.shape[2] if self.kind in ("maxpool", "avgpool") else self.in_w
        return conv_out(w, self.kernel_w, self.stride_w, self.pad_w, self.shape_mode)

    @property
    def input_elements(self) -> int:
        """Activation elements into the layer, per sample (both operands for matmul/add)."""
        k = self.kind
        if k == "conv":
            return self.in_channels * self.in_h * self.in_w
        if k == "linear":
            return self.tokens * self.in_features
        if k == "matmul":
            return self.count * (self.m * self.k + self.k * self.n)
        if k == "attention":  # Q, and K and V per key/value head
            return self.tokens * self.head_dim * (self.heads + 2 * (self.kv_heads or self.heads))
        if k == "embedding":
            return self.tokens
        e = math.prod(self.shape)
        return 2 * e if k == "add" else e

    @property
    def saved_elements(self) -> int:
        """Activation elements kept from the forward pass for this layer's backward, per sample.

        A GEMM keeps its input(s) for the weight (or other operand's) gradient; normalisation,
        max-pooling, GELU, tanh and softmax keep one tensor of the input's size (their input or
        output); an embedding keeps its token indices. An add passes its gradient through and
        average pooling spreads it evenly: nothing kept. ReLU keeps its output, which is the
        next layer's input (in-place in practice, e.g. torchvision's ResNet), so it is counted
        once, there. Per-channel statistics are negligible and not counted."""
        if self.kind in ("add", "avgpool", "relu"):
            return 0
        return self.input_elements

    @property
    def output_elements(self) -> int:
        """Activation elements out of the layer, per sample."""
        k = self.kind
        if k == "conv":
            return self.out_channels * self.out_h * self.out_w
        if k == "linear":
            return self.tokens * self.out_features
        if k == "matmul":
            return self.count * self.m * self.n
        if k == "attention":
            return self.tokens * self.heads * self.head_dim
        if k == "embedding":
            return self.tokens * self.dim
        if k in ("maxpool", "avgpool"):
            return self.shape[0] * self.out_h * self.out_w
        return math.prod(self.shape)

    @property
    def is_gemm(self) -> bool:
        return self.kind in GEMM_KINDS

    @property
    def n_params(self) -> int:
        """Trainable parameters (PyTorch ``numel`` of weights and biases; BN/LN running
        statistics are buffers, not parameters)."""
        k = self.kind
        if k == "conv":
            w = self.out_channels * (self.in_channels // self.groups) * self.kernel_h * self.kernel_w
            return w + (self.out_channels if self.bias else 0)
        if k == "linear":
            return self.in_features * self.out_features + (self.out_features if self.bias else 0)
        if k == "batchnorm":
            return 2 * self.shape[0]
        if k == "layernorm":
            return 2 * self.shape[-1]
        if k == "embedding":
            return self.vocab * self.dim
        return 0

    # ---- lowering -----------------------------------------------------------------------
    @property
    def n_param_tensors(self) -> int:
        """Parameter tensors of this layer: weight (+ bias) of conv/linear, scale and shift of
        BatchNorm/LayerNorm, none for parameter-free layers."""
        if self.n_params == 0:
            return 0
        if self.kind in ("batchnorm", "layernorm"):
            return 2
        if self.kind in ("conv", "linear"):
            return 1 + int(self.bias)
        return 1

    def gemms(self, batch: int) -> dict[str, Gemm]:
        """GEMMs per phase for a minibatch: keys ``fwd``, ``bwd_data`` (absent when
        ``input_grad`` is False) and ``wgrad``; an empty dict for non-GEMM layers."""
        batch = check_int("batch", batch)  # a Python int: exact products at any size
        k = self.kind
        if k == "conv":
            g = self.groups
            rows = batch * self.out_h * self.out_w
            window = (self.in_channels // g) * self.kernel_h * self.kernel_w
            cout = self.out_channels // g
            out = {"fwd": Gemm(rows, cout, window, g), "bwd_data": Gemm(rows, window, cout, g),
                   "wgrad": Gemm(window, cout, rows, g)}
        elif k == "linear":
            rows = batch * self.tokens
            fi, fo = self.in_features, self.out_features
            out = {"fwd": Gemm(rows, fo, fi), "bwd_data": Gemm(rows, fi, fo),
                   "wgrad": Gemm(fi, fo, rows)}
        elif k == "matmul":
            c = batch * self.count
            m, n, kk = self.m, self.n, self.k
            out = {"fwd": Gemm(m, n, kk, c), "bwd_data": Gemm(m, kk, n, c),
                   "wgrad": Gemm(kk, n, m, c)}
        elif k == "attention":  # Q K^T and P V per head, s^2 d MACs each (the kernel is the
            # stack's); a causal flash kernel the lower triangle with its diagonal, s (s+1)/2
            # scores as GptConfig.model_flops counts them, here as the equal rectangle
            s, d = self.tokens, self.head_dim
            m, n = (s, s) if not (self.causal and self.flash_attention) else (
                (s + 1, s // 2) if s % 2 == 0 else (s, (s + 1) // 2))
            g = Gemm(m, n, d, 2 * batch * self.heads)
            out = {"fwd": g, "bwd_data": g, "wgrad": g}
        else:
            return {}
        if not self.input_grad:
            del out["bwd_data"]
        return out

    def elementwise(self, batch: int) -> dict[str, Elementwise]:
        """Non-GEMM work per phase (``fwd``, ``bwd``) for a minibatch; empty for GEMM layers
        (their bias adds and activations are separate layers or fused epilogues).

        Counts per element E of the layer's tensor (estimates of a fused implementation):
        relu fwd r1 w1 op1, bwd r2 (dy, mask) w1 op1; gelu (tanh form) fwd op8, bwd r2 op12;
        tanh fwd op1, bwd r2 op3 (dy * (1 - y^2));
        add fwd r2 w1 op1, bwd r2 w1 op1 (the gradient sum at the residual fork is charged
        here); batchnorm/layernorm fwd: stats pass r1 op3 (sum, FMA sum of squares) + normalize
        pass r1 w1 op2 (one FMA), bwd: reduction pass r2 op5 + dx pass r2 w1 op4;
        softmax fwd r3 w1 op5 (max, sub, exp, sum, scale), bwd r4 w1 op4;
        maxpool fwd r=in w=out op=window*out, bwd r=2*out (dy, argmax) w=in op=out;
        avgpool fwd r=in w=out op=window*out, bwd r=out w=in op=in;
        embedding fwd gather r=w=tokens*dim op0, bwd scatter-add r=w=op=tokens*dim.
        """
        batch = check_int("batch", batch)  # a Python int: exact products at any size
        k = self.kind
        if k in GEMM_KINDS or k in ATTENTION_KINDS:
            return {}
        b = batch
        if k in ("maxpool", "avgpool"):
            ein, eout = b * math.prod(self.shape), b * self.output_elements
            window = self.kernel_h * self.kernel_w
            if k == "maxpool":
                return {"fwd": Elementwise(ein, eout, window * eout),
                        "bwd": Elementwise(2 * eout, ein, eout)}
            return {"fwd": Elementwise(ein, eout, window * eout),
                    "bwd": Elementwise(eout, ein, ein)}
        if k == "embedding":
            e = b * self.tokens * self.dim
            return {"fwd": Elementwise(e, e, 0), "bwd": Elementwise(e, e, e)}
        e = b * math.prod(self.shape)
        fwd, bwd = {
            "relu": ((1, 1, 1), (2, 1, 1)),
            "gelu": ((1, 1, 8), (2, 1, 12)),
            "tanh": ((1, 1, 1), (2, 1, 3)),
            "add": ((2, 1, 1), (2, 1, 1)),
            "batchnorm": ((2, 1, 5), (4, 1, 9)),
            "layernorm": ((2, 1, 5), (4, 1, 9)),
            "softmax": ((3, 1, 5), (4, 1, 4)),
        }[k]
        return {"fwd": Elementwise(*(c * e for c in fwd)), "bwd": Elementwise(*(c * e for c in bwd))}


@dataclass(frozen=True)
class Workload:
    """A named, ordered tuple of layers (``source`` says where the shapes come from)."""

    name: str
    layers: tuple[Layer, ...]
    description: str = ""
    source: str = ""
    published_params: int | None = None
    #: the transformer these layers were generated from (:class:`accelsim.workload.gpt.GptConfig`),
    #: kept so the engine times it as a transformer (attention as one op, tensor/pipeline plans);
    #: None for a hand-written layer list
    transformer: object | None = None

    @property
    def n_params(self) -> int:
        return sum(layer.n_params for layer in self.layers)

    @property
    def n_param_tensors(self) -> int:
        """Parameter tensors (weights, biases, normalisation scale and shift): what a per-tensor
        optimizer step visits. ResNet-50: 53 conv + 53 x 2 BatchNorm + fc weight and bias = 161."""
        return sum(layer.n_param_tensors for layer in self.layers)

    @property
    def gemm_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if layer.is_gemm)

    @property
    def first_gemm_layer(self) -> str:
        """Name of the first GEMM layer (kept in FP16 by the FP8/HFP8 schemes)."""
        return self.gemm_layers[0].name

    @property
    def last_gemm_layer(self) -> str:
        """Name of the last GEMM layer (kept in FP16 by the FP8/HFP8 schemes)."""
        return self.gemm_layers[-1].name

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"workload {self.name!r} has no layer {name!r}")

    def macs(self, batch: int = 1, phase: Phase | str = Phase.FWD) -> int:
        """Total GEMM MACs of one phase (``fwd``, ``bwd_data`` or ``wgrad``)."""
        phase = choose(Phase, phase, "phase")
        return sum(g.macs for layer in self.layers
                   for p, g in layer.gemms(batch).items() if p == phase)

    def flops(self, batch: int = 1) -> dict[str, int]:
        """GEMM FLOPs per phase for a minibatch."""
        return {p: 2 * self.macs(batch, p) for p in PHASES}

    def rows(self, batch: int) -> list[dict]:
        """Tidy records, one per layer x phase: GEMM shape and FLOPs, or element-wise work.

        Columns: layer, index, kind, phase, M, N, K, count, flops, elements_read,
        elements_written, elementwise_ops, params."""
        out = []
        for i, layer in enumerate(self.layers):
            for phase, g in layer.gemms(batch).items():
                out.append({"layer": layer.name, "index": i, "kind": layer.kind, "phase": phase,
                            "M": g.M, "N": g.N, "K": g.K, "count": g.count, "flops": g.flops,
                            "elements_read": 0, "elements_written": 0, "elementwise_ops": 0,
                            "params": layer.n_params if phase == "fwd" else 0})
            for phase, e in layer.elementwise(batch).items():
                out.append({"layer": layer.name, "index": i, "kind": layer.kind, "phase": phase,
                            "M": 0, "N": 0, "K": 0, "count": 0, "flops": 0,
                            "elements_read": e.elements_read,
                            "elements_written": e.elements_written, "elementwise_ops": e.ops,
                            "params": layer.n_params if phase == "fwd" else 0})
        return out
