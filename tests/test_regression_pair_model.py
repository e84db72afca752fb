"""The exact law of the statistic with two binary covariates beside normal ones, and its sampler.

:func:`~pymc_dp.regression.kernels.level_model.pair_layout`: the pair takes the four corners,
the other covariates are normal with a mean additive in the two binaries and one covariance.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import regression_statistic, released_pairs
from pymc_dp.regression import NIG, NIW
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    cells_from_coordinates,
    columns_first,
    draw_level_prior,
    draw_level_statistic,
    draw_level_x,
    level_parts,
    level_record_moments,
    level_statistic_logpdf,
    pair_layout,
)
from pymc_dp.regression.kernels.normal_model import split_statistic

PAR = LevelParameters(
    np.array([0.3, -0.8, 0.4, 0.5, 0.2]),
    np.array(0.4),
    np.array([0.4, 0.2, 0.25, 0.15]),
    np.array([[0.2, -0.5], [1.0, 0.3], [-0.4, 0.8]]),
    np.array([[0.6, 0.2], [0.2, 0.3]]),
)
LAYOUT = pair_layout(4)


def _records(rng, par, n, layout=LAYOUT):
    """Records of the model (binary columns first), conditioned on three corners or more."""
    while True:
        cell = rng.choice(4, size=n, p=par.probs)
        if np.unique(cell).size >= 3:
            break
    chol = np.linalg.cholesky(par.x_cov)
    x2 = layout.design[cell] @ par.group_loc + rng.standard_normal((n, chol.shape[0])) @ chol.T
    x = np.column_stack([layout.corners[cell], x2])
    y = par.theta[0] + x @ par.theta[1:] + np.sqrt(par.sigma2) * rng.standard_normal(n)
    return x, y, cell


def _record_loglik(par, x, y, cell, layout=LAYOUT):
    mean = layout.design[cell] @ par.group_loc
    out = np.sum(np.log(par.probs[cell]))
    out += np.sum(stats.multivariate_normal(cov=par.x_cov).logpdf(x[:, 2:] - mean))
    out += np.sum(stats.norm(par.theta[0] + x @ par.theta[1:], np.sqrt(par.sigma2)).logpdf(y))
    return out


def test_layout_and_cell_counts():
    layout = pair_layout(3)
    assert layout.levels == 4 and layout.means == 3 and layout.columns == 2
    assert [r.tolist() for r in layout.readers] == [[0, 3], [1, 6], [4]]
    x = np.array([[0, 0, 1.0], [1, 0, 2.0], [1, 1, 3.0], [0, 1, 4.0], [1, 1, 5.0]])
    s = regression_statistic(x, np.zeros(5))
    cells = cells_from_coordinates(s[layout.counts], 5, layout)
    assert cells.tolist() == [1.0, 1.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="at least 3"):
        pair_layout(2)


def test_draws_have_the_law_of_simulated_records():
    """Every component of the statistic against simulated records (n = 10, so that the corners'
    restriction matters), and the law of the three counts."""
    rng = np.random.default_rng(1)
    n = 10
    sim = np.array([regression_statistic(*_records(rng, PAR, n)[:2]) for _ in range(4000)])
    drawn = draw_level_statistic(rng, PAR, n, LAYOUT, size=(4000,))
    assert np.array_equal(drawn[:, LAYOUT.counts[:2]], drawn[:, LAYOUT.squares])
    assert np.all(level_parts(drawn, n, LAYOUT).consistent)
    for j in range(sim.shape[1]):
        assert stats.ks_2samp(sim[:, j], drawn[:, j]).pvalue > 1e-3, j
    codes = [c[:, LAYOUT.counts] @ [1, 100, 10_000] for c in (sim, drawn)]
    cells = np.union1d(*codes)
    table = np.array([[np.sum(c == v) for v in cells] for c in codes])
    table = table[:, table.sum(axis=0) >= 10]
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_density_ratios_are_the_records_likelihood_ratios():
    """The statistic is sufficient: log p(s | φ) − log p(s | φ') is the records' log-likelihood
    ratio, to rounding, for any two φ (here three random ones)."""
    rng = np.random.default_rng(2)
    n = 40
    x, y, cell = _records(rng, PAR, n)
    s = regression_statistic(x, y)
    others = []
    for seed in range(3):
        r = np.random.default_rng(100 + seed)
        a = r.normal(size=(2, 2))
        others.append(LevelParameters(r.normal(size=5), np.array(r.uniform(0.3, 2.0)),
                                      r.dirichlet(np.full(4, 5.0)), r.normal(size=(3, 2)),
                                      a @ a.T + np.eye(2)))  # fmt: skip
    for other in others:
        got = level_statistic_logpdf(s, PAR, n, LAYOUT) - level_statistic_logpdf(
            s, other, n, LAYOUT
        )
        ref = _record_loglik(PAR, x, y, cell) - _record_loglik(other, x, y, cell)
        assert got == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_logpdf_is_the_product_of_its_parts():
    """Against SciPy's matrix normal, Wishart and multinomial (the count law unrestricted)."""
    rng = np.random.default_rng(3)
    n = 40
    s = draw_level_statistic(rng, PAR, n, LAYOUT, size=(4,))
    got = level_statistic_logpdf(s, PAR, n, LAYOUT)
    parts = level_parts(s, n, LAYOUT)
    reg = split_statistic(s, n)
    for i in range(4):
        gram = parts.gram[i]
        ref = stats.multinomial.logpmf(parts.counts[i], n, PAR.probs)
        ref += stats.matrix_normal.logpdf(parts.sums[i], gram @ PAR.group_loc, gram, PAR.x_cov)
        ref += stats.wishart.logpdf(parts.scatter[i], df=n - 3, scale=PAR.x_cov)
        ref += stats.multivariate_normal.logpdf(
            reg.xty[i], reg.gram[i] @ PAR.theta, PAR.sigma2 * reg.gram[i]
        )
        ref += stats.chi2.logpdf(reg.residual[i] / PAR.sigma2, n - 5) - np.log(PAR.sigma2)
        assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_logpdf_is_minus_infinity_off_the_model():
    rng = np.random.default_rng(4)
    n = 30
    s = draw_level_statistic(rng, PAR, n, LAYOUT)
    assert np.isfinite(level_statistic_logpdf(s, PAR, n, LAYOUT))
    for position, change in ((LAYOUT.squares[0], 1.0), (LAYOUT.counts[2], 0.5)):
        bad = s.copy()
        bad[position] += change
        assert level_statistic_logpdf(bad, PAR, n, LAYOUT) == -np.inf
    # Two corners only, (0, 0) and (1, 1): Σx₁ = Σx₂ = Σx₁x₂ = 10.
    x = np.column_stack([np.repeat([0.0, 1.0], [20, 10])] * 2 + [rng.normal(size=(30, 2))])
    two = regression_statistic(x, rng.normal(size=30))
    assert level_statistic_logpdf(two, PAR, n, LAYOUT) == -np.inf


def test_record_moments_match_simulated_records():
    rng = np.random.default_rng(5)
    n = 200_000
    cell = rng.choice(4, size=n, p=PAR.probs)
    chol = np.linalg.cholesky(PAR.x_cov)
    x2 = LAYOUT.design[cell] @ PAR.group_loc + rng.standard_normal((n, 2)) @ chol.T
    x = np.column_stack([LAYOUT.corners[cell], x2])
    y = PAR.theta[0] + x @ PAR.theta[1:] + np.sqrt(PAR.sigma2) * rng.standard_normal(n)
    w = np.column_stack([np.ones(n), x, y])
    rows, cols = released_pairs(4)
    t = w[:, rows] * w[:, cols]
    mean, cov = level_record_moments(PAR, LAYOUT)
    se = t.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(t.mean(axis=0) - mean) <= 5 * se)
    np.testing.assert_allclose(np.cov(t.T), cov, rtol=0.05, atol=0.02)


def test_the_conjugate_draw_keeps_the_prior():
    """φ ~ prior, s ~ its law, (π, M, Σ)' ~ · | s: the prior's law again (Geweke, n = 10)."""
    rng = np.random.default_rng(6)
    n, size = 10, 4000
    layout = pair_layout(3)
    x_prior = NIW(np.array([0.5]), np.array(1.0), np.array(3.0), np.array([[0.8]]))
    prior = NIG(np.zeros(4), np.eye(4), np.array(3.0), np.array(1.0))
    par, s = draw_level_prior(rng, prior, x_prior, layout, size, n)
    probs2, loc2, cov2 = draw_level_x(rng, x_prior, s, n, layout)
    assert loc2.shape == (size, 3, 1) and probs2.shape == (size, 4)
    for g in range(4):
        assert stats.ks_2samp(par.probs[:, g], probs2[:, g]).pvalue > 1e-3
    for g in range(3):
        assert stats.ks_2samp(par.group_loc[:, g, 0], loc2[:, g, 0]).pvalue > 1e-3
    assert stats.ks_2samp(np.log(par.x_cov[:, 0, 0]), np.log(cov2[:, 0, 0])).pvalue > 1e-3


# --- the sampler ------------------------------------------------------------------------------


def _prior_draws(rng, size, n, scale, d, tight):
    p, d2 = d + 1, d - 2
    if tight:
        prior = NIG(np.zeros(p), 0.5 * np.eye(p), np.array(20.0), np.array(1.9))
        x_prior = NIW(np.zeros(d2), np.array(1.0), np.array(d2 + 2.0), 0.3 * np.eye(d2))
    else:
        prior = NIG(np.zeros(p), np.eye(p), np.array(3.0), np.array(1.0))
        x_prior = NIW(np.zeros(d2), np.array(1.0), np.array(d2 + 3.0), np.eye(d2))
    par, s = draw_level_prior(rng, prior, x_prior, pair_layout(d), size, n)
    return prior, x_prior, par, s


@pytest.mark.parametrize("d", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_every_move_keeps_the_joint_prior(d):
    """Geweke's test: (φ, s, w, z) from the joint prior (Laplace noise as N(0, w), w ~
    Exp(2b²)), then every move of (φ, s) given (z, w), those along the symmetries included: φ
    keeps its prior law and (z − s)/√w stays standard normal (KS, 3000 chains, 15 sweeps)."""
    from pymc_dp.regression.kernels.mixed_move import (
        MixedTarget,
        independence_move,
        joint_move,
        mixed_state,
        pack_levels,
        statistic_move,
    )
    from pymc_dp.regression.kernels.mixed_symmetry import mixed_symmetry_moves

    rng = np.random.default_rng(20 + d)
    size, n, scale = 3000, 30, 3.0
    prior, x_prior, par, s = _prior_draws(rng, size, n, scale, d, tight=True)
    w = rng.exponential(2.0 * scale**2, size=s.shape)
    z = s + np.sqrt(w) * rng.standard_normal(s.shape)
    target = MixedTarget(z, w, float(n), prior, x_prior, levels=pair_layout(d))
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
    assert np.mean(mapped > 0) > 0.3
    for j in range(k):
        assert stats.ks_2samp(before[:, j], after[:, j]).pvalue > 1e-3, ("u", j)
    resid = (z - state.suffstat) / np.sqrt(w)
    for j in range(s.shape[1]):
        assert stats.kstest(resid[:, j], "norm").pvalue > 1e-3, ("s", j)


def test_huge_epsilon_posterior_is_the_exact_one():
    """Noise of scale 10⁻⁴: (θ, σ²) has the NIG posterior of s and π is Dirichlet(1 + counts);
    the pair given last (the engine reorders it)."""
    from pymc_dp.regression import draw_nig, nig_update
    from pymc_dp.regression.engine.levels import sample_level_regression

    rng = np.random.default_rng(7)
    n = 80
    prior, x_prior, _, s = _prior_draws(rng, 3, n, 1e-4, 3, tight=False)
    z = s + rng.laplace(scale=1e-4, size=s.shape)
    user, user_z = (columns_first(a, [1, 2], inverse=True) for a in (s, z))
    back = np.array([0, 3, 1, 2])
    user_prior = NIG(prior.mean[back], prior.precision[np.ix_(back, back)], prior.shape,
                     prior.scale)  # fmt: skip
    tr = sample_level_regression(8, released=user_z, n=n, prior=user_prior, x_prior=x_prior,
                                 pair=[1, 2], scale=1e-4, draws=400, tune=200)  # fmt: skip
    assert tr.x_model == "pair" and tr.group_loc.shape == (2, 400, 3, 3, 1)
    np.testing.assert_allclose(tr.suffstat[0, -1], user, atol=1e-2)
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(user_prior, statistic=user, n=n),
                                     size=(20000,))  # fmt: skip
    counts = level_parts(s, n, pair_layout(3)).counts
    for r in range(3):
        th = tr.theta[:, :, r].reshape(-1, 4)
        np.testing.assert_allclose(
            th.mean(0), ref_theta[:, r].mean(0),
            atol=4 * ref_theta[:, r].std(0).max() / np.sqrt(200),
        )  # fmt: skip
        np.testing.assert_allclose(th.std(0), ref_theta[:, r].std(0), rtol=0.2)
        assert tr.sigma2[:, :, r].mean() == pytest.approx(ref_sigma2[:, r].mean(), rel=0.05)
        expected = (1 + counts[r]) / (4 + n)
        np.testing.assert_allclose(tr.probs[:, :, r].reshape(-1, 4).mean(0), expected,
                                   atol=0.02)  # fmt: skip


def test_the_engine_refuses_a_bad_pair():
    from pymc_dp.regression.engine.levels import sample_level_regression

    kw = dict(released=np.zeros((1, 14)), n=50, prior=NIG(np.zeros(4), np.eye(4), 3.0, 1.0),
              x_prior=NIW(np.zeros(1), 1.0, 4.0, np.eye(1)), scale=1.0, draws=5)  # fmt: skip
    with pytest.raises(ValueError, match="exactly one of factor"):
        sample_level_regression(0, factor=[0], pair=[1, 2], **kw)
    with pytest.raises(ValueError, match="pair must list two"):
        sample_level_regression(0, pair=[0, 1, 2], **kw)
    with pytest.raises(ValueError, match="distinct covariate indices"):
        sample_level_regression(0, pair=[1, 1], **kw)


@pytest.mark.slow
@pytest.mark.parametrize("d", [3, 4])
def test_sampler_is_calibrated_on_releases_drawn_from_its_model(d):
    """Ranks of the true θ and σ² in their posteriors over 120 releases drawn from the model's
    own prior (n = 60, Laplace scale 8): uniform by KS (p > 0.001)."""
    from pymc_dp.regression.engine.levels import sample_level_regression

    rng = np.random.default_rng(30 + d)
    releases = 120
    prior, x_prior, par, s = _prior_draws(rng, releases, 60, 8.0, d, tight=False)
    z = s + rng.laplace(scale=8.0, size=s.shape)
    tr = sample_level_regression(9, released=z, n=60, prior=prior, x_prior=x_prior,
                                 pair=[0, 1], scale=8.0, draws=400, tune=300)  # fmt: skip
    draws_theta = tr.theta[:, ::4].reshape(-1, releases, d + 1)
    draws_sigma2 = tr.sigma2[:, ::4].reshape(-1, releases)
    for j in range(d + 1):
        rank = np.mean(draws_theta[..., j] < par.theta[:, j], axis=0)
        assert stats.kstest(rank, "uniform").pvalue > 1e-3, j
    rank = np.mean(draws_sigma2 < par.sigma2, axis=0)
    assert stats.kstest(rank, "uniform").pvalue > 1e-3
