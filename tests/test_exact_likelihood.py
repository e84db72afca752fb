"""Exact likelihoods of released counts (no CLT): kernels, PyTensor graphs, samplers, switch."""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import clone_replace
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.exact import exact_posterior
from pymc_dp.families import Bernoulli, Binomial, Categorical
from pymc_dp.kernels.exact_counts import (
    NOISE_KINDS,
    NoiseLaw,
    binomial_log_likelihood,
    binomial_suffstat_weights,
    draw_binomial_suffstat,
    draw_multinomial_suffstat,
    multinomial_log_likelihood,
)
from pymc_dp.likelihoods.choice import CltWarning, choose_likelihood, clt_trust, exact_cost
from pymc_dp.likelihoods.exact import binomial_exact_logp, multinomial_exact_logp
from pymc_dp.model.noisy_suffstat import release_attrs


def _noise_pdf(d, kind, b):
    """The noise law by an independent route: scipy, or an explicit normalisation."""
    d = np.asarray(d, dtype=float)
    if kind == "laplace":
        return stats.laplace.pdf(d, scale=b)
    if kind == "discrete-laplace":
        return stats.dlaplace.pmf(d, 1.0 / b)
    k = np.arange(-4000, 4001)
    return np.exp(-0.5 * (d / b) ** 2) / np.exp(-0.5 * (k / b) ** 2).sum()


def _brute_binomial(y, p, total, kind, b):
    return np.log(
        sum(stats.binom.pmf(s, total, p) * _noise_pdf(y - s, kind, b) for s in range(total + 1))
    )


def _brute_multinomial(y, p, n, kind, b):
    total = 0.0
    for s in itertools.product(range(n + 1), repeat=len(y)):
        if sum(s) == n:
            total += stats.multinomial.pmf(s, n, p) * np.prod(_noise_pdf(y - np.array(s), kind, b))
    return np.log(total)


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_binomial_likelihood_matches_enumeration(kind):
    rng = np.random.default_rng(11)
    for total in (1, 4, 12):
        for _ in range(5):
            p, b = rng.uniform(0.01, 0.99), rng.uniform(0.3, 5.0)
            y = float(rng.integers(-3, total + 4))
            if kind == "laplace":
                y += rng.uniform(-0.5, 0.5)
            law = NoiseLaw(kind, b)
            want = _brute_binomial(y, p, total, kind, b)
            assert binomial_log_likelihood(y, p, total, law) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("kind", NOISE_KINDS)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_multinomial_likelihood_matches_enumeration(kind, k):
    rng = np.random.default_rng(12 + k)
    for n in (1, 3, 6):
        p = rng.dirichlet(np.ones(k))
        y = rng.integers(-2, n + 3, size=k).astype(float)
        b = rng.uniform(0.4, 4.0)
        law = NoiseLaw(kind, b)
        want = _brute_multinomial(y, p, n, kind, b)
        assert multinomial_log_likelihood(y, p, n, law) == pytest.approx(want, rel=1e-10)


def test_likelihoods_batch_and_handle_the_edge_of_the_simplex():
    law = NoiseLaw("laplace", 2.0)
    p = np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])
    y = np.array([1.0, 3.0, 4.0])
    got = multinomial_log_likelihood(y, p, 5, law)
    assert got.shape == (2,) and np.all(np.isfinite(got))
    assert got[0] == pytest.approx(_brute_multinomial(y, p[0], 5, "laplace", 2.0), rel=1e-10)
    assert np.all(np.isfinite(binomial_log_likelihood([0.0, 5.0], [0.0, 1.0], 5, law)))


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_pytensor_logps_match_the_kernels_with_gradients(kind):
    law = NoiseLaw(kind, 1.7)
    theta = pt.dvector("theta")
    y = np.array([2.0, 5.0, -1.0, 6.0])
    logp = multinomial_exact_logp(y, theta, 9, law, 4)
    fn = pytensor.function([theta], [logp, pt.grad(logp, theta)])
    p = np.array([0.1, 0.4, 0.2, 0.3])
    value, grad = fn(p)
    assert value == pytest.approx(multinomial_log_likelihood(y, p, 9, law), rel=1e-12)
    eye = np.eye(4) * 1e-6
    fd = [(fn(p + e)[0] - fn(p - e)[0]) / 2e-6 for e in eye]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)

    q = pt.dscalar("q")
    logp = binomial_exact_logp(3.4, q, 10, law)
    fn = pytensor.function([q], [logp, pt.grad(logp, q)])
    value, grad = fn(0.35)
    assert value == pytest.approx(binomial_log_likelihood(3.4, 0.35, 10, law), rel=1e-12)
    assert grad == pytest.approx((fn(0.35 + 1e-6)[0] - fn(0.35 - 1e-6)[0]) / 2e-6, rel=1e-5)


def test_exact_draws_of_s_follow_their_conditional():
    rng = np.random.default_rng(3)
    law = NoiseLaw("discrete-laplace", 1.5)
    draws = draw_binomial_suffstat(
        rng, released=np.full(40_000, 4.0), theta=0.3, total=8, noise=law
    )
    w = np.exp(binomial_suffstat_weights(4.0, 0.3, 8, law))
    observed = np.bincount(draws.astype(int), minlength=9)
    assert stats.chisquare(observed, w / w.sum() * draws.size).pvalue > 1e-3

    y, p, n = np.array([1.0, 0.0, 4.0]), np.array([0.2, 0.3, 0.5]), 4
    law = NoiseLaw("laplace", 1.2)
    draws = draw_multinomial_suffstat(
        rng, released=np.broadcast_to(y, (40_000, 3)), theta=p, n=n, noise=law
    )
    assert np.all(draws.sum(axis=-1) == n)
    cells = [s for s in itertools.product(range(n + 1), repeat=3) if sum(s) == n]
    prob = np.array(
        [stats.multinomial.pmf(s, n, p) * np.prod(stats.laplace.pdf(y, s, 1.2)) for s in cells]
    )
    index = {s: i for i, s in enumerate(cells)}
    observed = np.bincount([index[tuple(s)] for s in draws.astype(int)], minlength=len(cells))
    keep = prob / prob.sum() * draws.shape[0] > 5
    expected = prob[keep] / prob[keep].sum() * observed[keep].sum()
    assert stats.chisquare(observed[keep], expected).pvalue > 1e-3


def _simplex_posterior_mean(y, n, law, alpha=np.ones(3)):
    a = np.arange(0.0025, 1.0, 0.005)  # cell midpoints; the posterior sd is ≈ 0.1
    first, second = np.meshgrid(a, a, indexing="ij")
    inside = first + second < 1
    p = np.stack([first[inside], second[inside], 1 - first[inside] - second[inside]], -1)
    logw = multinomial_log_likelihood(y, p, n, law) + stats.dirichlet.logpdf(p.T, alpha)
    w = np.exp(logw - logw.max())
    return (p * w[:, None]).sum(0) / w.sum()


def test_engine_exact_paths_match_independent_posteriors():
    law = NoiseLaw("laplace", 3.0)
    trace = sample_gibbs(
        0,
        family=Binomial(trials=3),
        prior=(2.0, 2.0),
        released=[4.0, 20.0],
        n=8,
        scale=3.0,
        draws=4000,
        chains=2,
        likelihood="exact",
    )
    grid = np.linspace(1e-6, 1 - 1e-6, 20001)
    for i, y in enumerate([4.0, 20.0]):
        logw = stats.beta.logpdf(grid, 2, 2) + binomial_log_likelihood(y, grid, 24, law)
        w = np.exp(logw - logw.max())
        mean = (grid * w).sum() / w.sum()
        sd = np.sqrt(((grid - mean) ** 2 * w).sum() / w.sum())
        # Independent draws: the mean is within 4 standard errors.
        assert abs(trace.theta[..., i].mean() - mean) < 4 * sd / np.sqrt(8000)

    y = np.array([[3.0, 1.0, 6.0], [0.0, -2.0, 9.0]])
    trace = sample_gibbs(
        1,
        family=Categorical(categories=3),
        prior=(np.ones(3),),
        released=y,
        n=10,
        scale=2.0,
        draws=3000,
        tune=200,
        chains=2,
        likelihood="exact",
    )
    for i in range(2):
        want = _simplex_posterior_mean(y[i], 10, NoiseLaw("laplace", 2.0))
        got = trace.theta[:, :, i].reshape(-1, 3).mean(0)
        np.testing.assert_allclose(got, want, atol=0.01)


def test_pm_sample_default_is_the_exact_posterior_of_a_small_release():
    rel = pmdp.release(np.r_[np.ones(3), np.zeros(9)], pm.Bernoulli, epsilon=0.5, rng=4)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
        idata = pm.sample(
            draws=2000,
            tune=100,
            chains=2,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    reference = exact_posterior(rel, prior=(1.0, 1.0))
    draws = idata.posterior["p"].values.ravel()
    assert abs(draws.mean() - reference.mean()) < 4 * reference.sd() / np.sqrt(draws.size)
    assert draws.std() == pytest.approx(reference.sd(), rel=0.05)
    attrs = release_attrs(model)
    assert attrs["pymc_dp_likelihood_y"] == "exact"


def _rare_event_release():
    """3 events among 2·10⁵ records, ε = 1: m ≈ 2, the CLT untrusted; the exact sum 82 terms."""
    x = np.zeros(200_000, dtype=int)
    x[[11, 5_000, 150_000]] = 1
    rel = pmdp.release(x, pm.Bernoulli, epsilon=1.0, rng=4)
    return rel, exact_posterior(rel, prior=(1.0, 1.0), theta_range=(0.0, 1.5e-4))


def test_the_engine_takes_the_exact_sum_for_a_rare_event_among_many_records():
    """20 000 independent draws of sample_gibbs: KS p > 0.01 against the exact posterior with
    "auto"; the CLT's (``likelihood="clt"``) is rejected, p < 1e-4, so the check can fail."""
    rel, reference = _rare_event_release()
    pvalues = {}
    for likelihood in ("auto", "clt"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CltWarning)
            trace = sample_gibbs(
                1,
                family=Bernoulli(),
                prior=(1.0, 1.0),
                released=np.atleast_1d(np.asarray(rel.value, dtype=float)),
                n=rel.n,
                scale=rel.scale,
                draws=20_000,
                likelihood=likelihood,
            )
        pvalues[likelihood] = stats.kstest(trace.theta.ravel(), reference.cdf).pvalue
    assert pvalues["auto"] > 0.01, pvalues
    assert pvalues["clt"] < 1e-4, pvalues


@pytest.mark.slow
def test_a_rare_event_among_many_records_gets_the_exact_posterior_by_default():
    """3 events among 2·10⁵ records, ε = 1 (m ≈ 2: the CLT untrusted; the exact sum 82 terms).

    20 000 independent GridStep draws (4 × 5000): KS p > 0.01 against the exact posterior on a
    grid; the CLT's posterior, on the same release, is rejected (p < 1e-4), so the check can
    fail. Until 2026-12-01 "auto" took the CLT here, costing the sum at 2·10⁵ + 1 terms.
    """
    rel, reference = _rare_event_release()
    pvalues = {}
    for likelihood in ("auto", "clt"):
        with pm.Model() as model:
            p = pm.Beta("p", 1.0, 1.0)
            pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, likelihood=likelihood)
            idata = pm.sample(
                draws=5000,
                tune=10,
                chains=4,
                random_seed=1,
                progressbar=False,
                compute_convergence_checks=False,
            )
        draws = idata.posterior["p"].values.ravel()
        choice = release_attrs(model)["pymc_dp_likelihood_y"]
        pvalues[choice] = stats.kstest(draws, reference.cdf).pvalue
        if choice == "exact":
            # The exact draws of s afterwards sum the same window: within 40 scales of y.
            few = idata.isel(draw=slice(0, 50))
            s = pmdp.sample_latent(few, model, random_seed=2).posterior["y_s"]
            assert s.min() >= 0 and s.max() <= float(rel.value) + 40 * rel.scale
    assert pvalues["exact"] > 0.01, pvalues
    assert pvalues["clt"] < 1e-4, pvalues


def test_pm_sample_exact_categorical_matches_the_enumerated_posterior():
    rel = pmdp.release([0, 2, 2, 1, 2, 2, 0, 2], pm.Categorical, epsilon=1.0, categories=3, rng=6)
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.ones(3))
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel)
        idata = pm.sample(
            draws=1500,
            tune=500,
            chains=2,
            random_seed=7,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert [v.name for v in model.free_RVs] == ["p"]
    want = _simplex_posterior_mean(np.asarray(rel.value), 8, NoiseLaw("laplace", rel.scale))
    np.testing.assert_allclose(idata.posterior["p"].mean(("chain", "draw")), want, atol=0.02)
    idata = pmdp.sample_latent(idata, model, random_seed=8)
    assert np.all(idata.posterior["y_s"].sum("y_category") == 8)


def test_discrete_noise_releases_use_their_own_law():
    rel = pmdp.release([1, 0, 1, 1, 0], pm.Bernoulli, epsilon=1.0)
    assert rel.mechanism == "discrete-laplace"
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    info = y.tag.noisy_suffstat
    assert info.likelihood == "exact" and info.noise == NoiseLaw("discrete-laplace", 1.0)
    logp = model.compile_logp()({"p_logodds__": 0.0})
    want = (
        np.log(
            sum(
                stats.binom.pmf(s, 5, 0.5) * stats.dlaplace.pmf(rel.value - s, 1.0)
                for s in range(6)
            )
        )
        + stats.beta.logpdf(0.5, 1, 1)
        + np.log(0.25)
    )
    assert logp == pytest.approx(want, rel=1e-10)


def test_gaussian_releases_keep_the_exact_likelihood_where_auto_chooses_it():
    rel = pmdp.release([1, 0, 1, 1, 0, 1], pm.Bernoulli, mechanism="discrete-gaussian", rho=0.5)
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    assert y.tag.noisy_suffstat.noise == NoiseLaw("discrete-gaussian", rel.scale)
    assert y.tag.noisy_suffstat.likelihood == "exact"
    # likelihood="clt" was refused for a Gaussian release; it is now the normal-product node
    # (tests/test_collapsed_gaussian.py), and only the Laplace augmented sampler refuses it.
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, likelihood="clt")
    info = y.tag.noisy_suffstat
    assert (info.likelihood, info.noise.kind, info.collapsed) == ("clt", "discrete-gaussian", True)
    with pm.Model(), pytest.raises(ValueError, match="Gaussian mechanism"):
        p = pm.Beta("p", 1.0, 1.0)
        pmdp.NoisySuffStat(
            "y", pm.Bernoulli.dist(p=p), release=rel, likelihood="clt", method="augmented"
        )


def test_bad_likelihood_arguments_are_refused():
    rel = pmdp.release([1, 0, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    with pm.Model(), pytest.raises(ValueError, match="likelihood must be one of"):
        pmdp.NoisySuffStat(
            "y", pm.Bernoulli.dist(p=pm.Beta("p", 1, 1)), release=rel, likelihood="x"
        )
    with pm.Model(), pytest.raises(ValueError, match="no augmented form"):
        pmdp.NoisySuffStat(
            "y",
            pm.Bernoulli.dist(p=pm.Beta("p", 1, 1)),
            release=rel,
            likelihood="exact",
            method="augmented",
        )
    # Every family has an exact likelihood now; continuous records get the lattice one.
    with pm.Model() as model:
        lam = pm.Gamma("lam", 1, 1)
        pmdp.NoisySuffStat(
            "y",
            pm.Exponential.dist(lam=lam),
            n=10,
            epsilon=1.0,
            sensitivity=2.0,
            observed=5.0,
            bounds=(0.0, 2.0),
            likelihood="exact",
        )
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"


def test_one_large_categorical_release_sums_over_the_noise_window():
    """n = 5000, K = 3, a category of about ten records at ε = 1: 'auto' takes the exact sum
    (over the counts within the noise's reach of y), with no warning, and the node's log density
    and gradient are the full convolution's within 2-4 posterior sds of y / n."""
    rng = np.random.default_rng(21)
    rel = pmdp.release(
        rng.choice(3, size=5000, p=[0.002, 0.4, 0.598]), pm.Categorical, epsilon=1.0,
        categories=3, rng=22,
    )  # fmt: skip
    with pm.Model() as model, warnings.catch_warnings():
        warnings.simplefilter("error", CltWarning)
        p = pm.Dirichlet("p", np.ones(3))
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel)
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"
    law = NoiseLaw("laplace", float(rel.scale))
    y = np.asarray(rel.value, dtype=np.float64)
    theta = pt.dvector("theta")
    mine = clone_replace(pm.logp(model["y"], y), {p: theta})
    node = pytensor.function([theta], [mine, pt.grad(mine, theta)])
    share = np.clip(y, 0.5, None) / np.sum(np.clip(y, 0.5, None))
    sd = np.sqrt(share * (1 - share) / 5000)
    for step in (0.0, 2.0, -2.0, 4.0):  # -4 sds would be below 0 for the rare category
        point = share + step * sd * np.array([1.0, -1.0, 0.0])
        point /= point.sum()
        got, grad = node(point)
        # The full convolution, in log space (the kernel the engine uses).
        assert got == pytest.approx(multinomial_log_likelihood(y, point, 5000, law), rel=1e-10)
        h = 1e-7 * point
        fd = [
            (multinomial_log_likelihood(y, point + e, 5000, law)
             - multinomial_log_likelihood(y, point - e, 5000, law)) / (2 * e[j])
            for j, e in enumerate(np.diag(h))
        ]  # fmt: skip
        np.testing.assert_allclose(grad, fd, rtol=1e-5)


def test_a_gaussian_mechanism_release_is_priced_by_the_gaussian_reach():
    """The discrete Gaussian's reach (σ√80) is far narrower than the Laplace law's (40 b): K = 4,
    n = 10⁵, σ = 3 and a category of about ten records is the exact sum over about 3·10⁴ count
    vectors (priced by the Laplace law's ball, over the table's budget, it cost the full
    convolution's 1.8·10⁹ terms: the CLT with a warning), and the node's log density equals the
    sum over the Laplace law's ball of the same σ, a superset, to 1e-10. (OpenDP's releases are
    not seeded: the assertions hold for any noise.)"""
    from scipy.special import gammaln, logsumexp

    from pymc_dp.kernels.count_window import kept_counts

    rng = np.random.default_rng(41)
    x = rng.choice(4, size=100_000, p=[0.0001, 0.3, 0.3, 0.3999])
    rel = pmdp.release(x, pm.Categorical, categories=4, mechanism="discrete-gaussian", rho=1 / 9)
    sigma, y = float(rel.scale), np.asarray(rel.value, dtype=np.float64)
    assert sigma == pytest.approx(3.0)
    law = NoiseLaw("discrete-gaussian", sigma)
    narrow = len(kept_counts(y, 100_000, law, np.inf))
    fam = Categorical(categories=4)
    cost = exact_cost(fam, 100_000, scale=sigma, released=y, mechanism="discrete-gaussian")
    assert cost == math.ceil(0.25 * narrow) < 15_000
    assert exact_cost(fam, 100_000, scale=sigma, released=y) > 10**9
    with pm.Model() as model, warnings.catch_warnings():
        warnings.simplefilter("error", CltWarning)
        p = pm.Dirichlet("p", np.ones(4))
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel)
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"
    wide = kept_counts(y, 100_000, NoiseLaw("laplace", sigma), np.inf)
    assert len(wide) > 10 * narrow
    fixed = gammaln(100_001.0) - gammaln(wide + 1.0).sum(axis=1) + law.logpdf(y - wide).sum(axis=1)
    theta = pt.dvector("theta")
    node = pytensor.function([theta], clone_replace(pm.logp(model["y"], y), {p: theta}))
    for point in ([1e-4, 0.3, 0.3, 0.3999], [5e-5, 0.31, 0.29, 0.39995], [2e-4, 0.3, 0.3, 0.3998]):
        want = logsumexp(fixed + wide @ np.log(point))
        assert node(np.asarray(point)) == pytest.approx(want, rel=1e-10)


def test_auto_takes_the_exact_sum_only_where_the_clt_is_untrusted_and_warns_where_it_is_dear():
    fam = Bernoulli()
    # Trusted (m = 300, r = 0.14): the CLT, the cheaper; untrusted (m = 3) and affordable: exact.
    assert choose_likelihood(fam, 1000, 300.0, 2.0).likelihood == "clt"
    assert choose_likelihood(fam, 100, 3.0, 0.5).likelihood == "exact"
    assert choose_likelihood(fam, 10**6, 3e5, 20.0).likelihood == "clt"
    few = np.array([1.0, 500.0, 546.0])  # one category with about one expected count
    assert choose_likelihood(Categorical(categories=3), 1047, few, 2.0).likelihood == "exact"
    # Beyond n = 1047 the full convolution is too dear, but the counts within the noise's reach
    # of y are few whatever n (161² at b = 2): exact, where the CLT and a warning were before.
    assert choose_likelihood(Categorical(categories=3), 1048, few, 2.0).likelihood == "exact"
    many = np.array([10.0, 50_000.0, 49_990.0])
    assert choose_likelihood(Categorical(categories=3), 100_000, many, 2.0).likelihood == "exact"
    # K = 4: the count vectors within the noise's reach of y form a ball of about 2.3·10⁵ at
    # b = 2 (the box of three counts around y held 161³ = 4.2·10⁶), so any n; at b = 3 the ball
    # is over the table's budget, so the CLT, with a warning where it is untrusted.
    rare4 = np.array([3.0, 30_000.0, 30_000.0, 39_997.0])
    few4 = np.array([1.0, 300.0, 300.0, 399.0])
    assert choose_likelihood(Categorical(categories=4), 1000, few4, 2.0).likelihood == "exact"
    choice = choose_likelihood(Categorical(categories=4), 100_000, rare4, 2.0)
    assert choice.likelihood == "exact" and "CLT untrusted" in choice.reason
    with pytest.warns(CltWarning, match="more than 100000"):
        assert choose_likelihood(Categorical(categories=4), 100_000, rare4, 3.0).likelihood == "clt"
    # K counts: the CLT keeps s latent (no cheaper), so the exact sum wherever affordable.
    assert choose_likelihood(Categorical(categories=3), 1047, np.ones(3), 2.0).likelihood == "exact"
    big = np.array([300.0, 400.0, 347.0])
    assert choose_likelihood(Categorical(categories=3), 1047, big, 2.0).likelihood == "exact"
    assert choose_likelihood(Categorical(categories=3), 1048, big, 2.0).likelihood == "exact"
    # Where the CLT is trusted the sum over the count vectors within the noise's reach buys speed
    # only, which it does up to TRUSTED_TABLE_MAX_TERMS: K = 3 at b = 8 (6.5·10⁴ vectors), not at
    # b = 13.3 (1.8·10⁵), nor K = 4 at b = 2 (2.3·10⁵), where the untrusted release above is exact.
    common3 = np.array([200_000.0, 500_000.0, 300_000.0])
    assert choose_likelihood(Categorical(categories=3), 10**6, common3, 8.0).likelihood == "exact"
    assert choose_likelihood(Categorical(categories=3), 10**6, common3, 13.3).likelihood == "clt"
    common4 = np.array([20_000.0, 30_000.0, 20_000.0, 30_000.0])
    assert choose_likelihood(Categorical(categories=4), 100_000, common4, 2.0).likelihood == "clt"
    # Wide noise (b = 20: the ball covers most of the simplex's 5.5·10⁵ vectors, over the
    # table's budget) on many records: the CLT, at the full convolution's cost.
    assert choose_likelihood(Categorical(categories=3), 1048, big, 20.0).likelihood == "clt"
    assert exact_cost(Categorical(categories=3), 1048, scale=20.0, released=big) == exact_cost(
        Categorical(categories=3), 1048
    )
    # b = 10 on the same release: 1.2·10⁵ vectors within reach, 30 290 terms (with y unknown,
    # the full convolution's 100 085): affordable, but over the trusted CLT's budget.
    assert exact_cost(Categorical(categories=3), 1048, scale=10.0, released=big) == 30_290
    assert choose_likelihood(Categorical(categories=3), 1048, big, 10.0).likelihood == "clt"
    # A rare event among 10⁶ records: the exact sum runs over the 82 counts within the noise's
    # reach of y (40 scales each side), not over 10⁶ + 1 (the CLT and a warning until 2026-12-01).
    assert exact_cost(fam, 10**6) == 10**6 + 1
    assert exact_cost(fam, 10**6, scale=1.0) == 82
    assert exact_cost(fam, 10, scale=1.0) == 11
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        choice = choose_likelihood(fam, 10**6, 2.0, 1.0)
    assert choice.likelihood == "exact" and "82 terms" in choice.reason
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        choose_likelihood(fam, 10**6, 3e5, 20.0)
    assert choose_likelihood(fam, 10, 3.0, 1.0, "clt").likelihood == "clt"
    # The measured rule (benchmarks/clt_accuracy.py): KS ≤ 0.01 where trusted.
    assert not clt_trust(fam, 100, 3.0, 0.5)[0]
    assert clt_trust(fam, 10**4, 100.0, 1.0)[0]


def test_the_engine_switches_to_exact_only_outside_the_clt_region():
    common = dict(family=Binomial(trials=1), prior=(1.0, 1.0), scale=1.0, draws=50, chains=1)
    small = sample_gibbs(0, released=[3.0], n=10, **common)
    # Exact draws of s are whole numbers; CLT draws are not.
    assert small.theta.shape == (1, 50, 1)
    assert np.all(small.suffstat == np.round(small.suffstat))
    clt = sample_gibbs(0, released=[3000.0], n=10_000, **common)
    assert not np.all(clt.suffstat == np.round(clt.suffstat))


def test_trace_attrs_round_trip_the_likelihood(tmp_path):
    rel = pmdp.release(np.r_[np.ones(3), np.zeros(9)], pm.Bernoulli, epsilon=0.5, rng=4)
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, likelihood="clt")
    attrs = release_attrs(model)
    assert attrs["pymc_dp_likelihood_y"] == "clt"
    assert json.loads(attrs["pymc_dp_release_y"])["n"] == 12


@pytest.mark.parametrize("likelihood", ["auto", "clt"])
def test_cli_fit_takes_the_likelihood_and_integer_noise(tmp_path, capsys, likelihood):
    from pymc_dp.cli import main
    from pymc_dp.curator.release_file import write_release

    x = np.random.default_rng(2).binomial(1, 0.3, size=40)
    rel = pmdp.release(x, pm.Bernoulli, epsilon=1.0)  # OpenDP's integer noise
    path = write_release(rel, tmp_path / "release.json")
    out = tmp_path / likelihood
    argv = ["fit", str(path), "--draws", "200", "--tune", "100", "--chains", "2"]
    argv += ["--seed", "1", "--no-progress", "--likelihood", likelihood, "--output-dir", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    want = "exact" if likelihood == "auto" else "clt"
    assert f"{want} likelihood" in printed
    summary = (out / "summary.csv").read_text()
    # σ² is the Laplace scale mixture: an integer noise law has none.
    assert "y_s" in summary and ("y_sigma2" in summary) == (want == "clt")


def test_trimmed_multinomial_sum_equals_the_full_sum():
    """One release's multinomial sum over each category's central window (where its bound on
    the terms left out holds) equals the sum over every count vector, to 1e-13, over random
    releases of every noise law, K = 2..5 and n up to 400."""
    from pymc_dp.kernels import exact_counts

    rng = np.random.default_rng(35)
    trimmed = 0
    for _ in range(120):
        k, n = int(rng.integers(2, 6)), int(rng.integers(5, 401))
        p = rng.dirichlet(np.full(k, 2.0))
        law = NoiseLaw(
            str(rng.choice(["laplace", "discrete-laplace", "discrete-gaussian"])),
            float(np.exp(rng.uniform(np.log(0.5), np.log(200.0)))),
        )
        s = rng.multinomial(n, p)
        y = s + rng.laplace(0.0, law.scale, k)
        if law.kind != "laplace":
            y = np.round(y)
        terms = exact_counts._category_terms(y, p, n, law)
        got = exact_counts._trimmed_log_likelihood(terms, n)
        # The full sum: the same function on a batch of one row takes the untrimmed path.
        full = multinomial_log_likelihood(y[None, :], p[None, :], n, law)[0]
        if got is not None:
            trimmed += 1
            assert got == pytest.approx(full, rel=1e-13, abs=1e-11)
        assert multinomial_log_likelihood(y, p, n, law) == pytest.approx(full, rel=1e-13, abs=1e-11)
    assert trimmed >= 60  # the trimmed path is taken in most cases


def test_trimmed_sum_holds_where_the_noise_sums_far_from_zero():
    """Issue 35: K = 3, n = 1000, b = 2, y summing to 990.6 (noise 2 sds of its sum away from 0).

    The categories' windows then keep about e^-8 of the product of their masses; with e^-40 tails
    the bound on the dropped terms did not prove the trimmed sum, and each evaluation took the
    full sum (10x dearer). Now it is trimmed, and equal to the full sum."""
    from pymc_dp.kernels import exact_counts

    law, n = NoiseLaw("laplace", 2.0), 1000
    y = np.array([220.90202066, 486.92702729, 282.78432526])
    for p in ([0.2, 0.5, 0.3], [0.22, 0.49, 0.29], [0.25, 0.45, 0.3]):
        p = np.asarray(p)
        got = exact_counts._trimmed_log_likelihood(exact_counts._category_terms(y, p, n, law), n)
        assert got is not None, p
        full = multinomial_log_likelihood(y[None, :], p[None, :], n, law)[0]
        assert got == pytest.approx(full, rel=1e-13, abs=1e-11)
