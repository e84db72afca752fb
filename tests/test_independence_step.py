"""IndependenceStep: exact Metropolis–Hastings draws of a Dirichlet θ under the exact likelihood."""

import itertools

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.kernels import exact_counts
from pymc_dp.kernels.exact_counts import (
    NoiseLaw,
    multinomial_expected_counts,
    multinomial_log_likelihood,
)


def _grid_posterior(y, n, law, alpha, size=250):
    """Points of the simplex and their normalised posterior weights, on a grid that the prior's
    edge singularities do not spoil.

    p = (a², (1 - a²) sin²φ, (1 - a²) cos²φ) with a midpoint grid over a ∈ (0, 1) and
    φ ∈ (0, π/2): the Jacobian 4a(1 - a²) sin φ cos φ cancels a Dirichlet(½)'s p_j^(-½) at every
    edge, so the weights (likelihood × prior × Jacobian at the midpoints) carry no singular
    cells. A plain midpoint grid over (p0, p1) gave the first cell next to p0 = 0 only 0.71 of
    its mass under Dirichlet(½).
    """
    a = (np.arange(size) + 0.5) / size
    phi = (np.arange(size) + 0.5) / size * (np.pi / 2)
    a, phi = (v.ravel() for v in np.meshgrid(a, phi, indexing="ij"))
    p = np.stack([a**2, (1 - a**2) * np.sin(phi) ** 2, (1 - a**2) * np.cos(phi) ** 2], -1)
    # one point at a time: a batch would hold (n + 1)² terms per point
    loglik = np.array([multinomial_log_likelihood(y, point, n, law) for point in p])
    log_jacobian = np.log(4 * a * (1 - a**2) * np.sin(phi) * np.cos(phi))
    logw = loglik + stats.dirichlet.logpdf(p.T, alpha) + log_jacobian
    w = np.exp(logw - logw.max())
    return p, w / w.sum()


def _ks_to_grid(draws, points, weights):
    """Kolmogorov distance between draws of one component and the grid's weighted CDF.

    The 62 500 grid points each carry at most about 1e-3 of the mass, so the weighted
    empirical CDF of the grid is within that of the marginal's.
    """
    order = np.argsort(points)
    ref = np.interp(np.sort(draws), points[order], np.cumsum(weights[order]))
    emp = np.arange(1, draws.size + 1) / draws.size
    return float(np.max(np.maximum(np.abs(emp - ref), np.abs(emp - 1 / draws.size - ref))))


def _fit(rel, alpha, seed, extra=None, draws=1500):
    with pm.Model() as model:
        p = pm.Dirichlet("p", alpha)
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel)
        if extra is not None:
            extra(p)
        idata = pm.sample(
            draws=draws,
            tune=300,
            chains=2,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return model, idata


CASES = {
    # noise swamps the counts: the posterior is close to the Dirichlet(2, 2, 2) prior
    "noise-dominated": (100, 0.01, np.full(3, 2.0), [0.2, 0.5, 0.3]),
    # a concentrated posterior
    "concentrated": (100, 1.0, np.full(3, 2.0), [0.2, 0.5, 0.3]),
    # a rare category near the edge of the simplex, under a Dirichlet(0.5) prior
    "edge": (30, 0.5, np.full(3, 0.5), [0.02, 0.58, 0.4]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_draws_follow_the_exact_posterior(case):
    n, eps, alpha, truth = CASES[case]
    rng = np.random.default_rng(11)
    x = rng.choice(3, p=truth, size=n)
    rel = pmdp.release(x, pm.Categorical, epsilon=eps, categories=3, rng=rng)
    model, idata = _fit(rel, alpha, seed=3)
    assert pmdp.IndependenceStep.owns(model["p"])
    assert "diverging" not in idata.sample_stats  # no NUTS in the chain
    post = posterior_dataset(idata)["p"]
    accepted = float(idata.sample_stats["accepted"].mean())
    assert accepted > 0.5, f"acceptance {accepted:.2f}: the fitted proposal is poor"
    points, weights = _grid_posterior(
        np.asarray(rel.value), n, NoiseLaw("laplace", rel.scale), alpha
    )
    ess = az.ess(post.to_dataset(name="p"), method="bulk")["p"].values
    for j in range(3):
        draws = post.values[..., j].ravel()
        # Draws are not independent: the Kolmogorov bound (p about 0.001) uses the ESS.
        assert _ks_to_grid(draws, points[:, j], weights) < 1.95 / np.sqrt(ess[j]), (case, j)
        mean = float(np.sum(points[:, j] * weights))
        sd = float(np.sqrt(np.sum((points[:, j] - mean) ** 2 * weights)))
        assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(ess[j])
        assert draws.std() == pytest.approx(sd, rel=0.08)


@pytest.mark.slow  # a BFGS refit at every iteration: about 1 min
def test_conditional_with_moving_neighbours_is_refitted_and_stays_exact():
    # q ~ Dirichlet(20 p) moves every iteration; p's marginal is still p | y.
    rng = np.random.default_rng(5)
    x = rng.choice(3, p=[0.2, 0.5, 0.3], size=40)
    rel = pmdp.release(x, pm.Categorical, epsilon=0.5, categories=3, rng=rng)
    alpha = np.full(3, 2.0)
    _, idata = _fit(rel, alpha, seed=4, extra=lambda p: pm.Dirichlet("q", 20 * p), draws=800)
    post = posterior_dataset(idata)["p"]
    points, weights = _grid_posterior(
        np.asarray(rel.value), 40, NoiseLaw("laplace", rel.scale), alpha
    )
    ess = az.ess(post.to_dataset(name="p"), method="bulk")["p"].values
    for j in range(3):
        mean = float(np.sum(points[:, j] * weights))
        sd = float(np.sqrt(np.sum((points[:, j] - mean) ** 2 * weights)))
        assert abs(post.values[..., j].mean() - mean) < 4 * sd / np.sqrt(ess[j])


def test_expected_counts_match_enumeration_and_are_the_gradient():
    law, y, n = NoiseLaw("discrete-laplace", 1.3), np.array([1.0, 3.0, -1.0, 2.0]), 6
    p = np.array([0.15, 0.4, 0.25, 0.2])
    states = np.array([s for s in itertools.product(range(n + 1), repeat=4) if sum(s) == n])
    w = stats.multinomial.pmf(states, n, p) * np.prod(np.exp(law.logpdf(y - states)), axis=-1)
    want = (w[:, None] * states).sum(0) / w.sum()
    np.testing.assert_allclose(multinomial_expected_counts(y, p, n, law), want, rtol=1e-10)
    # d log p / d log θ_j = E[s_j | θ, y]
    for j in range(4):
        step = np.zeros(4)
        step[j] = 1e-6
        fd = (
            multinomial_log_likelihood(y, p * np.exp(step), n, law)
            - multinomial_log_likelihood(y, p * np.exp(-step), n, law)
        ) / 2e-6
        assert fd == pytest.approx(want[j], rel=1e-5)


def test_fast_convolution_keeps_deep_tails_exact():
    rng = np.random.default_rng(2)
    for _ in range(100):
        n = int(rng.integers(5, 320))
        s = np.arange(n + 1)
        # log-factorial scales, as in the count terms, plus noise: spans of 10^3 nats
        f = -0.5 * s * np.log1p(s) * rng.uniform(0.5, 3) + rng.normal(0, 5, n + 1)
        g = rng.uniform(-8, 8) * s + rng.normal(0, 5, n + 1)
        fast = exact_counts._log_convolve(f, g, n)
        slow = exact_counts._log_convolve_rows(f, g, n, slice(None))
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-9)


def test_large_batches_of_latent_draws_are_split_and_keep_their_law():
    """1000 posterior draws of s at n = 300, and 250 of a Binomial sum over 10⁵ counts, stay
    under 200 MB at peak with the same law. Unsplit they would hold 2.2 GB and 0.6 GB
    (measured with MAX_BATCH_TERMS lifted: 4000 draws held 1.5 GB before the split), so
    the peak check still fails if the split goes; the sizes are far above the split point
    (45 multinomial draws at n = 300, 40 binomial draws at 10⁵)."""
    import tracemalloc

    from pymc_dp.kernels.exact_counts import draw_binomial_suffstat, draw_multinomial_suffstat

    rng = np.random.default_rng(9)
    law = NoiseLaw("laplace", 4.0)
    y, p, n = np.array([70.0, 140.0, 90.0]), np.array([0.25, 0.45, 0.3]), 300
    tracemalloc.start()
    draws = draw_multinomial_suffstat(
        rng, released=y, theta=np.broadcast_to(p, (1000, 3)), n=n, noise=law
    )
    binomial = draw_binomial_suffstat(
        rng, released=np.full(250, 3e4), theta=0.3, total=100_000, noise=law
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"
    assert draws.shape == (1000, 3) and np.all(draws.sum(-1) == n)
    mean, sd = multinomial_expected_counts(y, p, n, law), draws.std(0)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4 * sd / np.sqrt(1000))
    assert binomial.shape == (250,) and np.all(np.abs(binomial - 3e4) < 1000)


def _centred_grid_posterior(y, n, law, alpha, centre, half_width, size=161):
    """Posterior weights on a midpoint grid over (p0, p1) centred on the posterior.

    A grid over the whole simplex (:func:`_grid_posterior`) gives a posterior with sd 0.015 only a
    few cells; here the cells are 1/8 of an sd wide, so the midpoint rule's error in the mean
    and sd (second order in the cell width) is far below the test's tolerance. The prior and
    the Jacobian of (p0, p1) are smooth inside the simplex.
    """
    axes = [c + half_width * ((np.arange(size) + 0.5) / size * 2 - 1) for c in centre]
    p0, p1 = (v.ravel() for v in np.meshgrid(*axes, indexing="ij"))
    p = np.stack([p0, p1, 1 - p0 - p1], -1)
    assert np.all(p > 0), "the grid leaves the simplex"
    loglik = np.array([multinomial_log_likelihood(y, point, n, law) for point in p])
    logw = loglik + stats.dirichlet.logpdf(p.T, alpha)
    w = np.exp(logw - logw.max())
    return p, (w / w.sum()).reshape(size, size)


@pytest.mark.slow  # the grid's 26 000 exact likelihoods and the sampling: about 40 s
def test_categorical_thousand_records_at_epsilon_one_matches_the_exact_posterior():
    """Issue 35: K = 3, n = 1000, ε = 1 (b = 2 against sd(s) ≈ 15), Dirichlet(2, 2, 2).

    The default (IndependenceStep, mode-fitted proposal) against the exact posterior on a grid
    of ±6 CLT sds around it: the mean within 4 Monte Carlo errors (sd/√ESS) and the sd within
    5% (about 4 Monte Carlo errors of an sd at ESS ≈ 3000).
    """
    rng = np.random.default_rng(35)
    n, alpha = 1000, np.full(3, 2.0)
    x = rng.choice(3, p=[0.2, 0.5, 0.3], size=n)
    rel = pmdp.release(x, pm.Categorical, epsilon=1.0, categories=3, rng=rng)
    y = np.asarray(rel.value)
    guess = (np.clip(y, 0, None) + alpha - 1) / (np.clip(y, 0, None).sum() + alpha.sum() - 3)
    spread = np.sqrt(guess * (1 - guess) / n)
    points, weights = _centred_grid_posterior(
        y, n, NoiseLaw("laplace", rel.scale), alpha, guess[:2], 6 * spread[:2].max()
    )
    # the grid holds the posterior: its edges carry a negligible share of the mass
    edges = np.concatenate([weights[0], weights[-1], weights[:, 0], weights[:, -1]])
    assert edges.sum() < 1e-8
    weights = weights.ravel()
    model, idata = _fit(rel, alpha, seed=35, draws=2000)
    assert pmdp.IndependenceStep.owns(model["p"])
    post = posterior_dataset(idata)["p"]
    ess = az.ess(post.to_dataset(name="p"), method="bulk")["p"].values
    for j in range(3):
        draws = post.values[..., j].ravel()
        mean = float(np.sum(points[:, j] * weights))
        sd = float(np.sqrt(np.sum((points[:, j] - mean) ** 2 * weights)))
        assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(ess[j]), (j, draws.mean(), mean)
        assert draws.std() == pytest.approx(sd, rel=0.05), (j, draws.std(), sd)
