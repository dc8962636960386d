"""Training-state and communication formats of mixed-precision AdamW training, as data: bytes per
parameter of every training state, bytes per element of every communicated tensor, and the GEMM
precision. A :class:`accelsim.arch.Scheme` carries one :class:`StateFormats` as its ``adamw``
recipe (the one scheme registry is :mod:`accelsim.arch.schemes`); the engine's transformer path
and every AdamW plan read it.

Sources:
* ``bf16``: Megatron-LM mixed precision (Narayanan et al. SC'21): bf16 working weights (2), an
  fp32 main-gradient buffer (4: Megatron's ``arguments.py`` forces
  ``accumulate_allreduce_grads_in_fp32`` with ``--bf16``, so gradients are accumulated and
  reduced in fp32), fp32 master weights (4) and Adam moments (8). FP8-LM's eq. 7 counts the
  optimizer path as 4 + 4 + 8 = 16 bytes per parameter (``bytes_per_param``); the working copy
  comes on top. The distributed optimizer all-gathers bf16 weights.
* ``te-fp8``: NVIDIA Transformer Engine (0.x, 2023, as FP8-LM ran it): FP8 GEMMs, states and
  communication as ``bf16``; each linear module keeps FP8 copies of its weight and of the
  weight's transpose between micro-batches (``set_fp8_weights``: ``weight_fp8``,
  ``weight_t_fp8``, 1 byte each) and saves the FP8 (transposed) input for the weight gradient
  instead of the 16-bit one.
* ``fp8-lm``: Peng et al. 2023, FP8-LM (arXiv:2310.18313), section 2: FP8 gradients and FP8
  gradient all-reduce with one scale per tensor, precision-decoupled AdamW (FP16 master weights
  with tensor scaling, FP8 first moment, FP16 second moment) -- 1 + 2 + 1 + 2 = 6 bytes per
  parameter (eq. 8) against 16 -- FP8 weights gathered by the whole-tensor ZeRO sharding and
  FP8 activations at the sequence-parallel all-gather (its Fig. 2 ``g``). Only the linear
  layers' weight matrices are FP8 tensors (MS-AMP replaces ``Linear`` weights by scaling
  tensors); embeddings, LayerNorms and biases keep the ``bf16`` states (``other_scheme``). The
  working weights stay 16-bit (2 bytes): FP8-LM Table 5's BF16 - FP8-LM memory differences
  (20.2, 19.3, 25.8 GiB for GPT-7B/13B/175B) equal the gradient (4 -> 1 B) and sharded
  optimizer (12 -> 5 B) savings alone within 7 %, leaving no 2 -> 1 B working-weight saving;
  the same differences leave no room for FP8 saved activations either, so the linear inputs
  are saved 16-bit (``saved_linear_input_bytes`` 2; docs/llm.md). Its per-micro-batch
  gradient accumulation (MS-AMP ``msamp/megatron/distributed.py``, ``_fp8_make_param_hook``:
  ``main_grad.copy_((main_grad.to(grad.dtype) + grad).cast(fp8))``) moves 18 bytes per
  FP8 parameter: the GEMM's 16-bit gradient written (2), the FP8 main gradient dequantized
  (read 1, write 2), the sum (read 2 + 2, write 2), its amax and FP8 cast (read 2 + 2,
  write 1) and the copy back (read 1, write 1).
* ``hfp8-gemm``: Sun et al. NeurIPS 2019 (HFP8) GEMMs (1-4-3 forward, 1-5-2 backward) under
  ordinary mixed-precision AdamW: FP16 weights and gradients, FP32 master weights and moments,
  FP16 gradient communication. (The paper's own system scheme, ``hfp8``, keeps 8-bit weights, a
  sharded update and an 8-bit all-gather: a different recipe, hence a different name.)
* ``hif8``: HiFloat8 (Luo et al. 2024) GEMMs on the chip's ``hif8`` datapath (its ``fp8`` one
  where it has none); states and communication as ``bf16`` (assumption: the paper changes the
  number format, not the optimizer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StateFormats:
    """Bytes per element of each training state / communicated tensor under one scheme.

    gemm_precision: the precision key of the system's MAC rates that linear layers run in
        (attention's score and P.V matmuls run at the scheme's precision when 16 or 32 bits and
        in bf16 under 8-bit schemes, as in Transformer Engine:
        :func:`accelsim.engine.graph.attention_precision`).
    weight_bytes, grad_bytes: the working weight copy and the gradient accumulator.
    master_bytes, moment_bytes: the optimizer's master weights and both Adam moments (sum).
    grad_comm_bytes: gradient all-reduce / reduce-scatter element size.
    weight_comm_bytes: ZeRO / distributed-optimizer weight all-gather element size.
    act_gather_bytes: element size of the sequence-parallel all-gather of a layer's input
        (FP8-LM Fig. 2's ``g``, forward and its re-gather in the backward pass);
        act_reduce_bytes: of every other tensor-parallel collective (the 16-bit partial sums
        and activation gradients: reduce-scatters, the gradient all-gathers, all-reduces).
    saved_linear_input_bytes: element size of the saved inputs of the four linear layers.
    grad_accumulation_bytes: HBM bytes per parameter and micro-batch of an unfused gradient
        accumulation (the weight-gradient GEMM's 16-bit output written, then the kernels that
        add it into the main gradient); bf16: 2 + (2 + 4 read, 4 written) = 12.
    fp8_weight_cache_bytes: cached low-precision copies per linear weight parameter, on top of
        ``weight_bytes`` (Transformer Engine's FP8 weight and its transpose).
    other_formats: when set, the formats the parameters outside the linear layers' weight
        matrices (embeddings, LayerNorms, biases) keep; None: the same formats for all.
    """

    name: str
    gemm_precision: str
    weight_bytes: float
    grad_bytes: float
    master_bytes: float
    moment_bytes: float
    grad_comm_bytes: float
    weight_comm_bytes: float
    act_gather_bytes: float
    act_reduce_bytes: float
    saved_linear_input_bytes: float
    description: str = ""
    other_formats: StateFormats | None = None
    fp8_weight_cache_bytes: float = 0
    grad_accumulation_bytes: float = 12

    def __post_init__(self) -> None:
        for f in ("weight_bytes", "grad_bytes", "master_bytes", "moment_bytes",
                  "grad_comm_bytes", "weight_comm_bytes", "act_gather_bytes",
                  "act_reduce_bytes", "saved_linear_input_bytes", "fp8_weight_cache_bytes",
                  "grad_accumulation_bytes"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"StateFormats {self.name}: {f} must be >= 0, got {v!r}")

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer states per parameter (master weights + moments)."""
        return self.master_bytes + self.moment_bytes

    @property
    def bytes_per_param(self) -> float:
        """FP8-LM's accounting (its eqs. 7 and 8): gradient + master weights + moments per
        parameter, without the working weight copy (16 for bf16, 6 for fp8-lm)."""
        return self.grad_bytes + self.optimizer_bytes

    @property
    def other(self) -> StateFormats:
        """The formats of the parameters outside the linear layers' weight matrices."""
        return self.other_formats if self.other_formats is not None else self


BF16 = StateFormats("bf16", "bf16", 2, 4, 4, 8, 4, 2, 2, 2, 2,
                    "Megatron-LM bf16 mixed precision, fp32 gradient buffer and reduction")
TE_FP8 = StateFormats("te-fp8", "fp8", 2, 4, 4, 8, 4, 2, 2, 2, 1,
                      "Transformer Engine: FP8 GEMMs, cached FP8 weights, the rest as bf16",
                      fp8_weight_cache_bytes=2)
# FP8-LM: FP8 gradient (1), FP16 master (2), FP8 m (1) + FP16 v (2) = eq. 8's 6 bytes, 16-bit
# working weights (see the module docstring); the SP all-gather in FP8, reduce-scatters 16-bit
FP8_LM = StateFormats("fp8-lm", "fp8", 2, 1, 2, 3, 1, 1, 1, 2, 2,
                      "FP8-LM O3: FP8 GEMMs, gradients, all-reduce, decoupled AdamW, "
                      "FP8 ZeRO and sequence-parallel all-gather", other_formats=BF16,
                      grad_accumulation_bytes=18)
HFP8_GEMM = StateFormats("hfp8-gemm", "hfp8", 2, 2, 4, 8, 2, 2, 2, 2, 2,
                         "HFP8 GEMMs (Sun et al. 2019), FP16 weights/gradients/comm, "
                         "fp32 master and moments", grad_accumulation_bytes=8)
HIF8 = StateFormats("hif8", "hif8", 2, 4, 4, 8, 4, 2, 2, 2, 2,
                    "HiFloat8 GEMMs on the hif8 datapath, states and communication as bf16")
#: 32-bit training (fp32 or TF32 tensor cores): the weights are the master copy (no second one),
#: 4-byte gradients, moments and communication; an unfused accumulation reads and writes 4 + 4
FP32 = StateFormats("fp32", "fp32", 4, 4, 0, 8, 4, 4, 4, 4, 4,
                    "FP32 weights, gradients, moments and communication",
                    grad_accumulation_bytes=16)


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of one GPU, split by the precision their states keep under a scheme.

    linear: the linear layers' weight matrices (QKV, projection, FC1, FC2; no biases), the
        tensors FP8 schemes store as FP8 -- at the scheme's own bytes;
    rest: everything else (embeddings, LayerNorms, biases) -- at ``scheme.other``'s bytes.
    """

    linear: float
    rest: float

    def __post_init__(self) -> None:
        for f in ("linear", "rest"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"ParamCounts.{f} must be >= 0, got {v!r}")

    @property
    def total(self) -> float:
        return self.linear + self.rest


def param_bytes(counts: ParamCounts, scheme: StateFormats,
                per_param: Callable[[StateFormats], float]) -> float:
    """Bytes of one per-parameter quantity over ``counts``: ``per_param(scheme)`` bytes for each
    linear weight-matrix parameter, ``per_param(scheme.other)`` for each of the rest. The
    one place the split is priced (memory states, DP communication, gradient accumulation,
    optimizer step), e.g. ``param_bytes(c, s, lambda x: x.grad_bytes)``."""
    return counts.linear * per_param(scheme) + counts.rest * per_param(scheme.other)
