"""Exact likelihoods of windowed count releases (n-fold convolution by FFT, no CLT)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import vectorize_graph
from scipy import stats
from scipy.special import logsumexp

import pymc_dp as pmdp
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.families import Geometric, Poisson
from pymc_dp.kernels.exact_counts import NOISE_KINDS, NoiseLaw
from pymc_dp.kernels.exact_windows import (
    draw_window_sum,
    window_record_log_pmf,
    window_sum_log_likelihood,
)
from pymc_dp.likelihoods.choice import choose_likelihood, exact_cost
from pymc_dp.likelihoods.exact_windows import WindowSumLogLikelihood, window_log_q
from pymc_dp.model.noisy_suffstat import release_attrs
from tests.conftest import sample


def _brute_window_sum_log_pmf(dist, window, n):
    """Log law of the window sum of n records by n log-space convolutions (no FFT)."""
    lo, hi = window
    k = np.arange(hi + 1)
    one = np.where((k >= lo) & (k <= hi), dist.logpmf(k), -np.inf)
    one[0] = np.logaddexp(one[0], np.logaddexp(dist.logcdf(lo - 1), dist.logsf(hi)))
    law = np.zeros(1)
    for _ in range(n):
        new = np.full(law.size + hi, -np.inf)
        for j in range(hi + 1):
            new[j : j + law.size] = np.logaddexp(new[j : j + law.size], law + one[j])
        law = new
    return law


def _noise_logpdf(d, kind, b):
    """The noise law by an independent route: scipy, or an explicit normalisation."""
    if kind == "laplace":
        return stats.laplace.logpdf(d, scale=b)
    if kind == "discrete-laplace":
        return stats.dlaplace.logpmf(d, 1.0 / b)
    k = np.arange(-4000, 4001)
    return -0.5 * (d / b) ** 2 - logsumexp(-0.5 * (k / b) ** 2)


CASES = [
    # (record law, window, n, y, noise scale): near the mode, and far in both tails
    (stats.poisson(8.0), (0, 20), 30, 240.0, 20.0),
    (stats.poisson(50.0), (0, 20), 30, 240.0, 20.0),
    (stats.poisson(0.5), (2, 20), 30, 400.0, 2.0),
    (stats.poisson(200.0), (0, 20), 30, 300.0, 3.0),
    (stats.poisson(2.0), (0, 3), 1, 2.0, 1.0),
    (stats.geom(0.3), (1, 15), 25, 60.0, 15.0),
    (stats.geom(0.02), (3, 12), 20, -40.0, 5.0),
]


@pytest.mark.parametrize("kind", NOISE_KINDS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_window_likelihood_matches_brute_force_convolution(kind, case):
    """To 1e-10 relative, also where log p(y | θ) is in the hundreds or thousands."""
    dist, window, n, y, b = CASES[case]
    law = _brute_window_sum_log_pmf(dist, window, n)
    want = logsumexp(law + _noise_logpdf(y - np.arange(law.size), kind, b))
    got, _ = window_sum_log_likelihood(window_record_log_pmf(dist, window), n, y, NoiseLaw(kind, b))
    assert got == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_window_likelihood_gradient_is_the_posterior_law_of_one_record():
    dist, window, n, y, b = CASES[0]
    noise = NoiseLaw("laplace", b)
    log_q = window_record_log_pmf(dist, window)
    value, grad = window_sum_log_likelihood(log_q, n, y, noise, gradient=True)
    assert grad.sum() == pytest.approx(n, rel=1e-9)
    assert np.all(grad >= 0)
    step = 1e-6
    for j in (0, 3, 8, 15, 20):
        moved = log_q.copy()
        moved[j] += step
        numeric = (window_sum_log_likelihood(moved, n, y, noise)[0] - value) / step
        assert grad[j] == pytest.approx(numeric, rel=1e-4, abs=1e-6)


def test_window_likelihood_batches():
    lams = np.array([[2.0, 8.0], [30.0, 0.1]])
    log_q = window_record_log_pmf(stats.poisson(lams), (1, 12))
    assert log_q.shape == (2, 2, 13)
    np.testing.assert_allclose(np.exp(logsumexp(log_q, axis=-1)), 1.0, rtol=1e-12)
    noise = NoiseLaw("discrete-laplace", 4.0)
    got, grad = window_sum_log_likelihood(log_q, 10, np.array([30.0, 50.0]), noise, gradient=True)
    assert got.shape == (2, 2) and grad.shape == (2, 2, 13)
    one, _ = window_sum_log_likelihood(log_q[1, 0], 10, 30.0, noise)
    assert got[1, 0] == pytest.approx(float(one), rel=1e-13)


def test_window_sum_draws_follow_their_conditional():
    rng = np.random.default_rng(0)
    dist, window, n, y = stats.poisson(3.0), (1, 6), 4, 11.0
    noise = NoiseLaw("laplace", 3.0)
    log_q = window_record_log_pmf(dist, window)
    draws = draw_window_sum(rng, np.broadcast_to(log_q, (20_000, log_q.size)), n, y, noise)
    law = _brute_window_sum_log_pmf(dist, window, n)
    weights = np.exp(law + _noise_logpdf(y - np.arange(law.size), "laplace", 3.0))
    expected = weights / weights.sum() * draws.size
    observed = np.bincount(draws.astype(int), minlength=law.size)
    keep = expected > 5
    _, p = stats.chisquare(
        observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()
    )
    assert p > 1e-3


@pytest.mark.parametrize(
    "family,theta,bounds",
    [(Poisson(), 8.0, (0, 20)), (Poisson(), 3.0, (2, 9)), (Geometric(), 0.2, (3, 15))],
)
def test_pytensor_window_law_and_logp_match_the_kernels_with_gradients(family, theta, bounds):
    t = pt.dscalar("t")
    log_q = window_log_q(family, t, bounds)
    want = window_record_log_pmf(family.record_distribution(theta), family.latent_window(bounds))
    got = pytensor.function([t], log_q)(theta)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12)

    noise = NoiseLaw("laplace", 10.0)
    logp = WindowSumLogLikelihood(12, noise)(log_q, 40.0)
    fn = pytensor.function([t], [logp, pytensor.grad(logp, t)])
    value, grad = fn(theta)
    assert value == pytest.approx(float(window_sum_log_likelihood(want, 12, 40.0, noise)[0]))
    step = 1e-6 * theta
    numeric = (fn(theta + step)[0] - fn(theta - step)[0]) / (2 * step)
    assert grad == pytest.approx(numeric, rel=1e-5)
    nodes = pt.dvector("nodes")
    batched = pytensor.function([nodes], vectorize_graph(logp, replace={t: nodes}))
    np.testing.assert_allclose(
        batched(np.array([theta, 2 * theta / (1 + theta)])),
        [fn(theta)[0], fn(2 * theta / (1 + theta))[0]],
        rtol=1e-12,
    )


def test_auto_takes_the_exact_window_likelihood_only_where_the_clt_is_untrusted():
    fam = Poisson()
    assert exact_cost(fam, 50, (0.0, 15.0)) == 751
    # The window rule (window_clt_trust): KS 0.003 at n = 50, b = 30; 0.44 at n = 5, b = 1.
    assert choose_likelihood(fam, 50, 260.0, 30.0, bounds=(0.0, 15.0)).likelihood == "clt"
    assert choose_likelihood(fam, 5, 30.0, 1.0, bounds=(0.0, 15.0)).likelihood == "exact"
    assert choose_likelihood(fam, 10**5, 6e5, 30.0, bounds=(0.0, 15.0)).likelihood == "clt"
    with pytest.raises(ValueError, match="bounds"):
        exact_cost(fam, 50)


def _exact_posterior_cdf(rel, family, prior_logpdf, grid):
    lo, hi = family.latent_window(rel.bounds)
    log_q = window_record_log_pmf(family.record_distribution(grid), (lo, hi))
    noise = NoiseLaw("laplace" if rel.mechanism != "discrete-laplace" else rel.mechanism, rel.scale)
    log_lik = np.array(
        [window_sum_log_likelihood(row, rel.n, float(rel.value), noise)[0] for row in log_q]
    )
    log_post = log_lik + prior_logpdf(grid)
    w = np.exp(log_post - log_post.max()) * np.gradient(grid)
    return np.cumsum(w) / w.sum()


def test_pm_sample_default_is_the_exact_windowed_posterior_far_mode_included():
    """n = 50 Poisson(6) records over [0, 15], ε = 0.5: the posterior has a far mode near
    λ = 16. The default (the CLT, trusted here: KS 0.003 between its law of y and the exact
    one) and the exact likelihood both match the posterior by quadrature of the brute-force
    likelihood (KS test), far mode included."""
    x = np.random.default_rng(1).poisson(6.0, size=50)
    rel = pmdp.release(x, pm.Poisson, epsilon=0.5, bounds=(0, 15), rng=2)
    grid = np.linspace(0.05, 60.0, 6000)
    cdf = _exact_posterior_cdf(rel, Poisson(), stats.gamma(2.0, scale=5.0).logpdf, grid)
    far = 1.0 - np.interp(11.0, grid, cdf)
    assert far > 0.03
    for likelihood, expected in (("auto", "clt"), ("exact", "exact")):
        with pm.Model() as model:
            lam = pm.Gamma("lam", 2.0, 0.2)
            pmdp.NoisySuffStat("y", pm.Poisson.dist(lam), release=rel, likelihood=likelihood)
            idata = pm.sample(
                draws=1000,
                tune=50,
                chains=2,
                random_seed=3,
                progressbar=False,
                compute_convergence_checks=False,
            )
        assert release_attrs(model)["pymc_dp_likelihood_y"] == expected
        draws = idata.posterior["lam"].values.ravel()
        assert abs(np.mean(draws > 11.0) - far) < 0.02
        assert stats.kstest(draws, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3
    idata = pmdp.sample_latent(idata, model, random_seed=4)
    s = idata.posterior["y_s"].values
    assert s.shape == draws.reshape(2, -1).shape
    assert np.all((s >= 0) & (s <= 50 * 15) & (s == np.round(s)))
    assert np.all(idata.posterior["y_sigma2"].values > 0)


def test_nuts_on_the_exact_window_likelihood_matches_the_posterior():
    """A Geometric release with p = invlogit(z): NUTS on the exact likelihood (unimodal here)."""
    x = np.random.default_rng(5).geometric(0.25, size=40)
    rel = pmdp.release(x, pm.Geometric, epsilon=1.0, bounds=(1, 12), rng=6)
    with pm.Model():
        z = pm.Normal("z", -1.0, 1.0)
        p = pm.Deterministic("p", pm.math.invlogit(z))
        pmdp.NoisySuffStat("y", pm.Geometric.dist(p), release=rel)
        idata = sample(draws=500, tune=500, chains=2, random_seed=7)
    zs = np.linspace(-5.0, 3.0, 2000)
    ps = 1.0 / (1.0 + np.exp(-zs))

    def prior_logpdf(g):  # z ~ N(-1, 1), p = invlogit(z): the density of p
        return stats.norm.logpdf(np.log(g / (1 - g)), -1.0, 1.0) - np.log(g * (1 - g))

    cdf = _exact_posterior_cdf(rel, Geometric(), prior_logpdf, ps)
    draws = idata.posterior["p"].values.ravel()
    mean = np.sum(np.diff(np.r_[0.0, cdf]) * ps)
    sd = np.sqrt(np.sum(np.diff(np.r_[0.0, cdf]) * (ps - mean) ** 2))
    assert abs(draws.mean() - mean) < 0.15 * sd
    assert draws.std() == pytest.approx(sd, rel=0.1)


def test_engine_exact_window_path_matches_the_quadrature_posterior():
    """sample_gibbs(likelihood="exact") on two windowed Poisson releases: independent grid
    draws of λ against the quadrature posterior (KS), with ŝ inside the window's range."""
    x = np.random.default_rng(1).poisson(6.0, size=50)
    rels = [pmdp.release(x, pm.Poisson, epsilon=0.5, bounds=(0, 15), rng=seed) for seed in (2, 9)]
    trace = sample_gibbs(
        11,
        family=Poisson(),
        prior=(2.0, 0.2),
        released=np.array([float(r.value) for r in rels]),
        n=50,
        scale=rels[0].scale,
        bounds=(0.0, 15.0),
        draws=1000,
        chains=2,
        likelihood="exact",
    )
    assert trace.theta.shape == (2, 1000, 2) and trace.suffstat.shape == (2, 1000, 2, 2)
    assert trace.noise_variance.shape == (2, 1000, 2)
    grid = np.linspace(0.05, 60.0, 6000)
    for j, rel in enumerate(rels):
        cdf = _exact_posterior_cdf(rel, Poisson(), stats.gamma(2.0, scale=5.0).logpdf, grid)
        draws = trace.theta[:, :, j].ravel()
        assert stats.kstest(draws, lambda v, cdf=cdf: np.interp(v, grid, cdf)).pvalue > 1e-3
    s_hat, s_all = trace.suffstat[..., 0], trace.suffstat[..., 1]
    assert np.all((s_hat >= 0) & (s_hat <= 750) & (s_hat == np.round(s_hat)))
    assert np.all(
        np.isfinite(s_all)
    )  # s of all records | ŝ: the joint CLT, as in the collapsed engine
    default = sample_gibbs(
        11,
        family=Poisson(),
        prior=(2.0, 0.2),
        released=np.array([float(rels[0].value)]),
        n=50,
        scale=rels[0].scale,
        bounds=(0.0, 15.0),
        draws=10,
    )
    assert default.suffstat.shape == (1, 10, 1, 2)  # "auto" keeps the CLT in the engine


def test_window_likelihood_of_a_law_off_the_support_is_minus_infinity_not_an_error():
    # A sampler's trial point with λ = inf or NaN gives no law of one record (blackjax's warm-up
    # met one): log p = -inf with a zero gradient, never a crash.
    law = NoiseLaw("laplace", 2.0)
    for log_q in (np.full(5, -np.inf), np.full(5, np.nan), np.array([0.0, np.inf, -1.0, -2.0])):
        ll, grad = window_sum_log_likelihood(log_q, 10, 12.0, law, gradient=True)
        assert ll == -np.inf and np.all(grad == 0.0)
    ok = np.log(np.full(5, 0.2))
    assert np.isfinite(window_sum_log_likelihood(ok, 10, 12.0, law)[0])
    assert window_sum_log_likelihood(ok, 10, np.nan, law)[0] == -np.inf
