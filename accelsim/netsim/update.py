"""Weight-update phase: the optimizer step as a memory/vector-unit-bound operation on one chip.

Cost model (per chip, elementwise, so the roofline of a streaming kernel applies):

    bytes = n_elems x (bytes read + bytes written per element)      [scheme precisions]
    ops   = n_elems x (optimizer ops + residual ops per element)
    time  = max(bytes / (memory_Bps x memory_efficiency), ops / vector_ops_per_s)
            + n_tensors x per_tensor_overhead_s

``n_elems`` is the whole model for replicated schemes (fp16, fp8: every chip updates all
weights) and ``ceil(n_params / N)`` for sharded ones (hfp8: each chip updates the shard it owns
and keeps its FP16 round-off residual).  Per element (SGD with momentum, mu m + g; w - lr m):

    read : gradient, master weight, momentum, residual (hfp8)
    write: master weight, momentum, residual (hfp8), low-precision compute copy (fp8)

The scheme is first resolved for the optimizer (:meth:`accelsim.arch.Scheme.for_optimizer`: under
AdamW its mixed-precision formats, e.g. bf16's fp32 gradient, master weight and moments, with the
16-bit working weight written back as the compute copy). AdamW keeps two state tensors (m, v)
and does ~12 vector ops per element (moments, bias
correction, sqrt, divide); plain SGD keeps none.  Vector-op counts are operation counts of the
update formulas, not measurements.

Gradient compression (AdaComp, Chen et al., AAAI 2018; Deep Gradient Compression, Lin et al.,
ICLR 2018): before the reduce-scatter every chip scans its local gradient once, adding it to a
local residue, selecting the elements to send and keeping the rest in the residue.  Modelled as
a streaming pass over all ``n_params`` elements reading the gradient and the residue and
writing the residue (``compress_bytes_per_elem`` = 3 x gradient bytes by default) with
``compress_ops_per_elem`` vector ops (add, magnitude, compare against the bin/threshold,
select: 4 by default).  Decompressing the received sparse chunks and adding them touches only
the selected elements (~ n/compression), counted with the same per-element costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.arch.schemes import OPTIMIZERS, Scheme, get_scheme
from accelsim.bounds import PER_TENSOR_OVERHEAD_S, check_number
from accelsim.errors import InputError, check_int



@dataclass(frozen=True)
class UpdateParams:
    """Global, physically meaningful knobs of the weight-update and compression model.

    memory_efficiency: fraction of peak memory bandwidth a streaming update kernel achieves.
    per_tensor_overhead_s: fixed cost per parameter tensor per update (kernel launch, sync,
        scale bookkeeping); multiplied by ``n_tensors`` (the workload's parameter tensors).
    compress_ops_per_elem, compress_bytes_per_elem: gradient-compression pass costs (above);
        ``None`` bytes means 3 x the scheme's gradient bytes.
    """

    memory_efficiency: float = 1.0
    per_tensor_overhead_s: float = 0.0
    compress_ops_per_elem: float = 4.0
    compress_bytes_per_elem: float | None = None

    def __post_init__(self) -> None:
        check_number("UpdateParams.memory_efficiency", self.memory_efficiency, 0.0, 1.0,
                     lo_open=True)
        check_number("UpdateParams.per_tensor_overhead_s", self.per_tensor_overhead_s,
                     *PER_TENSOR_OVERHEAD_S)
        check_number("UpdateParams.compress_ops_per_elem", self.compress_ops_per_elem, 0.0)
        if self.compress_bytes_per_elem is not None:
            check_number("UpdateParams.compress_bytes_per_elem", self.compress_bytes_per_elem,
                         0.0)


@dataclass(frozen=True)
class UpdateCost:
    """Cost of one elementwise pass on one chip."""

    elems: int
    bytes: float
    ops: float
    time_s: float
    bound: str  # "memory" | "vector" | "none"


def _check_rate(name: str, x: float) -> None:
    if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
        raise InputError(f"{name} must be a positive finite number, got {x!r}")


def check_counts(n_params: int, n_tensors: int) -> None:
    """A model's parameter and parameter-tensor counts: integers >= 0 (0: a model without
    weights), no more tensors than parameters (each tensor holds at least one; 10^12 tensors of
    10^3 parameters priced 10^12 per-tensor overheads)."""
    check_int("n_params", n_params, 0)
    check_int("n_tensors", n_tensors, 0)
    if n_tensors > n_params:
        raise InputError(f"n_tensors {n_tensors:,} is more than n_params {n_params:,}: every "
                         "parameter tensor holds at least one parameter")


def update_bytes_per_elem(scheme: Scheme | str,
                          optimizer: str = "sgd-momentum") -> tuple[float, float]:
    """(bytes read, bytes written) per updated element: the one per-parameter update formula
    (the engine's transformer path prices its optimizer step with it too)."""
    sc = get_scheme(scheme).for_optimizer(optimizer)
    n_state = _optimizer(optimizer)[0]
    read = sc.gradient_bytes + sc.master_weight_bytes + n_state * sc.optimizer_state_bytes \
        + sc.residual_bytes
    write = sc.master_weight_bytes + n_state * sc.optimizer_state_bytes + sc.residual_bytes \
        + sc.compute_copy_bytes
    return read, write


def _optimizer(name: str) -> tuple[int, float]:
    try:
        return OPTIMIZERS[name]
    except KeyError:
        raise InputError(f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}") from None


def _roofline(elems, nbytes, ops, memory_Bps, vector_ops_per_s, eff, overhead) -> UpdateCost:
    t_mem = nbytes / (memory_Bps * eff)
    t_vec = ops / vector_ops_per_s
    bound = "none" if elems == 0 else ("memory" if t_mem >= t_vec else "vector")
    return UpdateCost(elems=elems, bytes=nbytes, ops=ops, time_s=max(t_mem, t_vec) + overhead,
                      bound=bound)


def weight_update_cost(n_params: int, scheme: Scheme | str, n_chips: int, *, memory_Bps: float,
                       vector_ops_per_s: float, optimizer: str = "sgd-momentum",
                       n_tensors: int = 0, params: UpdateParams = UpdateParams()) -> UpdateCost:
    """Per-chip optimizer step for ``n_params`` parameters under ``scheme`` on ``n_chips``."""
    sc = get_scheme(scheme).for_optimizer(optimizer)
    check_counts(n_params, n_tensors)
    check_int("n_chips", n_chips)
    _check_rate("memory_Bps", memory_Bps)
    _check_rate("vector_ops_per_s", vector_ops_per_s)
    _, ops_pe = _optimizer(optimizer)
    elems = -(-n_params // n_chips) if sc.sharded_update else n_params
    rd, wr = update_bytes_per_elem(sc, optimizer)
    ops = elems * (ops_pe + sc.residual_ops_per_elem)
    # A sharded update touches every parameter tensor's slice on every chip (the shard cuts
    # through the flattened model), so the per-tensor overhead does not shrink with N.
    return _roofline(elems, elems * (rd + wr), ops, memory_Bps, vector_ops_per_s,
                     params.memory_efficiency, n_tensors * params.per_tensor_overhead_s)


def compression_cost(n_params: int, scheme: Scheme | str, compression: float, *,
                     memory_Bps: float, vector_ops_per_s: float,
                     params: UpdateParams = UpdateParams()) -> UpdateCost:
    """Per-chip compress (full local gradient) + decompress-add (selected elements) cost.

    Zero when ``compression == 1`` (no compression)."""
    sc = get_scheme(scheme)
    if not (isinstance(compression, (int, float)) and math.isfinite(compression)
            and compression >= 1):
        raise InputError(f"compression factor must be a number >= 1, got {compression!r}")
    if compression == 1:
        return UpdateCost(elems=0, bytes=0.0, ops=0.0, time_s=0.0, bound="none")
    _check_rate("memory_Bps", memory_Bps)
    _check_rate("vector_ops_per_s", vector_ops_per_s)
    bpe = 3 * sc.gradient_bytes if params.compress_bytes_per_elem is None \
        else params.compress_bytes_per_elem
    elems = n_params + math.ceil(n_params / compression)
    return _roofline(elems, elems * bpe, elems * params.compress_ops_per_elem, memory_Bps,
                     vector_ops_per_s, params.memory_efficiency, 0.0)
