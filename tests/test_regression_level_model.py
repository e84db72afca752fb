"""The level model of x (a factor of K levels beside normal covariates): exact law and moments."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import regression_statistic, released_pairs
from pymc_dp.regression import NIG, NIW
from pymc_dp.regression.kernels.cell_model import (
    CellParameters,
    cell_layout,
    cell_statistic_logpdf,
)
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    columns_first,
    draw_level_prior,
    draw_level_statistic,
    draw_level_x,
    level_layout,
    level_parts,
    level_record_moments,
    level_statistic_logpdf,
)
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    draw_mixed_statistic,
    mixed_statistic_logpdf,
)
from pymc_dp.regression.kernels.normal_model import split_statistic

# A factor of 3 levels (2 columns) beside 2 normal covariates: d = 4.
PAR = LevelParameters(
    np.array([0.3, -0.8, 0.4, 0.5, 0.2]),
    np.array(0.4),
    np.array([0.5, 0.2, 0.3]),
    np.array([[0.2, -0.5], [1.0, 0.3], [-0.4, 0.8]]),
    np.array([[0.6, 0.2], [0.2, 0.3]]),
)
LAYOUT = level_layout(4, 3)


def _records(rng, par, n, size):
    """Statistics of simulated records, conditioned on every level non-empty."""
    out = []
    levels = par.probs.size
    chol = np.linalg.cholesky(par.x_cov)
    while len(out) < size:
        level = rng.choice(levels, size=n, p=par.probs)
        if np.unique(level).size < levels:
            continue
        dummies = np.eye(levels)[level][:, 1:]
        x2 = par.group_loc[level] + rng.standard_normal((n, chol.shape[0])) @ chol.T
        x = np.column_stack([dummies, x2])
        y = par.theta[0] + x @ par.theta[1:] + np.sqrt(par.sigma2) * rng.standard_normal(n)
        out.append(regression_statistic(x, y))
    return np.array(out)


def test_draws_have_the_law_of_simulated_records():
    """Every component of the statistic against simulated records (n = 12, π₁ = 0.2: a level is
    empty with chance 0.07, so the restriction matters), and the counts' joint law."""
    rng = np.random.default_rng(1)
    n = 12
    sim = _records(rng, PAR, n, 4000)
    drawn = draw_level_statistic(rng, PAR, n, LAYOUT, size=(4000,))
    assert np.array_equal(drawn[:, LAYOUT.counts], drawn[:, LAYOUT.squares])
    assert np.all(drawn[:, LAYOUT.zeros] == 0.0)
    for j in range(sim.shape[1]):
        assert stats.ks_2samp(sim[:, j], drawn[:, j]).pvalue > 1e-3, j
    # The pair of counts (n₁, n₂): a χ² over the cells both samples fill.
    codes = [c[:, LAYOUT.counts] @ [1, 100] for c in (sim, drawn)]
    cells = np.union1d(*codes)
    table = np.array([[np.sum(c == v) for v in cells] for c in codes])
    table = table[:, table.sum(axis=0) >= 10]
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_logpdf_is_the_product_of_its_parts():
    """The density against an independent evaluation with SciPy's distributions (the count
    law unrestricted: the restriction's normaliser is left out with the prior's tilt)."""
    rng = np.random.default_rng(2)
    n = 40
    s = draw_level_statistic(rng, PAR, n, LAYOUT, size=(5,))
    got = level_statistic_logpdf(s, PAR, n, LAYOUT)
    parts = level_parts(s, n, LAYOUT)
    reg = split_statistic(s, n)
    for i in range(5):
        counts = parts.counts[i]
        ref = stats.multinomial.logpmf(counts, n, PAR.probs)
        for g, size in enumerate(counts):
            ref += stats.multivariate_normal.logpdf(
                parts.sums[i, g], size * PAR.group_loc[g], size * PAR.x_cov
            )
        ref += stats.wishart.logpdf(parts.scatter[i], df=n - 3, scale=PAR.x_cov)
        ref += stats.multivariate_normal.logpdf(
            reg.xty[i], reg.gram[i] @ PAR.theta, PAR.sigma2 * reg.gram[i]
        )
        ref += stats.chi2.logpdf(reg.residual[i] / PAR.sigma2, n - 5) - np.log(PAR.sigma2)
        assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_logpdf_is_minus_infinity_off_the_model():
    rng = np.random.default_rng(3)
    n = 30
    s = draw_level_statistic(rng, PAR, n, LAYOUT)
    assert np.isfinite(level_statistic_logpdf(s, PAR, n, LAYOUT))
    for position, change in ((LAYOUT.squares[0], 1.0), (LAYOUT.counts[1], 0.5),
                             (LAYOUT.zeros[0], 1.0)):  # fmt: skip
        bad = s.copy()
        bad[position] += change
        assert level_statistic_logpdf(bad, PAR, n, LAYOUT) == -np.inf
    empty = s.copy()  # every record in levels 1 and 2: the reference level empty
    ones = n - s[LAYOUT.counts[0]]
    empty[[LAYOUT.counts[1], LAYOUT.squares[1]]] = ones
    assert level_statistic_logpdf(empty, PAR, n, LAYOUT) == -np.inf


def test_two_levels_are_the_mixed_model_and_no_normal_covariate_the_cell_model():
    """K = 2 is the mixed model (a binary covariate first) up to its count law's normaliser
    log(1 − πⁿ − (1 − π)ⁿ); d₂ = 0 is the cell model's "categories" layout exactly."""
    rng = np.random.default_rng(4)
    n = 25
    mixed = MixedParameters(PAR.theta[[0, 1, 3, 4]], PAR.sigma2, np.array(0.3),
                            PAR.group_loc[:2], PAR.x_cov)  # fmt: skip
    s = draw_mixed_statistic(rng, mixed, n, size=(6,))
    level = LevelParameters(mixed.theta, mixed.sigma2, np.array([0.7, 0.3]), mixed.group_loc,
                            mixed.x_cov)  # fmt: skip
    diff = level_statistic_logpdf(s, level, n, level_layout(3, 2)) - mixed_statistic_logpdf(
        s, mixed, n
    )
    np.testing.assert_allclose(diff, np.log(1 - 0.3**n - 0.7**n), rtol=1e-9)
    cells = LevelParameters(PAR.theta[:3], PAR.sigma2, PAR.probs, np.zeros((3, 0)),
                            np.zeros((0, 0)))  # fmt: skip
    s = draw_level_statistic(rng, cells, n, level_layout(2, 3), size=(6,))
    np.testing.assert_allclose(
        level_statistic_logpdf(s, cells, n, level_layout(2, 3)),
        cell_statistic_logpdf(s, CellParameters(*cells[:3]), n, cell_layout(2, "categories")),
        rtol=1e-12,
    )


def test_record_moments_match_simulated_records():
    rng = np.random.default_rng(5)
    n = 200_000
    level = rng.choice(3, size=n, p=PAR.probs)
    x2 = PAR.group_loc[level] + rng.standard_normal((n, 2)) @ np.linalg.cholesky(PAR.x_cov).T
    x = np.column_stack([np.eye(3)[level][:, 1:], x2])
    y = PAR.theta[0] + x @ PAR.theta[1:] + np.sqrt(PAR.sigma2) * rng.standard_normal(n)
    w = np.column_stack([np.ones(n), x, y])
    rows, cols = released_pairs(4)
    t = w[:, rows] * w[:, cols]
    mean, cov = level_record_moments(PAR)
    se = t.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(t.mean(axis=0) - mean) <= 5 * se)  # the zeros: 0 and 0
    np.testing.assert_allclose(np.cov(t.T), cov, rtol=0.05, atol=0.02)


def test_the_conjugate_draw_keeps_the_prior():
    """φ ~ prior (π Dirichlet tilted by every level non-empty), s ~ its law, φ' ~ φ | s: φ' has
    the prior's law (a Geweke check, n = 8 so that the tilt matters)."""
    rng = np.random.default_rng(6)
    n, size = 8, 4000
    layout = level_layout(3, 3)
    x_prior = NIW(np.array([0.5]), np.array(1.0), np.array(3.0), np.array([[0.8]]))
    prior = NIG(np.zeros(4), np.eye(4), np.array(3.0), np.array(1.0))
    par, s = draw_level_prior(rng, prior, x_prior, layout, size, n)
    probs2, loc2, cov2 = draw_level_x(rng, x_prior, s, n, layout)
    for g in range(3):
        assert stats.ks_2samp(par.probs[:, g], probs2[:, g]).pvalue > 1e-3
        assert stats.ks_2samp(par.group_loc[:, g, 0], loc2[:, g, 0]).pvalue > 1e-3
    assert stats.ks_2samp(np.log(par.x_cov[:, 0, 0]), np.log(cov2[:, 0, 0])).pvalue > 1e-3


def test_columns_first_and_the_layout_refuse_bad_input():
    s = regression_statistic(np.eye(3), np.ones(3))
    with pytest.raises(ValueError, match="distinct covariate indices"):
        columns_first(s, [0, 0])
    with pytest.raises(ValueError, match="distinct covariate indices"):
        columns_first(s, [3])
    with pytest.raises(ValueError, match="levels must be in"):
        level_layout(3, 5)


# --- the sampler ------------------------------------------------------------------------------


def _joint_prior_draws(rng, size, n, scale, d=3, levels=3):
    """(φ, s, w, z) from the model's joint prior, Laplace noise as N(0, w), w ~ Exp(2b²)."""
    p, d2 = d + 1, d - levels + 1
    prior = NIG(np.zeros(p), 0.5 * np.eye(p), np.array(20.0), np.array(1.9))
    x_prior = NIW(np.zeros(d2), np.array(1.0), np.array(d2 + 2.0), 0.3 * np.eye(d2))
    par, s = draw_level_prior(rng, prior, x_prior, level_layout(d, levels), size, n)
    w = rng.exponential(2.0 * scale**2, size=s.shape)
    z = s + np.sqrt(w) * rng.standard_normal(s.shape)
    return prior, x_prior, par, s, w, z


@pytest.mark.parametrize("d", [3, 4])
def test_every_move_keeps_the_joint_prior(d):
    """Geweke's test: (φ, s, w, z) from the joint prior (a factor of 3 levels beside 1 or 2
    normal covariates), then moves of (φ, s) given (z, w): the move of s alone, the random walk
    and the multiple-try move, and the maps along the symmetries (of x_n, by level, and of y).
    Each leaves the posterior invariant, so φ keeps its prior law and (z − s)/√w stays standard
    normal (KS, 3000 chains, 15 sweeps)."""
    from pymc_dp.regression.kernels.mixed_move import (
        MixedTarget,
        independence_move,
        joint_move,
        mixed_state,
        pack_levels,
        statistic_move,
    )
    from pymc_dp.regression.kernels.mixed_symmetry import mixed_symmetry_moves

    rng = np.random.default_rng(10 + d)
    size, n, scale = 3000, 30, 3.0
    prior, x_prior, par, s, w, z = _joint_prior_draws(rng, size, n, scale, d=d)
    target = MixedTarget(z, w, float(n), prior, x_prior, levels=level_layout(d, 3))
    state = mixed_state(pack_levels(par), s, target)
    k = state.params.shape[-1]
    factor = np.broadcast_to(0.15 * np.eye(k), (size, k, k))
    centre = np.broadcast_to(state.params.mean(axis=0), state.params.shape)
    chol = np.broadcast_to(np.linalg.cholesky(np.cov(state.params.T)), (size, k, k))
    mapped = np.zeros(size)
    for _ in range(15):
        state, _ = statistic_move(rng, state, target)
        state, _ = joint_move(rng, state, target, factor)
        state, _ = independence_move(rng, state, target, centre, chol, tries=4)
        state, took = mixed_symmetry_moves(rng, state, target, steps=(0.3,))
        mapped += took
    before, after = pack_levels(par), state.params
    assert np.mean(np.any(after != before, axis=-1)) > 0.6
    assert np.mean(mapped > 0) > 0.3  # the maps move too
    for j in range(k):
        assert stats.ks_2samp(before[:, j], after[:, j]).pvalue > 1e-3, ("u", j)
    resid = (z - state.suffstat) / np.sqrt(w)
    for j in range(s.shape[1]):
        if j in LAYOUT.zeros and d == 4:
            continue
        assert stats.kstest(resid[:, j], "norm").pvalue > 1e-3, ("s", j)


def _releases(rng, releases, n, scale, d=3, levels=3):
    p, d2 = d + 1, d - levels + 1
    prior = NIG(np.zeros(p), np.eye(p), np.array(3.0), np.array(1.0))
    x_prior = NIW(np.zeros(d2), np.array(1.0), np.array(d2 + 3.0), np.eye(d2))
    par, s = draw_level_prior(rng, prior, x_prior, level_layout(d, levels), releases, n)
    return prior, x_prior, par, s, s + rng.laplace(scale=scale, size=s.shape)


def test_huge_epsilon_posterior_is_the_exact_one():
    """With noise of scale 10⁻⁴ the posterior of (θ, σ²) is the NIG posterior of s itself and π
    is Dirichlet(1 + counts); the factor's columns given last (the engine reorders them)."""
    from pymc_dp.regression import draw_nig, nig_update
    from pymc_dp.regression.engine.levels import sample_level_regression

    rng = np.random.default_rng(7)
    n = 80
    prior, x_prior, _, s, z = _releases(rng, 3, n, 1e-4)
    # The user's covariates: the normal one first, then the factor's columns.
    user = columns_first(s, [1, 2], inverse=True)
    user_z = columns_first(z, [1, 2], inverse=True)
    back = np.array([0, 3, 1, 2])  # θ in the user's order from θ with the factor first
    user_prior = NIG(prior.mean[back], prior.precision[np.ix_(back, back)], prior.shape,
                     prior.scale)  # fmt: skip
    tr = sample_level_regression(8, released=user_z, n=n, prior=user_prior, x_prior=x_prior,
                                 factor=[1, 2], scale=1e-4, draws=400, tune=200)  # fmt: skip
    np.testing.assert_allclose(tr.suffstat[0, -1], user, atol=1e-2)
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(user_prior, statistic=user, n=n),
                                     size=(20000,))  # fmt: skip
    counts = level_parts(s, n, LAYOUT_3).counts
    for r in range(3):
        th = tr.theta[:, :, r].reshape(-1, 4)
        np.testing.assert_allclose(
            th.mean(0), ref_theta[:, r].mean(0),
            atol=4 * ref_theta[:, r].std(0).max() / np.sqrt(200),
        )  # fmt: skip
        np.testing.assert_allclose(th.std(0), ref_theta[:, r].std(0), rtol=0.2)
        assert tr.sigma2[:, :, r].mean() == pytest.approx(ref_sigma2[:, r].mean(), rel=0.05)
        expected = (1 + counts[r]) / (3 + n)
        np.testing.assert_allclose(tr.probs[:, :, r].reshape(-1, 3).mean(0), expected,
                                   atol=0.02)  # fmt: skip


LAYOUT_3 = level_layout(3, 3)


@pytest.mark.slow
@pytest.mark.parametrize(("d", "levels"), [(3, 3), (4, 4)])
def test_sampler_is_calibrated_on_releases_drawn_from_its_model(d, levels):
    """Ranks of the true θ and σ² in their posteriors over 120 releases drawn from the model's
    own prior (n = 60, Laplace scale 8, so the noise matters): uniform by KS (p > 0.001)."""
    from pymc_dp.regression.engine.levels import sample_level_regression

    rng = np.random.default_rng(8 + d)
    releases = 120
    prior, x_prior, par, _, z = _releases(rng, releases, 60, 8.0, d=d, levels=levels)
    tr = sample_level_regression(9, released=z, n=60, prior=prior, x_prior=x_prior,
                                 factor=list(range(levels - 1)), scale=8.0, draws=400,
                                 tune=300)  # fmt: skip
    draws_theta = tr.theta[:, ::4].reshape(-1, releases, d + 1)
    draws_sigma2 = tr.sigma2[:, ::4].reshape(-1, releases)
    for j in range(d + 1):
        rank = np.mean(draws_theta[..., j] < par.theta[:, j], axis=0)
        assert stats.kstest(rank, "uniform").pvalue > 1e-3, j
    rank = np.mean(draws_sigma2 < par.sigma2, axis=0)
    assert stats.kstest(rank, "uniform").pvalue > 1e-3
