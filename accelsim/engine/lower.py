"""Lowering a layer workload to the op graph, and the data-parallel transformation.

:func:`lower_workload` turns every layer of a layer workload (TOML, SCALE-Sim topology, ONNX
import, ``accelsim workload gpt``) into one typed op of :mod:`accelsim.engine.graph` (ConvOp,
LinearOp, MatmulOp, NormOp, PointwiseOp, PoolOp, EmbeddingOp, LossOp) at the precision the
scheme gives it (:func:`accelsim.perf.precision.layer_precisions`). :func:`time_layer_op` times
an op by perf's one per-layer formula (:func:`accelsim.perf.layer_model.evaluate_layer`, every
phase under each mapping). :func:`data_parallel_program` is the data-parallel transformation:
it appends the gradient reduction (reduce-scatter, all-gather of the reduced gradients or, for
a sharded update, of the updated weights) and the optimizer update to the program, as CommOps
and an UpdateOp, in the scheme's phase order; their times are netsim's
(:func:`accelsim.engine.run.comm_phases`). :func:`zero_comm_ops` is the same transformation
for a plan with ZeRO (the transformer path's data-parallel traffic,
:func:`accelsim.engine.comm.comm`), its CommOps timed on the node file's fabric
(:func:`accelsim.engine.comm.op_s` on :class:`accelsim.netsim.fabric.Fabric`).
"""

from __future__ import annotations

from accelsim.arch import System
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.engine.stack import Stack
from accelsim.engine.graph import (
    LAYER_OPS,
    CommKind,
    CommOp,
    LossOp,
    Phase,
    Stream,
    UpdateOp,
    LayerOp,
)
from accelsim.perf.gemm import FITTED, Efficiency
from accelsim.perf.layer_model import Mapping, evaluate_layer
from accelsim.perf.precision import layer_precisions
from accelsim.workload import Workload


def lower_workload(workload: Workload, batch: int, scheme: Scheme | str,
                   stack: Stack | None = None) -> tuple[LayerOp, ...]:
    """One typed op per layer of ``workload``, in forward order, each on ``batch`` samples (the
    minibatch a mapping then splits over chips and cores) at its precision under ``scheme``. A
    softmax that ends the network is its loss (:class:`~accelsim.engine.graph.LossOp`). Under
    a software ``stack`` the LM head's vocabulary is padded as the stack pads it
    (:func:`accelsim.engine.stack_ops.pad_head`)."""
    from accelsim.engine.stack_ops import pad_head, vocabulary

    prec = layer_precisions(workload, get_scheme(scheme))
    last = len(workload.layers) - 1
    vocab = vocabulary(workload)
    ops = []
    for i, layer in enumerate(workload.layers):
        cls = LossOp if (i == last and layer.kind == "softmax") else LAYER_OPS[layer.kind]
        if stack is not None:
            layer = pad_head(layer, vocab, stack)
        ops.append(cls(layer, batch, prec[layer.name]))
    return tuple(ops)


def time_layer_op(system: System, op: LayerOp, mappings: list[Mapping], *,
                  efficiency: Efficiency = FITTED) -> dict:
    """Every phase of ``op`` under each of ``mappings``: perf's per-layer formula
    (:func:`accelsim.perf.layer_model.evaluate_layer`, its columns; one row per phase x
    mapping)."""
    return evaluate_layer(system, op.layer, op.batch, op.precision, mappings,
                          efficiency=efficiency)


def update_op(n_params: int, scheme: Scheme | str, optimizer: str, chips: int,
              n_tensors: int = 0) -> UpdateOp:
    """The optimizer step of ``n_params`` parameters on each of ``chips`` data-parallel chips
    under ``scheme``'s recipe for ``optimizer`` (bytes per element from netsim's one update
    formula)."""
    from accelsim.netsim.update import update_bytes_per_elem

    sc = get_scheme(scheme).for_optimizer(optimizer)
    rd, wr = update_bytes_per_elem(sc, optimizer)
    return UpdateOp(n_params=n_params, chips=chips, sharded=sc.sharded_update,
                    read_bytes_per_elem=rd, write_bytes_per_elem=wr, n_tensors=n_tensors)


def gradient_comm_ops(n_params: int, scheme: Scheme | str, optimizer: str, chips: int, *,
                      compression: float = 1.0) -> tuple[CommOp, CommOp]:
    """The data-parallel gradient reduction over ``chips`` ranks as netsim times it: a
    reduce-scatter of the gradients and an all-gather (of the reduced gradients, or of the
    updated weights when the update is sharded), each at the scheme's bytes per element, the
    compressible phases divided by ``compression``."""
    sc = get_scheme(scheme).for_optimizer(optimizer)

    def size(phase: str, bpe: float) -> float:
        return n_params * (bpe / compression if phase in sc.compressible_phases else bpe)

    return (CommOp("reduce_scatter", CommKind.REDUCE_SCATTER,
                   size("reduce_scatter", sc.reduce_scatter_bytes_per_elem), chips),
            CommOp("all_gather", CommKind.ALL_GATHER,
                   size("all_gather", sc.all_gather_bytes_per_elem), chips))


def data_parallel_program(ops: tuple, workload: Workload, scheme: Scheme | str, optimizer: str,
                          chips: int, *, compression: float = 1.0) -> tuple:
    """The data-parallel transformation: ``ops`` (one replica's layers) followed by the step
    that synchronizes the ``chips`` replicas -- the gradient reduce-scatter and all-gather
    (none on one chip or without parameters) and the optimizer update -- in the scheme's phase
    order."""
    n = int(workload.n_params)
    if n == 0:
        return tuple(ops)
    sc = get_scheme(scheme)
    step = {"weight_update": update_op(n, sc, optimizer, chips, workload.n_param_tensors)}
    if chips > 1:
        rs, ag = gradient_comm_ops(n, sc, optimizer, chips, compression=compression)
        step.update(reduce_scatter=rs, all_gather=ag)
    return tuple(ops) + tuple(step[ph] for ph in sc.phase_order if ph in step)



def zero_comm_ops(grad_bytes: float, weight_bytes: float, zero: int, group: int,
                  stride: int = 1) -> tuple[CommOp, ...]:
    """The data-parallel transformation's collectives for ``group`` replicas ``stride`` ranks
    apart under ZeRO stage ``zero``: the gradient buffer (``grad_bytes`` per rank) all-reduced
    (ZeRO 0) or reduce-scattered (ZeRO 1-3), then the updated weights (``weight_bytes``)
    all-gathered once (ZeRO 1, 2: the distributed optimizer) or, ZeRO 3, in the forward and
    again in the backward pass. The reduction comes first."""
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    if zero == 0:
        return (CommOp("dp_reduce", CommKind.ALL_REDUCE, grad_bytes, group, stride),)
    reduce = CommOp("dp_reduce", CommKind.REDUCE_SCATTER, grad_bytes, group, stride)
    if zero < 3:
        return reduce, CommOp("dp_gather", CommKind.ALL_GATHER, weight_bytes, group, stride)
    return (reduce,
            CommOp("dp_gather", CommKind.ALL_GATHER, weight_bytes, group, stride, phase=Phase.FWD),
            CommOp("dp_gather", CommKind.ALL_GATHER, weight_bytes, group, stride, phase=Phase.BWD))

