"""The op graph: what one training iteration executes, as typed ops with their shapes, FLOPs and
bytes (properties of the op, not recomputed by callers), and the one place each op kind is timed.

Compute ops are timed by perf's kernel formula (:func:`accelsim.perf.gemm.gemm_time` for GEMMs,
bytes over the achievable HBM bandwidth for element-wise kernels); communication ops by the
system's fabric (:mod:`accelsim.netsim.fabric`: netsim's ring term, or its DES on request). Front-ends
build ops (the transformer path of :mod:`accelsim.engine.transformer`, ``accelsim op``) and the
schedule composes their times (:mod:`accelsim.engine.schedule`); the per-op rows become the
breakdown table and the trace (:mod:`accelsim.engine.trace`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum

from accelsim.arch import System
from accelsim.engine.attention_kernels import FlashImpl
from accelsim.engine.stack import EagerKernel, FlashKernel
from accelsim.perf.gemm import OPERAND_BYTES, gemm_kernel_time
from accelsim.ring import bus_factor
from accelsim.errors import check_int, choose
from accelsim.errors import InputError
from accelsim.workload.transformer import attended_pairs


class Phase(StrEnum):
    """When an op runs in an iteration."""

    FWD = "fwd"
    BWD = "bwd"  # data gradient + weight gradient of a transformer op, or element-wise backward
    BWD_DATA = "bwd_data"
    WGRAD = "wgrad"
    STEP = "step"  # after back-propagation: gradient reduction, weight update, bubble


class Stream(StrEnum):
    """The trace track an op occupies (one per stream: compute and each kind of traffic)."""

    COMPUTE = "compute"
    TP = "tp_comm"
    DP = "dp_comm"
    PP = "pp_send_recv"
    FSDP = "fsdp_gather"  # FSDP's parameter all-gathers (its reduce-scatters: DP)
    CP = "cp_comm"  # context parallelism's KV exchange (ring, all-gather, all-to-all)


@dataclass(frozen=True)
class GemmOp:
    """``count`` independent ``C[m, n] = A[m, k] @ B[k, n]`` at ``precision``; ``fraction`` of
    the work is done (a causal flash kernel skips the masked half)."""

    name: str
    m: int
    n: int
    k: int
    precision: str
    count: int = 1
    fraction: float = 1.0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count * self.fraction

    @property
    def bytes(self) -> float:
        """Compulsory operand and result traffic (each matrix once)."""
        b = OPERAND_BYTES[self.precision]
        return (self.m * self.k + self.k * self.n + self.m * self.n) * b * self.count \
            * self.fraction

    @property
    def backward(self) -> tuple[GemmOp, GemmOp]:
        """The data-gradient (m, k, n) and weight-gradient (k, n, m) GEMMs of the same shapes."""
        return (GemmOp(f"{self.name}.dgrad", self.m, self.k, self.n, self.precision, self.count,
                       self.fraction),
                GemmOp(f"{self.name}.wgrad", self.k, self.n, self.m, self.precision, self.count,
                       self.fraction))


@dataclass(frozen=True)
class AttentionOp:
    """Scaled dot-product attention of ``batch`` sequences: ``heads`` query heads over
    ``kv_heads`` key/value heads (GQA; equal: multi-head), ``seq`` queries and keys of
    ``head_dim``. ``causal`` masks the future; a ``flash`` kernel keeps no score matrix (its
    softmax fused, the masked half skipped), an unfused one writes the ``s x s`` scores and runs
    softmax, mask and dropout over them in memory. ``window`` (0: none): each query attends at
    most that many keys, itself included (sliding-window attention, Mistral): a flash kernel
    computes only the band (:attr:`fraction`), an unfused one still every score. ``alibi``:
    ALiBi's per-head linear bias added to the scores inside the kernel, which costs no time
    here (FlashAttention-2 >= 2.4: "almost no loss by adding alibi", Dao-AILab/flash-attention
    #540, A100, 16k tokens; cuDNN's SDPA takes it as an ``alibi_mask``; llm-foundry's Triton
    kernel adds it in-kernel, mosaicml/llm-foundry#820); FlashAttention-3 has none
    (:func:`flash_attention_parts` refuses the pair)."""

    batch: int
    heads: int
    seq: int
    head_dim: int
    kv_heads: int = 0  # 0: as many as heads
    causal: bool = True
    flash: bool = False
    precision: str = "bf16"
    window: int = 0
    alibi: bool = False

    def __post_init__(self) -> None:
        for f in ("batch", "heads", "seq", "head_dim"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"attention {f} must be an integer >= 1, got {v!r}")
        w = self.window
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise InputError(f"attention window must be an integer >= 1 (0: none), got {w!r}")
        if not isinstance(self.alibi, bool):
            raise InputError(f"attention alibi must be true or false, got {self.alibi!r}")
        kv = self.kv_heads or self.heads
        if kv < 1 or self.heads % kv:
            raise InputError(f"attention heads {self.heads} must be a multiple of kv_heads {kv}")

    @property
    def banded(self) -> bool:
        """Whether a flash kernel computes a band narrower than the sequence."""
        return self.flash and 0 < self.window < self.seq

    @property
    def span(self) -> int:
        """Keys a query row of the kernel runs over (its efficiency's sequence length)."""
        return self.window if self.banded else self.seq

    @property
    def fraction(self) -> float:
        """Share of the s x s score work a kernel does: a causal flash kernel skips half; over
        a band, the exact count of attended query-key pairs
        (:func:`accelsim.workload.transformer.attended_pairs`)."""
        if self.banded:
            return attended_pairs(self.seq, self.window, self.causal) / self.seq ** 2
        return 0.5 if (self.causal and self.flash) else 1.0

    @property
    def gemms(self) -> tuple[GemmOp, GemmOp]:
        """Scores Q K^T and P V, one per (sequence, query head)."""
        n = self.batch * self.heads
        return (GemmOp("scores", self.seq, self.seq, self.head_dim, self.precision, n,
                       self.fraction),
                GemmOp("pv", self.seq, self.head_dim, self.seq, self.precision, n,
                       self.fraction))

    @property
    def score_bytes(self) -> float:
        """HBM bytes of the unfused softmax + mask + dropout over the scores (16-bit: 7 bytes
        per score, Korthikanti et al. 2022's accounting); 0 for a flash kernel."""
        return 0.0 if self.flash else 7.0 * self.batch * self.heads * self.seq * self.seq

    @property
    def flops(self) -> float:
        """Forward FLOPs."""
        return sum(g.flops for g in self.gemms)

    @property
    def backward_flops(self) -> float:
        """Backward FLOPs: two GEMMs per forward GEMM (data and weight side), and a flash
        kernel also recomputes the scores ``Q K^T`` it never stored -- 5 matmuls against the
        forward's 2, 2.5x (Dao 2023, FlashAttention-2, section 3.1.2's backward pass)."""
        if self.flash:
            return 2.5 * self.flops
        return 2.0 * self.flops

    @property
    def backward_bytes(self) -> float:
        """Backward HBM bytes of a flash kernel: Q, K, V, O, dO read, dQ, dK, dV written (K, V
        and their gradients per key/value head; the 4-byte log-sum-exp per query row, under
        1 % of it at head dim 64, is left out); an unfused kernel's twice the forward's (its
        score pass runs twice)."""
        if not self.flash:
            return 2.0 * self.bytes
        kv = self.kv_heads or self.heads
        elems = self.batch * self.seq * self.head_dim * (4 * self.heads + 4 * kv)
        return elems * OPERAND_BYTES[self.precision]

    @property
    def flash_backward_aux_bytes(self) -> float:
        """HBM bytes of the flash backward's two passes beside its main kernel (FlashAttention-2,
        Dao 2023, Algorithm 2: ``D = rowsum(dO * O)`` first, and dQ accumulated in fp32 then
        converted; cuDNN runs them as ``compute_dot_do_o`` and ``convert_dq_to_16bits``, seen in
        accelsim/data/h100_device/breakdown.json): dO and O read and D (fp32 per query row)
        written; the fp32 dQ read and the 16-bit dQ written."""
        e = OPERAND_BYTES[self.precision]
        q = self.batch * self.heads * self.seq * self.head_dim
        return q * (2 * e + 4 + e) + self.batch * self.heads * self.seq * 4

    @property
    def bytes(self) -> float:
        """Forward HBM bytes of the tensors it must move: Q and O per query head, K and V per
        key/value head (GQA shares them), plus the unfused score pass."""
        kv = self.kv_heads or self.heads
        elems = self.batch * self.seq * self.head_dim * (2 * self.heads + 2 * kv)
        return elems * OPERAND_BYTES[self.precision] + self.score_bytes


def attention_precision(compute_precision: str, core=None) -> str:
    """The precision attention's two matmuls run in: the scheme's when 16 or 32 bits, bf16
    under 8-bit schemes (Transformer Engine and FP8-LM keep attention 16-bit) -- fp16 on a
    ``core`` without a bf16 rate (V100)."""
    p = compute_precision if OPERAND_BYTES[compute_precision] >= 2 else "bf16"
    if core is not None and p == "bf16" and not core.supports("bf16") and core.supports("fp16"):
        return "fp16"
    return p


def flash_attention_parts(system: System, op: AttentionOp, kernel: FlashKernel,
                          hbm_Bps: float, floor_s: float = 0.0) -> tuple[float, float, str]:
    """(forward s, backward s, bound) of a fused (flash) attention kernel on one chip: its
    FLOPs (the causal half or the band outside a sliding window skipped; the backward pass
    2.5x, recompute included) at the chip's dense tensor-core peak for the op's precision times
    the kernel's sustained fraction on that pass (:meth:`FlashKernel.efficiency`: the kernel's
    published bars at the op's head dim and :attr:`AttentionOp.span`), or its HBM traffic (Q,
    K, V, O forward; Q, K, V, O, dO read and dQ, dK, dV written backward -- never the s x s
    scores) at ``hbm_Bps``, whichever is longer, plus the chip's kernel time; at least
    ``floor_s`` per pass (a stack's per-call floor). The backward pass adds its two auxiliary
    kernels (:attr:`AttentionOp.flash_backward_aux_bytes`) at ``hbm_Bps``, each with its kernel
    time. ``bound`` names what bounds the forward pass."""
    if not op.flash:
        raise InputError("flash_attention_parts times a flash kernel: the op has flash=False "
                         "(an unfused kernel is attention_parts')")
    if op.alibi and kernel.impl is FlashImpl.FA3:
        raise InputError("ALiBi needs another attention kernel: FlashAttention-3 has no ALiBi "
                         "(Dao-AILab/flash-attention#1666); fa2, cudnn and triton add it "
                         "in-kernel")
    peak = system.peak_flops(op.precision) / system.chips
    launch = system.chip.kernel_launch_s

    def one(flops: float, nbytes: float, backward: bool) -> tuple[float, str]:
        eff = kernel.efficiency(system.chip, backward, op.causal, op.head_dim, op.span)
        compute, memory = flops / (peak * eff), nbytes / hbm_Bps
        t = max(compute, memory) + launch
        if floor_s > t:
            return floor_s, "latency"
        return t, "compute" if compute >= memory else "memory"

    f, bound = one(op.flops, op.bytes, False)
    b, _ = one(op.backward_flops, op.backward_bytes, True)
    b += op.flash_backward_aux_bytes / hbm_Bps + 2 * launch
    return f, b, bound


@dataclass(frozen=True)
class ElementwiseOp:
    """A memory-bound kernel that moves ``bytes`` through HBM (norms, activations, residual
    adds, dropout, casts); ``kind`` names its kernel family, whose achieved bandwidth a
    software stack may know (:data:`accelsim.engine.stack.EAGER_KERNEL_GBPS`)."""

    name: str
    bytes: float
    flops: float = 0.0
    kind: EagerKernel = EagerKernel.STREAM


@functools.lru_cache(maxsize=65536)
def gemm_timed(system: System, m: int, n: int, k: int, precision: str, count: int):
    """perf's one kernel formula for one GEMM shape (cached: a plan search asks the same
    shapes again and again), at the system's core clock. Under ``--power-model`` the step's
    clock is set before (:mod:`accelsim.engine.limiter`): the limiter holds a step's average
    power, not each kernel's."""
    return gemm_kernel_time(system, m, n, k, precision, count=count)


def gemm_s(system: System, op: GemmOp, floor_s: float = 0.0) -> float:
    """Seconds of one GEMM op on one chip of ``system``, at least ``floor_s`` (a stack's
    per-call floor; 0: none)."""
    return max(op.fraction * gemm_timed(system, op.m, op.n, op.k, op.precision,
                                        op.count).time_s, floor_s)


def gemm_fwd_bwd_s(system: System, op: GemmOp, floor_s: float = 0.0) -> tuple[float, float]:
    """(forward, backward) seconds: the op, then its data- and weight-gradient GEMMs (each
    call at least ``floor_s``)."""
    d, w = op.backward
    return gemm_s(system, op, floor_s), gemm_s(system, d, floor_s) + gemm_s(system, w, floor_s)


def attention_s(system: System, op: AttentionOp, hbm_Bps: float) -> tuple[float, float]:
    """(forward, backward) seconds of an attention op: its two GEMMs and, unfused, the softmax
    pass over the scores at ``hbm_Bps`` (the backward pass: two GEMMs per GEMM, and the score
    pass twice)."""
    f, b, _ = attention_parts(system, op, hbm_Bps)
    return f, b


def attention_parts(system: System, op: AttentionOp, hbm_Bps: float
                    ) -> tuple[float, float, str]:
    """(forward s, backward s, bound): what bounds the forward pass -- the score pass
    (``memory``) or the slower GEMM's own bound."""
    f = b = 0.0
    worst, bound = -1.0, "memory"
    for g in op.gemms:
        gf, gb = gemm_fwd_bwd_s(system, g)
        f, b = f + gf, b + gb
        if gf > worst:
            worst, bound = gf, gemm_timed(system, g.m, g.n, g.k, g.precision, g.count).bound
    score_s = op.score_bytes / hbm_Bps
    if score_s > worst:
        bound = "memory"
    return f + score_s, b + 2 * score_s, bound


def elementwise_s(op: ElementwiseOp, hbm_Bps: float, floor_s: float = 0.0) -> float:
    """Seconds of a memory-bound kernel streaming at ``hbm_Bps``, at least ``floor_s`` (a
    stack's per-call floor; 0: none)."""
    return max(op.bytes / hbm_Bps, floor_s)


# --------------------------------------------------------------------------- communication
class CommKind(StrEnum):
    """The collectives and transfers a parallelism transformation inserts."""

    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"
    SEND_RECV = "send-recv"


@dataclass(frozen=True)
class CommOp:
    """One collective (or point-to-point transfer) in a group of ``group`` ranks spaced
    ``stride`` apart: ``size_bytes`` is the buffer each rank holds (nccl-tests ``size``; for
    send-recv the message), ``bytes`` what one rank sends."""

    name: str
    kind: CommKind
    size_bytes: float
    group: int
    stride: int = 1
    stream: Stream = Stream.DP
    phase: Phase = Phase.STEP

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", choose(CommKind, self.kind, f"CommOp {self.name!r} kind"))
        check_int(f"CommOp {self.name!r}: group", self.group)
        check_int(f"CommOp {self.name!r}: stride", self.stride)
        if not self.size_bytes >= 0:
            raise InputError(f"CommOp {self.name!r}: size_bytes must be >= 0, got "
                             f"{self.size_bytes!r}")

    @property
    def flops(self) -> float:
        return 0.0

    @property
    def bytes(self) -> float:
        """Bytes one rank sends: :func:`accelsim.ring.bus_factor` of the buffer for the ring
        collectives and the all-to-all (2 (p-1)/p for an all-reduce), the message for a
        send-recv."""
        if self.kind == CommKind.SEND_RECV:
            return float(self.size_bytes)
        return bus_factor(str(self.kind), self.group) * self.size_bytes


@dataclass(frozen=True)
class UpdateOp:
    """The optimizer step as the memory stream it is: ``elems`` parameters per chip (the whole
    model, or ``ceil(n_params / chips)`` when the scheme shards the update), each read and
    written at the scheme's bytes per element
    (:func:`accelsim.netsim.update.update_bytes_per_elem`)."""

    n_params: int
    chips: int
    sharded: bool
    read_bytes_per_elem: float
    write_bytes_per_elem: float
    n_tensors: int = 0
    name: str = "weight_update"

    @property
    def elems(self) -> int:
        return -(-self.n_params // self.chips) if self.sharded else self.n_params

    @property
    def flops(self) -> float:
        return 0.0

    @property
    def bytes(self) -> float:
        return self.elems * (self.read_bytes_per_elem + self.write_bytes_per_elem)


# the layer workloads' op kinds live in their own module; importable from here as before
from accelsim.engine.layer_ops import (  # noqa: E402
    LAYER_OPS,
    AttentionLayerOp,
    ConvOp,
    EmbeddingOp,
    LayerOp,
    LinearOp,
    LossOp,
    MatmulOp,
    NormOp,
    PointwiseOp,
    PoolOp,
)

__all__ = ["LAYER_OPS", "AttentionLayerOp", "AttentionOp", "CommKind", "CommOp", "ConvOp", "ElementwiseOp",
           "EmbeddingOp", "GemmOp", "LayerOp", "LinearOp", "LossOp", "MatmulOp", "NormOp",
           "Phase", "PointwiseOp", "PoolOp", "Stream", "UpdateOp", "attention_parts",
           "attention_precision", "attention_s", "elementwise_s", "flash_attention_parts",
           "gemm_fwd_bwd_s", "gemm_s", "gemm_timed"]

