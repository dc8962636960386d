"""Software stacks as presets: what belongs to the framework a model trains under rather than
to the chip -- the memory held outside the training tensors, whether element-wise work is
fused, the bandwidth a stream kernel reaches, the per-call floor of each kernel kind and the
attention kernel.

``megatron`` is the stack the LLM model was fitted on (Megatron-LM / MS-AMP on DGX H100,
``scripts/llm_fit.py``): its numbers are the ones ``accelsim llm`` has always used, so the
Megatron-LM and FP8-LM validations do not move. ``pytorch`` is eager PyTorch on one GPU or
under DDP -- bf16 autocast over fp32 master weights, fused AdamW, SDPA attention, every
element-wise op its own kernel -- what most single-GPU users run. Every number cites its
source where it is defined.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from accelsim.bounds import MEMORY_RESERVE_GiB, check_bool, check_number
from accelsim.engine.attention_kernels import FlashImpl, gpu_class, kernel_efficiency
from accelsim.errors import InputError, choose
from accelsim.perf.gemm import STREAM_EFFICIENCY  # the stream a plain copy reaches (its owner)

if TYPE_CHECKING:
    from accelsim.arch import Chip


class AttentionKernel(StrEnum):
    """How a stack runs scaled dot-product attention."""

    #: the score and P.V matmuls on perf's GEMM model, plus (unfused) the softmax pass over the
    #: scores; a "flash" model skips the masked half (the megatron preset's 2023 fit used it)
    GEMM_PAIR = "gemm-pair"
    #: one fused kernel (:class:`FlashKernel`): no score matrix in HBM, the causal half skipped,
    #: the backward pass recomputing the scores
    FLASH = "flash"
    #: as the model says: its ``flash_attention`` runs the stack's fused kernel
    #: (:class:`FlashKernel`), without it the unfused GEMM pair and its score pass (Megatron-LM:
    #: ``--use-flash-attn``, or its fused scale-mask-softmax over stored scores)
    AS_MODEL = "as-model"


class KernelKind(StrEnum):
    """The kinds of kernel a stack launches, each with its own per-call floor."""

    GEMM = "gemm"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    OPTIMIZER = "optimizer"


@dataclass(frozen=True)
class FlashKernel:
    """The fused attention kernel a stack runs (``impl``), at the efficiency its published bars
    give for the chip, pass, mask, head dim and sequence
    (:func:`accelsim.engine.attention_kernels.kernel_efficiency`, the one owner; the numbers
    and their sources: accelsim/data/attention_kernels.csv).

    The default, cuDNN, is what PyTorch's SDPA runs on H100: cuDNN attention, SDPA's first
    choice on sm90 once the bundled cuDNN is newer than 9.15 (PyTorch 2.11:
    ``check_prefer_cudnn_attention`` in ``sdp_utils.cpp``, as discussed in
    huggingface/transformers#48163); on an A100 SDPA runs its FlashAttention-2 backend, which
    the fallback gives (:data:`accelsim.engine.attention_kernels.FALLBACK`). On the H100 its
    curve is the one our device measurements checked (reports/device_validation.md).
    """

    impl: FlashImpl = FlashImpl.CUDNN

    def __post_init__(self) -> None:
        object.__setattr__(self, "impl", choose(FlashImpl, self.impl, "FlashKernel.impl"))

    def efficiency(self, chip: Chip, backward: bool, causal: bool, head_dim: int,
                   seq: int) -> float:
        """The fraction of ``chip``'s dense 16-bit peak the kernel sustains on one pass over
        ``seq`` keys per query at ``head_dim``."""
        return kernel_efficiency(self.impl, gpu_class(chip), backward, causal, head_dim, seq)


#: eager PyTorch's per-call floor (us): the time one op takes when it is issued back to back
#: from Python and its kernel is smaller than the issue cost -- fitted by
#: ``scripts/fit_stream.py`` on the same file: a cuBLAS matmul, the mean of the bf16/fp16
#: 768^3 and 1000^3 GEMMs (19.7, 20.5, 20.6, 21.4 us, whose tensor-core work is under 2.3 us);
#: an element-wise op, the 4 MiB copy (6.8 us; 8 MiB moved, from L2)
EAGER_GEMM_FLOOR_US = 20.6
EAGER_ELEMENTWISE_FLOOR_US = 6.8


class EagerKernel(StrEnum):
    """The families of eager element-wise kernels, each with its measured bandwidth
    (:data:`EAGER_KERNEL_GBPS`; ``STREAM``: a plain copy's)."""

    STREAM = "stream"
    PERMUTE = "permute"
    CAT = "cat"
    CAST_DOWN = "cast_down"
    CAST_UP = "cast_up"
    ADD = "add"
    ADD_MIXED = "add_mixed"
    GELU = "gelu"
    GELU_BWD = "gelu_bwd"
    LAYERNORM = "layernorm"
    LAYERNORM_BWD = "layernorm_bwd"
    REDUCE = "reduce"
    SOFTMAX = "softmax"
    SOFTMAX_BWD = "softmax_bwd"
    FILL = "fill"
    OPTIMIZER = "optimizer"


#: what eager PyTorch's element-wise kernels reach on an H100 SXM (GB/s of the bytes
#: :mod:`accelsim.engine.eager` counts for them), measured op by op as kernels (CUDA-graph
#: replay) at 8192 tokens x 2048 wide (working sets beyond the 50 MB L2):
#: ``benchmarks/device_h100_kernels.py``, accelsim/data/h100_device/kernels.json. A plain
#: copy streams at STREAM_EFFICIENCY ("stream"); the others are slower for what they do:
#: strided reads (permute), two passes (log-softmax), a reduction over tokens beside the
#: per-row pass (LayerNorm backward), a 16-bit read feeding a 32-bit write (casts up).
EAGER_KERNEL_GBPS: dict[EagerKernel, float] = {
    # .contiguous() of a permuted (b, s, 3, a, d) view: 1313/1359/1367
    EagerKernel.PERMUTE: 1346.0,
    # torch.stack of dQ, dK, dV
    EagerKernel.CAT: 2859.0,
    # fp32 -> bf16
    EagerKernel.CAST_DOWN: 2815.0,
    # bf16 -> fp32: 1854 (8192 x 2048) and 1980 (the logits)
    EagerKernel.CAST_UP: 1917.0,
    # fp32 + fp32
    EagerKernel.ADD: 2927.0,
    # fp32 + bf16 -> fp32 (the residual stream under autocast)
    EagerKernel.ADD_MIXED: 2353.0,
    EagerKernel.GELU: 2787.0,
    EagerKernel.GELU_BWD: 3010.0,
    # fp32, 2 x 4 B per element
    EagerKernel.LAYERNORM: 2359.0,
    # input and weight gradients: 5 x 4 B per element in 152.3 us
    EagerKernel.LAYERNORM_BWD: 2203.0,
    # a bias gradient: bf16 sum over the tokens
    EagerKernel.REDUCE: 2365.0,
    # fp32 log-softmax over the vocabulary, 2 x 4 B per logit
    EagerKernel.SOFTMAX: 1525.0,
    # 3 x 4 B per logit
    EagerKernel.SOFTMAX_BWD: 2724.0,
    # zero-fill of a logits-sized fp32 tensor
    EagerKernel.FILL: 3294.0,
    # fused AdamW, 28 B per fp32 parameter: 124M 2467, 1.3B 2502
    EagerKernel.OPTIMIZER: 2484.0,
}
#: the HBM bandwidth and SM rate those were measured at: NVIDIA H100 datasheet, 3.35 TB/s; 132
#: SMs at 1.83 GHz (as arch_configs/h100-sxm.toml's memory_bandwidth_GBps, cores and
#: frequency_GHz; tests/test_engine_stack.py checks they agree)
_H100_HBM_GBPS = 3350.0
_H100_SM_RATE = 132 * 1.83e9


def sm_scale(chip: Chip) -> float:
    """The chip's SM-side rate (SMs x clock) relative to the H100 SXM preset's, which the eager
    kernel bandwidths stand for. (They were measured at the real 1980 MHz, which the preset's
    fixed clock, 1.83 GHz, stands for; under ``--power-model`` the clock is the real one, so an
    H100 step at 1980 MHz runs their SM-side part 8 % faster than measured: within the steps'
    scatter, left as it is.)"""
    return chip.cores * chip.core.frequency_Hz / _H100_SM_RATE


def kernel_Bps(kind: EagerKernel | str, stream_Bps: float, sm: float = 1.0) -> float:
    """A kernel kind's bandwidth on a chip whose plain stream reaches ``stream_Bps`` and whose
    SM-side rate is ``sm`` x the H100's (:func:`sm_scale`). An unknown kind is a ValueError,
    not a silent plain stream.

    Two costs in series: each byte takes its share of the HBM stream and, for a kind slower
    than a stream on the H100, an SM-side time (index arithmetic of a strided copy, a
    reduction's passes) that does not shrink with HBM bandwidth: ``1/B = 1/stream + x/sm``,
    ``x = 1/B_H100 - 1/stream_H100``. On the H100 this is its measured bandwidth. A kind at
    least as fast as a stream there (a write-only fill) is HBM-bound and scales with it.
    Checked on an H200 (the same SMs, 1.43x the HBM; accelsim/data/h200_device/kernels.json,
    held out): strided copies run 1.03-1.05x the H100's, casts and adds 1.4x, as this
    predicts, where scaling every kind with HBM over-speeds the strided ones by ~40 %."""
    kind = EagerKernel(kind)
    if kind is EagerKernel.STREAM:
        return stream_Bps
    h100_stream = _H100_HBM_GBPS * 1e9 * STREAM_EFFICIENCY
    b = EAGER_KERNEL_GBPS[kind] * 1e9
    x = 1.0 / b - 1.0 / h100_stream
    if x <= 0:
        return stream_Bps * b / h100_stream
    return 1.0 / (1.0 / stream_Bps + x / sm)


#: HBM bytes per element of a fused stack's element-wise kernels (Megatron-LM's fused LayerNorm,
#: bias-GeLU and bias-dropout-add; Korthikanti et al. 2022's 16-bit accounting, forward; the
#: backward pass twice that): a LayerNorm reads and writes its hidden vector (2 x 2), the
#: residual's dropout + add 7 (read both operands, write the sum and the 1-byte mask), the GeLU
#: with its bias 4 per FFN element (read and write). A layer's sum, 2 x 4 + 2 x 7 = 22 per
#: hidden element plus 16 per 4 FFN elements, is :func:`accelsim.engine.decoder.elementwise_bytes`.
FUSED_ELEMENTWISE_BYTES = {"layernorm": 4, "add": 7, "gelu": 4}
#: the fused loss pass over the logits, bytes per logit: forward (softmax, cross-entropy: read
#: the 16-bit logits, write their fp32 softmax) and backward (read it, write the gradient)
FUSED_LOSS_BYTES = (3 * 2, 2 * 2)


@dataclass(frozen=True)
class Stack:
    """One software stack's global parameters.

    elementwise_efficiency: fraction of HBM bandwidth its element-wise (memory-bound) kernels
        and the optimizer step stream at.
    memory_reserve_GiB: GPU memory per GPU outside the training tensors (CUDA context,
        communicator buffers, library workspaces, allocator reserve).
    fused: element-wise work as one fused per-layer byte count (Megatron-LM's fused kernels,
        Korthikanti et al.'s accounting), or eager: every op its own kernel with its own HBM
        round trip and per-call floor (:mod:`accelsim.engine.eager`).
    attention: the attention kernel (:class:`AttentionKernel`).
    launch_floor_us: per-call floor of each kernel kind (a kernel takes at least this long;
        0: none beyond the chip's own kernel time).
    autocast: a PyTorch stack: 16-bit schemes keep fp32 weights that are the master copy
        (fp32 gradients and moments) and run under autocast (each forward casts the weights to
        16 bits and keeps the copies for the backward pass) or, under FSDP, in its 16-bit
        param dtype; which of the two is the plan's
        (:func:`accelsim.engine.mixed_precision.resolve`).
    vocab_multiple: the LM head's vocabulary is padded to a multiple of this times the
        tensor-parallel size (1: as the model states it).
    comm_contention: how much slower compute runs while a collective runs beside it (NCCL's
        kernels take SMs and HBM bandwidth): each second of overlap adds this many seconds
        (0: none). Applied where the schedule overlaps them (FSDP, :mod:`accelsim.engine.fsdp`;
        tensor-parallel overlap, :mod:`accelsim.engine.tp_overlap`).
    fuse_casts: the casts to a GEMM's low-precision input format (8-bit, 4-bit, block-scaled)
        run inside the kernel that produces the tensor (a GEMM's epilogue, a LayerNorm or
        activation kernel): no HBM round trip, only the block scales written
        (:func:`accelsim.engine.decoder.cast_bytes`); False: each cast is its own pass over
        HBM (read 16 bits, write the format with its scales). ``--fuse-casts on|off``.
    compiled: an eager stack's element-wise work as ``torch.compile`` (TorchInductor) fuses it:
        one kernel per fused group, each reading its inputs once and writing its outputs once
        (:mod:`accelsim.engine.compiled`), instead of one kernel per op.
    """

    name: str
    elementwise_efficiency: float
    memory_reserve_GiB: float
    fused: bool
    attention: AttentionKernel
    launch_floor_us: tuple[tuple[KernelKind, float], ...] = ()
    autocast: bool = False
    flash: FlashKernel = FlashKernel()
    vocab_multiple: int = 1
    comm_contention: float = 0.0
    fuse_casts: bool = False
    description: str = ""
    compiled: bool = False

    def __post_init__(self) -> None:
        v = self.elementwise_efficiency
        if not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise InputError(f"stack {self.name}: elementwise_efficiency must be in (0, 1], "
                             f"got {v!r}")
        check_number(f"stack {self.name}: memory_reserve_GiB", self.memory_reserve_GiB,
                     *MEMORY_RESERVE_GiB)
        if self.compiled and self.fused:
            raise InputError(f"stack {self.name}: a compiled stack is an eager one whose "
                             "element-wise ops torch.compile fuses (fused=False)")
        c = self.comm_contention
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1:
            raise InputError(f"stack {self.name}: comm_contention must be in [0, 1], got {c!r}")
        check_bool(f"stack {self.name}: fuse_casts", self.fuse_casts)
        for kind, us in self.launch_floor_us:
            if not isinstance(kind, KernelKind) or not isinstance(us, (int, float)) or us < 0:
                raise InputError(f"stack {self.name}: launch floor {kind!r} = {us!r} must be "
                                 "a KernelKind and a number of us >= 0")

    def __repr__(self) -> str:
        """A preset by its name (signatures in docs/api.md stay readable); else every field."""
        if STACKS.get(self.name) is self:
            return f"{self.name.upper()}"
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__dataclass_fields__)
        return f"Stack({fields})"

    def floor_s(self, kind: KernelKind) -> float:
        """The per-call floor of a kernel of ``kind`` (seconds)."""
        return dict(self.launch_floor_us).get(kind, 0.0) * 1e-6

    def update_Bps(self, chip: Chip, stream_Bps: float) -> float:
        """The bandwidth the stack's optimizer step streams at on ``chip``, its element-wise
        kernels reaching ``stream_Bps``: a fused stack's update is one of them; eager
        PyTorch's fused AdamW kernel runs at its measured bandwidth, carried to this chip
        (:func:`kernel_Bps`). The one update efficiency of a stack, whichever front-end asks."""
        if self.fused:
            return stream_Bps
        return kernel_Bps(EagerKernel.OPTIMIZER, stream_Bps, sm_scale(chip))


#: fitted: scripts/fit_fsdp.py on the A100 rows of llm-foundry's MPT FSDP benchmark table
#: (accelsim/data/mpt) at the power-limited clock: a second of collective beside a layer's
#: compute costs it 0.15 s (NCCL's ring kernels hold SMs and HBM bandwidth: a property of the
#: GPU and NCCL, so every stack's); grid 0-1 by 0.05, MAE 6.22 % at 0 -> 6.17 % (a weak
#: optimum: 0-0.15 within 0.05 %). The first fit, at the preset's fixed clock, gave 0.60 (the
#: A100 rows ran faster there). Only overlapped schedules read it (FSDP, ``--tp-overlap``), so
#: the Megatron-LM and FP8-LM validations do not move.
COMM_CONTENTION = 0.15

#: Megatron-LM's stack as ``accelsim llm`` has always modelled it (the Megatron-LM and FP8-LM
#: validations were fitted with it; the LM head's vocabulary padding moved them by < 0.01 %)
MEGATRON = Stack(
    name="megatron",
    # fitted: scripts/llm_fit.py on Narayanan et al. SC'21 Table 1 (with network 0.52)
    elementwise_efficiency=0.45,
    # fitted: scripts/llm_fit.py on FP8-LM Table 5 (CUDA context, NCCL buffers, workspaces,
    # allocator reserve of a 2023 Megatron-LM / MS-AMP run on DGX H100; docs/llm.md)
    memory_reserve_GiB=11.3,
    fused=True,  # Megatron-LM's fused bias-GeLU, bias-dropout-add, softmax, LayerNorm kernels
    # the model's flash attention runs Transformer Engine's fused attention, which prefers
    # cuDNN's kernel on Hopper and FlashAttention-2 on Ampere (NVIDIA/NeMo#9188's docs; the
    # default FlashKernel and its fallback); without it, the unfused kernel it was fitted with
    attention=AttentionKernel.AS_MODEL,
    # Megatron-LM pads the vocabulary to a multiple of --make-vocab-size-divisible-by (default
    # 128) x the tensor-parallel size (megatron/training/tokenizer, _vocab_size_with_padding)
    vocab_multiple=128,
    comm_contention=COMM_CONTENTION,
    # Transformer Engine (what Megatron-LM and FP8-LM run FP8 with) casts a GEMM input in a
    # kernel of its own, nvte_fp8_quantize / nvte_cast_transpose (TE C API, cast.h and
    # transpose.h, 0.1.0 on: read the 16-bit tensor, write FP8 and its transpose, update amax);
    # the FP8-LM validation was fitted with these passes priced (read 2, write 1 bytes)
    fuse_casts=False,
    description="Megatron-LM (fused kernels, as fitted on Megatron-LM and FP8-LM runs)")

#: eager PyTorch on one GPU (or DDP): bf16 autocast, fused AdamW, SDPA attention
PYTORCH = Stack(
    name="pytorch",
    elementwise_efficiency=STREAM_EFFICIENCY,
    # the CUDA context with lazy module loading (CUDA >= 11.7, PyTorch's default): "around
    # 400MB" (pytorch/pytorch#109888, ptrblck 2023); it is outside the caching allocator, so
    # torch.cuda.max_memory_allocated does not count it. The allocator's cached slack is not
    # modelled (it depends on the allocation history).
    memory_reserve_GiB=0.4,
    fused=False,
    attention=AttentionKernel.FLASH,
    launch_floor_us=((KernelKind.GEMM, EAGER_GEMM_FLOOR_US),
                     # an SDPA call is a library call like a matmul (assumption: same floor)
                     (KernelKind.ATTENTION, EAGER_GEMM_FLOOR_US),
                     (KernelKind.ELEMENTWISE, EAGER_ELEMENTWISE_FLOOR_US),
                     (KernelKind.OPTIMIZER, EAGER_ELEMENTWISE_FLOOR_US)),
    autocast=True,
    comm_contention=COMM_CONTENTION,
    fuse_casts=False,  # eager: every cast its own kernel
    description="eager PyTorch (fp32 master weights under bf16 autocast or FSDP's bf16 "
                "param dtype, fused AdamW, SDPA)")

#: PyTorch under ``torch.compile`` (TorchInductor's default mode, no CUDA graphs) on one GPU,
#: DDP or FSDP: the eager stack's numbers with its element-wise ops fused into Inductor's
#: generated kernels (:mod:`accelsim.engine.compiled`). Its memory reserve is the eager
#: stack's (the same CUDA context: pytorch/pytorch#109888; the compiled graph's workspace is
#: the caching allocator's, as eager's tensors are). Its per-call floors are the eager stack's:
#: an assumption (the generated wrapper launches each kernel from Python as eager does; no
#: measurement of Inductor's launch overhead here).
PYTORCH_COMPILE = replace(
    PYTORCH, name="pytorch-compile", compiled=True,
    description="PyTorch under torch.compile (Inductor's fused element-wise kernels and norms, "
                "fp32 master weights under bf16 autocast or FSDP's bf16 param dtype, fused "
                "AdamW, SDPA)")

STACKS = {s.name: s for s in (MEGATRON, PYTORCH, PYTORCH_COMPILE)}


def get_stack(name: str) -> Stack:
    """The preset called ``name``; an unknown name is an :class:`InputError` naming the
    known ones."""
    try:
        return STACKS[name]
    except KeyError:
        raise InputError(f"unknown stack {name!r}; known: {', '.join(STACKS)}") from None
