"""The NoisySuffStat node: structure, equivalent forms, composition, and bad input."""

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from tests.conftest import binomial_model, sample


def test_node_adds_latent_statistic_noise_variance_and_laplace_observation(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    assert [v.name for v in model.free_RVs] == ["p", "y_s", "y_sigma2"]
    assert [v.name for v in model.observed_RVs] == ["y"]
    # y | s is Laplace(s, Δ/ε): check the logp against scipy at a point.
    from scipy import stats

    point = model.initial_point()
    s = model.compile_fn(
        model.replace_rvs_by_values([model["y_s"]])[0],
        inputs=model.value_vars,
        on_unused_input="ignore",
    )(point)
    logp_y = model.compile_fn(
        model.logp(vars=[model["y"]], sum=True), inputs=model.value_vars, on_unused_input="ignore"
    )(point)
    expected = stats.laplace.logpdf(binomial_release.value, loc=s, scale=binomial_release.scale)
    np.testing.assert_allclose(logp_y, expected)


def test_explicit_arguments_build_the_same_model(binomial_release):
    rel = binomial_release
    a = binomial_model(rel)
    with pm.Model() as b:
        p = pm.Beta("p", 3, 5)
        pmdp.NoisySuffStat(
            "y",
            pm.Binomial.dist(n=5, p=p),
            n=rel.n,
            epsilon=rel.epsilon,
            sensitivity=rel.sensitivity,
            observed=rel.value,
        )
    point = a.initial_point()
    np.testing.assert_allclose(a.compile_logp()(point), b.compile_logp()(point))


def test_non_conjugate_theta_is_left_to_pymc_samplers(binomial_release):
    with pm.Model() as model:
        z = pm.Normal("z", -1.0, 1.0)
        pmdp.NoisySuffStat(
            "y", pm.Binomial.dist(n=5, p=pm.math.sigmoid(z)), release=binomial_release
        )
        _, selected = pm.sampling.mcmc.assign_step_methods(model)
        idata = sample(
            draws=300,
            tune=300,
            chains=1,
            random_seed=1,
        )
    names = {cls.__name__: [v.name for v in vs] for cls, vs in selected.items()}
    assert names["NUTS"] == ["z"]
    assert "ConjugateStep" not in names
    p = 1 / (1 + np.exp(-posterior_dataset(idata)["z"].values))
    assert abs(p.mean() - binomial_release.value / 5000) < 0.05


def test_two_releases_share_a_conjugate_theta():
    x = np.random.default_rng(3).binomial(1, 0.4, size=2000)
    rels = [
        pmdp.release(half, pm.Bernoulli, epsilon=0.5, rng=i)
        for i, half in enumerate(np.split(x, 2))
    ]
    with pm.Model():
        p = pm.Beta("p", 1, 1)
        pmdp.NoisySuffStat("a", pm.Bernoulli.dist(p=p), release=rels[0])
        pmdp.NoisySuffStat("b", pm.Bernoulli.dist(p=p), release=rels[1])
        idata = sample(
            draws=1000,
            tune=300,
            chains=2,
            random_seed=2,
        )
    draws = posterior_dataset(idata)["p"].values.ravel()
    exact = pmdp.nonprivate_posterior(x, pm.Bernoulli, prior=(1, 1))
    assert abs(draws.mean() - exact.mean()) < 3 * exact.std()
    assert draws.std() < 2 * exact.std()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(name=""), TypeError, "name must be a non-empty string"),
        (dict(dist=pm.StudentT.dist(nu=3)), TypeError, "dist must be one of"),
        (dict(release="y.json"), TypeError, "release must be a pymc_dp.Release"),
        (dict(n=10), TypeError, r"pass either release= or \['n'\]"),
        (dict(release=None), TypeError, "missing"),
        (
            dict(release=None, n=0, epsilon=1.0, sensitivity=5.0, observed=3.0),
            ValueError,
            "n must be an integer >= 1",
        ),
        (
            dict(release=None, n=10, epsilon=-1.0, sensitivity=5.0, observed=3.0),
            ValueError,
            "epsilon must be a finite number > 0",
        ),
        (
            dict(release=None, n=10, epsilon=1.0, sensitivity=np.inf, observed=3.0),
            ValueError,
            "sensitivity must be a finite number > 0",
        ),
        (
            dict(release=None, n=10, epsilon=1.0, sensitivity=5.0, observed=[1.0, 2.0]),
            ValueError,
            r"observed must have shape \(\)",
        ),
        (
            dict(release=None, n=10, epsilon=1.0, sensitivity=5.0, observed=np.nan),
            ValueError,
            "observed must not contain NaN",
        ),
    ],
)
def test_bad_arguments_are_rejected_with_their_name(binomial_release, kwargs, error, match):
    args = dict(name="y", release=binomial_release)
    args.update(kwargs)
    with pm.Model():
        p = pm.Beta("p", 1, 1)
        dist = args.pop("dist", pm.Binomial.dist(n=5, p=p))
        with pytest.raises(error, match=match):
            pmdp.NoisySuffStat(args.pop("name"), dist, **args)


def test_release_family_must_match_dist(binomial_release):
    with pm.Model():
        p = pm.Beta("p", 1, 1)
        with pytest.raises(ValueError, match=r"dist is Bernoulli.*release is for Binomial"):
            pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=binomial_release)
        with pytest.raises(ValueError, match="dist is Binomial\\(trials=4\\)"):
            pmdp.NoisySuffStat("y", pm.Binomial.dist(n=4, p=p), release=binomial_release)


def test_model_variable_as_dist_is_rejected(binomial_release):
    with pm.Model():
        p = pm.Beta("p", 1, 1)
        x = pm.Binomial("x", n=5, p=p)
        with pytest.raises(TypeError, match="unregistered distribution"):
            pmdp.NoisySuffStat("y", x, release=binomial_release)


def test_random_trials_are_rejected(binomial_release):
    with pm.Model():
        p = pm.Beta("p", 1, 1)
        trials = pm.Poisson("t", 5)
        with pytest.raises(ValueError, match="fixed whole number"):
            pmdp.NoisySuffStat("y", pm.Binomial.dist(n=trials, p=p), release=binomial_release)


def test_under_noised_release_warns():
    with pm.Model():
        p = pm.Dirichlet("p", np.ones(3))
        with pytest.warns(UserWarning, match="was not 1.0-DP"):
            pmdp.NoisySuffStat(
                "y",
                pm.Categorical.dist(p=p),
                n=100,
                epsilon=1.0,
                sensitivity=1.0,
                observed=[30.0, 30.0, 40.0],
            )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pmdp.NoisySuffStat(
                "z",
                pm.Categorical.dist(p=p),
                n=100,
                epsilon=1.0,
                sensitivity=2.0,
                observed=[30.0, 30.0, 40.0],
            )


def test_chains_start_from_distinct_prior_draws_unless_theta_has_an_initval(binomial_release):
    """The model sets no initval (PyMC's transforms refuse them); ConjugateStep draws θ from
    its Beta(3, 5) prior at each chain's first step: over 400 chains (KS p > 0.01), while later
    steps draw θ | s (sd < 0.01). A θ with an initval keeps its start."""
    from pymc_dp.model.step_methods import ConjugateStep

    model = binomial_model(binomial_release, method="augmented")
    assert all(v is None for v in model.rvs_to_initial_values.values())
    with model:
        step = ConjugateStep()
    point = model.initial_point()
    starts, later = [], []
    for seed in range(400):
        step.set_rng(np.random.default_rng(seed))
        starts.append(step.step(point)[0]["p_logodds__"])
        later.append(step.step(point)[0]["p_logodds__"])
    starts, later = (1 / (1 + np.exp(-np.asarray(v))) for v in (starts, later))
    assert stats.kstest(starts, stats.beta(3, 5).cdf).pvalue > 0.01
    assert np.std(later) < 0.01
    with pm.Model() as fixed:
        p = pm.Beta("p", 3, 5, initval=0.25)
        pmdp.NoisySuffStat(
            "y", pm.Binomial.dist(n=5, p=p), release=binomial_release, method="augmented"
        )
        step = ConjugateStep()
    point = fixed.initial_point(random_seed=3)
    np.testing.assert_allclose(point["p_logodds__"], np.log(0.25 / 0.75))
    step.set_rng(np.random.default_rng(0))
    first = 1 / (1 + np.exp(-step.step(point)[0]["p_logodds__"]))
    assert abs(first - 0.25) < 0.05  # θ | s at s from θ = 0.25, not a prior draw
