"""Precision schemes for LLM training as data: bytes per parameter of every training state,
bytes per element of every communicated tensor, and the GEMM precision.

Sources:
* ``bf16``: Megatron-LM mixed precision (Narayanan et al. SC'21; Rajbhandari et al. ZeRO, SC'20,
  section 3.1: 2 + 2 + 12 = 16 bytes per parameter -- bf16 weights and gradients, fp32 master
  weights and Adam moments). Megatron all-reduces bf16 gradients in fp32
  (``--accumulate-allreduce-grads-in-fp32``, the default with bf16), so gradients travel in
  4 bytes; the distributed optimizer all-gathers bf16 weights.
* ``te-fp8``: NVIDIA Transformer Engine: FP8 GEMMs, everything else as ``bf16``.
* ``fp8-lm``: Peng et al. 2023, FP8-LM (arXiv:2310.18313), section 2: FP8 gradients and FP8
  gradient all-reduce with one scale per tensor, precision-decoupled AdamW (FP16 master weights
  with tensor scaling, FP8 first moment, FP16 second moment) -- 2 + 1 + 1 + 2 = 6 bytes per
  parameter against 16 -- FP8 weights gathered by the whole-tensor ZeRO sharding and FP8
  activations at the tensor/sequence-parallel all-gather.
* ``hfp8``: Sun et al. NeurIPS 2019 (HFP8): 8-bit GEMMs (1-4-3 forward, 1-5-2 backward), FP16
  weights and gradients, FP32 master weights and moments, FP16 gradient communication.
* ``hif8``: HiFloat8 (Luo et al. 2024) GEMMs at the 8-bit rate; states and communication as
  ``te-fp8`` (assumption: the paper changes the number format, not the optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlmScheme:
    """Bytes per element of each training state / communicated tensor under one scheme.

    gemm_precision: the precision key of the system's MAC rates that linear layers run in
        (attention score and P.V matmuls always run in ``bf16``, as in Transformer Engine).
    weight_bytes, grad_bytes: the working weight copy and the gradient accumulator.
    master_bytes, moment_bytes: the optimizer's master weights and both Adam moments (sum).
    grad_comm_bytes: gradient all-reduce / reduce-scatter element size.
    weight_comm_bytes: ZeRO / distributed-optimizer weight all-gather element size.
    act_gather_bytes: element size of the tensor/sequence-parallel activation all-gathers
        (and all-reduces without sequence parallelism); act_reduce_bytes: of the reduce-scatters.
    saved_linear_input_bytes: element size of the saved inputs of the four linear layers.
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

    def __post_init__(self) -> None:
        for f in ("weight_bytes", "grad_bytes", "master_bytes", "moment_bytes",
                  "grad_comm_bytes", "weight_comm_bytes", "act_gather_bytes",
                  "act_reduce_bytes", "saved_linear_input_bytes"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"LlmScheme {self.name}: {f} must be >= 0, got {v!r}")

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer states per parameter (master weights + moments)."""
        return self.master_bytes + self.moment_bytes

    @property
    def bytes_per_param(self) -> float:
        """Model states per parameter without sharding (16 for bf16, 6 for fp8-lm)."""
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes


SCHEMES: dict[str, LlmScheme] = {
    "bf16": LlmScheme("bf16", "bf16", 2, 2, 4, 8, 4, 2, 2, 2, 2,
                      "Megatron-LM bf16 mixed precision, fp32 gradient all-reduce"),
    "te-fp8": LlmScheme("te-fp8", "fp8", 2, 2, 4, 8, 4, 2, 2, 2, 2,
                        "Transformer Engine: FP8 GEMMs, the rest as bf16"),
    # FP8-LM counts 6 bytes: FP16 master (2), FP8 gradient (1), FP8 m (1), FP16 v (2); the FP8
    # working weights are cast from the master copy and counted there (weight_bytes 0).
    "fp8-lm": LlmScheme("fp8-lm", "fp8", 0, 1, 2, 3, 1, 1, 1, 2, 1,
                        "FP8-LM O3: FP8 GEMMs, gradients, all-reduce, decoupled AdamW, "
                        "FP8 ZeRO and tensor-parallel all-gather"),
    "hfp8": LlmScheme("hfp8", "hfp8", 2, 2, 4, 8, 2, 2, 2, 2, 2,
                      "HFP8 (Sun et al. 2019): hybrid FP8 GEMMs, FP16 weights/gradients/comm"),
    "hif8": LlmScheme("hif8", "fp8", 2, 2, 4, 8, 4, 2, 2, 2, 2,
                      "HiFloat8 GEMMs at the 8-bit rate, the rest as te-fp8"),
}


def get_scheme(name: str) -> LlmScheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown LLM scheme {name!r}; known: {', '.join(SCHEMES)}") from None
