"""The collapsed likelihood, its exact s draw, the adaptive grid, and the collapsed samplers."""

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import fft, integrate, stats
from scipy.special import logsumexp

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.collapsed import posterior_grid
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.exact import exact_posterior
from pymc_dp.families import Poisson
from pymc_dp.kernels import draw_from_grid, grid_density
from pymc_dp.kernels.collapsed import collapsed_piece_log_masses, draw_collapsed_suffstat
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from tests.conftest import binomial_model, sample

_Y, _M, _V, _L, _U, _B = (pt.dscalar(n) for n in ("y", "m", "v", "lo", "hi", "b"))
_LOGP = normal_laplace_logp(_Y, _M, _V, _L, _U, _B)
LOGP = pytensor.function([_Y, _M, _V, _L, _U, _B], _LOGP)
GRADS = pytensor.function([_Y, _M, _V, _L, _U, _B], pt.grad(_LOGP, [_M, _V]))


def _quad_logp(y, m, v, lo, hi, b):
    sd = np.sqrt(v)
    dens = lambda s: stats.norm.pdf(s, m, sd) * stats.laplace.pdf(y, s, b)  # noqa: E731
    # The normal factor is negligible beyond 12 sd: integrate where the mass is.
    a, c = max(lo, m - 12 * sd), min(hi, m + 12 * sd)
    points = [p for p in (y, m) if a < p < c]
    val = integrate.quad(dens, a, c, points=points or None, limit=500, epsrel=1e-12)[0]
    return np.log(val / (stats.norm.cdf(hi, m, sd) - stats.norm.cdf(lo, m, sd)))


@pytest.mark.parametrize(
    "case",
    [
        (5.0, 3.0, 4.0, -40.0, 40.0, 1.5),
        (1500.0, 1400.0, 1050.0, 0.0, 5000.0, 500.0),  # noise ≫ spread (small n·ε)
        (-300.0, 10.0, 50.0, 0.0, 5000.0, 50.0),  # y below the region
        (6000.0, 4990.0, 50.0, 0.0, 5000.0, 50.0),  # y above it, truncation biting
        (30.0, 20.0, 16.0, 0.0, 40.0, 3.0),
    ],
)
def test_logp_matches_quadrature(case):
    assert LOGP(*case) == pytest.approx(_quad_logp(*case), abs=1e-8)


def test_logp_far_tails_agree_with_independent_numpy_form_and_stay_finite():
    """PyTensor (erfcx) and NumPy (log_ndtr) forms agree where quadrature underflows."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = rng.uniform(0, 5000)
        v = 10 ** rng.uniform(-2, 6)
        b = 10 ** rng.uniform(-1, 4)
        y = m + rng.choice([-1, 1]) * 10 ** rng.uniform(0, 6)
        lw, rw = collapsed_piece_log_masses(
            released=y, mean=m, var=v, lower=0.0, upper=5000.0, scale=b
        )
        sd = np.sqrt(v + (1e-6 * b) ** 2)
        log_z = np.log(stats.norm.cdf(5000.0, m, sd) - stats.norm.cdf(0.0, m, sd))
        expected = np.logaddexp(lw, rw) - np.log(2 * b) - log_z
        got = LOGP(y, m, v, 0.0, 5000.0, b)
        assert np.isfinite(got) and got == pytest.approx(expected, rel=1e-9, abs=1e-7)
        assert np.all(np.isfinite(GRADS(y, m, v, 0.0, 5000.0, b)))


def test_logp_gradient_matches_finite_differences():
    pytensor.gradient.verify_grad(
        lambda m, v: normal_laplace_logp(1400.0, m, v, 0.0, 5000.0, 40.0),
        [np.array(1300.0), np.array(900.0)],
        rng=np.random.default_rng(1),
    )


def test_suffstat_draw_is_its_conditional():
    """s | θ, y against the CDF of N(m, v)·Laplace(y; s, b), integrated on a dense grid
    (10⁶ trapezoids over the normal's ±12 sd), KS at α = 0.001 on 3000 draws."""
    rng = np.random.default_rng(2)
    for y, m, v, lo, hi, b in [
        (1500.0, 1400.0, 1050.0, 0.0, 5000.0, 50.0),
        (-30.0, 10, 50, 0, 100, 5),
    ]:
        s = draw_collapsed_suffstat(
            rng, released=np.full(3000, y), mean=m, var=v, lower=lo, upper=hi, scale=b
        )
        assert np.all((s >= lo) & (s <= hi))
        sd = np.sqrt(v)
        grid = np.linspace(max(lo, m - 12 * sd), min(hi, m + 12 * sd), 1_000_001)
        dens = stats.norm.pdf(grid, m, sd) * stats.laplace.pdf(y, grid, b)
        cum = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
        assert stats.kstest(s, lambda t, g=grid, c=cum: np.interp(t, g, c / c[-1])).pvalue > 0.001


@pytest.mark.parametrize(
    "dist, transform",
    [(stats.norm(3.0, 0.01), None), (stats.gamma(0.5), np.exp), (stats.laplace(1e4, 1e-3), None)],
    ids=["narrow-normal", "gamma-on-log-scale", "far-laplace"],
)
def test_grid_draws_follow_the_density(dist, transform):
    """KS at α = 0.001 against the target, from a start far from its mass."""
    rng = np.random.default_rng(3)
    if transform is None:
        # scipy's Laplace logpdf underflows to -inf far from its centre; the closed form does not.
        logp = (
            dist.logpdf
            if dist.dist.name != "laplace"
            else (lambda z: -np.abs(z - dist.mean()) / dist.std() * np.sqrt(2.0))
        )
    else:
        logp = lambda z: dist.logpdf(np.exp(z)) + z  # noqa: E731
    grid = grid_density(logp, center=np.zeros(1))
    draws = draw_from_grid(rng, grid, size=5000)[:, 0]
    values = draws if transform is None else transform(draws)
    assert stats.kstest(values, dist.cdf).pvalue > 0.001


def test_grid_keeps_a_narrow_second_mode_that_is_a_coarse_local_maximum():
    weights = (0.7, 0.3)

    def logp(z):
        return np.logaddexp(
            np.log(weights[0]) + stats.norm.logpdf(z, 0.0, 1.0),
            np.log(weights[1]) + stats.laplace.logpdf(z, 6.0, 0.01),  # 8x narrower than the grid
        )

    grid = grid_density(logp, center=np.array([-2.0]))
    assert float(grid.cdf(3.0)[0]) == pytest.approx(0.7, abs=1e-3)


def test_grid_refuses_an_improper_density():
    with pytest.raises(ValueError, match="improper"):
        grid_density(lambda z: np.zeros_like(z), center=np.zeros(1))


def test_engine_default_is_collapsed_and_matches_exact_binomial_posterior():
    """n = 1000, ε = 0.01 (n·ε = 10): engine draws vs the exact posterior (sum over s).

    2000 independent draws: KS at α = 0.001, mean within 0.1 sd, sd within 10%.
    """
    x = np.random.default_rng(21).binomial(5, 0.3, size=1000)
    rel = pmdp.release(x, pm.Binomial, epsilon=0.01, trials=5, rng=22)
    trace = sample_gibbs(
        4,
        family=rel.get_family(),
        prior=(3.0, 5.0),
        released=[float(rel.value)],
        n=rel.n,
        scale=rel.scale,
        draws=1000,
        chains=2,
    )
    draws = trace.theta.ravel()
    exact = exact_posterior(rel, prior=(3.0, 5.0))
    assert stats.kstest(draws, exact.cdf).pvalue > 0.001
    assert abs(draws.mean() - exact.mean()) < 0.1 * exact.sd()
    assert abs(draws.std() / exact.sd() - 1) < 0.1
    assert float(az.ess(trace.theta[..., 0])) > 1500  # independent draws
    assert trace.suffstat.shape == (2, 1000, 1, 1) and trace.noise_variance.shape == (2, 1000, 1)


def test_pm_sample_default_assigns_grid_step_and_matches_exact_posterior(binomial_release):
    rel = binomial_release
    model = binomial_model(rel)
    with model:
        idata = sample(draws=1000, tune=100, chains=2, cores=1, random_seed=5)
    post = posterior_dataset(idata)
    assert sorted(post.data_vars) == ["p"]
    draws = post["p"].values.ravel()
    assert float(az.ess(idata, var_names=["p"])["p"]) > 1500
    exact = exact_posterior(rel, prior=(3.0, 5.0))
    assert stats.kstest(draws, exact.cdf).pvalue > 0.001
    idata = pmdp.sample_latent(idata, model, random_seed=6)
    post = posterior_dataset(idata)
    assert post["y_s"].shape == (2, 1000) and np.all(post["y_sigma2"].values > 0)
    assert np.all((post["y_s"].values >= 0) & (post["y_s"].values <= 5 * rel.n))


def test_non_scalar_or_hierarchical_theta_goes_to_nuts(binomial_release):
    rel = binomial_release
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.5)
        p = pm.Deterministic("p", pm.math.invlogit(mu))
        pmdp.NoisySuffStat("y", pm.Binomial.dist(n=5, p=p), release=rel)
    selected = pm.sampling.mcmc.assign_step_methods(model)[-1]
    assert [cls.__name__ for cls in selected] == ["NUTS"]


def _windowed_poisson_exact_log_lik(lams, y, n, upper, scale):
    """log p(y | λ) by the n-fold convolution of one record's windowed statistic (FFT)."""
    k = np.arange(upper + 1)
    size = n * upper + 1
    length = fft.next_fast_len(2 * size)
    s = np.arange(size)
    log_noise = stats.laplace.logpdf(y, s, scale)
    out = []
    for lam in lams:
        one = stats.poisson.pmf(k, lam)
        one[0] += stats.poisson.sf(upper, lam)  # records outside the window contribute 0
        pmf = fft.irfft(fft.rfft(one, length) ** n, length)[:size]
        pmf = np.maximum(pmf, 1e-300)
        out.append(logsumexp(np.log(pmf) + log_noise))
    return np.array(out)


def test_windowed_poisson_grid_matches_exact_convolution_posterior_with_far_mode():
    """n = 2000 Poisson(8) records over (0, 20), ε = 1, prior Gamma(1, 0.05).

    The expected window sum rises then falls in λ, so a far mode near λ = 21.5 explains the
    release too. Its posterior mass from the grid (CLT likelihood) matches the exact posterior by
    n-fold convolution within 0.005, and so does the CDF at three more points.
    """
    fam = Poisson()
    n, bounds, epsilon = 2000, (0.0, 20.0), 1.0
    x = np.random.default_rng(8).poisson(8.0, size=n)
    rel = pmdp.release(x, pm.Poisson, epsilon=epsilon, bounds=bounds, rng=9)
    batch = ReleaseBatch(
        fam,
        (np.array([1.0]), np.array([0.05])),
        np.array([float(rel.value)]),
        n,
        NoiseLaw("laplace", rel.scale),
        bounds,
    )
    grid = posterior_grid(np.random.default_rng(10), batch)

    # Step 0.1, then step 0.01 (≥ 6 points per posterior sd) wherever the posterior is within
    # e⁻³⁰ of its peak: a mode of sd ≥ 0.06 keeps ≥ 0.7 of its peak at the nearest coarse point.
    def log_post_at(lams):
        log_lik = _windowed_poisson_exact_log_lik(lams, float(rel.value), n, 20, rel.scale)
        return log_lik + stats.gamma.logpdf(lams, 1.0, scale=1 / 0.05)

    coarse = np.linspace(6.0, 30.0, 241)
    log_coarse = log_post_at(coarse)
    kept = coarse[log_coarse > log_coarse.max() - 30.0]
    fine = np.setdiff1d(np.round(np.add.outer(kept, np.linspace(-0.1, 0.1, 21)), 2), coarse)
    lams = np.concatenate([coarse, fine])
    order = np.argsort(lams)
    lams, log_post = lams[order], np.concatenate([log_coarse, log_post_at(fine)])[order]
    dens = np.exp(log_post - log_post.max())
    cdf = integrate.cumulative_trapezoid(dens, lams, initial=0.0)
    cdf /= cdf[-1]
    far = 1 - np.interp(15.0, lams, cdf)
    assert far > 0.02  # the far mode carries visible mass
    for cut in (7.9, 8.1, 15.0, 22.0):
        got = float(grid.cdf(np.log(cut))[0])
        assert got == pytest.approx(np.interp(cut, lams, cdf), abs=0.005), cut


@pytest.mark.slow
def test_million_windowed_poisson_records_mix():
    """10⁶ Poisson(152) records over (0, 400), ε = 0.5: R-hat ≤ 1.01, bulk ESS ≥ 400 (4 × 1000)."""
    x = np.random.default_rng(0).poisson(152, size=1_000_000)
    rel = pmdp.release(x, pm.Poisson, epsilon=0.5, bounds=(0, 400), rng=1)
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 0.01)
        pmdp.NoisySuffStat("y", pm.Poisson.dist(lam), release=rel)
        idata = sample(draws=1000, tune=200, chains=4, cores=2, random_seed=2)
    summary = az.summary(idata, var_names=["lam"])
    assert float(summary["r_hat"].max()) <= 1.01 and float(summary["ess_bulk"].min()) >= 400


@pytest.mark.slow
def test_million_windowed_normal_records_mix():
    """10⁶ Normal(30, 8²) records over (10, 50), ε = 1, default method (partially collapsed
    Gibbs, NUTS on (μ, σ²) with the window moments' Op): R-hat ≤ 1.01, bulk ESS ≥ 400 for each
    parameter (4 × 1000), and the posterior mean within 5 posterior sd of the true (μ, σ²)."""
    x = np.random.default_rng(5).normal(30.0, 8.0, size=1_000_000)
    rel = pmdp.release(x, pm.Normal, epsilon=1.0, bounds=(10, 50), rng=1)
    with pm.Model():
        mu = pm.Normal("mu", 30.0, 20.0)
        sigma2 = pm.InverseGamma("sigma2", 2.0, 100.0)
        pmdp.NoisySuffStat("y", pm.Normal.dist(mu, pm.math.sqrt(sigma2)), release=rel)
        idata = sample(draws=1000, tune=1000, chains=4, cores=2, random_seed=3)
    summary = az.summary(idata, var_names=["mu", "sigma2"])
    assert float(summary["r_hat"].max()) <= 1.01 and float(summary["ess_bulk"].min()) >= 400
    for name, truth in (("mu", 30.0), ("sigma2", 64.0)):
        assert abs(summary.loc[name, "mean"] - truth) < 5 * summary.loc[name, "sd"]


def test_vector_statistic_uses_partially_collapsed_gibbs_in_order(categorical_release):
    """NUTS on θ | σ², y, then s | θ, σ², y, then σ² | s, y (van Dyk & Park's order)."""
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.full(3, 2.0))
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=categorical_release)
    selected = pm.sampling.mcmc.assign_step_methods(model)[-1]
    assert [cls.__name__ for cls in selected] == ["NUTS", "NormProductStep", "NoiseVarianceStep"]
    assert sorted(v.name for v in model.free_RVs) == ["p", "y_s", "y_sigma2"]


@pytest.mark.parametrize("family", ["exponential", "categorical", "normal"])
def test_collapsed_and_augmented_engines_agree(family, categorical_release):
    """Same release: collapsed/partially collapsed default vs Algorithm 1 (long chains).

    Exponential through the batched engine (collapsed vs augmented); Categorical and windowed
    Normal (μ, σ²) through pm.sample (partially collapsed) vs the engine (augmented). Two-sample
    KS at α = 0.001 on draws thinned to about one per effective sample (each of μ and σ²).
    """
    if family == "exponential":
        x = np.random.default_rng(21).exponential(1 / 3.0, size=500)
        rel = pmdp.release(x, pm.Exponential, epsilon=0.2, bounds=(0.0, 1.2), rng=22)
        kwargs = dict(
            family=rel.get_family(),
            prior=(2.0, 1.0),
            released=[float(rel.value)],
            n=rel.n,
            scale=rel.scale,
            bounds=rel.bounds,
        )
        a = sample_gibbs(1, draws=2000, chains=2, **kwargs).theta[..., 0]
        b = sample_gibbs(2, draws=4000, tune=500, chains=40, method="augmented", **kwargs)
        b = b.theta[..., 0]
    elif family == "normal":
        x = np.random.default_rng(23).normal(1.0, 1.5, size=300)
        rel = pmdp.release(x, pm.Normal, epsilon=1.0, bounds=(-2.0, 4.0), rng=24)
        with pm.Model():
            sigma2 = pm.InverseGamma("sigma2", 3.0, 4.0)
            mu = pm.Normal("mu", 0.0, pm.math.sqrt(sigma2 / 0.5))
            pmdp.NoisySuffStat("y", pm.Normal.dist(mu, pm.math.sqrt(sigma2)), release=rel)
            idata = sample(draws=1000, tune=500, chains=2, cores=1, random_seed=5)
        post = posterior_dataset(idata)
        b = sample_gibbs(
            6,
            family=rel.get_family(),
            prior=(0.0, 0.5, 3.0, 4.0),
            released=np.asarray(rel.value)[None],
            n=rel.n,
            scale=rel.scale,
            bounds=rel.bounds,
            draws=2000,
            tune=300,
            chains=20,
        ).theta[:, :, 0]
        for j, name in enumerate(("mu", "sigma2")):
            assert stats.ks_2samp(_thin(post[name].values), _thin(b[..., j])).pvalue > 0.001
        return
    else:
        rel = categorical_release
        with pm.Model():
            p = pm.Dirichlet("p", np.full(3, 2.0))
            pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel)
            idata = sample(draws=2000, tune=500, chains=2, cores=1, random_seed=3)
        a = posterior_dataset(idata)["p"].values[..., 0]
        b = sample_gibbs(
            4,
            family=rel.get_family(),
            prior=(np.full(3, 2.0),),
            released=np.asarray(rel.value)[None],
            n=rel.n,
            scale=rel.scale,
            draws=4000,
            tune=500,
            chains=40,
        ).theta[:, :, 0, 0]
    assert stats.ks_2samp(_thin(a), _thin(b)).pvalue > 0.001


def _thin(draws):
    draws = np.asarray(draws)
    step = max(1, int(draws.size / float(az.ess(az.convert_to_dataset(draws))["x"])))
    return draws[:, ::step].ravel()


@pytest.mark.parametrize("family", ["binomial", "categorical"])
def test_standard_pymc_workflows_run_on_the_default_model(
    family, binomial_release, categorical_release
):
    """Posterior predictive, log-likelihood, LOO, do, observe and freezing dims and data."""
    from pymc.model.transform.optimization import freeze_dims_and_data

    if family == "binomial":
        model, theta = binomial_model(binomial_release), 0.3
    else:
        from tests.conftest import categorical_model

        model, theta = categorical_model(categorical_release), np.array([0.2, 0.5, 0.3])
    with model:
        idata = sample(draws=100, tune=100, chains=2, cores=1, random_seed=7)
        pp = pm.sample_posterior_predictive(idata, progressbar=False, random_seed=8)
        ll = pm.compute_log_likelihood(idata, progressbar=False)
    assert np.all(np.isfinite(pp.posterior_predictive["y"].values))
    assert np.all(np.isfinite(ll.log_likelihood["y"].values))
    loo = az.loo(ll)
    assert np.isfinite(float(getattr(loo, "elpd_loo", None) or loo.elpd))  # ArviZ 0.x / 1.x
    assert "p" not in {v.name for v in pm.do(model, {"p": theta}).free_RVs}
    assert "p" in {v.name for v in pm.observe(model, {"p": theta}).observed_RVs}
    assert "p" in {v.name for v in freeze_dims_and_data(model).free_RVs}


def test_collapsed_likelihood_with_negligible_noise_is_the_normal_density():
    """Noise far below the spread of s (b/sd < 1e-5): y | θ is the truncated normal's density
    (to 1e-9 at sd/b = 1e5 and at 1e19), finite with a finite gradient, and a y just outside the
    region is scored at the region's end times the Laplace tail's mass beyond it. The model of a
    release with ε = 2.56e17 (found by the property tests) has a finite logp."""
    mean = pt.dscalar("mean")
    for scale in (3e-4, 1e-17):
        out = normal_laplace_logp(1210.0, mean, 900.0, 0.0, 1596.0, scale)
        fn = pytensor.function([mean], [out, pytensor.grad(out, mean)])
        value, grad = fn(1200.0)
        z = stats.norm.cdf(1596.0, 1200.0, 30.0) - stats.norm.cdf(0.0, 1200.0, 30.0)
        assert value == pytest.approx(stats.norm.logpdf(1210.0, 1200.0, 30.0) - np.log(z), abs=1e-9)
        assert grad == pytest.approx(10.0 / 900.0, rel=1e-6)
    outside = normal_laplace_logp(-2e-17, 1200.0, 900.0, 0.0, 1596.0, 1e-17).eval()
    # s sits at the region's end: (1/2b)∫_0^∞ e^{-(s - y)/b} ds = e^{-2}/2.
    assert outside == pytest.approx(
        stats.norm.logpdf(0.0, 1200.0, 30.0) - 2.0 - np.log(2.0), abs=1e-6
    )
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 2.0)
        pmdp.NoisySuffStat(
            "y", pm.Binomial.dist(n=3, p=p), n=532, epsilon=2.56e17, sensitivity=3.0, observed=0.0
        )
    logp = model.compile_logp()(model.initial_point())
    assert np.isfinite(logp)


def test_batched_engine_density_runs_on_ufuncs_and_matches_the_scalar_mirror():
    """The engine's collapsed log posterior (QUICK_MODE) loops no elementwise operation in
    Python, and equals the graph the C compiles, run here through its Python mirror (plain
    FAST_COMPILE), far tails and y outside the valid region included."""
    from pytensor.tensor.elemwise import Elemwise

    from pymc_dp.engine.collapsed import log_posterior, log_posterior_graph
    from pymc_dp.families import Binomial

    family = Binomial(trials=5)
    quick = log_posterior(family, 100, None)
    for node in quick.maker.fgraph.toposort():
        if isinstance(node.op, Elemwise):
            spec = getattr(node.op.scalar_op, "nfunc_spec", None)
            assert spec is not None and len(node.inputs) == spec[1], node
    inputs, output = log_posterior_graph(family, 100, None)
    mirror = pytensor.function(inputs, output, mode="FAST_COMPILE", on_unused_input="ignore")
    # rows: y near the mean, in each tail, and outside the valid region [0, 500]
    y = np.array([150.0, 40.0, 420.0, -30.0, 530.0])[:, None]
    scale = np.array([5.0, 50.0, 0.5, 5.0, 50.0])[:, None]
    z = np.linspace(-4.0, 2.0, 25)[None, :].repeat(5, axis=0)  # logit p
    cols = [y, scale, np.full((5, 1), 2.0), np.full((5, 1), 3.0)]
    fast, reference = quick(z, *cols), mirror(z, *cols)
    assert np.all(np.isfinite(fast))
    np.testing.assert_allclose(fast, reference, rtol=1e-9, atol=1e-9)
