"""Each step method of Algorithm 1 (method="augmented") samples its full conditional.

Also: assignment, pickling and replay.
"""

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from tests.conftest import binomial_model, categorical_model, sample

ALPHA = 0.001
N_DRAWS = 4000


def _repeat(step, point, name, n=N_DRAWS):
    """Apply ``step`` n times to the same point; return the untransformed draws of ``name``."""
    model = pm.modelcontext(None)
    rv = model[name]
    untransform = model.compile_fn(
        model.replace_rvs_by_values([rv])[0], inputs=model.value_vars, on_unused_input="ignore"
    )
    return np.array([untransform(step.step(point)[0]) for _ in range(n)])


def _point(model, **values):
    """A model point with the given untransformed values set."""
    point = model.initial_point()
    for name, value in values.items():
        rv = model[name]
        transform = model.rvs_to_transforms.get(rv)
        value_var = model.rvs_to_values[rv]
        arr = np.asarray(value, dtype=np.float64)
        point[value_var.name] = (
            arr if transform is None else transform.forward(arr, *rv.owner.inputs).eval()
        )
    return point


def test_assignment_picks_dp_steps_for_exactly_the_node_variables(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    with model:
        z = pm.Normal("z", 0, 1)  # unrelated variable keeps NUTS
        _, selected = pm.sampling.mcmc.assign_step_methods(model)
    by_step = {cls.__name__: sorted(v.name for v in vars) for cls, vars in selected.items()}
    assert by_step == {
        "ConjugateStep": ["p_logodds__"],
        "NormProductStep": ["y_s_interval__"],
        "NoiseVarianceStep": ["y_sigma2_log__"],
        "NUTS": ["z"],
    }
    del z


def test_competence_is_ideal_only_for_node_variables(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    ideal, incompatible = pm.step_methods.compound.Competence.IDEAL, 0
    assert pmdp.ConjugateStep.competence(model["p"], True) == ideal
    assert pmdp.NormProductStep.competence(model["y_s"], True) == ideal
    assert pmdp.NoiseVarianceStep.competence(model["y_sigma2"], True) == ideal
    for step in (pmdp.ConjugateStep, pmdp.NormProductStep, pmdp.NoiseVarianceStep):
        others = [v for v in model.free_RVs if not step.owns(v)]
        assert len(others) == 2
        assert all(step.competence(v, True) == incompatible for v in others)
    with pm.Model():
        q = pm.Beta("q", 1, 1)
    assert pmdp.ConjugateStep.competence(q, True) == incompatible


def test_conjugate_step_draws_beta_posterior(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    s = 1512.3
    with model:
        step = pmdp.ConjugateStep([model["p"]], rng=1)
        draws = _repeat(step, _point(model, y_s=s), "p")
    exact = stats.beta(3.0 + s, 5.0 + 5000 - s)
    assert stats.kstest(draws, exact.cdf).pvalue > ALPHA


def test_conjugate_step_draws_dirichlet_posterior(categorical_release):
    model = categorical_model(categorical_release, method="augmented")
    s = np.array([150.5, 402.0, 247.5]) * categorical_release.n / 800  # a point with Σ s = n
    with model:
        step = pmdp.ConjugateStep([model["p"]], rng=2)
        draws = _repeat(step, _point(model, y_s=s), "p")
    alpha = np.array([2.0, 2.0, 2.0]) + s
    for k in range(3):
        marginal = stats.beta(alpha[k], alpha.sum() - alpha[k])
        assert stats.kstest(draws[:, k], marginal.cdf).pvalue > ALPHA
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, rtol=1e-12)


def test_conjugate_step_reads_random_hyperparameters(binomial_release):
    with pm.Model() as model:
        a = pm.HalfNormal("a", 5.0)
        p = pm.Beta("p", a, 5.0)
        pmdp.NoisySuffStat(
            "y", pm.Binomial.dist(n=5, p=p), release=binomial_release, method="augmented"
        )
        step = pmdp.ConjugateStep([p], rng=3)
        draws = _repeat(step, _point(model, a=7.5, y_s=1000.0), "p", n=2000)
    assert stats.kstest(draws, stats.beta(7.5 + 1000, 5.0 + 4000).cdf).pvalue > ALPHA


def test_norm_product_step_draws_truncated_product_scalar(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    p, sigma2 = 0.31, 900.0
    y = float(binomial_release.value)
    with model:
        step = pmdp.NormProductStep([model["y_s"]], rng=4)
        draws = _repeat(step, _point(model, p=p, y_sigma2=sigma2), "y_s")
    # Explicit precision-weighted product, written independently of the kernel.
    v1, m1 = 1000 * 5 * p * (1 - p), 1000 * 5 * p
    v3 = 1.0 / (1.0 / v1 + 1.0 / sigma2)
    m3 = v3 * (m1 / v1 + y / sigma2)
    sd = np.sqrt(v3)
    exact = stats.truncnorm((0 - m3) / sd, (5000 - m3) / sd, loc=m3, scale=sd)
    assert stats.kstest(draws, exact.cdf).pvalue > ALPHA


def test_norm_product_step_at_a_boundary_stays_valid_and_exact():
    # Few records, mean far below zero relative to the spread: the fallback path is used.
    rel = pmdp.Release(
        value=-40.0, n=20, epsilon=1.0, sensitivity=1.0, bounds=(0, 1), family="bernoulli"
    )
    with pm.Model() as model:
        p = pm.Beta("p", 1, 1)
        pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, method="augmented")
        step = pmdp.NormProductStep([model["y_s"]], rng=5, proposals=1)
        draws = _repeat(step, _point(model, p=0.02, y_sigma2=4.0), "y_s")
    v1, m1 = 20 * 0.02 * 0.98, 20 * 0.02
    v3 = 1.0 / (1.0 / v1 + 1.0 / 4.0)
    m3 = v3 * (m1 / v1 - 40.0 / 4.0)
    sd = np.sqrt(v3)
    assert np.all((draws > 0) & (draws < 20))
    exact = stats.truncnorm((0 - m3) / sd, (20 - m3) / sd, loc=m3, scale=sd)
    assert stats.kstest(draws, exact.cdf).pvalue > ALPHA


def test_norm_product_step_categorical_stays_on_simplex_and_matches_product(categorical_release):
    model = categorical_model(categorical_release, method="augmented")
    p = np.array([0.2, 0.5, 0.3])
    sigma2 = np.array([50.0, 80.0, 60.0])
    y = np.asarray(categorical_release.value)
    with model:
        step = pmdp.NormProductStep([model["y_s"]], rng=6)
        draws = _repeat(step, _point(model, p=p, y_sigma2=sigma2), "y_s")
    n = categorical_release.n
    np.testing.assert_allclose(draws.sum(axis=1), n, rtol=1e-12)
    assert np.all(draws > 0)
    # Reference: condition N(n p, n(diag p - p pᵀ)) on y = s + noise, via the pseudo-inverse
    # free-coordinate form (first K-1 counts are full rank).
    cov1 = n * (np.diag(p) - np.outer(p, p))
    mean1 = n * p
    gain = cov1 @ np.linalg.inv(cov1 + np.diag(sigma2))
    mean3 = mean1 + gain @ (y - mean1)
    cov3 = cov1 - gain @ cov1
    for k in range(3):
        exact = stats.norm(mean3[k], np.sqrt(cov3[k, k]))
        assert stats.kstest(draws[:, k], exact.cdf).pvalue > ALPHA


def test_noise_variance_step_draws_inverse_gaussian(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    s = float(binomial_release.value) - 37.0
    with model:
        step = pmdp.NoiseVarianceStep([model["y_sigma2"]], rng=7)
        draws = _repeat(step, _point(model, y_s=s), "y_sigma2")
    b = binomial_release.scale
    mu, lam = 1.0 / (b * 37.0), 1.0 / b**2
    assert stats.kstest(1.0 / draws, stats.invgauss(mu / lam, scale=lam).cdf).pvalue > ALPHA


def test_steps_refuse_foreign_variables(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    with model, pytest.raises(ValueError, match="cannot sample 'y_s'"):
        pmdp.ConjugateStep([model["y_s"]])
    with model, pytest.raises(ValueError, match="cannot sample 'p'"):
        pmdp.NormProductStep([model["p"]])
    with model, pytest.raises(ValueError, match="proposals and sweeps"):
        pmdp.NormProductStep([model["y_s"]], proposals=0)


def test_conjugate_step_refuses_theta_used_elsewhere(binomial_release):
    with pm.Model() as model:
        p = pm.Beta("p", 3, 5)
        pmdp.NoisySuffStat(
            "y", pm.Binomial.dist(n=5, p=p), release=binomial_release, method="augmented"
        )
        pm.Bernoulli("extra", p=p, observed=[1, 0, 1])
        with pytest.raises(ValueError, match=r"'p' is also used by \['extra'\]"):
            pmdp.ConjugateStep([p])
    del model


def test_steps_pickle_and_sample_in_parallel(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    with model:
        step = pmdp.NormProductStep([model["y_s"]], rng=8)
        clone = cloudpickle.loads(cloudpickle.dumps(step))  # as sample(cores>1) does
        point = model.initial_point()
        assert clone.step(point)[0].keys() == point.keys()
        idata = sample(
            draws=50,
            tune=20,
            chains=2,
            cores=2,
            random_seed=9,
        )
    assert posterior_dataset(idata)["p"].shape == (2, 50)


@pytest.mark.parametrize("cores", [1, 2])
def test_same_seed_same_trace(categorical_release, cores):
    traces = []
    for _ in range(2):
        with categorical_model(categorical_release, method="augmented"):
            idata = sample(draws=30, tune=10, chains=2, cores=cores, random_seed=10)
        traces.append(posterior_dataset(idata))
    for name in ("p", "y_s", "y_sigma2"):
        np.testing.assert_array_equal(traces[0][name].values, traces[1][name].values)


def test_sampling_state_replays(binomial_release):
    model = binomial_model(binomial_release, method="augmented")
    with model:
        step = pmdp.NoiseVarianceStep([model["y_sigma2"]], rng=11)
    point = model.initial_point()
    state = step.sampling_state
    first = step.step(point)[0]["y_sigma2_log__"]
    step.sampling_state = state
    again = step.step(point)[0]["y_sigma2_log__"]
    np.testing.assert_array_equal(first, again)


def test_trace_shows_latent_statistic_and_noise_variance(binomial_release):
    with binomial_model(binomial_release, method="augmented"):
        idata = sample(
            draws=20,
            tune=10,
            chains=1,
            random_seed=12,
        )
    post = posterior_dataset(idata)
    assert {"p", "y_s", "y_sigma2"} <= set(post.data_vars)
    assert np.all((post["y_s"].values > 0) & (post["y_s"].values < 5000))
    assert np.all(post["y_sigma2"].values > 0)
