"""PrivateQuantile over data-independent log-spaced candidates, and the noisy-bounds warning."""

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.mechanisms.private_quantile import (
    NoisyBoundsWarning,
    bounds_rank_error,
    log_candidates,
    private_bounds,
    private_quantile,
)


@pytest.mark.parametrize(("lower", "upper"), [(1.0, 1e4), (0.0, 1000.0), (-50.0, 1e3), (-1e3, -1)])
def test_log_candidates_are_public_sorted_and_span_the_range(lower, upper):
    c = log_candidates(lower, upper)
    assert np.all(np.diff(c) > 0) and c[0] >= lower and c[-1] == upper
    if lower > 0:
        ratios = c[1:] / c[:-1]
        np.testing.assert_allclose(ratios, ratios[0])  # equal steps per decade


def _output_probs(x, quantile, epsilon, grid):
    data = np.sort(x)
    u = -np.abs(np.searchsorted(data, grid, side="left") - quantile * data.size)
    w = np.exp(epsilon / 2 * (u - u.max()))
    return w / w.sum()


def test_candidate_mechanism_is_epsilon_dp_over_replace_one_neighbours():
    """Exact output law (Gumbel-max = softmax) on 200 random neighbour pairs: the log ratio
    of any output's probability never exceeds ε."""
    rng = np.random.default_rng(8)
    grid = log_candidates(0.0, 100.0)
    eps = 0.7
    worst = 0.0
    for _ in range(200):
        x = rng.gamma(2.0, 5.0, size=25)
        y = x.copy()
        y[rng.integers(25)] = rng.uniform(0, 100)
        p, q = _output_probs(x, 0.9, eps, grid), _output_probs(y, 0.9, eps, grid)
        worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(q)))))
    assert worst <= eps + 1e-12
    assert worst > 0.5 * eps  # the search reaches near the bound


def test_candidate_draws_follow_the_softmax_law():
    x = np.random.default_rng(9).gamma(2.0, 5.0, size=40)
    grid = np.linspace(0, 60, 13)
    rng = np.random.default_rng(10)
    draws = [private_quantile(x, 0.5, epsilon=0.5, lower=0, upper=60, rng=rng, candidates=grid)
             for _ in range(4000)]  # fmt: skip
    counts = np.array([np.sum(np.isclose(draws, g)) for g in grid])
    expected = _output_probs(x, 0.5, 0.5, grid) * 4000
    from scipy import stats

    keep = expected > 5
    chi2 = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_candidates_are_checked():
    with pytest.raises(ValueError, match="candidates"):
        private_quantile([1.0], 0.5, epsilon=1, lower=0, upper=2, rng=0, candidates="grid")
    with pytest.raises(ValueError, match="public range"):
        private_quantile([1.0], 0.5, epsilon=1, lower=0, upper=2, rng=0, candidates=[0.5, 3.0])


def test_log_candidates_tighten_the_upper_bound_on_a_wide_public_range():
    """A target near 25-350 with the public range 0-1000 (the issue's diabetes example): over
    100 seeded windows, the log grid's median upper end is lower (less noise) than the gaps'."""
    x = np.clip(np.random.default_rng(0).gamma(4.0, 38.0, size=442), 25, 346)
    uppers = {}
    for cand in ("gaps", "log"):
        rng = np.random.default_rng(1)
        uppers[cand] = np.median(
            [
                private_bounds(x, epsilon=0.1, lower=0, upper=1000, rng=rng, candidates=cand)[1]
                for _ in range(100)
            ]
        )
    assert uppers["log"] < 0.85 * uppers["gaps"]


def test_noisy_bounds_warning_depends_on_public_values_only():
    """Same n, ε, share and range: the warning is the same for any data."""
    for x in (np.full(50, 3.0), np.random.default_rng(2).exponential(1.0, 50)):
        with pytest.warns(NoisyBoundsWarning, match="n=50"):
            pmdp.release(x, pm.Exponential, epsilon=1.0, bounds="private",
                         bounds_range=(0, 100), rng=0)  # fmt: skip
    x = np.random.default_rng(3).exponential(1.0, 20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoisyBoundsWarning)
        pmdp.release(x, pm.Exponential, epsilon=1.0, bounds="private", bounds_range=(0, 100),
                     rng=0)  # fmt: skip


def test_auto_candidates_follow_the_public_range():
    from pymc_dp.curator.private_window import resolve_candidates

    for study in (True, False):
        assert resolve_candidates("auto", (0.0, 1000.0), study=study) == "log"
        assert resolve_candidates("auto", (1.0, 1000.0), study=study) == "log"
    # Smith's gaps are drawn in floating point: studies only; a real release takes a grid.
    assert resolve_candidates("auto", (1.0, 50.0), study=True) == "gaps"
    assert resolve_candidates("auto", (-5.0, 5.0), study=True) == "gaps"
    assert resolve_candidates("auto", (1.0, 50.0), study=False) == "linear"
    assert resolve_candidates("auto", (-5.0, 5.0), study=False) == "linear"
    with pytest.raises(ValueError, match="bounds_candidates"):
        pmdp.release([1.0], pm.Exponential, epsilon=1.0, bounds="private",
                     bounds_range=(0, 10), bounds_candidates="x", rng=0)  # fmt: skip


def test_rank_error_formula():
    assert bounds_rank_error(100, 1.0, 101) == pytest.approx(2 * np.log(2020))
