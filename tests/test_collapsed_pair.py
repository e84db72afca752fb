"""A released pair (windowed (Σz, Σz²)) with ŝ integrated out: kernel, Op, proposal and sampler."""

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.tensor.elemwise import Elemwise
from scipy import integrate, stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.moments import batched_moments
from pymc_dp.kernels import collapsed_pair as cp
from pymc_dp.kernels.collapsed_pair import (
    draw_pair_suffstat,
    normal_laplace_log_density,
    pair_log_likelihood,
)
from pymc_dp.kernels.plane_grid import draw_plane_grid, fit_plane_grid, plane_grid_logpdf
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from pymc_dp.likelihoods.collapsed_pair import pair_logp
from pymc_dp.model.model_access import QUICK_MODE, conditional_logp
from pymc_dp.model.nodes.collapsed import fixed_prior_block
from pymc_dp.model.nodes.info import INDEPENDENCE_TAG


def _cov(sd1, sd2, rho):
    return np.array([[sd1**2, rho * sd1 * sd2], [rho * sd1 * sd2, sd2**2]])


def _nested_quad(y, m, v, b):
    """log ∫∫ N(s; m, V) L(y₁ - s₁) L(y₂ - s₂) ds by nested adaptive quadrature (independent).

    The densities are written out with ``math`` (scipy.stats' per-call overhead made this
    reference take minutes)."""
    v1, c, v2 = v[0, 0], v[0, 1], v[1, 1]
    w = v2 - c * c / v1
    sd1, sdw = math.sqrt(v1), math.sqrt(w)

    def normal(x, mean, sd):
        return math.exp(-0.5 * ((x - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))

    def laplace(x, scale):
        return math.exp(-abs(x) / scale) / (2 * scale)

    def inner(s1):
        a = m[1] + c / v1 * (s1 - m[0])
        f = lambda s2: normal(s2, a, sdw) * laplace(y[1] - s2, b[1])  # noqa: E731
        lo, hi = min(a, y[1]) - 40 * (sdw + b[1]), max(a, y[1]) + 40 * (sdw + b[1])
        return integrate.quad(f, lo, hi, points=[y[1], a], limit=400, epsabs=0, epsrel=1e-13)[0]

    def g(s1):
        return normal(s1, m[0], sd1) * laplace(y[0] - s1, b[0]) * inner(s1)

    lo, hi = min(m[0], y[0]) - 40 * (sd1 + b[0]), max(m[0], y[0]) + 40 * (sd1 + b[0])
    return math.log(
        integrate.quad(g, lo, hi, points=[y[0], m[0]], limit=400, epsabs=0, epsrel=1e-12)[0]
    )


CASES = [
    # (y, m, V, b): moderate correlations, noise wider and narrower than the spread
    ([1.0, 2.0], [0.0, 0.5], _cov(1.0, 2.0, 0.8), [1.0, 1.0]),
    ([3.0, -2.0], [0.0, 0.0], _cov(1.0, 2.0, -0.95), [0.3, 0.5]),
    ([0.5, 0.3], [0.2, 0.1], _cov(1.0, 1.0, 0.3), [5.0, 5.0]),
    ([12.0, 40.0], [10.0, 30.0], _cov(3.0, 20.0, 0.9), [2.0, 3.0]),
    ([-1.0, 4.0], [0.0, 0.0], _cov(0.5, 3.0, 0.0), [0.7, 0.2]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pair_likelihood_matches_nested_quadrature(case):
    y, m, v, b = (np.asarray(a, dtype=np.float64) for a in CASES[case])
    got = float(pair_log_likelihood(released=y, mean=m, cov=v, scale=b).log_likelihood)
    assert abs(got - _nested_quad(y, m, v, b)) < 1e-9


def test_pair_likelihood_in_far_tails_equals_two_scalar_convolutions():
    # With V diagonal the pair is two scalar convolutions, computed independently in PyTensor.
    y = np.array([1000.0, -3e4])
    m = np.array([0.0, 100.0])
    var, b = np.array([49.0, 900.0]), np.array([2.0, 3.0])
    got = float(pair_log_likelihood(released=y, mean=m, cov=np.diag(var), scale=b).log_likelihood)
    ref = sum(
        float(normal_laplace_logp(y[j], m[j], var[j], -1e12, 1e12, b[j]).eval()) for j in (0, 1)
    )
    assert got < -1e4
    assert abs(got - ref) < 1e-8 * abs(ref)


def test_pair_likelihood_converges_in_hard_cases():
    # Correlations near ±1, far tails, noise far wider or narrower than the spread: the default
    # rule agrees with a 400-node rule on the same pieces.
    rng = np.random.default_rng(3)
    count = 400
    sd = np.exp(rng.uniform(-2, 4, (count, 2)))
    rho = np.tanh(rng.uniform(-6, 6, count))
    v = np.empty((count, 2, 2))
    v[:, 0, 0], v[:, 1, 1] = sd[:, 0] ** 2, sd[:, 1] ** 2
    v[:, 0, 1] = v[:, 1, 0] = rho * sd[:, 0] * sd[:, 1]
    m = rng.normal(0, 10, (count, 2))
    b = np.exp(rng.uniform(-2, 4, (count, 2)))
    y = m + rng.normal(0, 1, (count, 2)) * np.exp(rng.uniform(-1, 3, (count, 2))) * (sd + b)
    got = pair_log_likelihood(released=y, mean=m, cov=v, scale=b).log_likelihood
    rule = cp._GL_X, cp._GL_W
    try:
        cp._GL_X, cp._GL_W = np.polynomial.legendre.leggauss(400)
        ref = pair_log_likelihood(released=y, mean=m, cov=v, scale=b).log_likelihood
    finally:
        cp._GL_X, cp._GL_W = rule
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - ref)) < 1e-8


def test_pair_gradient_matches_finite_differences():
    rng = np.random.default_rng(5)
    for _ in range(20):
        sd = np.exp(rng.uniform(-1, 2, 2))
        v = _cov(*sd, np.tanh(rng.uniform(-3, 3)))
        m = rng.normal(0, 3, 2)
        b = np.exp(rng.uniform(-1, 1.5, 2))
        y = m + rng.normal(0, 2, 2) * (sd + b)

        def f(m_, v_):
            return float(pair_log_likelihood(released=y, mean=m_, cov=v_, scale=b).log_likelihood)

        out = pair_log_likelihood(released=y, mean=m, cov=v, scale=b)
        h = 1e-5
        grad_m = [(f(m + h * e, v) - f(m - h * e, v)) / (2 * h) for e in np.eye(2)]
        np.testing.assert_allclose(out.grad_mean, grad_m, rtol=1e-5, atol=1e-7)
        for i, j in ((0, 0), (1, 1), (0, 1)):
            e = np.zeros((2, 2))
            e[i, j] = e[j, i] = h
            d = (f(m, v + e) - f(m, v - e)) / (2 * h)
            expected = d if i == j else d / 2  # each off-diagonal entry gets half
            np.testing.assert_allclose(out.grad_cov[i, j], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "case",
    [
        ([1.0, 2.0], [0.0, 0.0], _cov(1.0, 2.0, 0.8), [1.0, 1.0]),
        ([3.0, -2.0], [0.0, 0.0], _cov(1.0, 2.0, -0.95), [0.3, 0.5]),
        ([0.5, 0.3], [0.0, 0.0], _cov(1.0, 1.0, 0.3), [5.0, 5.0]),
    ],
)
def test_pair_draws_follow_the_conditional(case):
    y, m, v, b = (np.asarray(a, dtype=np.float64) for a in case)
    rng = np.random.default_rng(11)
    s = draw_pair_suffstat(rng, released=y, mean=np.tile(m, (20000, 1)), cov=v, scale=b)
    # Reference: N(m, V) draws weighted by the two Laplace densities.
    ref = rng.multivariate_normal(m, v, size=2_000_000)
    log_w = -np.abs(y[0] - ref[:, 0]) / b[0] - np.abs(y[1] - ref[:, 1]) / b[1]
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    for j in (0, 1):
        order = np.argsort(ref[:, j])
        cdf = np.cumsum(w[order])
        u = np.interp(s[:, j], ref[order, j], cdf)
        assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_normal_laplace_density_matches_quadrature():
    ref = integrate.quad(
        lambda s: stats.norm.pdf(s, 0, 2) * stats.laplace.pdf(1.5 - s, 0, 0.5),
        -30,
        30,
        points=[1.5],
    )[0]
    assert np.isclose(normal_laplace_log_density(1.5, 4.0, 0.5), np.log(ref), rtol=1e-12)


def test_pair_op_value_gradient_and_batch():
    m, chol = pt.dvector("m"), pt.dmatrix("chol")
    y, b = np.array([1.0, 3.0]), np.array([0.7, 1.3])
    logp = pair_logp(y, m, chol @ chol.T, b)
    fn = pytensor.function([m, chol], [logp, *pt.grad(logp, [m, chol])])
    m0, l0 = np.array([0.2, 1.0]), np.array([[1.0, 0.0], [0.8, 1.5]])
    value, grad_m, grad_l = fn(m0, l0)
    ref = pair_log_likelihood(released=y, mean=m0, cov=l0 @ l0.T, scale=b).log_likelihood
    assert np.isclose(value, ref)
    h = 1e-6
    fd_m = [(fn(m0 + h * e, l0)[0] - fn(m0 - h * e, l0)[0]) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(grad_m, fd_m, rtol=1e-5)
    for i in range(2):
        for j in range(2):
            e = np.zeros((2, 2))
            e[i, j] = h
            fd = (fn(m0, l0 + e)[0] - fn(m0, l0 - e)[0]) / (2 * h)
            assert np.isclose(grad_l[i, j], fd, rtol=1e-5, atol=1e-8)
    batch = pt.dmatrix("batch")
    batched = pytensor.function([batch, chol], vectorize_graph(logp, replace={m: batch}))
    rows = np.array([m0, m0 + 1, m0 - 1])
    np.testing.assert_allclose(batched(rows, l0), [fn(r, l0)[0] for r in rows])


def _banana(z):
    """x ~ N(0, 2²), y | x ~ N(x²/2, 0.2): a ridge of sd 0.45, curved over 30 units."""
    z = np.atleast_2d(z)
    return stats.norm.logpdf(z[:, 0], 0, 2) + stats.norm.logpdf(
        z[:, 1], 0.5 * z[:, 0] ** 2, 0.2**0.5
    )


@pytest.mark.parametrize(
    "target, scale",
    [
        (stats.multivariate_normal([1, -1], [[1, 0.9], [0.9, 1]]).logpdf, 4 * np.eye(2)),
        (_banana, np.diag([4.0, 10.0])),
    ],
    ids=["correlated normal", "banana"],
)
def test_plane_grid_proposes_the_target(target, scale):
    rng = np.random.default_rng(0)
    grid = fit_plane_grid(target, loc=np.zeros(2), scale=scale)
    z = draw_plane_grid(rng, grid, 100_000)
    log_w = target(z) - plane_grid_logpdf(grid, z)
    w = np.exp(log_w)
    assert np.sum(w) ** 2 / np.sum(w**2) / len(w) > 0.8  # importance efficiency
    # The targets are normalised, so the mean weight is the mass the proposal finds: near 1
    # when it misses no part of the target (a ridge passing between every evaluated centre of a
    # cell is missed: with a ridge sd of 0.22, a quarter of this one's, the mean was 0.94).
    assert abs(np.mean(w) - 1) < 0.02


def _nig_model(rel, kappa=0.1):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 3.0, 100.0)
        mu = pm.Normal("mu", 30.0, sigma=pm.math.sqrt(sigma2 / kappa))
        pmdp.NoisySuffStat("y", pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2)), release=rel)
    return model


def _window_release(n, epsilon, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(30.0, 7.0, n)
    return pmdp.release(x, pm.Normal, epsilon=epsilon, bounds=(10.0, 50.0), rng=rng)


def test_default_node_holds_theta_and_y_only_and_blocks_theta():
    model = _nig_model(_window_release(200, 1.0))
    assert [v.name for v in model.free_RVs] == ["sigma2", "mu"]
    for rv in model.free_RVs:
        assert getattr(rv.tag, INDEPENDENCE_TAG) == ("sigma2", "mu")
    # A θ whose prior moves with another free variable is left to NUTS.
    with pm.Model() as model:
        centre = pm.Normal("centre", 30.0, 10.0)
        mu = pm.Normal("mu", centre, 5.0)
        sigma = pm.HalfNormal("sigma", 10.0)
        pmdp.NoisySuffStat("y", pm.Normal.dist(mu=mu, sigma=sigma), release=_window_release(200, 1))
    theta = pt.stack([mu, sigma**2])
    assert fixed_prior_block(model, theta) == []
    assert not hasattr(mu.tag, INDEPENDENCE_TAG)


def test_quick_mode_leaves_no_elementwise_python_loop():
    model = _nig_model(_window_release(200, 1.0))
    values, total, _ = conditional_logp(model, list(model.free_RVs))
    flat = pt.dvector("flat")
    single = clone_replace(total, replace={values[0]: flat[0], values[1]: flat[1]})
    block = pt.dmatrix("block")
    batched = vectorize_graph(single, replace={flat: block})
    quick = pytensor.function([block], batched, mode=QUICK_MODE)
    slow = pytensor.function([block], batched, mode="FAST_COMPILE")
    z = np.column_stack([np.linspace(25, 35, 7), np.linspace(3, 4.5, 7)])
    np.testing.assert_allclose(quick(z), slow(z), rtol=1e-12)
    for node in quick.maker.fgraph.toposort():
        if isinstance(node.op, Elemwise):
            spec = getattr(node.op.scalar_op, "nfunc_spec", None)
            assert spec is not None and len(node.inputs) == spec[1], node


def _grid_reference(rel, post, kappa=0.1, points=600):
    """Marginal CDFs of μ and log σ² on a dense grid of the collapsed posterior."""
    family = rel.get_family()
    moments = batched_moments(family, rel.n, rel.bounds)
    draws = {"mu": post["mu"].values.ravel(), "log_sigma2": np.log(post["sigma2"].values.ravel())}
    axes = {}
    for name, d in draws.items():
        lo, hi = np.quantile(d, [0.0005, 0.9995])
        axes[name] = np.linspace(lo - 0.5 * (hi - lo), hi + 0.5 * (hi - lo), points)
    mu, log_s2 = np.meshgrid(axes["mu"], axes["log_sigma2"], indexing="ij")
    s2 = np.exp(log_s2).ravel()
    mean, cov = moments(np.stack([mu.ravel(), s2], -1))
    loglik = pair_log_likelihood(
        released=rel.value, mean=mean[:, :2], cov=cov[:, :2, :2], scale=rel.scale
    ).log_likelihood
    logprior = (
        stats.invgamma(3.0, scale=100.0).logpdf(s2)
        + np.log(s2)
        + stats.norm(30.0, np.sqrt(s2 / kappa)).logpdf(mu.ravel())
    )
    log_post = (loglik + logprior).reshape(points, points)
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    return {
        "mu": (axes["mu"], w.sum(1)),
        "log_sigma2": (axes["log_sigma2"], w.sum(0)),
    }, draws


def _check_against_grid(rel, *, draws=2000, seed=1, points=600):
    import arviz as az

    model = _nig_model(rel)
    with model:
        idata = pm.sample(
            draws=draws,
            tune=300,
            chains=2,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    post = posterior_dataset(idata)
    reference, draws_ = _grid_reference(rel, post, points=points)
    for name, (grid, mass) in reference.items():
        var = "mu" if name == "mu" else "sigma2"
        ess = float(az.ess(idata, var_names=[var])[var])
        cdf = np.cumsum(mass) - mass / 2
        u = np.interp(draws_[name], grid, cdf)
        ks = stats.kstest(u, "uniform").statistic
        # 1.63/√ESS is the 1% critical value of the KS distance for ESS independent draws.
        assert ks < 1.63 / np.sqrt(ess), (name, ks, ess)
        assert ess > 0.3 * 2 * draws, (name, ess)


def test_default_sampler_matches_the_collapsed_posterior_on_a_grid():
    """pm.sample() defaults (IndependenceStep on the (μ, σ²) block) against a 600 × 600 grid of
    the same posterior (KS < 1.63/√ESS for μ and log σ², ESS ≥ 30% of the draws); the grid's
    step is under 1% of the posterior's span, so its CDF error is far below that bound."""
    _check_against_grid(_window_release(1000, 1.0), draws=1000, points=300)


@pytest.mark.slow
@pytest.mark.parametrize("n, epsilon", [(100, 0.1), (1000, 0.01), (1_000_000, 0.01)])
def test_default_sampler_matches_the_collapsed_posterior_where_noise_bites(n, epsilon):
    """As above where the posterior is curved (funnel, hook-shaped ridge at 10⁶ records)."""
    _check_against_grid(_window_release(n, epsilon))


def test_sample_latent_draws_the_window_statistic_and_mixing_variances():
    rel = _window_release(1000, 1.0)
    model = _nig_model(rel)
    with model:
        idata = pm.sample(draws=200, tune=100, chains=2, random_seed=3, progressbar=False)
    idata = pmdp.sample_latent(idata, model, random_seed=4)
    post = posterior_dataset(idata)
    assert post["y_s"].dims == ("chain", "draw", "y_part")
    assert list(post["y_s"]["y_part"].values) == [
        "window_sum_x",
        "window_sum_x2",
        "all_sum_x",
        "all_sum_x2",
    ]
    assert post["y_sigma2"].dims == ("chain", "draw", "y_stat")
    s = post["y_s"].values
    assert np.all(np.isfinite(s)) and np.all(post["y_sigma2"].values > 0)
    assert np.all(rel.n * s[..., 3] >= s[..., 2] ** 2)  # the records' valid region
    # ŝ's draws centre where the kernel's posterior moments put them (per θ draw).
    theta = np.stack([post["mu"].values, post["sigma2"].values], -1).reshape(-1, 2)
    mean, cov = batched_moments(rel.get_family(), rel.n, rel.bounds)(theta)
    out = pair_log_likelihood(
        released=rel.value, mean=mean[:, :2], cov=cov[:, :2, :2], scale=rel.scale
    )
    expected = mean[:, :2] + np.einsum("...ij,...j->...i", cov[:, :2, :2], out.grad_mean)
    residual = s[..., :2].reshape(-1, 2) - expected
    assert np.all(np.abs(residual.mean(0)) < 4 * residual.std(0) / np.sqrt(len(residual)))


def _thinned(draws):
    import arviz as az

    draws = np.asarray(draws)
    step = max(1, int(draws.size / float(az.ess(az.convert_to_dataset(draws))["x"])))
    return draws[:, ::step].ravel()


def test_engine_collapsed_pair_agrees_with_pm_sample():
    """sample_gibbs(method="collapsed") and pm.sample() defaults on one release: two-sample KS
    of μ and σ² (each thinned to about its ESS) at α = 0.001."""
    from pymc_dp.engine.gibbs import sample_gibbs
    from pymc_dp.families import Normal

    rel = _window_release(1000, 0.1, seed=5)
    with _nig_model(rel):
        idata = pm.sample(draws=1500, tune=200, chains=2, random_seed=6, progressbar=False)
    post = posterior_dataset(idata)
    trace = sample_gibbs(
        7,
        family=Normal(),
        prior=(30.0, 0.1, 3.0, 100.0),
        released=np.asarray(rel.value)[None],
        n=rel.n,
        scale=rel.scale,
        draws=1500,
        chains=2,
        bounds=rel.bounds,
        method="collapsed",
    )
    assert trace.theta.shape == (2, 1500, 1, 2) and trace.suffstat.shape == (2, 1500, 1, 4)
    for j, name in enumerate(("mu", "sigma2")):
        engine = _thinned(trace.theta[:, :, 0, j])
        assert stats.ks_2samp(engine, _thinned(post[name].values)).pvalue > 1e-3, name


@pytest.mark.slow
def test_engine_collapsed_pair_calibrated_100_trials():
    """Calibration (Cook, Gelman & Rubin 2006) of the collapsed pair at n = 1000, ε = 0.1, where
    the noise is as wide as the posterior: 100 trials with (μ, σ²) from the NIG prior, records
    released over a window fixed before θ is drawn, 1000 draws each; the true θ's randomised
    rank among the draws must be uniform (KS p > 0.01 for μ and σ²)."""
    from pymc_dp.engine.gibbs import sample_gibbs
    from pymc_dp.evaluation.measures import calibration_quantiles
    from pymc_dp.families import Normal

    trials, n, epsilon = 100, 1000, 0.1
    mean, kappa, alpha, beta = 1.0, 2.0, 6.0, 5.0
    rng = np.random.default_rng(21)
    sigma2 = beta / rng.gamma(alpha, size=trials)
    mu = rng.normal(mean, np.sqrt(sigma2 / kappa))
    releases = [
        pmdp.release(
            rng.normal(m, np.sqrt(v), n), pm.Normal, epsilon=epsilon, bounds=(-2.0, 4.0), rng=rng
        )
        for m, v in zip(mu, sigma2, strict=True)
    ]
    trace = sample_gibbs(
        rng,
        family=Normal(),
        prior=(mean, kappa, alpha, beta),
        released=np.stack([r.value for r in releases]),
        n=n,
        scale=releases[0].scale,
        draws=1000,
        bounds=(-2.0, 4.0),
        method="collapsed",
    )
    u = calibration_quantiles(trace.theta, np.stack([mu, sigma2], 1), rng=rng)
    for j in range(2):
        assert stats.kstest(u[:, j], "uniform").pvalue > 0.01
