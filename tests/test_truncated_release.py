"""Releases over a truncation window, and their NoisySuffStat models under pm.sample."""

import json

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.families import Exponential, Normal
from tests.conftest import sample


def _exponential_data(n=400, rate=3.0, seed=0):
    return np.random.default_rng(seed).exponential(1 / rate, size=n)


# ---- curator side ----------------------------------------------------------------------
def test_release_sums_only_the_window_with_appendix_c_sensitivity():
    x = np.array([0.1, 0.5, 1.4, 2.0, 7.0])
    rel = pmdp.release(x, pm.Exponential, epsilon=1e6, bounds=(0.2, 1.5), rng=0)
    assert rel.sensitivity == 1.5  # not |t(b) - t(a)| = 1.3: a record may leave the window
    assert rel.bounds == (0.2, 1.5)
    assert rel.value == pytest.approx(1.9, abs=1e-4)


def test_normal_release_holds_sum_and_sum_of_squares():
    x = np.array([-5.0, -1.0, 2.0, 3.0])
    rel = pmdp.release(x, pm.Normal, epsilon=1e6, bounds=(-4.0, 6.0), rng=0)
    np.testing.assert_allclose(rel.value, [4.0, 14.0], atol=1e-3)
    # Exact L1 sensitivity of (z, z²) on [-4, 6]; Appendix C's sum of maxima gave 46.
    assert rel.sensitivity == 42.25
    known = pmdp.release(x, pm.Normal, epsilon=1e6, bounds=(-4.0, 6.0), sigma=2.0, rng=0)
    assert known.family == "normal_known_sigma" and known.value.shape == ()


def test_window_noise_is_laplace_at_sensitivity_over_epsilon():
    """y - ŝ over 4000 releases of one data set: KS against Laplace(Δ/ε) at α = 0.001."""
    x = _exponential_data(100)
    rng = np.random.default_rng(3)
    exact = Exponential().window_statistic(x, (0.0, 1.5))
    noise = [
        pmdp.release(x, pm.Exponential, epsilon=0.5, bounds=(0.0, 1.5), rng=rng).value - exact
        for _ in range(4000)
    ]
    assert stats.kstest(noise, stats.laplace(scale=1.5 / 0.5).cdf).pvalue > 1e-3


def test_private_bounds_split_the_budget_and_are_recorded():
    x = _exponential_data(2000)
    rel = pmdp.release(
        x,
        pm.Exponential,
        epsilon=5.0,
        bounds="private",
        bounds_share=0.2,
        bounds_range=(0.0, 20.0),
        rng=4,
    )
    assert rel.bounds_epsilon == pytest.approx(1.0)
    assert rel.epsilon == pytest.approx(4.0)
    assert rel.total_epsilon == pytest.approx(5.0)
    true_lo, true_hi = np.quantile(x, [0.025, 0.975])
    assert abs(rel.bounds[0] - true_lo) < 0.1 and abs(rel.bounds[1] - true_hi) < 0.3
    assert rel.sensitivity == Exponential().release_sensitivity(rel.bounds)
    again = pmdp.Release.from_json(rel.to_json())
    assert again == rel and json.loads(rel.to_json())["bounds_epsilon"] == rel.bounds_epsilon


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"bounds": (1.5, 0.0)}, ValueError, "a < b"),
        ({"bounds": (0.0, np.inf)}, ValueError, "finite"),
        ({"bounds": (np.nan, 1.0)}, ValueError, "finite"),
        ({}, ValueError, "bounds are required"),
        ({"bounds": "guess"}, ValueError, "private"),
        ({"bounds": "private"}, ValueError, "bounds_range"),
        (
            {"bounds": "private", "bounds_share": 1.0, "bounds_range": (0, 9)},
            ValueError,
            r"\(0, 1\)",
        ),
        (
            {"bounds": "private", "bounds_share": 0.0, "bounds_range": (0, 9)},
            ValueError,
            "bounds_share",
        ),
        (
            {"bounds": "private", "bounds_share": -0.5, "bounds_range": (0, 9)},
            ValueError,
            "bounds_share",
        ),
        ({"bounds": (0.0, 1.0), "sigma": 1.0}, TypeError, "takes"),
        # The public search range of PrivateQuantile is checked before it draws anything.
        ({"bounds": "private", "bounds_range": (-100.0, -1.0)}, ValueError, "domain"),
        ({"bounds": "private", "bounds_range": (5.0, 1.0)}, ValueError, "a < b"),
    ],
)
def test_release_rejects_bad_window_arguments_before_noise(kwargs, error, match):
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(error, match=match):
        pmdp.release(_exponential_data(50), pm.Exponential, epsilon=1.0, rng=rng, **kwargs)
    assert rng.bit_generator.state == state


@pytest.mark.parametrize(
    ("family", "x", "match"),
    [
        (pm.Exponential, [0.5, -1.0], "domain"),
        (pm.Poisson, [1, 2.5], "whole numbers"),
        (pm.Geometric, [0, 2], "domain"),
        (pm.LogNormal, [1.0, 0.0], "domain"),
        (pm.Normal, ["a", "b"], "numeric"),
        (pm.Exponential, [True, False], "numeric"),
    ],
)
def test_release_rejects_data_of_the_wrong_type(family, x, match):
    with pytest.raises((TypeError, ValueError), match=match):
        pmdp.release(x, family, epsilon=1.0, bounds=(1.0, 5.0), rng=0)


def test_bounds_are_rejected_for_bounded_families():
    with pytest.raises(TypeError, match="bounds apply only"):
        pmdp.release([0, 1], pm.Bernoulli, epsilon=1.0, bounds=(0, 1), rng=0)


def test_release_rejects_sensitivity_below_appendix_c():
    rel = pmdp.release(_exponential_data(50), pm.Exponential, epsilon=1.0, bounds=(0.2, 1.5))
    data = rel.to_dict() | {"sensitivity": 1.3}
    with pytest.raises(ValueError, match=r"sensitivity must be >= 1\.5"):
        pmdp.Release.from_dict(data)


# ---- analyst side ----------------------------------------------------------------------
def _fit_exponential(rel, **kwargs):
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=8.0, beta=2.0)
        pmdp.NoisySuffStat("y", pm.Exponential.dist(lam=lam), release=rel)
        idata = sample(**kwargs)
    return model, idata


def test_exponential_model_names_parts_of_the_latent_statistic():
    rel = pmdp.release(_exponential_data(), pm.Exponential, epsilon=0.5, bounds=(0.0, 1.5), rng=1)
    model, idata = _fit_exponential(rel, draws=300, tune=200, chains=2, random_seed=1)
    idata = pmdp.sample_latent(idata, model, random_seed=2)  # s was integrated out
    post = posterior_dataset(idata)
    assert list(post["y_part"].values) == ["window_sum_x", "all_sum_x"]
    assert np.all(np.isfinite(post["lam"].values))
    s = post["y_s"].values
    assert np.all(s[..., 1] >= 0)


def test_exponential_posterior_matches_conjugate_when_noise_and_window_vanish():
    """ε = 1e4 and a window holding every record: the posterior of λ is Gamma(8 + n, 2 + s)
    up to the CLT; mean within 0.1 sd and sd within 10% over 4000 draws."""
    x = _exponential_data(400)
    rel = pmdp.release(x, pm.Exponential, epsilon=1e4, bounds=(0.0, 50.0), rng=2)
    _, idata = _fit_exponential(rel, draws=2000, tune=500, chains=2, random_seed=2)
    lam = posterior_dataset(idata)["lam"].values.ravel()
    exact = stats.gamma(8.0 + x.size, scale=1 / (2.0 + x.sum()))
    assert abs(lam.mean() - exact.mean()) < 0.1 * exact.std()
    assert lam.std() == pytest.approx(exact.std(), rel=0.1)


def test_normal_inverse_gamma_is_one_conjugate_block():
    x = np.random.default_rng(5).normal(1.0, 2.0, size=500)
    rel = pmdp.release(x, pm.Normal, epsilon=1e4, bounds=(-8.0, 10.0), rng=1)
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=6.0, beta=5.0)
        mu = pm.Normal("mu", 1.0, sigma=pm.math.sqrt(sigma2 / 2.0))
        dist = pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2))
        pmdp.NoisySuffStat("y", dist, release=rel, method="augmented")
    assert set(model["mu"].tag.noisy_suffstat[0].theta) == {"sigma2", "mu"}
    with model:
        idata = sample(draws=1000, tune=300, chains=2, random_seed=3)
    post = posterior_dataset(idata)
    exact = Normal().conjugate_distribution(
        Normal().conjugate_update((1.0, 2.0, 6.0, 5.0), np.array([x.sum(), (x**2).sum()]), x.size)
    )
    assert abs(post["mu"].values.mean() - exact.mu.mean()) < 0.2 * exact.mu.std()
    assert abs(post["sigma2"].values.mean() - exact.sigma2.mean()) < 0.2 * exact.sigma2.std()


def test_normal_with_non_constant_kappa_is_not_conjugate():
    rel = pmdp.release(np.zeros(10), pm.Normal, epsilon=1.0, bounds=(-1.0, 1.0), rng=0)
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=6.0, beta=5.0)
        mu = pm.Normal("mu", 0.0, sigma=sigma2)  # σ_μ² / σ² is not constant
        pmdp.NoisySuffStat("y", pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2)), release=rel)
    assert not hasattr(model["mu"].tag, "noisy_suffstat")


def test_explicit_window_arguments_need_bounds():
    with pm.Model(), pytest.raises(ValueError, match="bounds are required"):
        lam = pm.Gamma("lam", 2.0, 1.0)
        pmdp.NoisySuffStat(
            "y", pm.Exponential.dist(lam=lam), n=10, epsilon=1.0, sensitivity=1.5, observed=3.0
        )
