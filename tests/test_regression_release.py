"""Curator side of private regression: statistic layout, sensitivity, noise, validation."""

import dataclasses
import itertools

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.release import MomentRelease, RegressionRelease, release_regression
from pymc_dp.curator.regression.sensitivity import (
    monomial_ranges,
    regression_sensitivity,
    regression_sensitivity_l2,
    sum_of_ranges,
)
from pymc_dp.curator.regression.statistics import (
    covariate_powers,
    monomial_sums,
    pack_statistic,
    regression_statistic,
    released_pairs,
    statistic_powers,
    unpack_statistic,
)


def _data(rng, n=50, d=2):
    x = rng.uniform(0.0, 1.0, size=(n, d))
    y = np.clip(x.sum(axis=1) / d + 0.1 * rng.standard_normal(n), -1.0, 2.0)
    return x, y


@pytest.mark.parametrize("d", [1, 2, 3])
def test_statistic_layout_round_trips(d):
    """s holds every unique entry of B = AᵀA except B[0, 0] = n, which unpack restores."""
    rng = np.random.default_rng(d)
    x, y = _data(rng, n=30, d=d)
    a = np.column_stack([np.ones(30), x, y])
    b = a.T @ a
    s = regression_statistic(x, y)
    assert s.shape == ((d + 2) * (d + 3) // 2 - 1,)
    np.testing.assert_allclose(unpack_statistic(s, 30), b, rtol=1e-13)
    np.testing.assert_allclose(pack_statistic(b), s)
    rows, cols = released_pairs(d)
    assert (0, 0) not in set(zip(rows.tolist(), cols.tolist()))
    assert len(set(zip(rows.tolist(), cols.tolist()))) == s.size  # no entry twice
    # Each component is the monomial statistic_powers says it is.
    np.testing.assert_allclose(monomial_sums(np.column_stack([x, y]), statistic_powers(d)), s)
    # Batched unpack.
    assert unpack_statistic(np.stack([s, s]), np.array([30, 30])).shape == (2, d + 2, d + 2)


def _grid(lower, upper, points):
    """Grid of each interval, with its ends and 0 when inside (where ranges can be extreme)."""
    axes = []
    for lo, hi in zip(lower, upper):
        g = np.linspace(lo, hi, points)
        if lo < 0 < hi:
            g = np.append(g, 0.0)
        axes.append(np.unique(g))
    return np.array(list(itertools.product(*axes)))


def _max_l1(t):
    """max over pairs of rows of ||t_a - t_b||_1 = max over signs of the range of sign · t."""
    best = 0.0
    for signs in itertools.product([-1.0, 1.0], repeat=t.shape[1] - 1):
        proj = t @ np.array((1.0, *signs))
        best = max(best, float(proj.max() - proj.min()))
    return best


_BOXES = {
    "d1-nonnegative": ([(0.0, 1.0)], (0.0, 2.0)),
    "d1-straddling": ([(-1.0, 2.0)], (-1.0, 1.0)),
    "d2-nonnegative": ([(0.0, 1.0), (0.5, 3.0)], (0.0, 4.0)),
    "d2-mixed": ([(0.0, 1.0), (-1.0, 1.0)], (-2.0, 3.0)),
}


@pytest.mark.parametrize("box", list(_BOXES), ids=str)
def test_sum_of_ranges_by_adversarial_grid_search(box):
    """Over all pairs of records on a grid of the box, ||t(w) - t(w')||_1 never exceeds Δ.

    Each component's range is exact (equals the grid's range, which contains the extremes), so
    Δ = Σ ranges is attained when all bounds are non-negative; when an interval straddles 0,
    Δ is an upper bound and the attainable maximum is at least 60 % of it on these boxes. (The
    exact bound, the default, is audited in ``test_regression_sensitivity.py``.)
    """
    x_bounds, y_bounds = _BOXES[box]
    d = len(x_bounds)
    lower = np.array([b[0] for b in x_bounds] + [y_bounds[0]])
    upper = np.array([b[1] for b in x_bounds] + [y_bounds[1]])
    w = _grid(lower, upper, 21 if d == 1 else 9)
    powers = statistic_powers(d)
    t = np.prod(w[:, None, :] ** powers[None, :, :], axis=-1)
    delta = regression_sensitivity(x_bounds, y_bounds, bound="sum-of-ranges")
    low, high = monomial_ranges(powers, lower, upper)
    np.testing.assert_allclose(low, t.min(axis=0), atol=1e-12)
    np.testing.assert_allclose(high, t.max(axis=0), atol=1e-12)
    attained = _max_l1(t)
    assert attained <= delta * (1 + 1e-12)
    if np.all(lower >= 0):
        assert attained == pytest.approx(delta, rel=1e-12)
    else:
        assert attained >= 0.6 * delta


def test_sensitivity_values():
    """Hand-computed: d = 1, x in [-1, 2], y in [-1, 1].

    x: 3, x²: [0, 4] → 4, y: 2, xy: [-2, 2] → 4, y²: [0, 1] → 1; total 14.
    """
    assert regression_sensitivity([(-1, 2)], (-1, 1), bound="sum-of-ranges") == 14.0
    # Moments of x in [-1, 2]: x 3, x² 4 | x³ [-1, 8] 9, x⁴ [0, 16] 16.
    assert sum_of_ranges(covariate_powers(1, (1, 2)), [-1.0], [2.0]) == 7.0
    assert sum_of_ranges(covariate_powers(1, (3, 4)), [-1.0], [2.0]) == 25.0


def test_release_noise_is_laplace():
    """2000 releases of the same data: each component's noise passes a KS test against
    Laplace(0, Δ/ε) at α = 0.001 (Bonferroni over all statistic and moment components)."""
    rng = np.random.default_rng(5)
    x, y = _data(rng, n=40, d=2)
    kwargs = dict(x_bounds=[(0, 1), (0, 1)], y_bounds=(-1, 2), epsilon=2.0, moments_share=0.3)
    exact = regression_statistic(x, y)
    gen = np.random.default_rng(6)
    rels = [release_regression(x, y, rng=gen, **kwargs) for _ in range(2000)]
    rel = rels[0]
    assert rel.epsilon == pytest.approx(1.4)
    # The whole moments share on the degree 3-4 sums; degree 1-2 are in the statistic.
    assert rel.second_moments is None
    assert rel.fourth_moments.epsilon == pytest.approx(0.6)
    assert rel.total_epsilon == pytest.approx(2.0)
    assert rel.sensitivity == regression_sensitivity(kwargs["x_bounds"], kwargs["y_bounds"])
    checks = [(np.array([r.value for r in rels]) - exact, rel.scale)]
    sums = monomial_sums(x, covariate_powers(2, (3, 4)))
    noise = np.array([r.fourth_moments.value for r in rels]) - sums
    checks.append((noise, rel.fourth_moments.scale))
    n_tests = sum(c[0].shape[1] for c in checks)
    for noise, scale in checks:
        for j in range(noise.shape[1]):
            assert stats.kstest(noise[:, j], stats.laplace(scale=scale).cdf).pvalue > 1e-3 / n_tests
    # A wrong scale (half the noise) is detected by the same test.
    noise, scale = checks[0]
    assert stats.kstest(noise[:, 0], stats.laplace(scale=scale / 2).cdf).pvalue < 1e-6


_X, _Y = _data(np.random.default_rng(0), n=20, d=2)
_GOOD = dict(x=_X, y=_Y, x_bounds=[(0, 1), (0, 1)], y_bounds=(-1, 2), epsilon=1.0)


def _bad(**changes):
    return {**_GOOD, **changes}


_BAD_INPUTS = [
    (_bad(x=np.vstack([_X[:-1], [[0.5, 1.5]]])), ValueError, "x has 1 record.*x_bounds"),
    (_bad(y=np.append(_Y[:-1], 2.5)), ValueError, "y has 1 value.*y_bounds"),
    (_bad(x=np.where(_X > 0.9, np.nan, _X)), ValueError, "x must not contain NaN"),
    (_bad(y=np.append(_Y[:-1], np.inf)), ValueError, "y must not contain NaN"),
    (_bad(y=_Y[:-1]), ValueError, "y must have one value per row of x"),
    (_bad(y=_Y[:, None]), ValueError, "y must be 1-dimensional"),
    (_bad(x=_X[:, :, None]), ValueError, "x must have shape"),
    (_bad(x=_X[:3], y=_Y[:3]), ValueError, "need n >= d\\+2"),
    (_bad(x_bounds=[(0, 1)]), ValueError, "x_bounds must give 2"),
    (_bad(x_bounds=[(0, 1), (1, 0)]), ValueError, "x_bounds must satisfy lower < upper"),
    (_bad(x_bounds=[(0, 1), (0, np.inf)]), ValueError, "x_bounds must be finite"),
    (_bad(y_bounds=(2, -1)), ValueError, "y_bounds must satisfy"),
    (_bad(epsilon=0.0), ValueError, "epsilon must be a finite number > 0"),
    (_bad(epsilon="1"), TypeError, "epsilon must be a real number"),
    (_bad(moments_share=1.0), ValueError, "moments_share must lie in"),
    (_bad(moments_share=True), TypeError, "moments_share must be a real number"),
    (_bad(binary=[0]), ValueError, r"x has 20 record\(s\) .* value other than 0 and 1"),
    (_bad(binary=[2]), ValueError, r"binary: 2 is not a covariate index in \[0, 1\]"),
    (_bad(binary=[0, 0]), ValueError, "binary must name each covariate once"),
    (_bad(binary=0), TypeError, "binary must be a sequence of covariate indices"),
    (
        _bad(binary=[0], x_bounds=[(0.25, 1), (0, 1)], x=np.clip(_X, 0.25, 1)),
        ValueError,
        r"covariate 0's box \[0.25, 1\] must hold 0 and 1",
    ),
]


@pytest.mark.parametrize("kwargs,exc,match", _BAD_INPUTS)
def test_bad_inputs_are_rejected_before_noise(kwargs, exc, match):
    gen = np.random.default_rng(9)
    before = gen.bit_generator.state
    with pytest.raises(exc, match=match):
        release_regression(**kwargs, rng=gen)
    assert gen.bit_generator.state == before


def test_release_record_is_frozen_and_checked():
    rel = release_regression(**_GOOD, moments_share=0.2, rng=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rel.epsilon = 2.0
    with pytest.raises(ValueError):
        rel.value[0] = 0.0
    assert rel.d == 2 and rel.n == 20
    assert rel.x_bounds == ((0.0, 1.0), (0.0, 1.0)) and rel.y_bounds == (-1.0, 2.0)
    fields = {f.name: getattr(rel, f.name) for f in dataclasses.fields(rel)}
    with pytest.raises(ValueError, match="sensitivity must be >="):
        RegressionRelease(**{**fields, "sensitivity": rel.sensitivity / 2})
    with pytest.raises(ValueError, match="come with fourth_moments"):
        RegressionRelease(
            **{**fields, "fourth_moments": None, "second_moments": rel.fourth_moments}
        )
    with pytest.raises(ValueError, match="components for d covariates"):
        RegressionRelease(**{**fields, "value": np.zeros(7)})
    mom = rel.fourth_moments
    with pytest.raises(ValueError, match="sensitivity is below"):
        RegressionRelease(
            **{**fields, "fourth_moments": MomentRelease(mom.value, mom.powers, 0.1, 0.5)}
        )
    with pytest.raises(ValueError, match="must hold the degree"):
        RegressionRelease(**{**fields, "second_moments": mom})
    plain = release_regression(**_GOOD, rng=1)
    assert plain.second_moments is None and plain.total_epsilon == 1.0


def test_binary_covariates_are_checked_recorded_and_read_back():
    """``binary=`` checks every record (clamping does not make 0.5 binary), leaves the noise
    as without it, and round-trips; files of format 4 and older read as declaring none."""
    x = np.column_stack([_X[:, 0], _X[:, 1] > 0.5])
    kwargs = {**_GOOD, "x": x}
    rel = release_regression(**kwargs, binary=[1], rng=1)
    plain = release_regression(**kwargs, rng=1)
    assert rel.binary == (1,) and plain.binary == ()
    assert np.array_equal(rel.value, plain.value) and rel.sensitivity == plain.sensitivity
    back = RegressionRelease.from_json(rel.to_json())
    assert back.binary == (1,) and rel.to_dict()["format_version"] == 5
    old = {**plain.to_dict(), "format_version": 4}
    del old["binary"]
    assert RegressionRelease.from_dict(old).binary == ()
    with pytest.raises(TypeError, match="binary must be a list"):
        RegressionRelease.from_dict({**rel.to_dict(), "binary": 1})
    half = np.where(np.arange(20)[:, None] == 3, [0.2, 0.5], x)
    with pytest.raises(ValueError, match=r"\(the first at index 3\) with a value other"):
        release_regression(**{**kwargs, "x": half}, binary=[1], clamp=True, rng=1)


def test_binary_covariates_are_checked_in_data_frames():
    pd = pytest.importorskip("pandas")
    x = np.column_stack([_X[:, 0], _X[:, 1] > 0.5])
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": _Y})
    kwargs = {k: v for k, v in _GOOD.items() if k not in ("x", "y")}
    rel = release_regression(frame, columns=["a", "b", "y"], **kwargs, binary=[1], rng=1)
    assert rel.binary == (1,)
    assert np.array_equal(rel.value, release_regression(x, _Y, **kwargs, binary=[1], rng=1).value)
    frame.loc[5, "b"] = 0.5
    with pytest.raises(ValueError, match="value other than 0 and 1"):
        release_regression(frame, columns=["a", "b", "y"], **kwargs, binary=[1], rng=1)


_L2_BOXES = {
    **_BOXES,
    "d1-symmetric": ([(-1.0, 1.0)], (-1.0, 1.0)),
    "d2-symmetric": ([(-1.0, 1.0), (-1.0, 1.0)], (-1.0, 1.0)),
    "d3-mixed": ([(0.0, 1.0), (-1.0, 2.0), (-0.5, 0.5)], (-1.0, 1.0)),
}


@pytest.mark.parametrize("box", list(_L2_BOXES), ids=str)
def test_l2_sensitivity_by_adversarial_search(box):
    """A search over pairs of records (a grid of the box, then local ascent from the best
    pairs) never exceeds Δ₂, and gets within 1% of it (0.5% on d2-mixed, where the branch and
    bound stops at its cap; ≤ 0.2% elsewhere): the exact Δ₂ is neither unsafe nor loose. It
    never exceeds the L2 norm of the ranges, and is below it where the box straddles 0 (the
    gain the exact search buys)."""
    from scipy.optimize import minimize

    x_bounds, y_bounds = _L2_BOXES[box]
    d = len(x_bounds)
    lower = np.array([b[0] for b in x_bounds] + [y_bounds[0]])
    upper = np.array([b[1] for b in x_bounds] + [y_bounds[1]])
    powers = statistic_powers(d)
    w = _grid(lower, upper, {1: 11, 2: 5, 3: 3}[d])
    t = np.prod(w[:, None, :] ** powers[None, :, :], axis=-1)
    sq = np.sum((t[:, None, :] - t[None, :, :]) ** 2, axis=-1)

    def neg(z):
        a, b = z[: d + 1], z[d + 1 :]
        return -np.sum((np.prod(a**powers, axis=-1) - np.prod(b**powers, axis=-1)) ** 2)

    found = float(sq.max())
    box_bounds = list(zip(lower, upper)) * 2
    for flat in np.argsort(sq, axis=None)[-20:]:
        i, j = np.unravel_index(flat, sq.shape)
        res = minimize(neg, np.concatenate([w[i], w[j]]), bounds=box_bounds, method="L-BFGS-B")
        found = max(found, -float(res.fun))
    found = np.sqrt(found)
    delta2 = regression_sensitivity_l2(x_bounds, y_bounds)
    ranges = regression_sensitivity_l2(x_bounds, y_bounds, bound="sum-of-ranges")
    assert found <= delta2 * (1 + 1e-12)
    assert delta2 <= found * (1.01 if box == "d2-mixed" else 1.002)
    assert delta2 <= ranges * (1 + 1e-12) and delta2 <= regression_sensitivity(x_bounds, y_bounds)
    if np.any(lower < 0):
        assert delta2 < 0.95 * ranges
