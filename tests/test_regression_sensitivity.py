"""Exact L1 sensitivity of the regression statistic: audited by search over neighbouring records.

The exact bound (the default up to d = 3) must never be exceeded by any pair of records in the
box — random pairs, pairs on a dense grid, and pairs optimised by L-BFGS-B — and must be reached
by the optimised search (it is the sensitivity, not just a bound).
"""

import itertools

import numpy as np
import pytest
from scipy import optimize

from pymc_dp.curator.regression.exact_l1 import (
    MAX_EXACT_COMPONENTS,
    RELATIVE_MARGIN,
    exact_l1_sensitivity,
    quadratic_box_range,
)
from pymc_dp.curator.regression.release import RegressionRelease, release_regression
from pymc_dp.curator.regression.sensitivity import (
    default_sensitivity_bound,
    regression_sensitivity,
    sum_of_ranges,
)
from pymc_dp.curator.regression.statistics import statistic_powers

_DOCS_BOX = (-2.0, 2.0, -3.0, 3.0)  # x in [-2, 2], y in [-3, 3]: docs/regression.md
_BOXES = {
    "d1-unit": ([(-1.0, 1.0)], (-1.0, 1.0)),
    "d1-docs": ([(-2.0, 2.0)], (-3.0, 3.0)),
    "d1-skewed": ([(-0.5, 2.0)], (-1.0, 3.0)),
    "d1-nonnegative": ([(0.0, 1.0)], (0.0, 2.0)),
    "d2-unit": ([(-1.0, 1.0)] * 2, (-1.0, 1.0)),
    "d2-mixed": ([(0.0, 1.0), (-1.0, 1.0)], (-2.0, 3.0)),
    "d2-skewed": ([(-0.3, 1.7), (-2.0, 0.5)], (-1.5, 4.0)),
    "d3-unit": ([(-1.0, 1.0)] * 3, (-1.0, 1.0)),
    "d3-docs": ([(-2.0, 2.0)] * 3, (-3.0, 3.0)),
}


def _box(name):
    x_bounds, y_bounds = _BOXES[name]
    lower = np.array([b[0] for b in x_bounds] + [y_bounds[0]])
    upper = np.array([b[1] for b in x_bounds] + [y_bounds[1]])
    return x_bounds, y_bounds, lower, upper


def _stat(w, d):
    """t of records ``w`` (..., d + 1)."""
    return np.prod(w[..., None, :] ** statistic_powers(d), axis=-1)


def _max_l1_on(t):
    """max over pairs of rows of ||t_a - t_b||_1 = max over signs of the range of sign · t."""
    best = 0.0
    for signs in itertools.product([-1.0, 1.0], repeat=t.shape[1] - 1):
        proj = t @ np.array((1.0, *signs))
        best = max(best, float(proj.max() - proj.min()))
    return best


@pytest.mark.parametrize("name", list(_BOXES), ids=str)
def test_random_neighbouring_pairs_never_exceed_the_exact_bound(name):
    """200 000 random pairs (uniform, and on the box's vertices and edges) stay below Δ."""
    x_bounds, y_bounds, lower, upper = _box(name)
    d = len(x_bounds)
    delta = regression_sensitivity(x_bounds, y_bounds)
    rng = np.random.default_rng(17)
    w = rng.uniform(lower, upper, size=(2, 100_000, d + 1))
    # Half the coordinates snapped to a bound: faces of every dimension are visited.
    snap = rng.uniform(size=w.shape) < 0.5
    w = np.where(snap, np.where(rng.uniform(size=w.shape) < 0.5, lower, upper), w)
    dist = np.abs(_stat(w[0], d) - _stat(w[1], d)).sum(axis=-1)
    assert dist.max() <= delta


def _stat_jacobian(w, d):
    """∂t_c/∂w_j of one record ``w`` (d + 1,), shape (C, d + 1)."""
    powers = statistic_powers(d)
    jac = np.zeros(powers.shape, dtype=np.float64)
    for j in range(d + 1):
        lowered = powers.copy()
        lowered[:, j] = np.maximum(lowered[:, j] - 1, 0)
        jac[:, j] = powers[:, j] * np.prod(w**lowered, axis=-1)
    return jac


def _optimised_pair(sign, d, lower, upper, rng, starts):
    """Largest σ·(t(w) − t(w')) found by L-BFGS-B over pairs of records in the box."""
    bounds = list(zip(lower, upper, strict=True)) * 2

    def neg(z):
        return -float(sign @ (_stat(z[: d + 1], d) - _stat(z[d + 1 :], d)))

    def neg_grad(z):
        return -np.concatenate(
            [sign @ _stat_jacobian(z[: d + 1], d), -(sign @ _stat_jacobian(z[d + 1 :], d))]
        )

    best = -np.inf
    for _ in range(starts):
        z0 = rng.uniform(np.tile(lower, 2), np.tile(upper, 2))
        res = optimize.minimize(neg, z0, jac=neg_grad, method="L-BFGS-B", bounds=bounds)
        z = np.clip(res.x, np.tile(lower, 2), np.tile(upper, 2))
        best = max(best, -neg(z))
    return best


@pytest.mark.parametrize(
    "name",
    [
        "d1-unit",
        "d1-docs",
        "d1-skewed",
        pytest.param("d2-unit", marks=pytest.mark.slow),
        pytest.param("d2-skewed", marks=pytest.mark.slow),
    ],
)
def test_optimised_search_reaches_but_never_exceeds_the_exact_bound(name):
    """For every sign vector, L-BFGS-B from 4 random starts maximises σ·(t(w) − t(w')) over
    pairs in the box; the best over all σ is max ||t(w) − t(w')||₁. It never exceeds Δ and
    reaches Δ / (1 + margin) to 1e-6: Δ is the sensitivity itself. (d = 2: 256 sign vectors,
    about a minute on a shared machine, so slow-marked.)"""
    x_bounds, y_bounds, lower, upper = _box(name)
    d = len(x_bounds)
    delta = regression_sensitivity(x_bounds, y_bounds)
    rng = np.random.default_rng(3)
    found = 0.0
    m = statistic_powers(d).shape[0]
    for signs in itertools.product([-1.0, 1.0], repeat=m - 1):
        sign = np.array((1.0, *signs))
        found = max(found, _optimised_pair(sign, d, lower, upper, rng, starts=4))
    assert found <= delta
    assert found == pytest.approx(delta / (1 + RELATIVE_MARGIN), rel=1e-6)


@pytest.mark.parametrize(
    ("name", "points"), [("d1-unit", 241), ("d1-docs", 241), ("d1-skewed", 241), ("d2-unit", 25)]
)
def test_dense_grid_brute_force_agrees(name, points):
    """Brute force over all pairs of a dense grid of the box (1/240 and 1/24 of the widths):
    the grid's maximum is below Δ and within 1e-5 of it."""
    x_bounds, y_bounds, lower, upper = _box(name)
    d = len(x_bounds)
    axes = [np.linspace(lo, hi, points) for lo, hi in zip(lower, upper, strict=True)]
    w = np.array(list(itertools.product(*axes)))
    attained = _max_l1_on(_stat(w, d))
    delta = regression_sensitivity(x_bounds, y_bounds)
    assert delta * (1 - 1e-5) <= attained <= delta


def test_dense_grid_brute_force_d2_skewed_box():
    """A box whose maximisers are not on a simple grid: the grid's maximum (21 points an axis)
    stays below Δ and comes within 3 % of it."""
    x_bounds, y_bounds, lower, upper = _box("d2-skewed")
    axes = [np.linspace(lo, hi, 21) for lo, hi in zip(lower, upper, strict=True)]
    w = np.array(list(itertools.product(*axes)))
    attained = _max_l1_on(_stat(w, 2))
    delta = regression_sensitivity(x_bounds, y_bounds)
    assert delta * 0.97 <= attained <= delta


@pytest.mark.parametrize(
    ("d", "box", "ratio"),
    [
        (1, (-1, 1, -1, 1), 1.5),
        (1, _DOCS_BOX, 35 / (73 / 3)),
        (2, (-1, 1, -1, 1), 1.6),
        (3, (-1, 1, -1, 1), 5 / 3),
    ],
)
def test_exact_bound_is_below_the_sum_of_ranges_by_the_measured_factor(d, box, ratio):
    """The ratios measured in issue 17: 1.5× (d = 1), 35 vs 24.33 (docs' box), 1.6×, 1.67×."""
    x_bounds, y_bounds = [box[:2]] * d, box[2:]
    exact = regression_sensitivity(x_bounds, y_bounds)
    ranges = regression_sensitivity(x_bounds, y_bounds, bound="sum-of-ranges")
    assert exact < ranges
    assert ranges / exact == pytest.approx(ratio, rel=1e-8)


def test_a_nonnegative_box_attains_the_sum_of_ranges():
    """With every interval non-negative one record tops every component: both bounds agree,
    and the margin never lifts the exact bound above the (attained) sum of ranges."""
    for d in (1, 2, 3):
        x_bounds, y_bounds = [(0.5, 2.0)] * d, (0.0, 3.0)
        ranges = regression_sensitivity(x_bounds, y_bounds, bound="sum-of-ranges")
        assert regression_sensitivity(x_bounds, y_bounds) == ranges


def test_quadratic_box_range_against_a_dense_grid():
    """Random quadratics in 2 and 3 variables: the kernel's min and max bracket every grid
    value, and the grid (41 points an axis) comes within its resolution of both."""
    rng = np.random.default_rng(11)
    for q in (2, 3):
        a = rng.normal(size=(20, q))
        h = rng.normal(size=(20, q, q))
        h = h + np.swapaxes(h, -1, -2)
        lower, upper = -rng.uniform(0.2, 2.0, size=q), rng.uniform(0.2, 2.0, size=q)
        low, high = quadratic_box_range(a, h, lower, upper)
        axes = [np.linspace(lo, hi, 41) for lo, hi in zip(lower, upper, strict=True)]
        v = np.array(list(itertools.product(*axes)))
        f = v @ a.T + 0.5 * np.einsum("nq,bqr,nr->nb", v, h, v)
        assert np.all(f.max(axis=0) <= high + 1e-12) and np.all(f.min(axis=0) >= low - 1e-12)
        np.testing.assert_allclose(f.max(axis=0), high, atol=0.05)
        np.testing.assert_allclose(f.min(axis=0), low, atol=0.05)


def test_quadratic_box_range_handles_singular_faces():
    """A quadratic constant along a direction (x y − x y, ½(x + y)² with a null direction) has
    singular Hessians on faces; the extremes are still found on smaller faces."""
    low, high = quadratic_box_range([1.0, 1.0], [[1.0, 1.0], [1.0, 1.0]], [-1, -1], [1, 1])
    assert (float(low), float(high)) == (-0.5, 4.0)  # min at x + y = -1, max at (1, 1)
    low, high = quadratic_box_range([0.0, 0.0], np.zeros((2, 2)), [-1, -1], [1, 1])
    assert (float(low), float(high)) == (0.0, 0.0)


def test_default_bound_and_fallback_threshold():
    """Exact up to d = 3 (14 components), sum of ranges from d = 4 on."""
    assert statistic_powers(3).shape[0] == MAX_EXACT_COMPONENTS
    assert [default_sensitivity_bound(d) for d in (1, 2, 3, 4, 10)] == ["exact"] * 3 + [
        "sum-of-ranges"
    ] * 2
    box4 = ([(-1.0, 1.0)] * 4, (-1.0, 1.0))
    lower, upper = np.array([-1.0] * 5), np.array([1.0] * 5)
    assert regression_sensitivity(*box4) == sum_of_ranges(statistic_powers(4), lower, upper)
    with pytest.raises(ValueError, match="bound='exact' is enumerated up to d = 3"):
        regression_sensitivity(*box4, bound="exact")
    with pytest.raises(ValueError, match="bound must be one of"):
        regression_sensitivity([(0, 1)], (0, 1), bound="tight")


@pytest.mark.parametrize(
    ("powers", "match"),
    [
        ([[3, 0], [1, 1]], "degree 1 or 2"),
        ([[0, 0], [1, 1]], "degree 1 or 2"),
        ([[1, 0, 0]], "shape \\(C, q\\)"),
        ([[1, 0], [0, 1], [2, 0], [1, 1], [0, 2]] * 3, "at most 14 components"),
    ],
)
def test_exact_kernel_rejects_bad_input(powers, match):
    with pytest.raises(ValueError, match=match):
        exact_l1_sensitivity(powers, [-1.0, -1.0], [1.0, 1.0])


def test_release_uses_and_records_the_exact_bound():
    """The noise scale is Δ_exact / ε, the release says which bound it used, the JSON keeps it,
    and d = 4 falls back to (and records) the sum of ranges."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, size=(60, 2))
    y = np.clip(x @ [0.5, -0.2], -1, 1)
    box = dict(x_bounds=[(-1, 1)] * 2, y_bounds=(-1, 1))
    rel = release_regression(x, y, epsilon=1.0, moments_share=0.2, rng=1, **box)
    assert rel.sensitivity_bound == "exact"
    assert rel.sensitivity == pytest.approx(15.0 / 1.6)
    assert rel.scale == pytest.approx(9.375 / 0.8)  # 18.75 with the sum of ranges
    assert RegressionRelease.from_json(rel.to_json()).sensitivity_bound == "exact"
    x4 = rng.uniform(-1, 1, size=(60, 4))
    rel4 = release_regression(
        x4, np.clip(x4.sum(axis=1) / 4, -1, 1), x_bounds=[(-1, 1)] * 4, y_bounds=(-1, 1),
        epsilon=1.0, rng=1,
    )  # fmt: skip
    assert rel4.sensitivity_bound == "sum-of-ranges" and rel4.sensitivity == 35.0
    # A record may not claim less noise than the exact sensitivity.
    with pytest.raises(ValueError, match="sensitivity must be >="):
        RegressionRelease(
            value=rel.value, n=rel.n, epsilon=1.0, sensitivity=9.37, **box
        )  # fmt: skip
