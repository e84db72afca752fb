"""The default regression sampler's kernels (collapsed.py, moment_move.py, collapsed_sampler.py)."""

import numpy as np
import pytest
from scipy import stats

import pymc_dp.regression.engine.collapsed as collapsed_sampler
from pymc_dp.kernels import draw_noise_variance
from pymc_dp.regression import (
    NIG,
    NIW,
    default_x_prior,
    draw_nig,
    draw_niw,
    nig_update,
    niw_update,
    regression_statistic,
    release_regression,
    sample_regression,
)
from pymc_dp.regression.engine.collapsed import collapsed_sweep, initial_step_sd
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.collapsed import (
    collapsed_target,
    evaluate,
    pack_parameters,
    parameter_log_jacobian,
    statistic_correction,
    unpack_parameters,
)
from pymc_dp.regression.kernels.moment_move import (
    moment_move,
    moment_prior,
    moment_proposal,
    parameters_from_moments,
    t_draw,
    t_log_density,
)
from pymc_dp.regression.kernels.normal_model import draw_statistic, record_moments, statistic_logpdf
from pymc_dp.regression.kernels.psd import (
    _PIVOT_PASS_MAX,
    _factor_by_halves,
    _positive_pivots,
    batched_cholesky,
)

PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))
X_PRIOR = NIW(np.zeros(1), np.array(4.0), np.array(20.0), np.array([[1.8]]))


def _batch(prior, x_prior, rows):
    p = NIG(*(np.broadcast_to(np.asarray(a, float), (rows, *np.shape(a))) for a in prior))
    x = NIW(*(np.broadcast_to(np.asarray(a, float), (rows, 1, *np.shape(a))) for a in x_prior))
    return p, x


def _assert_prior_distributed(rng, u, s=None, n=None, z=None, scale=None):
    """Geweke's check: θ₀, θ₁, σ², μ_x, σ_x² of ``u`` against 6000 prior draws; with ``s``, its
    m = 5 entries against the prior predictive of a statistic of ``n`` records, and z − s against
    the Laplace(``scale``) noise (KS, α = 0.001 over the number of tests)."""
    par = unpack_parameters(u, 1)
    ref_theta, ref_sigma2 = draw_nig(rng, PRIOR, size=(6000,))
    ref_loc, ref_cov = draw_niw(rng, X_PRIOR, size=(6000,))
    pairs = [
        (par.theta[:, 0], ref_theta[:, 0]),
        (par.theta[:, 1], ref_theta[:, 1]),
        (par.sigma2, ref_sigma2),
        (par.x_loc[:, 0, 0], ref_loc[:, 0]),
        (par.x_cov[:, 0, 0, 0], ref_cov[:, 0, 0]),
    ]
    if s is not None:
        ref_s = draw_statistic(rng, theta=ref_theta[:, None], sigma2=ref_sigma2[:, None],
                               x_loc=ref_loc[:, None], x_cov=ref_cov[:, None], n=n)  # fmt: skip
        pairs += [(s[:, 0, j], ref_s[:, 0, j]) for j in range(s.shape[-1])]
        # The noise z − s ties s to the release: it must still be Laplace.
        pairs += [(z[:, 0, j] - s[:, 0, j], stats.laplace(0.0, scale).cdf) for j in range(5)]
    for ours, ref in pairs:
        test = stats.ks_2samp if isinstance(ref, np.ndarray) else stats.kstest
        assert test(ours, ref).pvalue > 1e-3 / len(pairs)


def test_parameter_round_trip_and_jacobian_d2():
    """pack ∘ unpack is the identity; the log-Jacobian equals a finite-difference one."""
    rng = np.random.default_rng(1)
    theta, sigma2 = rng.normal(size=3), 0.7
    loc, cov = rng.normal(size=(1, 2)), np.array([[[1.0, 0.3], [0.3, 0.5]]])
    u = pack_parameters(theta, sigma2, loc, cov)
    par = unpack_parameters(u, 2)
    np.testing.assert_allclose(par.theta, theta)
    np.testing.assert_allclose(par.sigma2, sigma2)
    np.testing.assert_allclose(par.x_cov, cov, rtol=1e-12)

    def natural(v):  # (θ, σ², μ_x, unique entries of Σ_x)
        q = unpack_parameters(v, 2)
        return np.concatenate([q.theta, [q.sigma2], q.x_loc[0], q.x_cov[0][np.tril_indices(2)]])

    h = 1e-6
    jac = np.stack([(natural(u + h * e) - natural(u - h * e)) / (2 * h) for e in np.eye(9)], 1)
    np.testing.assert_allclose(parameter_log_jacobian(par), np.linalg.slogdet(jac)[1], rtol=1e-6)


def test_first_stage_density_is_prior_times_clt_marginal():
    """evaluate's surrogate = SciPy's NIG × NIW log densities + log-Jacobian + log N(z; nμ_t,
    nΣ_t + diag w), d = 1."""
    rng = np.random.default_rng(2)
    n = 30
    theta, sigma2, loc, cov = np.array([0.1, 0.4]), 0.2, np.array([0.3]), np.array([[0.5]])
    z = draw_statistic(rng, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=n)
    w = rng.uniform(1.0, 3.0, size=5)
    prior, x_prior = _batch(PRIOR, X_PRIOR, 1)
    target = collapsed_target(z[None, None], w[None, None], [n], prior, x_prior)
    u = pack_parameters(theta, sigma2, loc[None], cov[None])[None]
    ev = evaluate(u, target)
    mean, var = record_moments(theta, sigma2, loc, cov)
    ref = (
        stats.multivariate_normal.logpdf(theta, PRIOR.mean, sigma2 * np.linalg.inv(PRIOR.precision))
        + stats.invgamma.logpdf(sigma2, 20.0, scale=1.9)
        + stats.norm.logpdf(loc[0], 0.0, np.sqrt(cov[0, 0] / 4.0))
        + stats.invwishart.logpdf(cov[0, 0], 20.0, 1.8)
        + float(parameter_log_jacobian(unpack_parameters(u, 1))[0])
        + stats.multivariate_normal.logpdf(z, n * mean, n * var + np.diag(w))
    )
    np.testing.assert_allclose(ev.surrogate[0], ref, rtol=1e-8)
    s = draw_statistic(rng, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=n)
    corr = statistic_correction(s[None, None], ev, target)[0]
    exact = statistic_logpdf(s, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=n)
    np.testing.assert_allclose(
        corr, exact - stats.multivariate_normal.logpdf(s, n * mean, n * var), rtol=1e-6
    )


def test_moments_of_one_record_determine_the_parameters():
    rng = np.random.default_rng(3)
    for d in (1, 3):
        theta = rng.normal(size=(4, d + 1))
        a = rng.normal(size=(4, d, d))
        cov = a @ np.swapaxes(a, -1, -2) + np.eye(d)
        loc, sigma2 = rng.normal(size=(4, d)), rng.uniform(0.1, 1, size=4)
        eta, _ = record_moments(theta, sigma2, loc, cov)
        u, ok = parameters_from_moments(eta, d)
        assert np.all(ok)
        np.testing.assert_allclose(u, pack_parameters(theta, sigma2, loc[:, None], cov[:, None]))
    eta[0, -1] = -1.0  # E y² < 0: no distribution has it
    assert not parameters_from_moments(eta, 3)[1][0]


def test_moment_prior_memory_does_not_hold_a_covariance_per_draw():
    """moment_prior fits the mean of 2 000 prior draws per chain; the Isserlis covariance of
    each draw's statistic, (draws, rows, m, m), is never needed. With it, 40 chains at d = 4
    (m = 20) peaked at 1.08 GB of NumPy memory (about 11 GB for a 200-release study); the
    draws themselves take about 40 MB. Measured by tracemalloc, so not a timing."""
    import tracemalloc

    d, rows = 4, 40
    prior = NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0), np.array(1.9))
    x_prior = NIW(np.zeros(d), np.array(4.0), np.array(20.0), 1.8 * np.eye(d))
    prior, x_prior = _batch(prior, x_prior, rows)
    tracemalloc.start()
    try:
        fit = moment_prior(np.random.default_rng(0), prior, NIW(*(a[:, 0] for a in x_prior)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fit.mean.shape == (rows, (d + 2) * (d + 3) // 2 - 1)
    assert peak < 200e6, peak


@pytest.mark.parametrize(
    "n, epsilon, rows",
    [(20, 1.0, 600), pytest.param(200, 0.5, 3000, marks=pytest.mark.slow)],
)
def test_sweep_leaves_the_joint_posterior_invariant(n, epsilon, rows):
    """Geweke's joint-distribution test: (φ, s, z) from the model, w | s, z exact, then three
    sweeps of the collapsed moves (CLT and exact-law refreshes, multiple-try moment move,
    random walk) at a fixed walk. If every move leaves p(φ, s | z, w) invariant, φ after the
    sweeps is still a draw from the prior. ``rows`` members (600 in the default run, 3000 in
    the slow one), KS against 6000 prior draws for θ₀, θ₁, σ², μ_x, σ_x² at α = 0.001 / 5, and
    the moves must have moved."""
    rng = np.random.default_rng(4 + n)
    prior, x_prior = _batch(PRIOR, X_PRIOR, rows)
    theta, sigma2 = draw_nig(rng, prior)
    loc, cov = draw_niw(rng, x_prior)
    s = draw_statistic(rng, theta=theta[:, None], sigma2=sigma2[:, None], x_loc=loc, x_cov=cov,
                       n=n)  # fmt: skip
    scale = 24.33 / epsilon
    z = s + rng.laplace(0.0, scale, size=s.shape)
    u = pack_parameters(theta, sigma2, loc, cov)
    start = u.copy()
    target = collapsed_target(z, np.ones_like(z), [n], prior, x_prior)
    adapt = RandomWalkAdaptation(u, initial_sd=2.0 * initial_step_sd(prior, x_prior))
    adapt.center = np.broadcast_to(adapt.center.mean(axis=0), u.shape)  # a fixed anchor
    fit = moment_prior(np.random.default_rng(0), prior, NIW(*(a[:, 0] for a in x_prior)))
    for _ in range(3):
        w = draw_noise_variance(rng, residual=z - s, scale=scale)
        target = target._replace(noise_variance=w)
        state, _ = collapsed_sweep(rng, u, s, target=target, adaptation=adapt, fit=fit,
                                   moves=2, tries=8, tune=False)  # fmt: skip
        u, s = state.params, state.suffstat
    assert np.mean(np.any(u != start, axis=-1)) > 0.5
    _assert_prior_distributed(rng, u)


def _joint_draws(rng, rows, n, scale):
    """``rows`` draws of (φ, s, z) from the model: priors, u, s and z = s + Laplace(scale)."""
    prior, x_prior = _batch(PRIOR, X_PRIOR, rows)
    theta, sigma2 = draw_nig(rng, prior)
    loc, cov = draw_niw(rng, x_prior)
    s = draw_statistic(rng, theta=theta[:, None], sigma2=sigma2[:, None], x_loc=loc, x_cov=cov,
                       n=n)  # fmt: skip
    z = s + rng.laplace(0.0, scale, size=s.shape)
    return prior, x_prior, pack_parameters(theta, sigma2, loc, cov), s, z


def _prior_eta_fit(u, rows):
    """Mean and covariance of η over the members' states, for every member (a fixed fit)."""
    par = unpack_parameters(u, 1)
    eta = record_moments(par.theta, par.sigma2, par.x_loc[:, 0], par.x_cov[:, 0])[0]
    m = eta.shape[-1]
    return (np.broadcast_to(eta.mean(axis=0), (rows, m)),
            np.broadcast_to(np.cov(eta.T), (rows, m, m)))  # fmt: skip


@pytest.mark.parametrize("scale", [24.33, 1.0])
def test_sweep_with_w_integrated_out_leaves_the_joint_posterior_invariant(monkeypatch, scale):
    """Geweke's test of the sweeps that integrate the Laplace mixing variances out (every sweep
    here: ``MARGINAL_SHARE`` = 1), as ``sample_regression`` runs them: (φ, s, z) from the
    model, then three rounds of (w | s, z exact; conjugate draws of φ | s; one sweep with
    ``laplace_scale``), the fitted proposal from fixed moments of η (those of the members'
    prior draws). φ and s must still follow the prior and z − s the Laplace noise (1500
    members, n = 20, KS at α = 0.001 / 15), and most members must have moved. Laplace scale
    24.33 (ε = 1 for the box of the docs) and 1 (the release pins s)."""
    monkeypatch.setattr(collapsed_sampler, "MARGINAL_SHARE", 1.0)
    rows, n = 1500, 20
    rng = np.random.default_rng(41)
    prior, x_prior, u, s, z = _joint_draws(rng, rows, n, scale)
    start = u.copy()
    target = collapsed_target(z, np.ones_like(z), [n], prior, x_prior)
    adapt = RandomWalkAdaptation(u, initial_sd=initial_step_sd(prior, x_prior))
    adapt.center = np.broadcast_to(u.mean(axis=0), u.shape)
    adapt.cov = np.broadcast_to(np.cov(u.T), (rows, u.shape[-1], u.shape[-1]))
    adapt.moment_mean, adapt.moment_cov = _prior_eta_fit(u, rows)
    fit = moment_prior(np.random.default_rng(0), prior, NIW(*(a[:, 0] for a in x_prior)))
    moved = 0.0
    for _ in range(3):
        w = draw_noise_variance(rng, residual=z - s, scale=scale)
        target = target._replace(noise_variance=w)
        theta, sigma2 = draw_nig(rng, nig_update(prior, statistic=s[:, 0], n=n))
        loc, cov = draw_niw(rng, niw_update(x_prior, statistic=s, n=np.array([float(n)])))
        state, sweep = collapsed_sweep(rng, pack_parameters(theta, sigma2, loc, cov), s,
                                       target=target, adaptation=adapt, fit=fit, moves=2,
                                       tries=8, tune=False, laplace_scale=scale)  # fmt: skip
        assert np.all(np.isnan(sweep.moved))  # no random-walk moves in these sweeps
        moved += np.mean(sweep.moment) / 3
        u, s = state.params, state.suffstat
    assert moved > 0.05  # at scale 1 the prior-wide fit is a poor proposal: ~12 %
    assert np.mean(np.any(u != start, axis=-1)) > 0.5
    _assert_prior_distributed(rng, u, s, n, z, scale)


def test_adaptation_tracks_the_moments_over_its_windows():
    """``moment_mean`` and ``moment_cov`` are the last closed window's sample moments."""
    rng = np.random.default_rng(3)
    ad = RandomWalkAdaptation(np.zeros((2, 3)), initial_sd=np.ones(3))
    seen = []
    for _ in range(80):  # windows of 25 and 50 close at updates 25 and 75
        eta = rng.normal(size=(2, 4))
        seen.append(eta)
        ad.update(rng.normal(size=(2, 3)), eta)
    window = np.array(seen[25:75])
    np.testing.assert_allclose(ad.moment_mean, window.mean(axis=0))
    for b in range(2):
        np.testing.assert_allclose(ad.moment_cov[b], np.cov(window[:, b].T))
    assert RandomWalkAdaptation(np.zeros(3), initial_sd=np.ones(3)).moment_cov is None


def test_t_component_of_the_moment_move_is_a_normalised_multivariate_t():
    """The mixture weights need the t's density normalised: against SciPy's, and its draws."""
    rng = np.random.default_rng(11)
    centre, chol = np.array([0.3, -1.0, 2.0]), np.array([[1.0, 0, 0], [0.5, 0.7, 0], [0, 0.2, 2]])
    u = rng.normal(size=(5, 3))
    ref = stats.multivariate_t(centre, chol @ chol.T, df=5).logpdf(u)
    np.testing.assert_allclose(t_log_density(u, centre, chol), ref, rtol=1e-12)
    draws = t_draw(rng, centre[None], chol[None], 4000)[:, 0]
    for j in range(3):
        ref_j = stats.t(5, loc=centre[j], scale=np.sqrt((chol @ chol.T)[j, j]))
        assert stats.kstest(draws[:, j], ref_j.cdf).pvalue > 1e-3


@pytest.mark.parametrize("scale", [24.33, 1.0])
def test_moment_move_with_the_t_component_leaves_the_joint_posterior_invariant(scale):
    """Geweke's test of the moment move alone (its two moves of s, then the multiple-try
    move), candidates from the mixture of the normal in η and the t in u: (φ, s, z) from the
    model, then four rounds of (w | s, z exact; one moment move) with a fixed anchor and spread.
    φ and s must still follow the prior, and z − s the noise's law (2000 members, KS at
    α = 0.001 / 15 for θ₀, θ₁, σ², μ_x, σ_x², the five entries of s and of z − s), and most
    members must have moved. Laplace scale 24.33 (ε = 1 for the box of the docs: the release
    says little) and 1 (it pins s: there, a move of s that ignored z failed the noise's KS
    tests, smallest p below 1e-5)."""
    rows, n = 2000, 20
    rng = np.random.default_rng(29)
    prior, x_prior, u, s, z = _joint_draws(rng, rows, n, scale)
    start = u.copy()
    centre = np.broadcast_to(u.mean(axis=0), u.shape)
    spread = np.broadcast_to(np.cov(u.T), (rows, u.shape[-1], u.shape[-1]))
    target = collapsed_target(z, np.ones_like(z), [n], prior, x_prior)
    fit = moment_prior(np.random.default_rng(0), prior, NIW(*(a[:, 0] for a in x_prior)))
    for _ in range(4):
        target = target._replace(noise_variance=draw_noise_variance(rng, residual=z - s,
                                                                    scale=scale))  # fmt: skip
        proposal = moment_proposal(centre, target, fit, spread)
        state, _ = moment_move(rng, u, s, proposal=proposal, target=target, tries=8)
        u, s = state.params, state.suffstat
    assert np.mean(np.any(u != start, axis=-1)) > 0.5
    _assert_prior_distributed(rng, u, s, n, z, scale)


@pytest.mark.parametrize(
    "d, n, draws, tune",
    [
        (1, 300, 300, 150),
        pytest.param(3, 300, 1500, 500, marks=pytest.mark.slow),
        pytest.param(10, 2000, 200, 100, marks=pytest.mark.slow),
    ],
)
def test_huge_epsilon_posterior_is_the_exact_one(d, n, draws, tune):
    """ε = 10⁴, d covariates (d = 10: the most the docs promise; the release falls back to the
    sum of ranges there), d read from the release: the batched sampler's (θ, σ²) and one entry
    each of μ_x and Σ_x against iid draws of the exact NIG and NIW posteriors given the exact
    statistic. Given s the parameters are drawn exactly, so the chains are near-iid: means
    within 0.15 sd (≥ 3 standard errors at 2 × 200 draws), sds within 15 %."""
    rng = np.random.default_rng(5 + d)
    x = rng.normal(0.1, 0.4, size=(n, d))
    coef = np.linspace(0.5, -0.3, d)
    y = np.clip(0.2 + x @ coef + 0.3 * rng.standard_normal(n), -4, 4)
    rel = release_regression(np.clip(x, -2, 2), y, x_bounds=[(-2, 2)] * d, y_bounds=(-4, 4),
                             epsilon=1e4, rng=rng)  # fmt: skip
    prior = NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(3.0), np.array(0.2))
    x_prior = default_x_prior(rel.x_bounds)
    tr = sample_regression(6, released=rel.value[None], n=n, scale=rel.scale, prior=prior,
                           x_prior=x_prior, draws=draws, tune=tune, chains=2)  # fmt: skip
    assert tr.theta.shape[-1] == d + 1
    s = regression_statistic(np.clip(x, -2, 2), y)
    ex_theta, ex_sigma2 = draw_nig(rng, nig_update(prior, statistic=s, n=n), size=(8000,))
    ex_loc, ex_cov = draw_niw(rng, niw_update(x_prior, statistic=s, n=n), size=(8000,))
    pairs = [(tr.theta[..., 0, j], ex_theta[:, j]) for j in range(d + 1)]
    pairs += [(tr.sigma2[..., 0], ex_sigma2), (tr.x_loc[..., 0, d - 1], ex_loc[:, d - 1])]
    pairs += [(tr.x_cov[..., 0, d - 1, d - 1], ex_cov[:, d - 1, d - 1])]
    for ours, ref in pairs:
        assert abs(ours.mean() - ref.mean()) < 0.15 * ref.std()
        assert abs(ours.std() / ref.std() - 1) < 0.15


def test_a_start_far_outside_the_posterior_keeps_the_sweep_going():
    """An inverse-Wishart prior of x with ν = 1.5 at d = 2 is proper, and its start draw for
    seed 0 has Σ_x of order 10¹⁰ on a box of width 4. The moment move's proposal at that anchor
    was indefinite in floating point and its Cholesky factor raised ``LinAlgError`` before any
    sweep; now its eigenvalues are floored there. The chain then returns to the box: after
    tuning every draw of diag Σ_x is under the box's largest variance h² = 4 and θ is finite."""
    rng = np.random.default_rng(11)
    x = rng.normal(0.3, 0.5, size=(1000, 2))
    y = np.clip(0.1 + x @ np.array([0.4, -0.2]) + 0.3 * rng.standard_normal(1000), -3, 3)
    rel = release_regression(np.clip(x, -2, 2), y, x_bounds=[(-2, 2)] * 2, y_bounds=(-3, 3),
                             epsilon=1.0, rng=rng)  # fmt: skip
    x_prior = default_x_prior(rel.x_bounds)._replace(dof=np.array(1.5))
    prior = NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9))
    tr = sample_regression(0, released=rel.value[None], n=1000, scale=rel.scale, prior=prior,
                           x_prior=x_prior, draws=100, tune=200, chains=1)  # fmt: skip
    assert np.all(np.isfinite(tr.theta))
    assert np.all(np.diagonal(tr.x_cov, axis1=-2, axis2=-1) < 4.0)


def test_sampler_rejects_bad_arguments():
    z = np.ones((1, 5))
    kw = dict(released=z, n=20, prior=PRIOR, x_prior=X_PRIOR, draws=5)
    with pytest.raises(TypeError, match="exactly one of scale"):
        sample_regression(0, **kw)
    with pytest.raises(TypeError, match="exactly one of scale"):
        sample_regression(0, scale=1.0, noise_sd=1.0, **kw)
    with pytest.raises(ValueError, match="must be finite and > 0"):
        sample_regression(0, scale=-1.0, **kw)
    with pytest.raises(ValueError, match=r"prior\.mean must have 2"):
        sample_regression(0, scale=1.0, **{**kw, "prior": NIG(np.zeros(3), np.eye(3), 2.0, 1.0)})


def _assert_numpy_member_by_member(a, chol, ok):
    """Each member's factor and verdict are NumPy's on that member alone (identity if none)."""
    eye = np.eye(a.shape[-1])
    for index in np.ndindex(a.shape[:-2]):
        try:
            ref = np.linalg.cholesky(a[index])
            has = bool(np.all(np.isfinite(ref)))
        except np.linalg.LinAlgError:
            ref, has = eye, False
        assert ok[index] == has, index
        np.testing.assert_array_equal(chol[index], ref if has else eye)


@pytest.mark.parametrize("k", [3, 9, 20])
def test_batched_cholesky_marks_the_members_without_a_factor(k):
    """``batched_cholesky`` on a batch (11, 40) of k × k matrices where some are indefinite, one
    holds a NaN, one is singular and five fail at the last pivot only: the members with a
    factor, and their factors, are those of NumPy called on each member alone; the others get
    the identity. k = 3 and 9 take the vectorised pass that finds the failed members (checked
    alone too: a wrong pass would only be slower, the loop behind it mends its answer), k = 20
    the loop over the members."""
    rng = np.random.default_rng(k)
    x = rng.standard_normal((11, 40, k, k + 2))
    a = x @ x.swapaxes(-1, -2)
    a[rng.uniform(size=(11, 40)) < 0.1] -= 3.0 * (k + 2) * np.eye(k)
    a[0, 0, 0, 0] = np.nan
    a[1, 1] = np.outer(np.arange(k), np.arange(k))
    # Positive definite but for the last pivot, which a pass must test too.
    a[2, :5] = x[2, :5] @ x[2, :5].swapaxes(-1, -2)
    a[2, :5, -1, -1] -= 2.0 * np.linalg.cholesky(a[2, :5])[..., -1, -1] ** 2
    chol, ok = batched_cholesky(a)
    _assert_numpy_member_by_member(a, chol, ok)
    assert 10 < np.sum(~ok) < 100
    if k <= _PIVOT_PASS_MAX:
        np.testing.assert_array_equal(_positive_pivots(a), ok)


def test_a_pass_that_disagrees_with_lapack_leaves_the_factors_numpys(monkeypatch):
    """Where the pivot pass keeps a member LAPACK cannot factor (at rounding level in the cube),
    ``batched_cholesky`` factors the members the pass kept by halves: NumPy's factor and verdict
    on each member alone; a member the pass dropped stays failed (the identity) whatever LAPACK
    would say of it."""
    import pymc_dp.regression.kernels.psd as psd

    rng = np.random.default_rng(4)
    k = 5
    x = rng.standard_normal((3, 50, k, k + 1))
    a = x @ x.swapaxes(-1, -2)
    a[rng.uniform(size=(3, 50)) < 0.05] -= 20.0 * np.eye(k)  # indefinite
    a[1, 7] = np.outer(np.arange(k), np.arange(k))  # singular
    keep_all = np.ones(a.shape[:-2], dtype=bool)
    monkeypatch.setattr(psd, "_positive_pivots", lambda m: keep_all)
    chol, ok = batched_cholesky(a)
    _assert_numpy_member_by_member(a, chol, ok)
    assert 3 <= np.sum(~ok) < 30
    dropped = keep_all.copy()
    dropped[2, 3] = False  # a member with a factor, which the pass says has none
    monkeypatch.setattr(psd, "_positive_pivots", lambda m: dropped)
    chol2, ok2 = batched_cholesky(a)
    assert ok[2, 3] and not ok2[2, 3]
    np.testing.assert_array_equal(chol2[2, 3], np.eye(k))
    ok2[2, 3], chol2[2, 3] = True, chol[2, 3]
    np.testing.assert_array_equal(ok2, ok)
    np.testing.assert_array_equal(chol2, chol)


@pytest.mark.parametrize("size", [1, 2, 8, 9, 3000])
def test_factoring_by_halves_is_numpy_member_by_member_in_few_calls(size, monkeypatch):
    """The fallback of ``batched_cholesky`` (k > the pass's limit, or the pass and LAPACK
    disagreeing at rounding level): every member's factor and verdict are NumPy's on that
    member alone, to the bit, and with f failing members of N it makes at most
    2f·(log₂ N + 1) + 8f + 2 calls (the loop over the members made N: 1.44 million in one
    test of the cube)."""
    rng = np.random.default_rng(size)
    k = 5
    x = rng.standard_normal((size, k, k + 1))
    a = x @ x.swapaxes(-1, -2)
    bad = rng.choice(size, size=min(size, 10), replace=False)
    a[bad[::2]] -= 20.0 * np.eye(k)  # indefinite
    a[bad[1::2]] = np.outer(np.arange(k), np.arange(k)) + np.outer(np.ones(k), np.ones(k))
    calls = []
    cholesky = np.linalg.cholesky
    monkeypatch.setattr(np.linalg, "cholesky", lambda m: calls.append(1) or cholesky(m))
    out = np.broadcast_to(np.eye(k), a.shape).copy()
    ok = np.zeros(size, dtype=bool)
    _factor_by_halves(a, out, ok)
    monkeypatch.undo()
    _assert_numpy_member_by_member(a, out, ok)
    failing = int(np.sum(~ok))
    assert failing == len(bad)
    assert len(calls) <= 2 * failing * (np.log2(size) + 1) + 8 * failing + 2
