"""The layer ops of the op graph: one typed op per layer of a layer workload (TOML, SCALE-Sim
topology, ONNX import), with its FLOPs and bytes as properties; perf's one per-layer formula
(:func:`accelsim.perf.layer_model.evaluate_layer`) times every phase of it
(:func:`accelsim.engine.lower.time_layer_op`). Re-exported by :mod:`accelsim.engine.graph`.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import InputError, check_int
from accelsim.perf.gemm import OPERAND_BYTES
from accelsim.workload.model import Layer

# --------------------------------------------------------------------------- layer workloads
# The op kinds a layer workload (TOML, SCALE-Sim topology, ONNX import, `workload gpt`) lowers
# to (:func:`accelsim.engine.lower.lower_workload`): one op per layer, carrying the layer it
# came from (its shapes) and the ``batch`` samples and ``precision`` it runs at. FLOPs and
# bytes are the op's own properties (forward pass; ``training_flops`` adds the backward GEMMs);
# perf's one per-layer formula (:func:`accelsim.perf.layer_model.evaluate_layer`) times every
# phase of it (:func:`accelsim.engine.lower.time_layer_op`).


@dataclass(frozen=True)
class LayerOp:
    """One workload layer run on ``batch`` samples at ``precision`` (base of the layer ops)."""

    layer: Layer
    batch: int
    precision: str

    def __post_init__(self) -> None:
        check_int(f"{type(self).__name__} {self.layer.name!r}: batch", self.batch)
        if self.precision not in OPERAND_BYTES:
            raise InputError(f"{type(self).__name__} {self.layer.name!r}: unknown precision "
                             f"{self.precision!r}")

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def kind(self) -> str:
        """The layer kind (``conv``, ``linear``, ``batchnorm``, ...): the breakdown's ``op``."""
        return self.layer.kind

    @property
    def phases(self) -> tuple[str, ...]:
        """The training phases perf times for this op (GEMMs: fwd, bwd_data unless it is the
        first layer, wgrad; element-wise: fwd, bwd)."""
        return tuple(self.layer.gemms(self.batch) or self.layer.elementwise(self.batch))

    @property
    def flops(self) -> float:
        """Forward FLOPs (0 for memory-bound kinds, whose arithmetic is counted in ``ops``)."""
        return 0.0

    @property
    def training_flops(self) -> float:
        """FLOPs of every training phase (the GEMMs perf counts as useful work)."""
        return float(sum(g.flops for g in self.layer.gemms(self.batch).values()))

    @property
    def bytes(self) -> float:
        """Forward compulsory HBM traffic: input(s), parameters and output once each, in the
        op's precision."""
        la = self.layer
        elems = (la.input_elements + la.output_elements) * self.batch + la.n_params
        return float(elems * OPERAND_BYTES[self.precision])


@dataclass(frozen=True)
class ConvOp(LayerOp):
    """A 2-D convolution: ``n`` images of ``c`` channels convolved with ``k`` filters of
    ``r x s`` (``groups`` groups) into ``p x q`` outputs. perf runs it as an implicit GEMM or,
    on chips with ``winograd``, the faster Winograd algorithm per phase."""

    @property
    def n(self) -> int:
        return self.batch

    @property
    def c(self) -> int:
        return self.layer.in_channels

    @property
    def k(self) -> int:
        return self.layer.out_channels

    @property
    def r(self) -> int:
        return self.layer.kernel_h

    @property
    def s(self) -> int:
        return self.layer.kernel_w

    @property
    def p(self) -> int:
        return self.layer.out_h

    @property
    def q(self) -> int:
        return self.layer.out_w

    @property
    def groups(self) -> int:
        return self.layer.groups

    @property
    def flops(self) -> float:
        """2 N K (C / groups) R S P Q: one multiply-add per filter tap and output."""
        return 2.0 * self.n * self.k * (self.c // self.groups) * self.r * self.s * self.p \
            * self.q


@dataclass(frozen=True)
class LinearOp(LayerOp):
    """A fully connected layer on ``batch x tokens`` rows: ``in_features -> out_features``."""

    @property
    def flops(self) -> float:
        la = self.layer
        return 2.0 * self.batch * la.tokens * la.in_features * la.out_features


@dataclass(frozen=True)
class MatmulOp(LayerOp):
    """``count`` activation x activation products per sample (``C[m, n] = A[m, k] B[k, n]``,
    e.g. attention's scores and P V): a batched GEMM without parameters."""

    @property
    def flops(self) -> float:
        la = self.layer
        return 2.0 * self.batch * la.count * la.m * la.n * la.k


@dataclass(frozen=True)
class AttentionLayerOp(LayerOp):
    """Scaled dot-product attention as one op (an ``attention`` layer, an SDPA node): the
    software stack's attention kernel times it as the transformer path's
    :class:`~accelsim.engine.graph.AttentionOp` (:func:`accelsim.engine.stack_ops.attention_op`)."""

    @property
    def flops(self) -> float:
        """Forward FLOPs of the scores and P V matmuls (the layer's model-FLOPs count)."""
        return float(self.layer.gemms(self.batch)["fwd"].flops)


@dataclass(frozen=True)
class _ElementwiseLayerOp(LayerOp):
    """A memory-bound layer: its elementary operations and the bytes it streams (unfused; perf
    applies the chip's fusion rule when it times it)."""

    @property
    def ops(self) -> int:
        """Forward elementary operations (an FMA counts 2)."""
        return self.layer.elementwise(self.batch)["fwd"].ops

    @property
    def bytes(self) -> float:
        """Forward bytes read and written, unfused, in the op's precision."""
        e = self.layer.elementwise(self.batch)["fwd"]
        return float(e.bytes_moved(OPERAND_BYTES[self.precision]))


@dataclass(frozen=True)
class NormOp(_ElementwiseLayerOp):
    """BatchNorm or LayerNorm: a statistics pass and a normalizing pass (scale and shift)."""


@dataclass(frozen=True)
class PointwiseOp(_ElementwiseLayerOp):
    """An activation (ReLU, GELU, tanh), a residual add or a softmax inside the network."""


@dataclass(frozen=True)
class PoolOp(_ElementwiseLayerOp):
    """Max or average pooling over ``kernel_h x kernel_w`` windows."""


@dataclass(frozen=True)
class EmbeddingOp(_ElementwiseLayerOp):
    """A table lookup: ``tokens`` rows of ``dim`` gathered from ``vocab`` per sample (its
    backward scatter-adds into the table's gradient)."""


@dataclass(frozen=True)
class LossOp(_ElementwiseLayerOp):
    """The loss at the end of the network: a softmax over the logits (cross-entropy's
    normalization; its backward starts back-propagation)."""


#: the op kind each workload layer kind lowers to (a final softmax is the loss)
LAYER_OPS: dict[str, type[LayerOp]] = {
    "conv": ConvOp, "linear": LinearOp, "matmul": MatmulOp, "attention": AttentionLayerOp,
    "batchnorm": NormOp, "layernorm": NormOp,
    "relu": PointwiseOp, "gelu": PointwiseOp, "tanh": PointwiseOp, "add": PointwiseOp,
    "softmax": PointwiseOp, "maxpool": PoolOp, "avgpool": PoolOp, "embedding": EmbeddingOp,
}


