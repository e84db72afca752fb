"""The mixed model of x (a binary covariate beside normal ones): exact law, moments, sampler."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import regression_statistic
from pymc_dp.regression import (
    NIG,
    NIW,
    default_mixed_x_prior,
    draw_nig,
    draw_niw,
    nig_update,
    release_regression,
    sample_mixed_regression,
)
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    binary_first,
    draw_mixed_statistic,
    draw_mixed_x,
    group_parts,
    log_prob_prior,
    mixed_record_moments,
    mixed_statistic_logpdf,
    tied_positions,
)
from pymc_dp.regression.kernels.mixed_move import pack_mixed, unpack_mixed

PAR = MixedParameters(
    np.array([0.3, -0.8, 0.5, 0.2]),
    np.array(0.4),
    np.array(0.25),
    np.array([[0.2, -0.5], [1.0, 0.3]]),
    np.array([[0.6, 0.2], [0.2, 0.3]]),
)


def _records(rng, par, n, size):
    """Statistics of simulated records, conditioned on both groups non-empty."""
    out = []
    chol = np.linalg.cholesky(par.x_cov)
    while len(out) < size:
        xb = (rng.uniform(size=n) < par.prob).astype(float)
        if xb.sum() in (0, n):
            continue
        x2 = par.group_loc[xb.astype(int)] + rng.standard_normal((n, chol.shape[0])) @ chol.T
        x = np.column_stack([xb, x2])
        y = par.theta[0] + x @ par.theta[1:] + np.sqrt(par.sigma2) * rng.standard_normal(n)
        out.append(regression_statistic(x, y))
    return np.array(out)


def test_draws_have_the_law_of_simulated_records():
    """Every component of the statistic, and k's restricted binomial, against simulated records
    (n = 12, π = 0.25: a group is empty with chance 0.03, so the restriction matters)."""
    rng = np.random.default_rng(1)
    n = 12
    sim = _records(rng, PAR, n, 4000)
    drawn = draw_mixed_statistic(rng, PAR, n, size=(4000,))
    pos_k, pos_kk = tied_positions(3)
    assert np.array_equal(drawn[:, pos_k], drawn[:, pos_kk])
    for j in range(sim.shape[1]):
        assert stats.ks_2samp(sim[:, j], drawn[:, j]).pvalue > 1e-3, j
    k = np.arange(1, n)
    pmf = stats.binom.pmf(k, n, PAR.prob)
    counts = np.array([np.sum(drawn[:, pos_k] == v) for v in k])
    expected = 4000 * pmf / pmf.sum()
    keep = expected > 5
    assert (
        stats.chisquare(
            counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum()
        ).pvalue
        > 1e-3
    )


def test_logpdf_is_the_product_of_its_parts():
    """The density against an independent evaluation with SciPy's distributions."""
    rng = np.random.default_rng(2)
    n = 40
    s = draw_mixed_statistic(rng, PAR, n, size=(5,))
    got = mixed_statistic_logpdf(s, PAR, n)
    parts = group_parts(s, n)
    from pymc_dp.regression.kernels.normal_model import split_statistic

    reg = split_statistic(s, n)
    for i in range(5):
        k = parts.count[i]
        ref = stats.binom.logpmf(k, n, PAR.prob) - np.log(
            1 - stats.binom.pmf(0, n, PAR.prob) - stats.binom.pmf(n, n, PAR.prob)
        )
        for g, size in enumerate((n - k, k)):
            ref += stats.multivariate_normal.logpdf(
                parts.sums[i, g], size * PAR.group_loc[g], size * PAR.x_cov
            )
        ref += stats.wishart.logpdf(parts.scatter[i], df=n - 2, scale=PAR.x_cov)
        ref += stats.multivariate_normal.logpdf(
            reg.xty[i], reg.gram[i] @ PAR.theta, PAR.sigma2 * reg.gram[i]
        )
        ref += stats.chi2.logpdf(reg.residual[i] / PAR.sigma2, n - 4) - np.log(PAR.sigma2)
        assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_logpdf_is_minus_infinity_off_the_model():
    rng = np.random.default_rng(3)
    s = draw_mixed_statistic(rng, PAR, 30)
    pos_k, pos_kk = tied_positions(3)
    for change in ((pos_kk, 0.5), (pos_k, 0.5)):
        bad = s.copy()
        bad[change[0]] += change[1]
        assert mixed_statistic_logpdf(bad, PAR, 30) == -np.inf
    empty = s.copy()
    empty[[pos_k, pos_kk]] = 0.0  # no record in the second group
    assert mixed_statistic_logpdf(empty, PAR, 30) == -np.inf


def test_a_negative_definite_scatter_has_no_density():
    """d = 3: the other covariates' pooled scatter W with two negative eigenvalues (a state
    the sampler reached while validity was det W > 0) is no data set's: −∞."""
    n = 1000.0
    s = np.array([405.0, 22263.013, 115.442, 405.0, -27599.638, -90.391, -4671.201, 24085.377,
                  89.455, -9424.882, 12719.826, -5462.306, -10811.202, 10182.656])  # fmt: skip
    par = MixedParameters(np.zeros(4), np.array(1.0), np.array(0.4), np.zeros((2, 2)), np.eye(2))
    scatter = group_parts(s, n).scatter
    assert np.linalg.det(scatter) > 0 and np.all(np.linalg.eigvalsh(scatter) < 0)
    assert mixed_statistic_logpdf(s, par, n) == -np.inf


def test_record_moments_match_simulated_records():
    rng = np.random.default_rng(4)
    n = 200_000
    xb = (rng.uniform(size=n) < PAR.prob).astype(float)
    x2 = (
        PAR.group_loc[xb.astype(int)]
        + rng.standard_normal((n, 2)) @ np.linalg.cholesky(PAR.x_cov).T
    )
    x = np.column_stack([xb, x2])
    y = PAR.theta[0] + x @ PAR.theta[1:] + np.sqrt(PAR.sigma2) * rng.standard_normal(n)
    w = np.column_stack([np.ones(n), x, y])
    from pymc_dp.curator.regression.statistics import released_pairs

    rows, cols = released_pairs(3)
    t = w[:, rows] * w[:, cols]
    mean, cov = mixed_record_moments(PAR)
    se = t.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(t.mean(axis=0) - mean) < 5 * se)
    np.testing.assert_allclose(np.cov(t.T), cov, rtol=0.05, atol=0.02)


def test_prior_of_prob_is_normalised_and_the_conjugate_draw_keeps_the_prior():
    """φ ~ prior, s ~ its law, φ' ~ φ | s: φ' has the prior's law (a Geweke check)."""
    from scipy.integrate import quad

    assert quad(lambda q: np.exp(log_prob_prior(q, 3)), 0, 1)[0] == pytest.approx(1.0)
    rng = np.random.default_rng(5)
    n, size = 8, 4000
    x_prior = NIW(np.array([0.5]), np.array(1.0), np.array(3.0), np.array([[0.8]]))
    # π from its prior ∝ 1 − πⁿ − (1 − π)ⁿ by rejection from the uniform.
    prob = rng.uniform(size=4 * size)
    prob = prob[rng.uniform(size=prob.size) < 1 - prob**n - (1 - prob) ** n][:size]
    loc0, cov = draw_niw(rng, x_prior, size=(size,))
    loc1 = 0.5 + np.sqrt(cov[:, 0]) * rng.standard_normal((size, 1))
    par = MixedParameters(np.array([0.0, 0.5, -0.3]), np.array(1.0), prob,
                          np.stack([loc0, loc1], axis=-2), cov)  # fmt: skip
    s = draw_mixed_statistic(rng, par, n)
    prob2, loc2, cov2 = draw_mixed_x(rng, x_prior, s, n)
    assert stats.ks_2samp(prob, prob2).pvalue > 1e-3
    assert stats.ks_2samp(np.log(cov[:, 0, 0]), np.log(cov2[:, 0, 0])).pvalue > 1e-3
    for g in range(2):
        assert stats.ks_2samp(par.group_loc[:, g, 0], loc2[:, g, 0]).pvalue > 1e-3


def test_binary_first_reorders_and_parameters_round_trip():
    rng = np.random.default_rng(6)
    x = np.column_stack([rng.normal(size=20), rng.uniform(size=20) < 0.5, rng.normal(size=20)])
    y = rng.normal(size=20)
    s = regression_statistic(x, y)
    moved = binary_first(s, 1)
    np.testing.assert_allclose(moved, regression_statistic(x[:, [1, 0, 2]], y))
    np.testing.assert_allclose(binary_first(moved, 1, inverse=True), s)
    back, _ = unpack_mixed(pack_mixed(PAR), 3)
    for a, b in zip(back, PAR, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_default_prior_names_the_binary_box():
    with pytest.raises(ValueError, match=r"x_bounds\[0\] must hold 0 and 1"):
        default_mixed_x_prior([(0.0, 0.5), (-1.0, 1.0)], binary=0)
    with pytest.raises(ValueError, match="binary must be a covariate index"):
        default_mixed_x_prior([(0.0, 1.0), (-1.0, 1.0)], binary=2)


def _exact_releases(rng, releases, n, scale, d=2):
    """(θ, σ²) and z for releases whose statistic is drawn from the model's prior."""
    prior = NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0), np.array(1.9))
    x_prior = default_mixed_x_prior([(0.0, 1.0)] + [(-2.0, 2.0)] * (d - 1), binary=0)
    theta, sigma2 = draw_nig(rng, prior, size=(releases,))
    prob = rng.uniform(0.1, 0.9, size=releases)
    loc0, cov = draw_niw(rng, x_prior, size=(releases,))
    root = np.linalg.cholesky(cov)
    loc1 = x_prior.loc + (root @ rng.standard_normal((releases, d - 1, 1)))[..., 0]
    par = MixedParameters(theta, sigma2, prob, np.stack([loc0, loc1], axis=-2), cov)
    s = draw_mixed_statistic(rng, par, n)
    return prior, x_prior, theta, sigma2, s, s + rng.laplace(scale=scale, size=s.shape)


@pytest.mark.parametrize("d", [2, 3])
def test_huge_epsilon_posterior_is_the_exact_one(d):
    """With noise of scale 10⁻⁴ the posterior of (θ, σ²) is the NIG posterior of s itself
    (d = 3: with the moves along the symmetries, on by default there)."""
    rng = np.random.default_rng(7)
    prior, x_prior, _, _, s, z = _exact_releases(rng, 3, 80, 1e-4, d=d)
    tr = sample_mixed_regression(8, released=z, n=80, prior=prior, x_prior=x_prior,
                                 scale=1e-4, draws=400, tune=200)  # fmt: skip
    post = nig_update(prior, statistic=s, n=80)
    ref_theta, ref_sigma2 = draw_nig(rng, post, size=(20000,))
    for r in range(3):
        th = tr.theta[:, :, r].reshape(-1, d + 1)
        np.testing.assert_allclose(
            th.mean(0),
            ref_theta[:, r].mean(0),
            atol=4 * ref_theta[:, r].std(0).max() / np.sqrt(200),
        )
        np.testing.assert_allclose(th.std(0), ref_theta[:, r].std(0), rtol=0.2)
        assert tr.sigma2[:, :, r].mean() == pytest.approx(ref_sigma2[:, r].mean(), rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 3])
def test_sampler_is_calibrated_on_releases_drawn_from_its_model(d):
    """Ranks of the true θ and σ² in their posteriors over 120 releases drawn from the model's
    own prior (n = 60, Laplace scale 8, so the noise matters): uniform by KS (p > 0.001).
    d = 3 runs the moves along the symmetries (about 100 s)."""
    rng = np.random.default_rng(8)
    releases = 120
    prior, x_prior, theta, sigma2, _, z = _exact_releases(rng, releases, 60, 8.0, d=d)
    tr = sample_mixed_regression(9, released=z, n=60, prior=prior, x_prior=x_prior,
                                 scale=8.0, draws=400, tune=300)  # fmt: skip
    draws_theta = tr.theta[:, ::4].reshape(-1, releases, d + 1)
    draws_sigma2 = tr.sigma2[:, ::4].reshape(-1, releases)
    for j in range(d + 1):
        rank = np.mean(draws_theta[..., j] < theta[:, j], axis=0)
        assert stats.kstest(rank, "uniform").pvalue > 1e-3, j
    rank = np.mean(draws_sigma2 < sigma2, axis=0)
    assert stats.kstest(rank, "uniform").pvalue > 1e-3


def test_sampler_refuses_bad_input():
    z = np.zeros((1, 9))
    prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0))
    x_prior = default_mixed_x_prior([(0.0, 1.0), (-1.0, 1.0)], binary=0)
    with pytest.raises(ValueError, match="binary must be a covariate index"):
        sample_mixed_regression(0, released=z, n=50, prior=prior, x_prior=x_prior, scale=1.0,
                                binary=2, draws=5)  # fmt: skip
    wide = default_mixed_x_prior([(0.0, 1.0)] * 2 + [(-1.0, 1.0)], 0)
    with pytest.raises(ValueError, match=r"x_prior\.loc must have d - 1 = 1 entries"):
        sample_mixed_regression(0, released=z, n=50, prior=prior, scale=1.0, draws=5,
                                x_prior=wide)  # fmt: skip
    with pytest.raises(TypeError, match="exactly one of scale"):
        sample_mixed_regression(0, released=z, n=50, prior=prior, x_prior=x_prior, draws=5)


def _joint_prior_draws(rng, size, n, scale):
    """(φ, s, w, z) from the model's joint prior (π by rejection from its prior ∝ Z(π))."""
    prior = NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9))
    x_prior = NIW(np.array([0.0]), np.array(1.0), np.array(3.0), np.array([[0.3]]))
    theta, sigma2 = draw_nig(rng, prior, size=(size,))
    prob = rng.uniform(size=4 * size)
    prob = prob[rng.uniform(size=prob.size) < 1 - prob**n - (1 - prob) ** n][:size]
    loc0, cov = draw_niw(rng, x_prior, size=(size,))
    loc1 = (np.linalg.cholesky(cov) @ rng.standard_normal((size, 1, 1)))[..., 0]
    par = MixedParameters(theta, sigma2, prob, np.stack([loc0, loc1], axis=-2), cov)
    s = draw_mixed_statistic(rng, par, n)
    w = rng.exponential(2.0 * scale**2, size=s.shape)  # Laplace = N(0, w), w ~ Exp(2b²)
    z = s + np.sqrt(w) * rng.standard_normal(s.shape)
    return prior, x_prior, par, s, w, z


def test_every_move_keeps_the_joint_prior():
    """Geweke's test: (φ, s, w, z) from the joint prior, then moves of (φ, s) given (z, w);
    every move leaves the posterior invariant, so φ keeps its prior law and (z − s)/√w stays
    standard normal (KS, 3000 chains, 20 sweeps of the three moves). The latter sees a move
    of s that targets another conditional, which the marginal of s, dominated by the spread
    of φ, hides."""
    from pymc_dp.regression.kernels.mixed_move import (
        MixedTarget,
        independence_move,
        joint_move,
        mixed_state,
    )

    rng = np.random.default_rng(10)
    size, n, scale = 3000, 30, 3.0
    prior, x_prior, par, s, w, z = _joint_prior_draws(rng, size, n, scale)
    target = MixedTarget(z, w, float(n), prior, x_prior)
    state = mixed_state(pack_mixed(par), s, target)
    k = state.params.shape[-1]
    factor = np.broadcast_to(0.15 * np.eye(k), (size, k, k))
    centre = np.broadcast_to(state.params.mean(axis=0), state.params.shape)
    chol = np.broadcast_to(np.linalg.cholesky(np.cov(state.params.T)), (size, k, k))
    from pymc_dp.regression.kernels.mixed_move import statistic_move

    for _ in range(20):
        state, _ = statistic_move(rng, state, target)
        state, _ = joint_move(rng, state, target, factor)
        state, _ = independence_move(rng, state, target, centre, chol, tries=4)
    before, after = pack_mixed(par), state.params
    moved = np.mean(np.any(after != before, axis=-1))
    assert moved > 0.6
    for j in range(k):
        assert stats.ks_2samp(before[:, j], after[:, j]).pvalue > 1e-3, ("u", j)
    resid = (z - state.suffstat) / np.sqrt(w)
    for j in range(s.shape[1]):
        assert stats.kstest(resid[:, j], "norm").pvalue > 1e-3, ("s", j)


def test_chains_started_far_from_the_readings_do_not_stick(monkeypatch):
    """A release in raw units (BMI in [15, 45], a response in [0, 400]: the noise swamps the
    binary covariate's count) under Gaussian noise, chains started from the prior: without the
    proposals of s from its law alone, the readings ask for an s the exact law rules out at the
    chains' φ and 3 of 4 chains keep one k for all 500 iterations; with them every chain moves.
    (The engine's chains now start near the release, :func:`release_nig_start`; here they start
    from the prior, the harder case.)
    """
    from pymc_dp.cli.regression import default_nig_prior
    from pymc_dp.regression.engine import mixed as mixed_engine
    from pymc_dp.regression.kernels import mixed_move

    monkeypatch.setattr(mixed_engine, "release_nig_start",
                        lambda rng, prior, statistic, n: draw_nig(rng, prior))  # fmt: skip

    rng = np.random.default_rng(0)
    n = 300
    sex = (rng.uniform(size=n) < 0.45).astype(float)
    bmi = np.clip(rng.normal(27, 4, n), 15, 45)
    y = np.clip(-100 + 10 * bmi + 5 * sex + rng.normal(0, 60, n), 0, 400)
    box = [(15.0, 45.0), (0.0, 1.0)]
    rel = release_regression(np.column_stack([bmi, sex]), y, x_bounds=box, y_bounds=(0, 400),
                             epsilon=1.0, rng=1)  # fmt: skip
    mu, cov, alpha, beta = default_nig_prior(box, (0, 400))
    prior = NIG(mu, np.linalg.inv(cov), np.array(alpha), np.array(beta))

    def distinct_k() -> list[int]:
        tr = sample_mixed_regression(2, released=rel.value[None], n=n, prior=prior,
                                     noise_sd=rel.scale * np.sqrt(2), binary=1,
                                     x_prior=default_mixed_x_prior(box, 1), draws=300,
                                     tune=200, chains=4)  # fmt: skip
        return [len(np.unique(chain)) for chain in tr.suffstat[:, :, 0, 1]]

    assert min(distinct_k()) > 20
    monkeypatch.setattr(mixed_move, "DEFENSIVE_SHARE", 1e-300)
    assert sum(k == 1 for k in distinct_k()) >= 2  # the test's power: stuck without them
