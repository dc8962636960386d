"""The two doors of the Chakra room: :func:`write_chakra` turns an engine prediction into one
trace file per distinct rank plus a manifest, :func:`predict_chakra` times a trace directory on
a system (:mod:`accelsim.chakra.sim`)."""

from __future__ import annotations

from pathlib import Path

from accelsim.arch import System
from accelsim.chakra.codec import NodeType
from accelsim.chakra.trace import EtOp, Export, Group, RankGraph, write_dir
from accelsim.engine.graph import CommOp, Stream
from accelsim.engine.inference import InferenceResult
from accelsim.engine.plan import LlmParams
from accelsim.engine.prediction import Prediction
from accelsim.engine.run import WorkloadPrediction
from accelsim.errors import InputError


def workload_export(r: WorkloadPrediction) -> Export:
    """A layer workload's data-parallel iteration (:meth:`WorkloadPrediction.graph`): every rank
    runs the one graph; its collectives span the ``dp`` group of every chip."""
    comm = {op.name: op for op, _ in r.step_ops() if isinstance(op, CommOp)}
    ops = []
    for t in r.graph():
        if t.stream == Stream.COMPUTE:
            ops.append(EtOp(f"{t.layer} {t.op}" if t.layer != t.op else t.op,
                            NodeType.COMP_NODE, t.time_s, str(t.stream), t.phase, t.deps,
                            flops=t.flops, bytes=t.bytes, layer=t.layer))
            continue
        op = comm.get(t.op)
        if op is None:
            raise ValueError(f"graph task {t.layer}/{t.op} on {t.stream} has no CommOp")
        ops.append(EtOp(f"{t.layer} {t.op}", NodeType.COMM_COLL_NODE, t.time_s,
                        str(t.stream), t.phase, t.deps, comm=op.kind,
                        size_bytes=op.size_bytes, pg="dp", layer=t.layer))
    chips = r.system.chips
    return Export((RankGraph(0, tuple(ops), tuple((i, i) for i in range(chips))),), chips,
                  (("dp", Group(chips, 1)),),
                  f"accelsim predict: {r.workload.name} on {r.system.name}, {r.scheme.name}")


def write_chakra(out_dir: Path | str, prediction, every_rank: bool = False) -> Path:
    """Write ``prediction`` (an llm/transformer :class:`Prediction`, a layer workload's
    :class:`WorkloadPrediction`, an :class:`InferenceResult` or an export already built) as
    Chakra traces in ``out_dir``;
    returns the manifest's path. ``every_rank``: one file per rank, each group instance its own
    ``pg_name`` (:func:`accelsim.chakra.trace.every_rank`: what ASTRA-sim reads)."""
    if isinstance(prediction, Export):
        ex = prediction
    elif isinstance(prediction, Prediction):
        from accelsim.chakra.llm_graph import llm_export

        ex = llm_export(prediction)
    elif isinstance(prediction, WorkloadPrediction):
        ex = workload_export(prediction)
    elif isinstance(prediction, InferenceResult):
        from accelsim.chakra.infer_graph import infer_export

        ex = infer_export(prediction)
    else:
        raise InputError(f"--chakra: no Chakra export for a {type(prediction).__name__}")
    if every_rank:
        from accelsim.chakra.trace import every_rank as expand

        ex = expand(ex)
    return write_dir(out_dir, ex)


def predict_chakra(spec: str | Path, system: System, batch: int = 0,
                   params: LlmParams = LlmParams(), engine: str = "analytic",
                   retime: str | None = None):
    """Read, check, time and schedule the trace directory ``spec`` (``chakra:DIR``) on
    ``system`` (:class:`accelsim.chakra.sim.ChakraRun`); ``retime``: GEMM nodes timed by perf's
    formula on ``system``, at this precision unless a node names its own."""
    from accelsim.chakra.load import load_job
    from accelsim.chakra.sim import simulate_job
    from accelsim.engine.comm import fabric_of

    job = load_job(spec)
    return simulate_job(job, system, fabric_of(system, params, engine), batch, retime)
