"""What a NoisySuffStat node leaves in ArviZ: the release, named dimensions, and predictions.

* the release's n, ε, Δ and bounds in ``constant_data``; the whole release in ``attrs``;
* dimensions named for categories (``y_category``) and statistics (``y_stat``, ``y_part``);
* ``pm.sample_posterior_predictive`` draws released statistics y = ŝ + Laplace(0, Δ/ε): the
  residuals y_pred - ŝ over the posterior draws are checked against Laplace(0, Δ/ε) with a KS
  test at α = 0.001.
"""

import dataclasses
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.model.noisy_suffstat import release_attrs, releases_from_attrs
from pymc_dp.model.ready_made import build_model
from tests.conftest import sample

ALPHA = 0.001


@pytest.fixture(scope="module")
def exponential_release():
    x = np.random.default_rng(21).exponential(0.5, size=600)
    return pmdp.release(x, pm.Exponential, epsilon=0.5, bounds=(0.0, 2.0), rng=22)


@pytest.fixture(scope="module")
def normal_release():
    x = np.random.default_rng(23).normal(1.0, 2.0, size=600)
    return pmdp.release(x, pm.Normal, epsilon=1.0, bounds=(-5.0, 7.0), rng=24)


def _group(idata, name):
    """A group of InferenceData (ArviZ 0.x) or DataTree (ArviZ 1.x) as an xarray.Dataset."""
    group = idata[name]
    return group.to_dataset() if hasattr(group, "to_dataset") else group


def _posterior_predictive(idata, model, seed):
    with model, warnings.catch_warnings():
        # y_sigma2 depends on the released value, not on the node y, so redrawing y freezes
        # nothing implicitly (PyMC 6 would warn otherwise).
        warnings.filterwarnings("error", message=".*implicitly frozen.*")
        return pm.sample_posterior_predictive(idata, random_seed=seed, progressbar=False)


def test_constant_data_and_dims_are_declared(binomial_release, categorical_release):
    model = build_model(categorical_release)
    assert model.coords["y_category"] == (0, 1, 2)
    for name in ("p", "y", "y_s", "y_sigma2"):
        assert model.named_vars_to_dims[name] == ("y_category",), name
    assert model.coords["y_bound"] == ("lower", "upper")
    assert model.named_vars_to_dims["y_bounds"] == ("y_bound",)
    data = {v.name: v.get_value() for v in model.data_vars}
    assert data["y_n"] == categorical_release.n
    assert data["y_epsilon"] == categorical_release.epsilon
    assert data["y_sensitivity"] == 2.0
    np.testing.assert_array_equal(data["y_bounds"], [0.0, 2.0])
    # A scalar statistic has no dimension to name.
    assert "y" not in build_model(binomial_release).named_vars_to_dims


def test_statistic_dims_for_windowed_families(exponential_release, normal_release):
    model = build_model(exponential_release, method="augmented")
    assert model.named_vars_to_dims["y_s"] == ("y_part",)
    assert "y" not in model.named_vars_to_dims
    # Collapsed (the default): y alone, with its statistic dimension.
    model = build_model(normal_release)
    assert model.coords["y_stat"] == ("sum_x", "sum_x2")
    assert model.named_vars_to_dims["y"] == ("y_stat",)
    assert "y_s" not in model.named_vars and "y_sigma2" not in model.named_vars
    data = {v.name: v.get_value() for v in model.data_vars}
    np.testing.assert_array_equal(data["y_bounds"], [-5.0, 7.0])
    model = build_model(normal_release, method="augmented")
    assert model.named_vars_to_dims["y_sigma2"] == ("y_stat",)
    assert model.coords["y_part"] == ("window_sum_x", "window_sum_x2", "all_sum_x", "all_sum_x2")


def test_model_may_name_the_categories(categorical_release):
    with pm.Model(coords={"y_category": ["red", "green", "blue"]}) as model:
        p = pm.Dirichlet("p", np.ones(3), dims="y_category")
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=categorical_release)
    assert model.coords["y_category"] == ("red", "green", "blue")
    with pm.Model(coords={"y_category": ["red", "green"]}):
        p = pm.Dirichlet("p", np.ones(3))
        with pytest.raises(ValueError, match="coordinate 'y_category' must have 3 labels"):
            pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=categorical_release)


def test_release_attrs_round_trip(exponential_release, binomial_release):
    model = build_model(exponential_release)
    assert releases_from_attrs(release_attrs(model)) == {"y": exponential_release}
    # A value released elsewhere is recorded with the family's domain as bounds.
    rel = binomial_release
    with pm.Model() as model:
        p = pm.Beta("p", 1, 1)
        pmdp.NoisySuffStat(
            "z",
            pm.Binomial.dist(n=5, p=p),
            n=rel.n,
            epsilon=rel.epsilon,
            sensitivity=rel.sensitivity,
            observed=rel.value,
        )
    # Where the noise came from is unknown for a value released elsewhere.
    assert releases_from_attrs(release_attrs(model)) == {
        "z": dataclasses.replace(rel, library=None)
    }
    with pytest.raises(ValueError, match=r"pymc_dp_release_y.*not valid JSON"):
        releases_from_attrs({"pymc_dp_release_y": "{oops"})


@pytest.fixture(scope="module")
def fitted(binomial_release, categorical_release, exponential_release):
    """(release, model, idata) per family: 2 chains × 300 draws after 100 tuning steps."""
    cache = {}

    def fit(family):
        if family not in cache:
            rel = {
                "binomial": binomial_release,
                "categorical": categorical_release,
                "exponential": exponential_release,
            }[family]
            # Algorithm 1: y_s is in the trace, and y's predictive is y_s + Laplace noise.
            model = build_model(rel, method="augmented")
            with model:
                cache[family] = rel, model, sample(draws=300, tune=100, chains=2, random_seed=5)
        return cache[family]

    return fit


def test_sampling_result_holds_release_and_named_coords(fitted):
    rel, _, idata = fitted("categorical")
    constant = _group(idata, "constant_data")
    assert int(constant["y_n"].values) == rel.n
    assert float(constant["y_sensitivity"].values) == 2.0
    assert list(constant["y_bounds"].coords["y_bound"].values) == ["lower", "upper"]
    posterior = posterior_dataset(idata)
    for name in ("p", "y_s", "y_sigma2"):
        assert posterior[name].dims == ("chain", "draw", "y_category"), name
    assert list(_group(idata, "observed_data")["y"].dims) == ["y_category"]


def _ks_residuals(residuals, scale):
    return stats.kstest(np.ravel(residuals), stats.laplace(scale=scale).cdf).pvalue


@pytest.mark.parametrize("family", ["binomial", "categorical", "exponential"])
def test_posterior_predictive_is_statistic_plus_laplace_noise(family, fitted):
    """y_pred - ŝ over 2 × 300 posterior draws (× K components) ~ Laplace(0, Δ/ε): KS at
    α = 0.001. Each draw's ŝ is the one in the trace, so residuals are independent."""
    rel, model, idata = fitted(family)
    pp = _posterior_predictive(idata, model, seed=6)
    y_pred = _group(pp, "posterior_predictive")["y"]
    s = posterior_dataset(idata)["y_s"].values
    if family == "categorical":
        assert y_pred.dims == ("chain", "draw", "y_category")
        released = s
    elif family == "exponential":
        assert y_pred.dims == ("chain", "draw")
        released = s[..., 0]  # ŝ, the window's sum: what y releases
    else:
        assert y_pred.dims == ("chain", "draw")
        released = s
    assert y_pred.shape == released.shape
    residuals = y_pred.values - released
    assert _ks_residuals(residuals, rel.scale) > ALPHA
    # Power: residuals against the wrong scale (half the noise) are rejected.
    assert _ks_residuals(residuals, rel.scale / 2) < ALPHA
