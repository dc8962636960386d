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
    order = one_f_one_b(4, 0, 6)
    assert order[:4] == [(Phase.FWD, 0), (Phase.FWD, 1), (Phase.FWD, 2), (Phase.FWD, 3)]
    assert order[4:6] == [(Phase.BWD, 0), (Phase.FWD, 4)]
    assert one_f_one_b(4, 3, 2) == [(Phase.FWD, 0), (Phase.BWD, 0), (Phase.FWD, 1),
                                    (Phase.BWD, 1)]
    for s in range(4):
        o = one_f_one_b(4, s, 6)
        assert sorted(o) == sorted([(ph, k) for ph in (Phase.FWD, Phase.BWD) for k in range(6)])


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
