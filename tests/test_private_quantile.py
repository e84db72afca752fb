"""Tests of the private quantile mechanism: validation, exact output law, privacy, utility.

The output density of the mechanism is piecewise constant, so both its law and its privacy loss
can be computed exactly. Statistical tests use KS at ``ALPHA = 0.001`` on fixed-seed samples.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from pymc_dp.mechanisms.private_quantile import (
    _gap_log_weights,
    private_bounds,
    private_quantile,
)

ALPHA = 1e-3
TINY_X = [1.0, 2.0, 2.0, 5.0]
LOWER, UPPER = 0.0, 10.0
BASE = {"x": TINY_X, "quantile": 0.5, "epsilon": 1.0, "lower": LOWER, "upper": UPPER}


def exact_gaps(x, quantile, epsilon, lower, upper):
    """Gap edges and gap probabilities, straight from the definition (independent of the module).

    Inside gap ``i`` exactly ``i`` clamped points lie below, so the density there is
    proportional to ``exp(-epsilon * |i - quantile * n| / 2)``.
    """
    data = sorted(min(max(float(v), lower), upper) for v in x)
    n = len(data)
    edges = np.array([lower, *data, upper])
    widths = np.diff(edges)
    weights = np.array(
        [w * math.exp(-epsilon * abs(i - quantile * n) / 2) for i, w in enumerate(widths)]
    )
    return edges, weights / weights.sum()


def piecewise_cdf(y, edges, probs):
    y = np.asarray(y, dtype=float)[..., None]
    lo, hi = edges[:-1], edges[1:]
    widths = hi - lo
    open_ = widths > 0
    frac = np.clip((y - lo[open_]) / widths[open_], 0.0, 1.0)
    return np.sum(probs[open_] * frac, axis=-1)


def mechanism_log_density(x, y, *, quantile, epsilon, lower=LOWER, upper=UPPER):
    """Log density of the mechanism's output at points ``y`` that lie on no gap edge."""
    edges, log_probs = _gap_log_weights(
        x, quantile=quantile, epsilon=epsilon, lower=lower, upper=upper
    )
    # side="right" skips tied edges, landing on the open gap that contains y.
    gap = np.searchsorted(edges, y, side="right") - 1
    return log_probs[gap] - np.log(edges[gap + 1] - edges[gap])


def output_points(*datasets, lower=LOWER, upper=UPPER):
    """Midpoints of every piece of the common refinement, plus a fine grid off the edges.

    The density ratio of two data sets is constant on each piece of the common refinement of
    their edges, so the midpoints alone give the exact maximum; the grid is a second net.
    """
    cuts = np.unique(
        np.clip(np.concatenate([np.asarray(d, float) for d in datasets]), lower, upper)
    )
    cuts = np.unique(np.concatenate(([lower, upper], cuts)))
    midpoints = (cuts[:-1] + cuts[1:]) / 2
    grid = np.linspace(lower, upper, 4001)[1:-1]
    grid = grid[~np.isin(grid, cuts)]
    return np.concatenate((midpoints, grid))


def max_privacy_loss(x, neighbours, *, quantile, epsilon, mechanism_epsilon=None):
    mech_eps = epsilon if mechanism_epsilon is None else mechanism_epsilon
    worst = 0.0
    for x2 in neighbours:
        y = output_points(x, x2)
        diff = mechanism_log_density(x, y, quantile=quantile, epsilon=mech_eps)
        diff -= mechanism_log_density(x2, y, quantile=quantile, epsilon=mech_eps)
        worst = max(worst, float(np.max(np.abs(diff))))
    return worst


REPLACEMENTS = np.linspace(-2.0, 12.0, 57)  # step 0.25: hits the data, the range ends, outside


def replace_one_neighbours(x):
    for j in range(len(x)):
        for v in REPLACEMENTS:
            x2 = list(x)
            x2[j] = float(v)
            yield x2


def add_remove_neighbours(x):
    for j in range(len(x)):
        yield x[:j] + x[j + 1 :]
    for v in REPLACEMENTS:
        yield [*x, float(v)]


# ---- validation ------------------------------------------------------------------------------

QUANTILE_ERRORS = [
    ({"x": []}, ValueError, "x must not be empty"),
    ({"x": [[1.0, 2.0], [3.0, 4.0]]}, ValueError, "x must be 1-dimensional"),
    ({"x": [1.0, np.nan]}, ValueError, "x must not contain NaN"),
    ({"x": [1.0, np.inf]}, ValueError, "x must not contain NaN"),
    ({"x": ["a", "b"]}, TypeError, "x must be a real numeric array"),
    ({"quantile": -0.1}, ValueError, r"quantile must be a number in \[0, 1\] \(got -0.1\)"),
    ({"quantile": 1.5}, ValueError, r"quantile must be a number in \[0, 1\] \(got 1.5\)"),
    ({"quantile": np.nan}, ValueError, r"quantile must be a number in \[0, 1\]"),
    ({"quantile": "0.5"}, TypeError, "quantile must be a real number"),
    ({"quantile": True}, TypeError, "quantile must be a real number"),
    ({"epsilon": 0.0}, ValueError, r"epsilon must be a finite number > 0 \(got 0.0\)"),
    ({"epsilon": -1.0}, ValueError, "epsilon must be a finite number > 0"),
    ({"epsilon": np.inf}, ValueError, "epsilon must be a finite number > 0"),
    ({"epsilon": np.nan}, ValueError, "epsilon must be a finite number > 0"),
    ({"epsilon": "1"}, TypeError, "epsilon must be a real number"),
    ({"lower": 10.0, "upper": 0.0}, ValueError, "lower must be < upper"),
    ({"lower": 5.0, "upper": 5.0}, ValueError, "lower must be < upper"),
    ({"lower": -np.inf}, ValueError, r"lower must be finite \(got -inf\)"),
    ({"upper": np.nan}, ValueError, "upper must be finite"),
    ({"lower": -1e308, "upper": 1e308}, ValueError, "upper - lower must be finite"),
    ({"lower": "0"}, TypeError, "lower must be a real number"),
    ({"upper": None}, TypeError, "upper must be a real number"),
]


def _case_id(case):
    return "-".join(f"{k}={v!r}" for k, v in case[0].items())[:40]


@pytest.mark.parametrize(
    "override, error, match", QUANTILE_ERRORS, ids=map(_case_id, QUANTILE_ERRORS)
)
def test_private_quantile_rejects_bad_input_before_drawing(override, error, match):
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(error, match=match):
        private_quantile(**{**BASE, **override}, rng=rng)
    assert rng.bit_generator.state == before


BOUNDS_ERRORS = [
    ({"quantiles": (0.9, 0.1)}, ValueError, "quantiles must satisfy q_lo < q_hi"),
    ({"quantiles": (0.5, 0.5)}, ValueError, "quantiles must satisfy q_lo < q_hi"),
    ({"quantiles": (-0.1, 0.5)}, ValueError, r"quantiles\[0\] must be a number in \[0, 1\]"),
    ({"quantiles": (0.1, 1.1)}, ValueError, r"quantiles\[1\] must be a number in \[0, 1\]"),
    ({"quantiles": (0.1,)}, ValueError, r"quantiles must be a pair .* \(got 1 values\)"),
    ({"quantiles": (0.1, 0.5, 0.9)}, ValueError, r"quantiles must be a pair .* \(got 3 values\)"),
    ({"quantiles": 0.5}, TypeError, "quantiles must be a pair"),
    ({"quantiles": "ab"}, TypeError, "quantiles must be a pair"),
    ({"quantiles": ("a", 0.5)}, TypeError, r"quantiles\[0\] must be a real number"),
    ({"x": []}, ValueError, "x must not be empty"),
    ({"x": [[1.0]]}, ValueError, "x must be 1-dimensional"),
    ({"epsilon": 0.0}, ValueError, "epsilon must be a finite number > 0"),
    ({"lower": 10.0, "upper": 0.0}, ValueError, "lower must be < upper"),
]


@pytest.mark.parametrize("override, error, match", BOUNDS_ERRORS, ids=map(_case_id, BOUNDS_ERRORS))
def test_private_bounds_rejects_bad_input_before_drawing(override, error, match):
    base = {k: v for k, v in BASE.items() if k != "quantile"}
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(error, match=match):
        private_bounds(**{**base, **override}, rng=rng)
    assert rng.bit_generator.state == before


@pytest.mark.parametrize(
    "rng, error, match",
    [
        ("seed", TypeError, "rng must be an int seed"),
        (np.random.RandomState(0), TypeError, "rng must be an int seed"),
        (-1, ValueError, r"rng seed must be >= 0 \(got -1\)"),
    ],
)
def test_bad_rng_is_rejected(rng, error, match):
    with pytest.raises(error, match=match):
        private_quantile(**BASE, rng=rng)
    with pytest.raises(error, match=match):
        private_bounds(TINY_X, epsilon=1.0, lower=LOWER, upper=UPPER, rng=rng)


def test_int_seed_and_generator_give_the_same_draw():
    assert private_quantile(**BASE, rng=7) == private_quantile(**BASE, rng=np.random.default_rng(7))


# ---- exact form of the mechanism -------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_gap_weights_match_hand_computation(epsilon):
    # n = 4, q n = 2; gaps [0,1], [1,2], [2,2], [2,5], [5,10] hold 0, 1, 2, 3, 4 points below.
    edges, log_probs = _gap_log_weights(
        TINY_X, quantile=0.5, epsilon=epsilon, lower=LOWER, upper=UPPER
    )
    e1, e2 = math.exp(-epsilon), math.exp(-epsilon / 2)
    weights = np.array([1 * e1, 1 * e2, 0.0, 3 * e2, 5 * e1])
    np.testing.assert_array_equal(edges, [0.0, 1.0, 2.0, 2.0, 5.0, 10.0])
    np.testing.assert_allclose(np.exp(log_probs), weights / weights.sum(), rtol=1e-12)
    assert log_probs[2] == -np.inf


@pytest.mark.parametrize("seed", range(5))
def test_gap_weights_match_definition_with_ties_and_clamping(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 14, size=30).astype(float)  # ties, and values outside [0, 10]
    q, eps = rng.uniform(), rng.uniform(0.1, 3.0)
    edges, log_probs = _gap_log_weights(x, quantile=q, epsilon=eps, lower=LOWER, upper=UPPER)
    ref_edges, ref_probs = exact_gaps(x, q, eps, LOWER, UPPER)
    np.testing.assert_array_equal(edges, ref_edges)
    np.testing.assert_allclose(np.exp(log_probs), ref_probs, rtol=1e-10, atol=0.0)


KS_CASES = [
    (TINY_X, 0.5, 1.0),
    (TINY_X, 0.25, 0.5),
    (TINY_X, 0.9, 3.0),
    ([-3.0, 1.0, 2.0, 2.0, 5.0, 12.0, 12.0], 0.6, 1.5),  # clamped at both ends
]


@pytest.mark.parametrize("x, quantile, epsilon", KS_CASES)
def test_output_follows_exact_piecewise_uniform_law(x, quantile, epsilon):
    rng = np.random.default_rng(20110606)
    draws = np.array(
        [
            private_quantile(x, quantile, epsilon=epsilon, lower=LOWER, upper=UPPER, rng=rng)
            for _ in range(20_000)
        ]
    )
    assert np.all((draws >= LOWER) & (draws <= UPPER))
    edges, probs = exact_gaps(x, quantile, epsilon, LOWER, UPPER)
    result = stats.kstest(draws, lambda y: piecewise_cdf(y, edges, probs))
    assert result.pvalue > ALPHA


# ---- privacy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("quantile", [0.0, 0.3, 0.5, 1.0])
def test_privacy_loss_at_most_epsilon_over_replace_one_neighbours(quantile, epsilon):
    """Exact max |log density ratio| over 4 x 57 replace-one neighbours of the tiny data set."""
    loss = max_privacy_loss(
        TINY_X, replace_one_neighbours(TINY_X), quantile=quantile, epsilon=epsilon
    )
    assert loss <= epsilon + 1e-9
    # The check has teeth: the worst neighbour uses a large share of the budget. At q = 0 or 1
    # the rank utility moves one way under a replacement, so there the supremum is epsilon / 2.
    assert loss >= 0.45 * epsilon


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
@pytest.mark.parametrize("quantile", [0.0, 0.5, 0.8])
def test_privacy_loss_at_most_epsilon_over_add_remove_neighbours(quantile, epsilon):
    loss = max_privacy_loss(
        TINY_X, add_remove_neighbours(TINY_X), quantile=quantile, epsilon=epsilon
    )
    assert loss <= epsilon + 1e-9


def test_privacy_check_detects_a_mechanism_spending_twice_the_budget():
    epsilon = 1.0
    loss = max_privacy_loss(
        TINY_X,
        replace_one_neighbours(TINY_X),
        quantile=0.5,
        epsilon=epsilon,
        mechanism_epsilon=2 * epsilon,
    )
    assert loss > epsilon + 0.1


# ---- utility and numerics --------------------------------------------------------------------


def test_utility_975_quantile_within_0p2_in_95_of_100_repeats():
    """n = 2000 Exponential(1) points, range [0, 50], epsilon = 1, 100 seeded repeats.

    The expected number of hits within 0.2 of the sample quantile is computed exactly from the
    output law and must be >= 95. The observed number, a sum of independent Bernoullis with those
    probabilities, must clear the ALPHA quantile of a binomial with the same mean (a Poisson-
    binomial is more concentrated than that binomial, so the bound is conservative).
    """
    quantile, tol, repeats = 0.975, 0.2, 100
    hit_probs, hits = [], 0
    for child in np.random.SeedSequence(2011).spawn(repeats):
        rng = np.random.default_rng(child)
        x = rng.exponential(size=2000)
        target = np.quantile(x, quantile)
        out = private_quantile(x, quantile, epsilon=1.0, lower=0.0, upper=50.0, rng=rng)
        hits += abs(out - target) <= tol
        edges, log_probs = _gap_log_weights(
            x, quantile=quantile, epsilon=1.0, lower=0.0, upper=50.0
        )
        cdf = piecewise_cdf([target - tol, target + tol], edges, np.exp(log_probs))
        hit_probs.append(cdf[1] - cdf[0])
    expected_hits = float(np.sum(hit_probs))
    assert expected_hits >= 95
    min_hits = stats.binom.ppf(ALPHA, repeats, expected_hits / repeats)
    assert hits >= min_hits


@pytest.mark.parametrize(
    "x, quantile, epsilon",
    [
        (np.arange(1.0, 100.0), 0.5, 1e6),
        (np.full(1000, 3.0), 0.5, 1.0),
        (np.full(1000, 3.0), 0.5, 1e6),
        (np.full(1000, LOWER), 0.9, 1e6),  # every point clamped onto an edge of the range
        (np.full(1000, 1e9), 0.1, 1e6),
        (np.arange(1.0, 100.0), 0.5, 1e308),  # epsilon * utility overflows
        (np.arange(1e5), 0.3, 1e6),
    ],
)
def test_extreme_epsilon_and_ties_give_finite_output_without_warnings(x, quantile, epsilon):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = private_quantile(
            x, quantile, epsilon=epsilon, lower=LOWER, upper=max(UPPER, float(x.max())), rng=3
        )
    assert math.isfinite(out)
    assert LOWER <= out <= max(UPPER, float(x.max()))


def test_huge_epsilon_lands_in_the_gaps_next_to_the_quantile():
    x = np.arange(1.0, 100.0)  # q n = 49.5: gaps [49, 50] and [50, 51] tie for best
    outs = [private_quantile(x, 0.5, epsilon=1e6, lower=0.0, upper=100.0, rng=s) for s in range(20)]
    assert all(49.0 <= y <= 51.0 for y in outs)


# ---- private_bounds --------------------------------------------------------------------------


@pytest.mark.parametrize("quantiles", [(0.025, 0.975), (0.0, 1.0), (0.4, 0.6)])
def test_private_bounds_is_two_half_budget_quantiles_then_sorted(quantiles):
    x = np.random.default_rng(5).normal(size=200)
    a, b = private_bounds(x, epsilon=2.0, quantiles=quantiles, lower=-5.0, upper=5.0, rng=9)
    rng = np.random.default_rng(9)
    first, second = (
        private_quantile(x, q, epsilon=1.0, lower=-5.0, upper=5.0, rng=rng) for q in quantiles
    )
    assert (a, b) == (min(first, second), max(first, second))
    assert isinstance(a, float)
    assert isinstance(b, float)
    assert -5.0 <= a <= b <= 5.0


def test_private_bounds_returns_coincident_endpoints_unchanged():
    # A range one ulp wide: every draw is one of two floats, so a == b happens and is kept.
    lower, upper = 1.0, float(np.nextafter(1.0, 2.0))
    pairs = [
        private_bounds([1.0, 1.0], epsilon=1.0, lower=lower, upper=upper, rng=s) for s in range(20)
    ]
    assert all(lower <= a <= b <= upper for a, b in pairs)
    assert any(a == b for a, b in pairs)
