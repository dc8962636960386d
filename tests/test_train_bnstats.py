"""HFP8 appendix C: the Monte-Carlo BN-output errors match the closed forms (eqs. 2 and 10)
within sampling error; the tolerance is z standard errors of the sample mean, se ~ 1/sqrt(n)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelsim.train.bnstats import bn_error_table, monte_carlo, preserved_error, retuned_error

Z = 4.0  # two-sided 4-sigma band: a correct model fails with probability ~6e-5 per comparison


@pytest.mark.parametrize("var_q", [1e-3, 0.03, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("x_dist,q_dist", [("normal", "uniform"), ("laplace", "normal")])
def test_monte_carlo_matches_closed_forms(var_q, x_dist, q_dist):
    rng = np.random.default_rng(int(var_q * 1000) + len(x_dist))
    mc = monte_carlo(rng, var_q, n=50_000, mu=1.5, sigma2=2.0, mean_q=0.1, x_dist=x_dist, q_dist=q_dist)
    assert abs(mc.preserved - preserved_error(var_q, 2.0, 0.1)) <= Z * mc.preserved_se
    assert abs(mc.retuned - retuned_error(var_q, 2.0)) <= Z * mc.retuned_se


def test_closed_forms_limits_and_ordering():
    for r in (1e-6, 1e-3, 0.1, 1.0, 10.0, 1e4):
        assert retuned_error(r) <= preserved_error(r)  # re-tuning never hurts (zero-mean Q)
        assert retuned_error(r) == pytest.approx(2.0 * (1.0 - 1.0 / math.sqrt(1.0 + r)), rel=1e-12)
    assert retuned_error(1e-8) == pytest.approx(1e-8, rel=1e-7)  # first order: both equal r
    assert retuned_error(1e12) == pytest.approx(2.0, rel=1e-5)  # saturates at 2
    assert preserved_error(0.0, 4.0, mean_q=1.0) == 0.25  # bias only
    assert retuned_error(0.0) == 0.0


def test_table_has_rows_per_ratio_and_is_deterministic():
    a = bn_error_table(np.random.default_rng(7), (0.01, 1.0), n=1000)
    b = bn_error_table(np.random.default_rng(7), (0.01, 1.0), n=1000)
    assert list(a["var_ratio"]) == [0.01, 1.0]
    assert a.equals(b)


def test_figure_is_written(tmp_path):
    from accelsim.report.bnstats import plot_bn_error

    t = bn_error_table(np.random.default_rng(1), (0.01, 0.1, 1.0), n=2000)
    p = plot_bn_error(t, tmp_path / "bn.png")
    assert p.stat().st_size > 1000
    with pytest.raises(ValueError):
        plot_bn_error(t.drop(columns="retuned_mc"), tmp_path / "x.png")


@pytest.mark.parametrize(
    "call",
    [
        lambda: preserved_error(-1.0),
        lambda: retuned_error(1.0, 0.0),
        lambda: monte_carlo(np.random.default_rng(0), 1.0, n=1),
        lambda: monte_carlo(np.random.default_rng(0), 1.0, x_dist="cauchy"),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
