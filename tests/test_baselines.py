import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp import Release, naive_posterior, nonprivate_posterior


def beta_release(y, n, trials=None):
    family, params = ("bernoulli", {}) if trials is None else ("binomial", {"trials": trials})
    upper = 1.0 if trials is None else float(trials)
    return Release(
        value=y,
        n=n,
        epsilon=0.5,
        sensitivity=upper,
        bounds=(0.0, upper),
        family=family,
        family_params=params,
    )


def categorical_release(y, n):
    return Release(
        value=y,
        n=n,
        epsilon=0.5,
        sensitivity=2.0,
        bounds=(0.0, len(y) - 1.0),
        family="categorical",
        family_params={"categories": len(y)},
    )


# ---- non-private posterior -------------------------------------------------------------------


def test_nonprivate_bernoulli_by_hand():
    post = nonprivate_posterior([1, 0, 1, 1, 1, 0], pm.Bernoulli, prior=(2.0, 0.5))
    assert post.args == (2.0 + 4, 0.5 + 2)
    assert post.mean() == pytest.approx(6.0 / 8.5)


def test_nonprivate_binomial_by_hand():
    x = np.array([0, 5, 2, 3, 3])
    post = nonprivate_posterior(x, pm.Binomial, prior=(1.0, 3.0), trials=5)
    s, n = x.sum(), x.size
    assert post.args == (1.0 + s, 3.0 + 5 * n - s)
    assert post.mean() == pytest.approx((1.0 + s) / (4.0 + 5 * n))


def test_nonprivate_categorical_by_hand():
    x = np.array([0, 2, 2, 3, 1, 2, 0])
    alpha = np.array([0.5, 1.0, 2.0, 0.1])
    post = nonprivate_posterior(x, pm.Categorical, prior=(alpha,), categories=4)
    counts = np.array([2.0, 1.0, 3.0, 1.0])
    np.testing.assert_array_equal(post.alpha, alpha + counts)
    np.testing.assert_allclose(post.mean(), (alpha + counts) / (alpha.sum() + 7))


def test_nonprivate_accepts_family_names():
    a = nonprivate_posterior([0, 1, 1], "bernoulli", prior=(1, 1))
    b = nonprivate_posterior([0, 1, 1], pm.Bernoulli, prior=(1, 1))
    assert a.args == b.args == (3.0, 2.0)


@pytest.mark.parametrize("x", [[0, 2], [0.5], [], [np.nan]])
def test_nonprivate_validates_data(x):
    with pytest.raises(ValueError, match=r"\bx\b"):
        nonprivate_posterior(x, pm.Bernoulli, prior=(1, 1))


# ---- naive posterior -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "s"), [(-3.7, 0.0), (0.0, 0.0), (2.25, 2.25), (10.0, 10.0), (14.2, 10.0)]
)
def test_naive_binomial_clips_to_valid_region(y, s):
    n, trials = 5, 2
    post = naive_posterior(beta_release(y, n, trials), prior=(1.5, 2.5))
    assert post.args == pytest.approx((1.5 + s, 2.5 + n * trials - s))
    assert np.all(np.array(post.args) > 0)


def test_naive_bernoulli_clips_to_valid_region():
    assert naive_posterior(beta_release(-40.0, 8), prior=(1, 1)).args == (1.0, 9.0)
    assert naive_posterior(beta_release(40.0, 8), prior=(1, 1)).args == (9.0, 1.0)


def test_naive_categorical_clips_each_count():
    rel = categorical_release([-2.5, 4.25, 13.0], n=10)
    post = naive_posterior(rel, prior=([1.0, 1.0, 1.0],))
    np.testing.assert_array_equal(post.alpha, [1.0, 5.25, 11.0])


def test_naive_equals_nonprivate_without_noise_in_range():
    # With y equal to the exact statistic the naive posterior is the non-private one.
    x = [0, 2, 2, 1, 0]
    rel = Release(
        value=[2.0, 1.0, 2.0],
        n=5,
        epsilon=1.0,
        sensitivity=2.0,
        bounds=(0, 2),
        family="categorical",
        family_params={"categories": 3},
    )
    np.testing.assert_array_equal(
        naive_posterior(rel, prior=([1, 2, 3],)).alpha,
        nonprivate_posterior(x, pm.Categorical, prior=([1, 2, 3],), categories=3).alpha,
    )


def test_naive_from_a_real_release():
    rel = pmdp.release([1, 0, 1, 1], pm.Bernoulli, epsilon=0.2, rng=9)
    s = float(np.clip(rel.value, 0, 4))
    assert naive_posterior(rel, prior=(1, 1)).args == pytest.approx((1 + s, 1 + 4 - s))


def test_naive_rejects_non_release():
    with pytest.raises(TypeError, match="release"):
        naive_posterior({"value": 1.0}, prior=(1, 1))


# ---- prior validation ------------------------------------------------------------------------

BAD_BETA_PRIORS = [
    ((1.0,), TypeError),
    ((1.0, 1.0, 1.0), TypeError),
    ("ab", TypeError),
    (np.array([1.0, 1.0]), TypeError),
    ((0.0, 1.0), ValueError),
    ((1.0, -2.0), ValueError),
    ((np.nan, 1.0), ValueError),
    ((1.0, np.inf), ValueError),
]


@pytest.mark.parametrize(("prior", "error"), BAD_BETA_PRIORS)
def test_beta_prior_errors_name_prior(prior, error):
    with pytest.raises(error, match="prior"):
        nonprivate_posterior([0, 1], pm.Bernoulli, prior=prior)
    with pytest.raises(error, match="prior"):
        naive_posterior(beta_release(1.0, 2, trials=3), prior=prior)


BAD_DIRICHLET_PRIORS = [
    (([1.0, 1.0],), ValueError),
    (([1.0, 1.0, 1.0, 1.0],), ValueError),
    (([1.0, 0.0, 1.0],), ValueError),
    (([1.0, -1.0, 1.0],), ValueError),
    (([1.0, np.nan, 1.0],), ValueError),
    ((1.0,), ValueError),
    (([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]), TypeError),
    ((), TypeError),
]


@pytest.mark.parametrize(("prior", "error"), BAD_DIRICHLET_PRIORS)
def test_dirichlet_prior_errors_name_prior(prior, error):
    with pytest.raises(error, match="prior"):
        nonprivate_posterior([0, 2], pm.Categorical, prior=prior, categories=3)
    with pytest.raises(error, match="prior"):
        naive_posterior(categorical_release([1.0, 0.0, 1.0], n=2), prior=prior)


def test_prior_with_mismatched_shapes_is_rejected():
    with pytest.raises(ValueError, match="core shape"):
        pmdp.nonprivate_posterior([1, 0, 1], pm.Bernoulli, prior=([1, 2], [1, 2, 3]))
