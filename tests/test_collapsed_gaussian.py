"""Gaussian-mechanism releases under the CLT: the normal-product likelihood, s | θ, y, samplers.

Releases are made by the vetted sampler (unseeded), then given a seeded value y = s + discrete
Gaussian noise drawn here, so every test is reproducible.
"""

import dataclasses
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.families import Binomial, Categorical, Exponential
from pymc_dp.kernels.collapsed import draw_collapsed_suffstat
from pymc_dp.kernels.collapsed_pair import draw_pair_suffstat
from pymc_dp.likelihoods.choice import CltWarning
from pymc_dp.likelihoods.collapsed_gaussian import lattice_error_bound, normal_normal_logp
from pymc_dp.model.nodes.gaussian import gaussian_collapsed_node  # noqa: F401 (public module)
from pymc_dp.model.nodes.info import TAG
from tests.conftest import sample

_ARGS = [pt.dscalar(n) for n in ("y", "m", "v", "lo", "hi", "t")]
_LOGP = normal_normal_logp(*_ARGS)
LOGP = pytensor.function(_ARGS, _LOGP)
GRADS = pytensor.function(_ARGS, pt.grad(_LOGP, _ARGS[1:3]))


def _quad_logp(y, m, v, lo, hi, t):
    """log ∫_lo^hi N(s; m, v) N(y; s, t²) ds / P(lo ≤ s ≤ hi), by quadrature in log space."""
    sd = np.sqrt(v)
    post = (t * t * m + v * y) / (v + t * t)
    post_sd = np.sqrt(v * t * t / (v + t * t))

    def log_f(s):
        return stats.norm.logpdf(s, m, sd) + stats.norm.logpdf(y, s, t)

    top = log_f(np.clip(post, lo, hi))
    a, c = max(lo, post - 40 * post_sd), min(hi, post + 40 * post_sd)
    if a >= c:  # the product's mass lies beyond the region: integrate near the nearer end
        a, c = (lo, lo + 40 * post_sd) if post < lo else (hi - 40 * post_sd, hi)
    inner = integrate.quad(
        lambda s: np.exp(log_f(s) - top),
        a,
        c,
        points=[p for p in (post,) if a < p < c] or None,
        limit=500,
        epsabs=0,
        epsrel=1e-13,
    )[0]
    log_z = np.log(stats.norm.cdf(hi, m, sd) - stats.norm.cdf(lo, m, sd))
    return top + np.log(inner) - log_z


@pytest.mark.parametrize(
    "case",
    [
        (5.0, 3.0, 4.0, 0.0, 40.0, 1.5),
        (1500.0, 1400.0, 1050.0, 0.0, 5000.0, 500.0),  # noise ≫ spread
        (-300.0, 10.0, 50.0, 0.0, 5000.0, 50.0),  # y below the region
        (6000.0, 4990.0, 50.0, 0.0, 5000.0, 50.0),  # y above it, truncation biting
        (30.0, 20.0, 16.0, 0.0, 40.0, 3.0),
        (400.0, 300.0, 210.0, 0.0, 1000.0, 0.5),  # noise ≪ spread, y 7 sd out
    ],
)
def test_logp_matches_quadrature(case):
    assert LOGP(*case) == pytest.approx(_quad_logp(*case), abs=1e-8)


def test_gradients_match_finite_differences_in_the_tails():
    for case in [(5.0, 3.0, 4.0, 0.0, 40.0, 1.5), (-300.0, 10.0, 50.0, 0.0, 5000.0, 50.0)]:
        grad = GRADS(*case)
        for i, g in zip((1, 2), grad):
            h = 1e-5 * max(1.0, abs(case[i]))
            up, down = list(case), list(case)
            up[i] += h
            down[i] -= h
            fd = (LOGP(*up) - LOGP(*down)) / (2 * h)
            assert g == pytest.approx(fd, rel=1e-5, abs=1e-8)


def _discrete_gaussian(rng, sigma, size=None):
    """Seeded draws of the discrete Gaussian N_ℤ(0, σ²) (OpenDP's law), by inverse CDF."""
    k = np.arange(-int(np.ceil(14 * sigma)) - 2, int(np.ceil(14 * sigma)) + 3)
    p = np.exp(-(k**2) / (2 * sigma**2))
    return rng.choice(k, size=size, p=p / p.sum()).astype(np.float64)


def _gaussian_release(data, dist, *, seed, **kwargs):
    """A real Gaussian-mechanism release of ``data`` with a seeded value (same law)."""
    rel = pmdp.release(data, dist, mechanism="discrete-gaussian", **kwargs)
    fam = rel.get_family()
    x = np.asarray(data, dtype=np.float64)
    if fam.needs_bounds:
        a, b = fam.latent_window(rel.bounds)
        z = fam.to_latent(x)
        inside = np.where((z >= a) & (z <= b), z, 0.0)
        s = np.sum(inside) if fam.stat_size == 1 else np.array([inside.sum(), (inside**2).sum()])
        s = np.round(s / rel.quantum) * rel.quantum
    elif isinstance(fam, Categorical):
        s = np.bincount(x.astype(int), minlength=fam.categories).astype(np.float64)
    else:
        s = np.sum(x)
    rng = np.random.default_rng(seed)
    noise = _discrete_gaussian(rng, rel.scale / rel.quantum, size=np.shape(s)) * rel.quantum
    return dataclasses.replace(rel, value=np.asarray(s + noise, dtype=np.float64))


def test_binomial_node_logp_matches_quadrature_and_is_the_chosen_node():
    x = np.random.default_rng(1).binomial(5, 0.3, size=400)
    rel = _gaussian_release(x, pm.Binomial, seed=2, trials=5, rho=0.02)
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 2.0)
        y = pmdp.NoisySuffStat("y", pm.Binomial.dist(n=5, p=p), release=rel, likelihood="clt")
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    info = getattr(y.tag, TAG)
    assert info.noise.scale == pytest.approx(rel.scale) and info.likelihood == "clt"
    logp = model.compile_logp(vars=[y])
    total = 2000
    for p_val in (0.2, 0.3, 0.31, 0.45):
        want = _quad_logp(
            float(rel.value), total * p_val, total * p_val * (1 - p_val), 0.0, total, rel.scale
        )
        got = logp({"p_logodds__": np.log(p_val / (1 - p_val))})
        assert got == pytest.approx(want, abs=1e-8)


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_lattice_error_bound_holds_against_the_discrete_sum(tau):
    """Σ_s N(s; m, v) N_ℤ(y - s; τ) (integer s, OpenDP's noise) against the continuous model.

    The log difference may be any constant in θ (the pmf's normaliser); its spread over θ is
    the error, which must stay within the bound (and, at τ = 0.5, be of its order).
    """
    v, y = 30.0, 100.0
    s = np.arange(0, 400)
    k = np.arange(-60, 61)
    log_z_noise = logsumexp(-(k**2) / (2 * tau**2))
    diffs = []
    for m in np.linspace(90.0, 110.0, 41):
        log_prior = stats.norm.logpdf(s, m, np.sqrt(v))
        log_prior -= logsumexp(log_prior)  # s | θ: the normal on the integers
        exact = logsumexp(log_prior - (y - s) ** 2 / (2 * tau**2) - log_z_noise)
        diffs.append(exact - LOGP(y, m, v, -1e9, 1e9, tau))
    spread = np.ptp(diffs)
    bound = lattice_error_bound(v, tau)
    assert spread <= 2 * bound + 1e-12  # rounding of the sums
    if tau == 0.5:
        assert spread > bound / 20


def _np_logp(y, m, v, lo, hi, t):
    """The normal-product likelihood in scipy (vectorised), for grid posteriors."""
    m, v = np.asarray(m, dtype=np.float64), np.asarray(v, dtype=np.float64)
    post = (t * t * m + v * y) / (v + t * t)
    post_sd = np.sqrt(v * t * t / (v + t * t))
    sd = np.sqrt(v)
    inside = stats.norm.cdf(hi, post, post_sd) - stats.norm.cdf(lo, post, post_sd)
    z = stats.norm.cdf(hi, m, sd) - stats.norm.cdf(lo, m, sd)
    return stats.norm.logpdf(y, m, np.sqrt(v + t * t)) + np.log(inside) - np.log(z)


def _grid_posterior(log_post, grid):
    w = np.exp(log_post - log_post.max())
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


def _ks_against_grid(draws, grid, cdf):
    return stats.kstest(draws, lambda q: np.interp(q, grid, cdf)).pvalue


def test_pm_sample_binomial_matches_an_independent_grid_posterior():
    """GridStep draws θ | y exactly: KS against a grid posterior built with scipy (α = 0.001)."""
    x = np.random.default_rng(3).binomial(5, 0.3, size=200)
    rel = _gaussian_release(x, pm.Binomial, seed=4, trials=5, rho=0.005)
    with pm.Model() as model:
        p = pm.Beta("p", 3.0, 5.0)
        pmdp.NoisySuffStat("y", pm.Binomial.dist(n=5, p=p), release=rel, likelihood="clt")
        idata = sample(draws=2000, tune=0, chains=2, random_seed=5)
        idata = pmdp.sample_latent(idata, model, random_seed=6)
    post = posterior_dataset(idata)
    assert "y_sigma2" not in post and "y_s" in post
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    total, t = 1000, rel.scale
    log_post = stats.beta.logpdf(grid, 3.0, 5.0) + _np_logp(
        float(rel.value), total * grid, total * grid * (1 - grid), 0, total, t
    )
    cdf = _grid_posterior(log_post, grid)
    draws = post["p"].values.reshape(-1)
    assert _ks_against_grid(draws, grid, cdf) > 1e-3
    # s | θ, y: E[s] from the draws against the normal product's mean, averaged over θ.
    m, v = total * draws, total * draws * (1 - draws)
    want = np.mean((t * t * m + v * float(rel.value)) / (v + t * t))
    s = post["y_s"].values.reshape(-1)
    assert abs(s.mean() - want) < 5 * s.std() / np.sqrt(s.size)


def _exponential_window_moments(lam, n, a, b):
    """(mean, var) of ŝ = Σ x·1[a ≤ x ≤ b] for Exponential(λ) records, by quadrature."""
    pdf = stats.expon(scale=1 / lam).pdf
    e1 = integrate.quad(lambda x: x * pdf(x), a, b, epsrel=1e-12)[0]
    e2 = integrate.quad(lambda x: x * x * pdf(x), a, b, epsrel=1e-12)[0]
    return n * e1, n * (e2 - e1 * e1)


def test_pm_sample_windowed_exponential_matches_an_independent_grid_posterior():
    n, bounds = 300, (0.0, 2.0)
    x = np.random.default_rng(7).exponential(1 / 1.5, size=n)
    rel = _gaussian_release(x, pm.Exponential, seed=8, bounds=bounds, rho=0.05)
    with pm.Model():
        lam = pm.Gamma("lam", 4.0, 2.0)
        y = pmdp.NoisySuffStat("y", pm.Exponential.dist(lam=lam), release=rel)
        idata = sample(draws=2000, tune=0, chains=2, random_seed=9)
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    lower, upper = (float(v[0]) for v in Exponential().record_region(n, bounds)[:2])
    grid = np.linspace(0.5, 3.5, 1501)
    m, v = np.array([_exponential_window_moments(q, n, *bounds) for q in grid]).T
    log_lik = _np_logp(float(rel.value), m, v, lower, upper, rel.scale)
    log_post = stats.gamma.logpdf(grid, 4.0, scale=1 / 2.0) + log_lik
    cdf = _grid_posterior(log_post, grid)
    draws = posterior_dataset(idata)["lam"].values.reshape(-1)
    assert _ks_against_grid(draws, grid, cdf) > 1e-3


def test_scalar_suffstat_draws_follow_the_truncated_normal_product():
    rng = np.random.default_rng(10)
    y, m, v, lo, hi, t = 95.0, 100.0, 16.0, 0.0, 96.0, 3.0  # truncation bites
    s = draw_collapsed_suffstat(
        rng, released=np.full(20000, y), mean=m, var=v, lower=lo, upper=hi, scale=t, gaussian=True
    )
    loc, sd = (t * t * m + v * y) / (v + t * t), np.sqrt(v * t * t / (v + t * t))
    law = stats.truncnorm((lo - loc) / sd, (hi - loc) / sd, loc=loc, scale=sd)
    assert stats.kstest(s, law.cdf).pvalue > 1e-3


def test_pair_suffstat_draws_have_the_normal_product_moments():
    rng = np.random.default_rng(11)
    mean, cov = np.array([10.0, 50.0]), np.array([[4.0, 3.0], [3.0, 9.0]])
    y, t = np.array([14.0, 40.0]), 2.0
    s = draw_pair_suffstat(
        rng, released=y, mean=np.broadcast_to(mean, (40000, 2)), cov=cov, scale=t, gaussian=True
    )
    prec = np.linalg.inv(cov) + np.eye(2) / t**2
    cov3 = np.linalg.inv(prec)
    mean3 = cov3 @ (np.linalg.solve(cov, mean) + y / t**2)
    z = (s - mean3) @ np.linalg.inv(np.linalg.cholesky(cov3)).T
    # Whitened draws: each coordinate N(0, 1), uncorrelated (combined KS at α = 0.001).
    assert min(stats.kstest(z[:, j], "norm").pvalue for j in range(2)) > 5e-4
    assert abs(np.corrcoef(z.T)[0, 1]) < 4 / np.sqrt(len(z))


def test_categorical_node_is_normal_with_the_noise_variance_and_samples():
    rng = np.random.default_rng(12)
    x = rng.choice(3, size=600, p=[0.2, 0.3, 0.5])
    rel = _gaussian_release(x, pm.Categorical, seed=13, categories=3, rho=0.05)
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.full(3, 2.0))
        y = pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel, likelihood="clt")
    assert [v.name for v in model.free_RVs] == ["p"]
    theta = np.array([0.25, 0.3, 0.45])
    cov = 600 * (np.diag(theta) - np.outer(theta, theta)) + rel.scale**2 * np.eye(3)
    want = stats.multivariate_normal(600 * theta, cov).logpdf(rel.value)
    point = {"p_simplex__": pm.distributions.transforms.simplex.forward(theta).eval()}
    assert model.compile_logp(vars=[y])(point) == pytest.approx(want, rel=1e-10)
    with model:
        idata = sample(draws=1000, tune=300, chains=2, cores=1, random_seed=14)
        idata = pmdp.sample_latent(idata, model, random_seed=15)
    post = posterior_dataset(idata)
    # Against the engine's Gibbs sampler (Algorithm 1, σ² fixed at τ²): a second implementation.
    tr = sample_gibbs(
        16,
        family=Categorical(categories=3),
        prior=(np.full(3, 2.0),),
        released=rel.value[None],
        n=600,
        scale=rel.scale,
        draws=3000,
        tune=300,
        chains=2,
        likelihood="clt",
        noise="discrete-gaussian",
    )
    assert np.allclose(tr.noise_variance, rel.scale**2)
    got = post["p"].values.reshape(-1, 3)
    ref = tr.theta.reshape(-1, 3)
    sd = ref.std(axis=0)
    assert np.all(np.abs(got.mean(0) - ref.mean(0)) < 0.15 * sd)
    assert np.all(np.abs(got.std(0) / sd - 1) < 0.15)
    s = post["y_s"].values.reshape(-1, 3)
    assert np.allclose(s.sum(-1), 600) and np.all(s >= 0)
    assert np.all(np.abs(s.mean(0) - tr.suffstat.reshape(-1, 3).mean(0)) < 0.15 * s.std(0))


def test_pair_node_is_the_bivariate_normal_and_sample_latent_adds_s_only():
    rng = np.random.default_rng(17)
    x = rng.normal(1.0, 2.0, size=500)
    rel = _gaussian_release(x, pm.Normal, seed=18, bounds=(-6.0, 8.0), rho=0.1)
    with pm.Model() as model:
        s2 = pm.InverseGamma("s2", 3.0, 8.0)
        mu = pm.Normal("mu", 0.0, 5.0)
        y = pmdp.NoisySuffStat("y", pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(s2)), release=rel)
    fam = getattr(y.tag, TAG).family
    mean, cov = fam.joint_clt(pt.as_tensor([1.2, 3.5]), 500, (-6.0, 8.0))
    mean, cov = mean[:2].eval(), cov[:2, :2].eval() + rel.scale**2 * np.eye(2)
    want = stats.multivariate_normal(mean, cov).logpdf(rel.value)
    got = model.compile_logp(vars=[y])({"s2_log__": np.log(3.5), "mu": 1.2})
    assert got == pytest.approx(want, rel=1e-10)
    with model:
        idata = sample(draws=300, tune=300, chains=2, cores=1, random_seed=19)
        idata = pmdp.sample_latent(idata, model, random_seed=20)
    post = posterior_dataset(idata)
    assert post["y_s"].shape[-1] == 4 and "y_sigma2" not in post
    assert abs(float(post["mu"].mean()) - 1.0) < 0.5


def test_augmented_and_collapsed_pair_refuse_gaussian_noise():
    x = np.random.default_rng(21).binomial(1, 0.4, size=300)
    rel = _gaussian_release(x, pm.Bernoulli, seed=22, rho=0.05)
    with pm.Model(), pytest.raises(ValueError, match="Gaussian mechanism"):
        pmdp.NoisySuffStat(
            "y",
            pm.Bernoulli.dist(p=pm.Beta("p", 1, 1)),
            release=rel,
            likelihood="clt",
            method="augmented",
        )
    from pymc_dp.families import Normal

    with pytest.raises(ValueError, match="Laplace"):
        sample_gibbs(
            0,
            family=Normal(),
            prior=(0.0, 1.0, 3.0, 3.0),
            released=[[1.0, 5.0]],
            n=10,
            scale=1.0,
            draws=5,
            bounds=(-3.0, 3.0),
            method="collapsed",
            noise="discrete-gaussian",
        )


def test_continuous_window_auto_takes_the_gaussian_clt_node_with_a_warning_if_untrusted():
    x = np.random.default_rng(23).exponential(1.0, size=15)
    rel = _gaussian_release(x, pm.Exponential, seed=24, bounds=(0.0, 3.0), rho=2.0)
    with pm.Model(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = pmdp.NoisySuffStat("y", pm.Exponential.dist(lam=pm.Gamma("lam", 2, 2)), release=rel)
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    assert any(issubclass(w.category, CltWarning) for w in caught)


def test_engine_collapsed_matches_the_grid_posterior_and_fixes_sigma2():
    x = np.random.default_rng(25).binomial(1, 0.3, size=500)
    rel = _gaussian_release(x, pm.Bernoulli, seed=26, rho=0.01)
    tr = sample_gibbs(
        27,
        family=Binomial(trials=1),
        prior=(2.0, 2.0),
        released=[rel.value],
        n=500,
        scale=rel.scale,
        draws=4000,
        likelihood="clt",
        noise="discrete-gaussian",
    )
    assert np.allclose(tr.noise_variance, rel.scale**2)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    log_post = stats.beta.logpdf(grid, 2.0, 2.0) + _np_logp(
        float(rel.value), 500 * grid, 500 * grid * (1 - grid), 0, 500, rel.scale
    )
    cdf = _grid_posterior(log_post, grid)
    assert _ks_against_grid(tr.theta.reshape(-1), grid, cdf) > 1e-3


def _calibration(rng, trials, n, sigma, prior):
    """u = P(θ < θ_true | y) for ``trials`` Gaussian-mechanism Binomial releases (engine)."""
    theta = rng.beta(*prior, size=trials)
    s = rng.binomial(n, theta).astype(np.float64)
    y = s + _discrete_gaussian(rng, sigma, size=trials)
    tr = sample_gibbs(
        rng,
        family=Binomial(trials=1),
        prior=prior,
        released=y,
        n=n,
        scale=sigma,
        draws=1000,
        likelihood="clt",
        noise="discrete-gaussian",
    )
    draws = tr.theta.reshape(-1, trials)
    return np.mean(draws < theta, axis=0), draws, theta


def test_engine_calibration_200_trials_ks_and_90pct_coverage():
    """200 Binomial releases (n = 300, σ = 10 quanta, Beta(4, 4)): u uniform by KS (p > 0.001),
    90% central interval coverage within [0.83, 0.97] (±3.4 binomial sd)."""
    u, draws, theta = _calibration(np.random.default_rng(28), 200, 300, 10.0, (4.0, 4.0))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    coverage = np.mean((theta >= lo) & (theta <= hi))
    assert 0.83 <= coverage <= 0.97


@pytest.mark.slow
def test_engine_calibration_categorical_1000_trials():
    """Categorical K = 3, n = 200, σ = 8, Dirichlet(3, 3, 3), Algorithm 1 with σ² fixed at τ²:
    1000 trials, KS p > 0.001 for each component's u."""
    rng = np.random.default_rng(29)
    trials, n, sigma = 1000, 200, 8.0
    theta = rng.dirichlet(np.full(3, 3.0), size=trials)
    s = np.array([rng.multinomial(n, t) for t in theta], dtype=np.float64)
    y = s + _discrete_gaussian(rng, sigma, size=s.shape)
    tr = sample_gibbs(
        rng,
        family=Categorical(categories=3),
        prior=(np.full(3, 3.0),),
        released=y,
        n=n,
        scale=sigma,
        draws=1000,
        tune=200,
        likelihood="clt",
        noise="discrete-gaussian",
    )
    draws = tr.theta.reshape(-1, trials, 3)
    for k in range(3):
        u = np.mean(draws[..., k] < theta[:, k], axis=0)
        assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_grouped_gaussian_release_gets_the_normal_product_per_group():
    """A ReleaseSet made with the Gaussian mechanism: under the CLT, one CollapsedGaussian of
    shape (G,), its log density the sum of the per-group normal products (to 1e-10)."""
    from pymc_dp.curator.grouped import release_grouped

    groups = ["a", "b", "c"]
    rng = np.random.default_rng(30)
    keys = rng.choice(groups, size=600)
    x = rng.binomial(5, np.where(keys == "a", 0.2, 0.6))
    rs = release_grouped(
        x,
        pm.Binomial,
        trials=5,
        mechanism="discrete-gaussian",
        rho=0.05,
        by=keys,
        groups=groups,
        sizes="public",
    )
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 2.0)
        y = pmdp.NoisySuffStat("y", pm.Binomial.dist(n=5, p=p), release=rs, likelihood="clt")
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    got = model.compile_logp(vars=[y])({"p_logodds__": np.log(0.4 / 0.6)})
    want = sum(
        _quad_logp(
            float(rs[g].value), 5 * rs[g].n * 0.4, 5 * rs[g].n * 0.24, 0, 5 * rs[g].n, rs[g].scale
        )
        for g in groups
    )
    assert got == pytest.approx(want, abs=1e-8)


@pytest.mark.parametrize("mechanism", ["discrete-laplace", "discrete-gaussian"])
def test_sample_latent_of_a_one_chain_windowed_trace(mechanism):
    """(ŝ, s) of a windowed scalar node from a one-chain trace (s came back squeezed before)."""
    x = np.random.default_rng(31).exponential(1.0, size=200)
    budget = {"rho": 0.1} if mechanism == "discrete-gaussian" else {"epsilon": 1.0}
    rel = pmdp.release(x, pm.Exponential, bounds=(0.0, 3.0), mechanism=mechanism, **budget)
    with pm.Model() as model:
        pmdp.NoisySuffStat("y", pm.Exponential.dist(lam=pm.Gamma("lam", 2, 2)), release=rel)
        idata = sample(draws=20, tune=0, chains=1, random_seed=32)
        idata = pmdp.sample_latent(idata, model, random_seed=33)
    s = posterior_dataset(idata)["y_s"]
    assert s.shape == (1, 20, 2) and np.all(np.isfinite(s.values))
