"""4-bit quantizers of the int4-fp4 recipe (accelsim.train.lowbit)."""

from __future__ import annotations

import numpy as np

from accelsim.train.lowbit import pact, pact_alpha_grad, radix4, sawb, sawb_coefficients


def test_pact_codes_and_clip_gradient():
    x = np.array([0.0, 0.3, 1.0, 2.5, 7.0])
    q, d = pact(x, 3.0)
    assert d == 3.0 / 15
    np.testing.assert_array_equal(q, [0, 2, 5, 12, 15])  # rint(x * 5), clipped at 15
    dx, g = pact_alpha_grad(x, np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 2.5)
    np.testing.assert_array_equal(dx, [1, 2, 3, 0, 0])
    assert g == 9.0


def test_pact_alpha_gradient_matches_finite_differences():
    # L = sum(R * y(x; alpha)) with y the clip: dL/dalpha = sum of R where x >= alpha
    rng = np.random.default_rng(0)
    x, R, alpha, h = rng.uniform(0, 4, 50), rng.standard_normal(50), 2.0, 1e-7
    clip = lambda a: np.clip(x, 0, a)  # noqa: E731
    fd = ((R * clip(alpha + h)).sum() - (R * clip(alpha - h)).sum()) / (2 * h)
    _, g = pact_alpha_grad(x, R, alpha)
    assert abs(g - fd) < 1e-6


def test_sawb_fit_is_near_the_mse_optimal_clip_for_a_gaussian():
    c1, c2 = sawb_coefficients()
    assert c1 > 0 and c2 > 0
    w = np.random.default_rng(1).standard_normal(50000) * 0.05
    q, d = sawb(w)
    assert set(np.unique(q)) <= set(range(-7, 8))
    mse = np.mean((q * d - w) ** 2)
    best = min(np.mean((np.clip(np.rint(w / (a / 7)), -7, 7) * a / 7 - w) ** 2)
               for a in np.linspace(0.01, 0.25, 400))
    assert mse <= 1.05 * best


def test_radix4_two_phases_use_complementary_power_of_two_grids():
    g = np.random.default_rng(2).standard_normal(1000) * 1e-3
    for phase in (0, 1):
        q, d = radix4(g, phase)
        nz = np.abs(q[q != 0])
        e = np.log2(nz)
        assert np.all(e == np.round(e)) and np.all(np.round(e) % 2 == phase)  # 4^k or 2 x 4^k
        assert nz.max() == 2.0**phase and d == 2.0 ** np.round(np.log2(d))  # GradScale: power of two
        assert np.all(np.sign(q[q != 0]) == np.sign(g[q != 0]))
