"""The 1F1B pipeline as a schedule (accelsim.engine.pipeline): the order on each stage, the
closed form (m + p - 1) slots for equal stages, and unequal stages at their slowest one's pace."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.engine.graph import Phase
from accelsim.engine.pipeline import one_f_one_b, pipeline_schedule
from accelsim.engine.schedule import pipeline_s


def test_one_f_one_b_order():
    # PipeDream-Flush, 4 stages, 6 micro-batches: stage 0 warms up with 3 forwards
    F, B = Phase.FWD, Phase.BWD
    order = one_f_one_b(4, 0, 6)
    assert order[:4] == [(F, 0, 0), (F, 0, 1), (F, 0, 2), (F, 0, 3)]
    assert order[4:6] == [(B, 0, 0), (F, 0, 4)]
    assert one_f_one_b(4, 3, 2) == [(F, 0, 0), (B, 0, 0), (F, 0, 1), (B, 0, 1)]
    for s in range(4):
        o = one_f_one_b(4, s, 6)
        assert sorted(o) == sorted([(ph, 0, k) for ph in (F, B) for k in range(6)])
    # interleaved (Megatron's get_model_chunk_id): 2 chunks, the forwards 4 micro-batches at a
    # time through chunk 0 then chunk 1; stage 0 warms up with 2 x 3 + 1 x 4 = 10 forwards
    o = one_f_one_b(4, 0, 8, chunks=2)
    assert o[:8] == [(F, 0, 0), (F, 0, 1), (F, 0, 2), (F, 0, 3),
                     (F, 1, 0), (F, 1, 1), (F, 1, 2), (F, 1, 3)]
    assert [x[0] for x in o[:10]] == [F] * 10 and o[11] == (B, 1, 0)


@pytest.mark.parametrize("p, m, v", [(4, 8, 2), (4, 16, 2), (2, 4, 2), (8, 16, 2), (4, 8, 4),
                                     (8, 32, 3), (3, 6, 2)])
def test_equal_stages_interleaved_are_the_closed_form(p, m, v):
    """Interleaved 1F1B's bubble is (p - 1) / v slots (SC'21 section 2.2)."""
    s = pipeline_schedule([1.0] * p, [2.0] * p, m, chunks=v)
    assert s.makespan_s == pytest.approx(pipeline_s(3.0, m, p, v)[0], rel=1e-12)


@pytest.mark.parametrize("p, m", [(1, 4), (2, 4), (4, 8), (4, 16), (8, 32), (3, 2), (8, 3)])
def test_equal_stages_are_the_closed_form(p, m):
    s = pipeline_schedule([1.0] * p, [2.0] * p, m)
    assert s.makespan_s == pytest.approx(pipeline_s(3.0, m, p)[0], rel=1e-12)


def test_unequal_stages_run_at_the_slowest_pace():
    """In the steady state every further micro-batch adds the slowest stage's forward +
    backward; sends shorter than a pass hide behind the other stages' work."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        p = int(rng.integers(2, 6))
        f, b = list(rng.uniform(0.5, 2, p)), list(rng.uniform(1, 4, p))
        t = [pipeline_schedule(f, b, m, 0.05).makespan_s for m in (6 * p, 6 * p + 1)]
        assert t[1] - t[0] == pytest.approx(max(x + y for x, y in zip(f, b)), rel=1e-9)
        # never faster than the slowest stage alone, never slower than all at its pace
        slow = max(x + y for x, y in zip(f, b))
        assert 6 * p * slow <= t[0] <= (6 * p + p - 1) * slow + 2 * (p - 1) * 0.05 * 6 * p


def test_bad_pipelines_are_refused():
    with pytest.raises(ValueError, match="one forward and one backward"):
        pipeline_schedule([1.0], [1.0, 2.0], 4)
    with pytest.raises(ValueError, match="micro-batches"):
        pipeline_schedule([1.0], [1.0], 0)
    with pytest.raises(ValueError, match="multiple of the 4 stages"):
        pipeline_schedule([1.0] * 4, [1.0] * 4, 6, chunks=2)
