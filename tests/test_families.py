import dataclasses

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_dp.families import (
    Bernoulli,
    Binomial,
    Categorical,
    ExponentialFamily,
    family_from_dist,
    get_family,
)

ALPHA = 1e-3
FAMILIES = [
    Bernoulli(),
    Binomial(trials=1),
    Binomial(trials=7),
    Categorical(categories=2),
    Categorical(categories=4),
]
FAMILY_IDS = [repr(f) for f in FAMILIES]


def compile_moments(fam):
    theta = pt.dvector("theta") if fam.stat_shape else pt.dscalar("theta")
    closed = fam.moments(theta)
    autodiff = ExponentialFamily.moments(fam, theta)
    return pytensor.function([theta], [*closed, *autodiff], mode="FAST_COMPILE")


# ---- moments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fam", [Bernoulli(), Binomial(trials=7)], ids=repr)
def test_binomial_closed_form_moments_equal_autodiff(fam):
    fn = compile_moments(fam)
    for p in [1e-4, 0.01, 0.3, 0.5, 0.9, 0.999]:
        mu_c, sigma_c, mu_a, sigma_a = fn(p)
        np.testing.assert_allclose(mu_c, mu_a, rtol=1e-9)
        np.testing.assert_allclose(sigma_c, sigma_a, rtol=1e-7)
        np.testing.assert_allclose(mu_c, stats.binom(fam.trials, p).mean(), rtol=1e-12)
        np.testing.assert_allclose(sigma_c, stats.binom(fam.trials, p).var(), rtol=1e-12)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_categorical_closed_form_moments_equal_autodiff(k):
    fam = Categorical(categories=k)
    fn = compile_moments(fam)
    thetas = list(np.random.default_rng(k).dirichlet(np.ones(k), size=4))
    thetas.append(np.r_[1e-6, np.full(k - 1, (1 - 1e-6) / (k - 1))])
    for p in thetas:
        mu_c, sigma_c, mu_a, sigma_a = fn(p)
        np.testing.assert_allclose(mu_c, mu_a, rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(sigma_c, sigma_a, rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(sigma_c, stats.multinomial(1, p).cov(), atol=1e-14)
        np.testing.assert_allclose(sigma_c.sum(axis=-1), 0.0, atol=1e-14)


# ---- sufficient statistics -------------------------------------------------------------------


@pytest.mark.parametrize("fam", FAMILIES, ids=FAMILY_IDS)
def test_sufficient_statistic_is_sum_of_t(fam):
    rng = np.random.default_rng(21)
    lo, hi = fam.domain
    x = rng.integers(int(lo), int(hi) + 1, size=137)
    s = fam.sufficient_statistic(fam.validate_data(x))
    assert s.dtype == np.float64 and s.shape == fam.stat_shape
    if isinstance(fam, Categorical):
        expected = np.eye(fam.categories)[x].sum(axis=0)
    else:
        expected = float(x.sum())
    np.testing.assert_array_equal(s, expected)


def test_statistic_of_known_data():
    assert Bernoulli().sufficient_statistic(Bernoulli().validate_data([1, 0, 1, 1])) == 3.0
    assert Bernoulli().sufficient_statistic(Bernoulli().validate_data([True, False])) == 1.0
    fam = Binomial(trials=5)
    assert fam.sufficient_statistic(fam.validate_data([0.0, 5.0, 2.0])) == 7.0
    fam = Categorical(categories=4)
    np.testing.assert_array_equal(
        fam.sufficient_statistic(fam.validate_data([3, 3, 0, 1.0])), [1.0, 1.0, 0.0, 2.0]
    )


def test_validate_data_returns_integer_array():
    out = Binomial(trials=3).validate_data([0.0, 3.0, 1.0])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [0, 3, 1])


# ---- validate_data rejections ----------------------------------------------------------------

BAD_DATA = [
    (Bernoulli(), [0, 1, 2], ValueError),
    (Bernoulli(), [-1, 0], ValueError),
    (Bernoulli(), [0.5, 1], ValueError),
    (Bernoulli(), [0, np.nan], ValueError),
    (Bernoulli(), [1, np.inf], ValueError),
    (Bernoulli(), [], ValueError),
    (Bernoulli(), [[0, 1], [1, 0]], ValueError),
    (Bernoulli(), 1, ValueError),
    (Bernoulli(), ["0", "1"], TypeError),
    (Bernoulli(), [0, None], TypeError),
    (Binomial(trials=3), [0, 4], ValueError),
    (Binomial(trials=3), [-1, 2], ValueError),
    (Binomial(trials=3), [1.5], ValueError),
    (Binomial(trials=3), [3 + 1e-9], ValueError),
    (Binomial(trials=3), [np.nan], ValueError),
    (Binomial(trials=3), [-np.inf], ValueError),
    (Binomial(trials=3), np.array([], dtype=np.int64), ValueError),
    (Binomial(trials=3), [[1, 2]], ValueError),
    (Binomial(trials=3), ["a"], TypeError),
    (Categorical(categories=3), [0, 3], ValueError),
    (Categorical(categories=3), [-1], ValueError),
    (Categorical(categories=3), [0.5, 1], ValueError),
    (Categorical(categories=3), [np.nan, 1], ValueError),
    (Categorical(categories=3), [], ValueError),
    (Categorical(categories=3), [[0], [1]], ValueError),
    (Categorical(categories=3), [{"a": 1}], TypeError),
]


@pytest.mark.parametrize(("fam", "x", "error"), BAD_DATA)
def test_validate_data_rejects_bad_records_naming_x(fam, x, error):
    with pytest.raises(error, match=r"\bx\b"):
        fam.validate_data(x)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize(
    "fam", [Bernoulli(), Binomial(trials=3), Categorical(categories=3)], ids=repr
)
def test_validate_data_rejects_complex_records(fam):
    with pytest.raises(TypeError, match=r"\bx\b"):
        fam.validate_data(np.array([1 - 1j, 0 + 1j]))


def test_bernoulli_accepts_booleans():
    np.testing.assert_array_equal(Bernoulli().validate_data(np.array([True, False])), [1, 0])


# ---- declarations ----------------------------------------------------------------------------


def test_declared_constants():
    assert Bernoulli().sensitivity == 1.0
    assert Binomial(trials=7).sensitivity == 7.0
    assert Categorical(categories=5).sensitivity == 2.0
    assert Bernoulli().domain == (0.0, 1.0)
    assert Binomial(trials=7).domain == (0.0, 7.0)
    assert Categorical(categories=5).domain == (0.0, 4.0)
    assert Binomial(trials=7).stat_shape == ()
    assert Categorical(categories=5).stat_shape == (5,)


@pytest.mark.parametrize("fam", FAMILIES, ids=FAMILY_IDS)
def test_valid_region_contains_every_statistic(fam):
    n = 9
    lower, upper = fam.valid_region(n)
    lo, hi = fam.domain
    rng = np.random.default_rng(22)
    xs = [np.full(n, int(lo)), np.full(n, int(hi)), rng.integers(int(lo), int(hi) + 1, size=n)]
    for x in xs:
        s = np.ravel(fam.sufficient_statistic(fam.validate_data(x)))
        assert np.all((lower <= s) & (s <= upper))
    # ... and is tight: both ends are reached by some dataset.
    if isinstance(fam, Categorical):
        np.testing.assert_array_equal(lower, 0.0)
        np.testing.assert_array_equal(upper, float(n))
    else:
        np.testing.assert_array_equal(lower, [0.0])
        np.testing.assert_array_equal(upper, [n * hi])


@pytest.mark.parametrize("fam", FAMILIES, ids=FAMILY_IDS)
def test_params_rebuild_the_family(fam):
    assert get_family(fam.name, **fam.params()) == fam
    assert get_family(fam.pymc_distribution, **fam.params()) == fam


def test_families_are_frozen_and_hashable():
    fam = Binomial(trials=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fam.trials = 4
    assert hash(fam) == hash(Binomial(trials=3))
    assert Bernoulli() != Binomial(trials=1)


@pytest.mark.parametrize(
    ("cls", "kwargs", "error", "name"),
    [
        (Binomial, {"trials": 0}, ValueError, "trials"),
        (Binomial, {"trials": 2.0}, TypeError, "trials"),
        (Binomial, {"trials": True}, TypeError, "trials"),
        (Categorical, {"categories": 1}, ValueError, "categories"),
        (Categorical, {"categories": "3"}, TypeError, "categories"),
    ],
)
def test_family_settings_are_checked(cls, kwargs, error, name):
    with pytest.raises(error, match=name):
        cls(**kwargs)


def test_conjugate_update_by_hand():
    fam = Binomial(trials=4)
    alpha, beta = fam.conjugate_update((np.float64(2.0), np.float64(3.0)), np.float64(7.0), 5)
    assert (alpha, beta) == (9.0, 3.0 + 20 - 7)
    (a,) = Categorical(categories=3).conjugate_update(
        (np.array([1.0, 2.0, 0.5]),), np.array([4.0, 0.0, 6.0]), 10
    )
    np.testing.assert_array_equal(a, [5.0, 2.0, 6.5])
    assert fam.conjugate_distribution((9.0, 16.0)).args == (9.0, 16.0)
    np.testing.assert_array_equal(
        Categorical(categories=3).conjugate_distribution(([5.0, 2.0, 6.5],)).alpha, [5, 2, 6.5]
    )


def test_draw_conjugate_follows_conjugate_distribution():
    rng = np.random.default_rng(23)
    fam = Binomial(trials=3)
    draws = fam.draw_conjugate(rng, (np.full(20_000, 2.5), np.full(20_000, 4.0)))
    assert stats.kstest(draws, fam.conjugate_distribution((2.5, 4.0)).cdf).pvalue > ALPHA
    cat = Categorical(categories=3)
    alpha = np.array([2.0, 0.5, 3.0])
    draws = cat.draw_conjugate(rng, (np.broadcast_to(alpha, (20_000, 3)),))
    pvalues = [
        stats.kstest(draws[:, k], stats.beta(a, alpha.sum() - a).cdf).pvalue
        for k, a in enumerate(alpha)
    ]
    assert min(pvalues) * 3 > ALPHA


# ---- registry --------------------------------------------------------------------------------


def test_get_family_by_class_and_name():
    assert get_family(pm.Bernoulli) == Bernoulli()
    assert get_family("bernoulli") == Bernoulli()
    assert get_family(pm.Binomial, trials=5) == Binomial(trials=5)
    assert get_family("categorical", categories=3) == Categorical(categories=3)


@pytest.mark.parametrize("family", [pm.StudentT, pm.Weibull, "weibull", "Binomial", None, 3])
def test_get_family_rejects_unknown_family(family):
    with pytest.raises(ValueError, match="family"):
        get_family(family)


@pytest.mark.parametrize(
    ("family", "params", "name"),
    [
        (pm.Binomial, {}, "trials"),
        (pm.Categorical, {}, "categories"),
        (pm.Bernoulli, {"trials": 1}, "trials"),
        (pm.Binomial, {"trials": 3, "categories": 2}, "categories"),
        (pm.Categorical, {"categories": 3, "p": [0.5, 0.5]}, "'p'"),
    ],
)
def test_get_family_rejects_missing_or_extra_settings(family, params, name):
    with pytest.raises(TypeError, match=name):
        get_family(family, **params)


def test_family_from_dist():
    assert family_from_dist(pm.Binomial.dist(n=5, p=0.3)) == Binomial(trials=5)
    assert family_from_dist(pm.Bernoulli.dist(p=0.3)) == Bernoulli()
    assert family_from_dist(pm.Categorical.dist(p=[0.2, 0.3, 0.5])) == Categorical(categories=3)
    with pytest.raises(TypeError, match="dist"):
        family_from_dist(pm.StudentT.dist(nu=3))
    with pytest.raises(TypeError, match="dist"):
        family_from_dist(pm.Binomial)


def test_family_from_dist_rejects_symbolic_trials():
    with pytest.raises(ValueError, match="trials"):
        family_from_dist(pm.Binomial.dist(n=pt.iscalar("n"), p=0.3))


def test_family_from_dist_rejects_vector_trials():
    with pytest.raises(ValueError, match="trials"):
        family_from_dist(pm.Binomial.dist(n=[2, 3], p=0.3))
