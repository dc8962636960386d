"""The one scheduler (accelsim.engine.scheduler): CUDA-stream semantics on small graphs timed by
hand, exposure that sums to the makespan by construction, and memory events."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from accelsim.engine.graph import Phase, Stream
from accelsim.engine.scheduler import Graph, Task, schedule

C, DP, TP = Stream.COMPUTE, Stream.DP, Stream.TP


def _task(name, t, stream=C, deps=(), **kw):
    return Task(name, name, Phase.FWD, t, stream, tuple(deps), **kw)


def test_backward_buckets_hide_behind_the_rest_of_backward():
    """Three backward layers of 2 s; each layer's gradient reduce-scatter (1 s, DP stream)
    starts when its layer is done: only the last one sticks out."""
    g = Graph()
    rs = []
    for i in range(3):
        b = g.add(_task(f"bwd{i}", 2.0, deps=g.last(C)))
        rs.append(g.add(_task(f"rs{i}", 1.0, DP, deps=(b,))))
    s = schedule(g.tasks)
    assert s.makespan_s == 7.0
    assert [s.start_s[i] for i in rs] == [2.0, 4.0, 6.0]
    ex = dict(zip((t.op for t in s.tasks), s.exposed_s()))
    assert ex == {"bwd0": 2.0, "rs0": 0.0, "bwd1": 2.0, "rs1": 0.0, "bwd2": 2.0, "rs2": 1.0}


def test_a_stream_is_fifo_and_a_slow_collective_queues():
    """Reduce-scatters of 3 s behind 1 s layers queue on their stream (in order): the last
    one ends at 1 + 3 x 3 = 10 s; the optimizer step waits for it."""
    g = Graph()
    for i in range(3):
        b = g.add(_task(f"bwd{i}", 1.0, deps=g.last(C)))
        g.add(_task(f"rs{i}", 3.0, DP, deps=(b,)))
    g.add(_task("update", 0.5, deps=g.last(DP)))
    s = schedule(g.tasks)
    assert s.end_s[-2] == 10.0 and s.makespan_s == 10.5
    assert sum(s.exposed_s()) == pytest.approx(s.makespan_s, rel=1e-15)


def test_exposure_always_sums_to_the_makespan():
    """Random graphs over four streams: the shares sum to the makespan, none is negative or
    above its task's time, and a task runs no earlier than its dependencies end."""
    rng = np.random.default_rng(7)
    streams = (C, DP, TP, Stream.PP)
    for _ in range(50):
        g = Graph()
        for i in range(int(rng.integers(1, 30))):
            deps = tuple(sorted({int(d) for d in rng.integers(0, i, size=2)})) if i else ()
            g.add(_task(f"t{i}", float(rng.choice([0.0, rng.exponential()])),
                        streams[int(rng.integers(4))], deps))
        s = schedule(g.tasks)
        ex = s.exposed_s()
        assert sum(ex) == pytest.approx(s.makespan_s, rel=1e-12, abs=1e-15)
        for t, e, st in zip(s.tasks, ex, s.start_s):
            assert -1e-15 <= e <= t.time_s + 1e-12
            assert all(st >= s.end_s[d] for d in t.deps)
        for a, b in itertools.combinations(range(len(s.tasks)), 2):  # one task at a time
            if s.tasks[a].stream == s.tasks[b].stream:
                assert s.end_s[a] <= s.start_s[b] + 1e-12


def test_rows_and_trace_come_from_the_schedule():
    g = Graph()
    a = g.add(_task("fwd", 2.0, flops=10.0))
    g.add(_task("ar", 1.0, TP, deps=(a,), bytes=5.0))
    g.add(_task("bwd", 3.0, deps=(a,)))
    s = schedule(g.tasks)
    rows = s.rows()
    assert [(r.op, r.time_s, r.exposed_s) for r in rows] == [("fwd", 2.0, 2.0), ("ar", 1.0, 0.0),
                                                             ("bwd", 3.0, 3.0)]
    assert rows[0].flops == 10.0 and rows[1].bytes == 5.0 and rows[1].stream == TP
    tl = s.timeline()
    assert tl.end_s == s.makespan_s == 5.0
    assert [(e.start_s, e.stream) for e in tl.events] == [(0.0, C), (2.0, TP), (2.0, C)]


def test_memory_is_the_running_sum_along_the_schedule():
    """Activations allocated by the forward ops and freed by the backward ones: the peak is
    at the end of the forward pass; a free at the instant of an allocation goes first."""
    g = Graph()
    g.add(_task("f0", 1.0, alloc_bytes=10.0))
    g.add(_task("f1", 1.0, deps=g.last(), alloc_bytes=20.0))
    g.add(_task("b1", 1.0, deps=g.last(), free_bytes=20.0))
    g.add(_task("b0", 1.0, deps=g.last(), free_bytes=10.0, alloc_bytes=5.0))
    s = schedule(g.tasks)
    assert s.memory_peak_bytes(100.0) == 130.0


def test_bad_graphs_are_refused():
    g = Graph()
    with pytest.raises(ValueError, match="earlier task"):
        g.add(_task("x", 1.0, deps=(0,)))
    with pytest.raises(ValueError, match="must be >= 0"):
        g.add(_task("x", -1.0))
    with pytest.raises(ValueError, match="earlier tasks"):
        schedule([_task("x", 1.0, deps=(1,)), _task("y", 1.0)])


@pytest.mark.parametrize("overlap", [False, True])
def test_transformer_step_after_the_pipeline_is_scheduled(overlap):
    """llm's iteration after its micro-batches: the gradient reduction hides behind the last
    micro-batch's backward pass only with overlap_grad_reduce (PyTorch DDP's buckets), the
    optimizer waits for it, the ZeRO weight gathers follow the optimizer -- by hand:
    pipeline + max(0, reduce - window) + optimizer + gathers; the rows sum to the iteration."""
    from accelsim.arch import build_system
    from accelsim.engine import Plan, predict
    from accelsim.paths import REPO_ROOT
    from accelsim.workload.gpt import GptConfig

    node = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
    gpt = GptConfig(layers=4, hidden=2048, heads=16, seq=1024, vocab=32000,
                    flash_attention=True)
    r = predict(gpt, Plan(tp=1, pp=2, dp=4, micro_batch=1, global_batch=8, zero=1,
                          overlap_grad_reduce=overlap), "bf16", node)
    cm = r.comm
    window = r.backward_s if overlap else 0.0
    want = r.pipeline_s + max(0.0, cm.dp_reduce_s - window) + r.optimizer_s + cm.dp_gather_s
    assert r.iteration_time_s == pytest.approx(want, rel=1e-12)
    assert sum(x.exposed_s for x in r.rows()) == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert r.timeline().end_s == pytest.approx(r.iteration_time_s, rel=1e-12)
    (red,) = [x for x in r.rows() if x.op == "dp_reduce"]
    assert red.exposed_s == pytest.approx(max(0.0, cm.dp_reduce_s - window), abs=1e-15)


def test_data_parallel_graph_orders_its_step():
    """The data-parallel step's graph: without buckets the compression pass and the
    reduce-scatter follow back-propagation; with buckets but no layer to reduce the pass still
    runs; each step task waits for the one before, whatever its stream."""
    from accelsim.engine.scheduler import LayerPhases, data_parallel_graph

    layer = LayerPhases("l0", "linear", ((Phase.FWD, 1.0, 0.0, 0.0, ""),
                                         (Phase.WGRAD, 1.0, 0.0, 0.0, ""),
                                         (Phase.BWD_DATA, 1.0, 0.0, 0.0, "")), 2.0)
    step = [Task("grads", "x", Phase.STEP, 1.0, TP), Task("grads", "y", Phase.STEP, 1.0, TP)]
    plain = schedule(data_parallel_graph([layer], step=step, compression_s=0.5))
    assert plain.makespan_s == 3.0 + 0.5 + 2.0 + 1.0 + 1.0
    quiet = LayerPhases("l0", "linear", layer.phases, 0.0)
    for buckets in (False, True):
        s = schedule(data_parallel_graph([quiet], step=[], compression_s=5.0, buckets=buckets))
        assert s.makespan_s == 8.0  # the compression pass is never dropped
    # with a bucket the reduce-scatter starts when the weight gradient is ready (t = 2):
    # compression 0.5 then 2 s on the DP stream beside the data gradient, then x and y in turn
    b = schedule(data_parallel_graph([layer], step=step, compression_s=0.5, buckets=True))
    assert b.makespan_s == 2.0 + 0.5 + 2.0 + 1.0 + 1.0
    starts = {t.op: st for t, st in zip(b.tasks, b.start_s)}
    assert starts["y"] == starts["x"] + 1.0
