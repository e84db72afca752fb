"""The PyMC-native private regression: NoisyRegressionStat, its step methods, predictive, JSON."""

import warnings
from unittest.mock import patch

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.tensor.blockwise import Blockwise
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.regression import (
    NIG,
    NIW,
    CovariateModelStep,
    MomentRelease,
    NoisyRegressionStat,
    RegressionCollapsedStep,
    RegressionConjugateStep,
    RegressionNoiseVarianceStep,
    RegressionRelease,
    RegressionSuffStatStep,
    XMoments,
    default_x_prior,
    draw_nig,
    draw_niw,
    nig_update,
    niw_update,
    nonprivate_regression_posterior,
    normal_x_moments,
    posterior_predictive,
    predictive_coverage,
    predictive_draws,
    regression_statistic,
    release_regression,
    sample_gibbs_ss,
    sample_regression,
    suffstat_moments,
    x_moments_from_release,
)
from pymc_dp.regression.model.distributions import (
    InverseWishart,
    RegressionSuffStat,
    SharedCovNormal,
    clt_moments_pt,
    normal_x_moments_pt,
)
from pymc_dp.regression.model.noisy_regression import nig_prior_parameters

OURS = {
    "RegressionConjugateStep",
    "RegressionSuffStatStep",
    "RegressionNoiseVarianceStep",
    "CovariateModelStep",
}
# θ | σ² ~ N(0, 2σ² I) (precision 0.5 I), σ² ~ InvGamma(20, 1.9) (mean 0.1).
A, B, V = 20.0, 1.9, 2.0


def _prior(d):
    return NIG(np.zeros(d + 1), np.eye(d + 1) / V, np.array(A), np.array(B))


def _data(rng, n, d):
    """x ~ Uniform(-1, 1)^d, y from a prior draw of (θ, σ²), inside |y| ≤ 4."""
    theta, sigma2 = draw_nig(rng, _prior(d))
    x = rng.uniform(-1.0, 1.0, size=(n, d))
    y = theta[0] + x @ theta[1:] + np.sqrt(sigma2) * rng.standard_normal(n)
    assert np.all(np.abs(y) <= 4.0)
    return x, y


def _release(x, y, epsilon, rng, moments_share=0.2):
    d = x.shape[1]
    return release_regression(
        x,
        y,
        x_bounds=[(-1.0, 1.0)] * d,
        y_bounds=(-4.0, 4.0),
        epsilon=epsilon,
        moments_share=moments_share,
        rng=rng,
    )


def _model(rel, *, diagonal=False, **node_kwargs):
    p = (rel.d if rel is not None else node_kwargs.pop("d")) + 1
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=A, beta=B)
        if diagonal:
            theta = pm.Normal("theta", 0.0, sigma=pt.sqrt(sigma2 * V), shape=p)
        else:
            theta = pm.MvNormal("theta", np.zeros(p), cov=sigma2 * V * np.eye(p))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **node_kwargs)
    return model


def _sample(model, **kwargs):
    with model:
        return pm.sample(progressbar=False, compute_convergence_checks=False, cores=1, **kwargs)


def _thinned(draws):
    """(chain, draw) → about one draw per effective sample, flattened."""
    import arviz as az

    step = max(1, int(draws.size / float(az.ess(az.convert_to_dataset(draws))["x"])))
    return draws[:, ::step].ravel()


def _assert_agree(post, tr, *, x_model):
    """pm.sample's draws against a batched sampler's trace (release 0): two-sample KS on
    ESS-thinned draws of θ_0, θ_1, σ² and, with a model of x, μ_x and σ_x², at α = 0.001 each."""
    pairs = [
        (post["theta"].values[..., 0], tr.theta[:, :, 0, 0]),
        (post["theta"].values[..., 1], tr.theta[:, :, 0, 1]),
        (post["sigma2"].values, tr.sigma2[:, :, 0]),
    ]
    if x_model:
        pairs += [
            (post["z_x_loc"].values[..., 0], tr.x_loc[:, :, 0, 0]),
            (post["z_x_cov"].values[..., 0, 0], tr.x_cov[:, :, 0, 0, 0]),
        ]
    for ours, reference in pairs:
        assert stats.ks_2samp(_thinned(ours), _thinned(reference)).pvalue > 1e-3


def _assert_matches(chain_draws, iid, alpha):
    """Two-sample KS on ESS-thinned draws; means within 0.1 sd and sds within 10 %."""
    assert stats.ks_2samp(_thinned(chain_draws), iid).pvalue > alpha
    assert abs(chain_draws.mean() - iid.mean()) < 0.1 * iid.std()
    assert abs(chain_draws.std() / iid.std() - 1) < 0.1


@pytest.fixture(scope="module")
def release_d1():
    rng = np.random.default_rng(101)
    x, y = _data(rng, 200, 1)
    return x, y, _release(x, y, 1.0, rng)


# ---- structure ------------------------------------------------------------------------------


def test_sample_assigns_the_regression_steps_to_every_node_variable_and_nuts_to_the_rest(
    release_d1,
):
    _, _, rel = release_d1
    model = _model(rel)
    with model:
        other = pm.Normal("other", 0.0, 1.0)
        pm.Normal("obs", other, 1.0, observed=[0.3])
        _, selected = pm.sampling.mcmc.assign_step_methods(model)
    names = {cls.__name__: sorted(v.name for v in vs) for cls, vs in selected.items()}
    assert names == {
        "RegressionCollapsedStep": ["sigma2_log__", "theta", "z_s", "z_x_cov", "z_x_loc"],
        "RegressionNoiseVarianceStep": ["z_sigma2_log__"],
        "NUTS": ["other"],
    }
    model = _model(rel, method="gibbs-ss")
    with model:
        _, selected = pm.sampling.mcmc.assign_step_methods(model)
    names = {cls.__name__: sorted(v.name for v in vs) for cls, vs in selected.items()}
    assert names == {
        "RegressionConjugateStep": ["sigma2_log__", "theta"],
        "RegressionSuffStatStep": ["z_s"],
        "RegressionNoiseVarianceStep": ["z_sigma2_log__"],
    }
    model = _model(
        rel, method="gibbs-ss", x_prior=NIW(np.zeros(1), np.array(1.0), np.array(5.0), np.eye(1))
    )
    with model:
        _, selected = pm.sampling.mcmc.assign_step_methods(model)
    names = {cls.__name__: sorted(v.name for v in vs) for cls, vs in selected.items()}
    assert set(names) == OURS
    assert names["CovariateModelStep"] == ["z_x_cov", "z_x_loc"]
    assigned = sorted(v for vs in names.values() for v in vs)
    assert assigned == sorted(v.name for v in model.value_vars)


def test_steps_are_registered_once_and_refuse_foreign_variables(release_d1):
    for cls in (
        RegressionSuffStatStep,
        RegressionConjugateStep,
        CovariateModelStep,
        RegressionNoiseVarianceStep,
        RegressionCollapsedStep,
    ):
        assert pm.step_methods.STEP_METHODS.count(cls) == 1
    with _model(release_d1[2], method="gibbs-ss") as model:
        other = pm.Normal("other", 0.0, 1.0)
        with pytest.raises(ValueError, match="cannot sample 'other'"):
            RegressionSuffStatStep([other])
        with pytest.raises(ValueError, match="give RegressionConjugateStep both"):
            RegressionConjugateStep([model["theta"]])
        # The default model's step does not take a Gibbs-SS node's variables.
        with pytest.raises(ValueError, match="cannot sample 'theta'"):
            RegressionCollapsedStep([model["theta"]])
    with _model(release_d1[2]) as default:
        with pytest.raises(ValueError, match=r"moves .* together; give it all"):
            RegressionCollapsedStep([default["theta"], default["sigma2"]])
        with pytest.raises(ValueError, match="cannot sample 'z_s'"):
            RegressionSuffStatStep([default["z_s"]])
    # A NoisySuffStat's steps do not take the regression node's variables, nor ours theirs.
    assert not pmdp.NormProductStep.owns(model["z_s"])
    assert not pmdp.NoiseVarianceStep.owns(model["z_sigma2"])
    assert not pmdp.ConjugateStep.owns(model["theta"])


def test_coordinates_name_coefficients_and_statistics_by_their_monomials():
    rng = np.random.default_rng(5)
    x, y = _data(rng, 50, 2)
    model = _model(_release(x, y, 1.0, rng), covariates=["age", "dose"])
    assert model.coords["z_coef"] == ("intercept", "age", "dose")
    assert model.coords["z_stat"] == (
        "sum_age",
        "sum_dose",
        "sum_age^2",
        "sum_age_dose",
        "sum_dose^2",
        "sum_y",
        "sum_age_y",
        "sum_dose_y",
        "sum_y^2",
    )
    assert model.named_vars_to_dims["theta"] == ("z_coef",)
    for name in ("z", "z_s", "z_sigma2"):
        assert model.named_vars_to_dims[name] == ("z_stat",)


def test_explicit_arguments_build_the_same_model(release_d1):
    _, _, rel = release_d1
    moments = x_moments_from_release(rel)
    a = _model(rel, x_moments=moments)
    explicit = dict(
        n=rel.n,
        epsilon=rel.epsilon,
        sensitivity=rel.sensitivity,
        observed=rel.value,
        x_moments=moments,
    )
    b = _model(None, d=1, **explicit)
    c = _model(None, d=1, bounds=(rel.x_bounds, rel.y_bounds), **explicit)
    point = a.initial_point(random_seed=3)
    for other in (b, c):
        np.testing.assert_allclose(
            a.compile_logp(mode="FAST_COMPILE")(point),
            other.compile_logp(mode="FAST_COMPILE")(point),
        )


def test_diagonal_normal_prior_is_the_same_nig_as_mvnormal(release_d1):
    _, _, rel = release_d1
    params = []
    for diagonal in (False, True):
        model = _model(rel, diagonal=diagonal)
        exprs = nig_prior_parameters(model, model["theta"], model["sigma2"])
        params.append(pytensor.function([], list(exprs), mode="FAST_COMPILE")())
    for a, b in zip(*params, strict=True):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(params[0][1], np.eye(2) / V)
    np.testing.assert_allclose([params[0][2], params[0][3]], [A, B])


# ---- log densities against the NumPy formulas ------------------------------------------------


def test_pytensor_moments_equal_the_numpy_kernels_d2():
    rng = np.random.default_rng(7)
    loc, root = rng.normal(size=2), rng.normal(size=(2, 2))
    cov = root @ root.T + 0.5 * np.eye(2)
    theta, sigma2 = rng.normal(size=3), 0.3
    mom = normal_x_moments(loc, cov)
    second, phi = normal_x_moments_pt(pt.constant(loc), pt.constant(cov))
    np.testing.assert_allclose(second.eval(), mom.second, rtol=1e-12)
    np.testing.assert_allclose(phi.eval(), mom.fourth_cov, rtol=1e-12, atol=1e-14)
    mean, var = clt_moments_pt(pt.constant(theta), sigma2, mom.second, mom.fourth_cov, d=2)
    ex_mean, ex_var = suffstat_moments(theta, sigma2, mom)
    np.testing.assert_allclose(mean.eval(), ex_mean, rtol=1e-12)
    np.testing.assert_allclose(var.eval(), ex_var, rtol=1e-12, atol=1e-14)


def test_suffstat_logp_is_the_clt_normal_on_psd_statistics_only():
    rng = np.random.default_rng(8)
    mom = normal_x_moments(np.array([0.2]), np.array([[0.5]]))
    theta, sigma2, n = np.array([0.1, 0.7]), 0.2, 40
    dist = RegressionSuffStat.dist(theta, sigma2, mom.second, mom.fourth_cov, n)
    mean, cov = suffstat_moments(theta, sigma2, mom)
    s = regression_statistic(rng.normal(0.2, 0.7, size=(n, 1)), rng.normal(size=n))
    expected = stats.multivariate_normal(n * mean, n * cov).logpdf(s)
    np.testing.assert_allclose(pm.logp(dist, s).eval(), expected, rtol=1e-6)
    invalid = s.copy()
    invalid[1] = 0.0  # Σx² = 0 with Σx ≠ 0: B is not PSD
    assert pm.logp(dist, invalid).eval() == -np.inf
    draws = pm.draw(dist, draws=200, random_seed=9)
    assert draws.shape == (200, 5)
    assert np.all(pmdp.regression.is_valid_statistic(draws, n))


def test_inverse_wishart_logp_and_draws_match_scipy():
    scale = np.array([[2.0, 0.3], [0.3, 1.0]])
    dist = InverseWishart.dist(dof=6.0, scale=scale)
    value = np.array([[0.7, 0.1], [0.1, 0.4]])
    expected = stats.invwishart(df=6.0, scale=scale).logpdf(value)
    np.testing.assert_allclose(pm.logp(dist, value).eval(), expected, rtol=1e-10)
    draws = pm.draw(dist, draws=4000, random_seed=10)
    ref = stats.invwishart(df=6.0, scale=scale).rvs(4000, random_state=11)
    assert stats.ks_2samp(draws[:, 0, 0], ref[:, 0, 0]).pvalue > 1e-3 / 2
    assert stats.ks_2samp(draws[:, 0, 1], ref[:, 0, 1]).pvalue > 1e-3 / 2


def test_shared_cov_normal_is_mvnormal_and_its_gradient_is_not_batched():
    """Rows N(μ_g, Σ): log density and its gradient in Σ equal pm.MvNormal's at random points
    (3 rows and one vector), draws match in mean and covariance (4 000 rows, within 5 standard
    errors); the gradient in an InverseWishart Σ (the level models' prior of the level means)
    factors Σ itself, where pm.MvNormal's factors it broadcast to the rows, a batched linear
    algebra whose gradient PyTensor builds with the static shapes of the whole model folded
    (1-2 s of each pm.sample's gradient probes in the level models)."""
    rng = np.random.default_rng(12)
    cov = pt.dmatrix("cov")
    cov_value = np.array([[0.8, 0.3], [0.3, 0.5]])
    for mu in (rng.normal(size=(3, 2)), rng.normal(size=2)):
        value = rng.normal(size=mu.shape)
        ours = pm.logp(SharedCovNormal.dist(mu, pt.specify_shape(cov, (2, 2))), value)
        theirs = pm.logp(pm.MvNormal.dist(mu, cov), value)
        grads = [pytensor.grad(lp.sum(), cov) for lp in (ours, theirs)]
        got = pytensor.function([cov], [ours, theirs, *grads])(cov_value)
        np.testing.assert_allclose(got[0], got[1], rtol=1e-12)
        np.testing.assert_allclose(got[2], got[3], rtol=1e-10)
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])
    bad = pm.logp(SharedCovNormal.dist(np.zeros(2), not_pd), np.zeros(2)).eval()
    assert bad == -np.inf
    mu = np.array([[1.0, -1.0], [0.0, 2.0]])
    draws = pm.draw(SharedCovNormal.dist(mu, cov_value), draws=4000, random_seed=3)
    assert draws.shape == (4000, 2, 2)
    se = np.sqrt(np.diag(cov_value) / 4000)
    assert np.all(np.abs(draws.mean(axis=0) - mu) < 5 * se)
    for row in range(2):
        np.testing.assert_allclose(np.cov(draws[:, row].T), cov_value, atol=0.05)
    with pytest.raises(ValueError, match="one matrix of a static size"):
        SharedCovNormal.dist(np.zeros(2), pt.dmatrix("free"))

    def factored(prior):
        """The dimensions of every matrix a Blockwise linear algebra gradient factors."""
        coords = {"level": ["a", "b", "c"], "x": ["u", "v"], "x_bis": ["u", "v"]}
        with pm.Model(coords=coords) as model:
            x_cov = InverseWishart("x_cov", dof=6.0, scale=np.eye(2), dims=("x", "x_bis"))
            prior("x_loc", mu=np.zeros((3, 2)), cov=x_cov / 2.0, dims=("level", "x"))
        found = []
        # PyTensor 3 calls an Op's pullback, PyTensor 2 its L_op.
        name = "pullback" if "pullback" in vars(Blockwise) else "L_op"
        original = getattr(Blockwise, name)

        def spy(self, inputs, outputs, output_grads):
            found.append(inputs[0].type.ndim)
            return original(self, inputs, outputs, output_grads)

        with patch.object(Blockwise, name, spy):
            pytensor.grad(model.logp(), model.value_vars[0])
        return found

    found = factored(SharedCovNormal)
    assert found and set(found) == {2}  # Cholesky, solves: matrices, never a batch of them


# ---- posteriors --------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2])
def test_huge_epsilon_matches_the_exact_non_private_posterior(d):
    """ε = 10⁴, n = 200: pm.sample (2 chains × 1000 after 200) draws of every θ_j and σ² vs iid
    draws of the exact non-private NIG posterior: two-sample KS on ESS-thinned draws at
    α = 0.001 / (d + 2), means within 0.1 sd, sds within 10 %."""
    rng = np.random.default_rng(200 + d)
    x, y = _data(rng, 200, d)
    rel = _release(x, y, 1e4, rng)
    post = posterior_dataset(_sample(_model(rel), draws=1000, tune=200, chains=2, random_seed=d))
    ex_theta, ex_sigma2 = draw_nig(
        np.random.default_rng(3),
        nonprivate_regression_posterior(x, y, prior=_prior(d)),
        size=(4000,),
    )
    theta = post["theta"].values
    for j in range(d + 1):
        _assert_matches(theta[..., j], ex_theta[:, j], 1e-3 / (d + 2))
    _assert_matches(post["sigma2"].values, ex_sigma2, 1e-3 / (d + 2))


def test_pymc_path_agrees_with_the_numpy_sampler_at_moderate_epsilon(release_d1):
    """ε = 1 (0.8 on the statistic, Δ = 26.33), n = 200, Gibbs-SS-Noisy: pm.sample (4 chains × 1000
    after 300) and sample_gibbs_ss (8 chains × 1000 after 300) on the same release, prior and
    noisy moments: two-sample KS on ESS-thinned draws of θ_0, θ_1, σ² at α = 0.001 each."""
    _, _, rel = release_d1
    model = _model(rel, method="gibbs-ss")
    post = posterior_dataset(_sample(model, draws=1000, tune=300, chains=4, random_seed=21))
    tr = sample_gibbs_ss(
        22,
        released=rel.value[None],
        n=rel.n,
        scale=rel.scale,
        prior=_prior(1),
        x_moments=x_moments_from_release(rel),
        draws=1000,
        tune=300,
        chains=8,
    )
    _assert_agree(post, tr, x_model=False)


def test_pymc_update_path_agrees_with_the_numpy_sampler_at_moderate_epsilon():
    """Gibbs-SS-Update, d = 1, ε = 2 all on the statistic (box x ∈ [-2, 2], y ∈ [-4, 4]),
    n = 300, x ~ N(0.2, 0.1): pm.sample (4 chains × 1000 after 300) and sample_gibbs_ss with
    x_prior (8 chains × 1000 after 300): two-sample KS on ESS-thinned draws of θ_0, θ_1, σ²,
    μ_x, σ_x² at α = 0.001 each."""
    rng = np.random.default_rng(71)
    x_prior = NIW(np.zeros(1), np.array(4.0), np.array(20.0), np.array([[1.8]]))
    x = rng.normal(0.2, np.sqrt(0.1), size=(300, 1))
    theta0, sigma20 = draw_nig(rng, _prior(1))
    y = theta0[0] + theta0[1] * x[:, 0] + np.sqrt(sigma20) * rng.standard_normal(300)
    rel = release_regression(
        x, y, x_bounds=[(-2.0, 2.0)], y_bounds=(-4.0, 4.0), epsilon=2.0, rng=rng
    )
    model = _model(rel, x_prior=x_prior, method="gibbs-ss")
    post = posterior_dataset(_sample(model, draws=1000, tune=300, chains=4, random_seed=72))
    tr = sample_gibbs_ss(
        73,
        released=rel.value[None],
        n=rel.n,
        scale=rel.scale,
        prior=_prior(1),
        x_prior=x_prior,
        draws=1000,
        tune=300,
        chains=8,
    )
    _assert_agree(post, tr, x_model=True)


@pytest.mark.slow
def test_default_pymc_path_agrees_with_the_batched_sampler_at_moderate_epsilon(release_d1):
    """The default model (exact law of s, box prior of x), ε = 1, n = 200: pm.sample (4 chains ×
    1000 after 500) and sample_regression (8 chains × 1000 after 500) on the same release and
    priors: two-sample KS on ESS-thinned draws of θ_0, θ_1, σ², μ_x, σ_x² at α = 0.001 each."""
    _, _, rel = release_d1
    model = _model(rel)
    post = posterior_dataset(_sample(model, draws=1000, tune=500, chains=4, random_seed=23))
    tr = sample_regression(
        24,
        released=rel.value[None],
        n=rel.n,
        scale=rel.scale,
        prior=_prior(1),
        x_prior=default_x_prior(rel.x_bounds),
        draws=1000,
        tune=500,
        chains=8,
    )
    _assert_agree(post, tr, x_model=True)


@pytest.mark.parametrize("method", ["gibbs-ss", "collapsed"])
def test_normal_model_of_x_matches_the_exact_posteriors_at_huge_epsilon(method):
    """Gibbs-SS-Update and the default sampler, d = 2, ε = 10⁴ (all on the statistic), n = 200,
    x ~ N(μ_x, Σ_x) inside the box: pm.sample (2 chains × 1000 after 200) draws of θ, σ², μ_x
    and diag Σ_x vs iid draws of the exact non-private NIG and NIW posteriors, KS on
    ESS-thinned draws at α = 0.001 / 7, means within 0.1 sd, sds within 10 %."""
    rng = np.random.default_rng(31)
    x_prior = NIW(np.zeros(2), np.array(4.0), np.array(20.0), 1.8 * np.eye(2))
    n, d = 200, 2
    x = rng.multivariate_normal([0.1, -0.1], [[0.1, 0.03], [0.03, 0.08]], size=n)
    theta0, sigma20 = draw_nig(rng, _prior(d))
    y = theta0[0] + x @ theta0[1:] + np.sqrt(sigma20) * rng.standard_normal(n)
    rel = release_regression(
        x, y, x_bounds=[(-2.0, 2.0)] * 2, y_bounds=(-4.0, 4.0), epsilon=1e4, rng=rng
    )
    model = _model(rel, x_prior=x_prior, method=method)
    post = posterior_dataset(_sample(model, draws=1000, tune=200, chains=2, random_seed=32))
    ex_rng = np.random.default_rng(33)
    ex_theta, ex_sigma2 = draw_nig(
        ex_rng, nonprivate_regression_posterior(x, y, prior=_prior(d)), size=(4000,)
    )
    ex_loc, ex_cov = draw_niw(
        ex_rng, niw_update(x_prior, statistic=regression_statistic(x, y), n=n), size=(4000,)
    )
    pairs = [(post["theta"].values[..., j], ex_theta[:, j]) for j in range(3)]
    pairs += [(post["sigma2"].values, ex_sigma2)]
    pairs += [(post["z_x_loc"].values[..., 0], ex_loc[:, 0])]
    pairs += [(post["z_x_cov"].values[..., j, j], ex_cov[:, j, j]) for j in range(2)]
    for ours, iid in pairs:
        _assert_matches(ours, iid, 1e-3 / 7)


# ---- predictive ----------------------------------------------------------------------------------


def test_posterior_predictive_of_the_release_and_at_new_covariates():
    """Released-statistic predictive from pm.sample_posterior_predictive: shape (chain, draw, m)
    with the statistic's coordinates, centred on the latent s. New-x predictive at ε = 10⁴, n =
    400: coverage of the 50 % and 90 % intervals on 2000 fresh records within 4 binomial SE."""
    rng = np.random.default_rng(41)
    x, y = _data(rng, 2400, 1)
    rel = _release(x[:400], y[:400], 1e4, rng)
    model = _model(rel)
    idata = _sample(model, draws=500, tune=100, chains=2, random_seed=42)
    with model, warnings.catch_warnings():
        # The mixing variances depend on z's value, not on the node z: nothing is implicitly
        # frozen when z is redrawn (PyMC 6 would warn).
        warnings.filterwarnings("error", message=".*implicitly frozen.*")
        pp = pm.sample_posterior_predictive(idata, random_seed=43, progressbar=False)
    z = pp["posterior_predictive"]["z"]
    assert z.dims == ("chain", "draw", "z_stat") and z.shape == (2, 500, 5)
    s = posterior_dataset(idata)["z_s"].values
    resid = z.values - s
    assert abs(resid.std() / (np.sqrt(2) * rel.scale) - 1) < 0.05  # Laplace sd is √2 b

    y_new = posterior_predictive(idata, x[400:], rng=44)
    assert y_new.dims == ("chain", "draw", "x_new") and y_new.shape == (2, 500, 2000)
    hits = predictive_coverage(y_new.values, y[400:], (0.5, 0.9))
    for level, hit in zip((0.5, 0.9), hits, strict=True):
        assert abs(hit.mean() - level) < 4 * np.sqrt(level * (1 - level) / 2000)
    with pytest.raises(KeyError, match="no variable 'beta'"):
        posterior_predictive(idata, x[400:], theta="beta")
    with pytest.raises(ValueError, match="x_new must have shape"):
        posterior_predictive(idata, np.zeros((3, 2)))


# ---- JSON ----------------------------------------------------------------------------------


def test_regression_release_json_round_trip(release_d1):
    _, _, rel = release_d1
    back = RegressionRelease.from_json(rel.to_json())
    for field in ("n", "epsilon", "sensitivity", "x_bounds", "y_bounds", "total_epsilon"):
        assert getattr(back, field) == getattr(rel, field)
    np.testing.assert_array_equal(back.value, rel.value)
    assert rel.second_moments is None and back.second_moments is None
    for key in ("fourth_moments",):
        a, b = getattr(rel, key), getattr(back, key)
        np.testing.assert_array_equal(a.value, b.value)
        np.testing.assert_array_equal(a.powers, b.powers)
        assert (a.epsilon, a.sensitivity) == (b.epsilon, b.sensitivity)
    plain = RegressionRelease(
        value=rel.value,
        n=rel.n,
        epsilon=1.0,
        sensitivity=35.0,
        x_bounds=[(-1, 1)],
        y_bounds=(-4, 4),
    )
    assert RegressionRelease.from_json(plain.to_json()).second_moments is None
    # A node built from the file is the node built from the release.
    point = _model(rel).initial_point(random_seed=1)
    np.testing.assert_allclose(
        _model(rel).compile_logp(mode="FAST_COMPILE")(point),
        _model(back).compile_logp(mode="FAST_COMPILE")(point),
    )


@pytest.mark.parametrize(
    ("edit", "error", "match"),
    [
        (lambda d: d.pop("n"), ValueError, "needs the fields"),
        (lambda d: d.update(extra=1), ValueError, "needs the fields"),
        (lambda d: d.update(format_version=99), ValueError, "format_version"),
        (lambda d: d.update(kind="exponential_family"), ValueError, "not a regression release"),
        (lambda d: d.update(sensitivity=1.0), ValueError, "sensitivity must be >="),
        (lambda d: d["fourth_moments"].pop("powers"), ValueError, "moment release needs"),
    ],
)
def test_regression_release_from_dict_rejects_bad_files(release_d1, edit, error, match):
    data = release_d1[2].to_dict()
    edit(data)
    with pytest.raises(error, match=match):
        RegressionRelease.from_dict(data)


def test_moment_release_dict_round_trip():
    mom = MomentRelease(value=[1.0, 2.0], powers=[[1], [2]], epsilon=0.1, sensitivity=2.0)
    back = MomentRelease.from_dict(mom.to_dict())
    np.testing.assert_array_equal(back.value, mom.value)
    np.testing.assert_array_equal(back.powers, mom.powers)


# ---- bad inputs ----------------------------------------------------------------------------


def _node(rel, theta_fn, sigma2_fn=None, **kwargs):
    with pm.Model():
        sigma2 = (sigma2_fn or (lambda: pm.InverseGamma("sigma2", 2.0, 1.0)))()
        theta = theta_fn(sigma2)
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)


def _mv(p=2, scale=1.0):
    return lambda s2: pm.MvNormal("theta", np.zeros(p), cov=scale * s2 * np.eye(p))


@pytest.mark.parametrize(
    ("theta_fn", "sigma2_fn", "match"),
    [
        (lambda s2: pm.MvNormal("theta", np.zeros(2), cov=np.eye(2)), None, "sigma2 times"),
        (
            lambda s2: pm.Normal("theta", 0, sigma=s2, shape=2),
            None,
            "not proportional to sigma2",
        ),
        (_mv(), lambda: pm.HalfNormal("sigma2", 1.0), "sigma2 is a HalfNormalRV"),
        (lambda s2: pm.Laplace("theta", 0, 1, shape=2), None, "theta is a LaplaceRV"),
        (
            lambda s2: pm.MvNormal(
                "theta", np.zeros(2), cov=s2 * pm.HalfNormal("g", 1.0) * np.eye(2)
            ),
            None,
            "depend on no other random variable",
        ),
        (
            lambda s2: pm.MvNormal("theta", s2 * np.ones(2), cov=s2 * np.eye(2)),
            None,
            "mean must not depend on sigma2",
        ),
        (_mv(p=3), None, r"theta has 3 coefficients but the release is for d=1.*needs d \+ 1 = 2"),
    ],
)
def test_non_nig_priors_and_wrong_lengths_are_rejected(release_d1, theta_fn, sigma2_fn, match):
    with pytest.raises(ValueError, match=match):
        _node(release_d1[2], theta_fn, sigma2_fn)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(release="z.json"), TypeError, "release must be a pymc_dp.regression.Regression"),
        (dict(n=200), TypeError, r"pass either release= or \['n'\]"),
        (dict(release=None, n=200, epsilon=1.0), TypeError, r"missing \['sensitivity', 'obs"),
        (
            dict(release=None, n=200, epsilon=1.0, sensitivity=35.0, observed=np.ones(4)),
            ValueError,
            "observed: a regression statistic has",
        ),
        (
            dict(
                release=None,
                n=200,
                epsilon=1.0,
                sensitivity=1.0,
                observed=np.ones(5),
                bounds=([(-1, 1)], (-4, 4)),
                x_moments=normal_x_moments([0.0], [[1.0]]),
            ),
            ValueError,
            "sensitivity must be >=",
        ),
        (
            dict(
                release=None,
                n=200,
                epsilon=1.0,
                sensitivity=35.0,
                observed=np.ones(5),
                method="gibbs-ss",
            ),
            TypeError,
            "the moments of x are needed",
        ),
        (
            dict(release=None, n=200, epsilon=1.0, sensitivity=35.0, observed=np.ones(5)),
            TypeError,
            "needs a prior: give x_prior",
        ),
        (dict(method="nuts"), ValueError, "method must be one of"),
        (
            dict(method="collapsed", x_moments=normal_x_moments([0.0], [[1.0]])),
            TypeError,
            "method='collapsed' models x as normal",
        ),
        (
            dict(x_moments=normal_x_moments([0.0, 0.0], np.eye(2))),
            ValueError,
            r"x_moments must be for d=1",
        ),
        (dict(x_moments=(1, 2)), TypeError, "x_moments must be an XMoments"),
        (
            dict(x_prior=NIW(np.zeros(2), np.array(1.0), np.array(5.0), np.eye(2))),
            ValueError,
            "x_prior must be an unbatched NIW for d=1",
        ),
        (
            dict(
                x_prior=NIW(np.zeros(1), np.array(1.0), np.array(5.0), np.eye(1)),
                x_moments=normal_x_moments([0.0], [[1.0]]),
            ),
            TypeError,
            "not both",
        ),
        (dict(covariates=["a", "b"]), ValueError, "covariates must be 1 distinct names"),
        (dict(name=""), TypeError, "name must be a non-empty string"),
    ],
)
def test_bad_arguments_are_rejected_with_their_name(release_d1, kwargs, error, match):
    kwargs = {"release": release_d1[2], **kwargs}
    name = kwargs.pop("name", "z")
    with pm.Model(), pytest.raises(error, match=match):
        sigma2 = pm.InverseGamma("sigma2", 2.0, 1.0)
        theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * np.eye(2))
        NoisyRegressionStat(name, theta=theta, sigma2=sigma2, **kwargs)


@pytest.mark.parametrize("method", ["gibbs-ss", "collapsed"])
def test_theta_used_elsewhere_is_refused_by_the_steps(release_d1, method):
    model = _model(release_d1[2], method=method)
    step = RegressionConjugateStep if method == "gibbs-ss" else RegressionCollapsedStep
    with model:
        pm.Normal("extra", model["theta"][0], 1.0, observed=0.5)
        with pytest.raises(ValueError, match=r"'theta' is also used by \['extra'\]"):
            step()


def test_nodes_of_one_theta_need_one_method(release_d1):
    rel = release_d1[2]
    with pm.Model(), pytest.raises(ValueError, match="need the same method"):
        sigma2 = pm.InverseGamma("sigma2", alpha=A, beta=B)
        theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * V * np.eye(2))
        NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=rel)
        NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rel, method="gibbs-ss")


def test_wrong_release_type_from_the_exponential_family_api(release_d1):
    rel = pmdp.release(np.ones(10), pm.Bernoulli, epsilon=1.0, rng=0)
    with pytest.raises(TypeError, match=r"pmdp\.NoisySuffStat"):
        _node(rel, _mv())
    assert isinstance(x_moments_from_release(release_d1[2]), XMoments)


# ---- step methods in isolation -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["gibbs-ss", "collapsed"])
def test_every_step_replays_from_its_sampling_state(release_d1, method):
    x_prior = NIW(np.zeros(1), np.array(1.0), np.array(5.0), np.eye(1))
    model = _model(release_d1[2], x_prior=x_prior, method=method)
    point = model.initial_point(random_seed=4)
    steps = (
        (RegressionSuffStatStep, RegressionConjugateStep, CovariateModelStep)
        if method == "gibbs-ss"
        else (RegressionCollapsedStep,)
    )
    with model:
        for cls in (*steps, RegressionNoiseVarianceStep):
            step = cls(rng=np.random.default_rng(5))
            state = step.sampling_state
            first, _ = step.step(point)
            step.sampling_state = state
            again, _ = step.step(point)
            moved = [k for k in first if not np.array_equal(first[k], point[k])]
            assert moved and sorted(moved) == sorted(v.name for v in step.vars)
            for key in first:
                np.testing.assert_array_equal(first[key], again[key])


def test_theta_shared_by_two_releases_conditions_on_both_statistics():
    """The conjugate step's draw equals draw_nig (same generator state) from the NIG posterior
    given the sum of the two nodes' statistics and record counts."""
    rng = np.random.default_rng(61)
    x, y = _data(rng, 300, 1)
    rels = [_release(x[:100], y[:100], 1.0, rng), _release(x[100:], y[100:], 1.0, rng)]
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=A, beta=B)
        theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * V * np.eye(2))
        NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=rels[0], method="gibbs-ss")
        NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rels[1], method="gibbs-ss")
        step = RegressionConjugateStep(rng=np.random.default_rng(62))
    point = model.initial_point(random_seed=63)
    new, _ = step.step(point)
    post = nig_update(_prior(1), statistic=point["a_s"] + point["b_s"], n=300)
    theta, sigma2 = draw_nig(np.random.default_rng(62), post)
    np.testing.assert_allclose(new["theta"], theta, rtol=1e-9)
    np.testing.assert_allclose(np.exp(new["sigma2_log__"]), sigma2, rtol=1e-9)


def test_inverse_wishart_size_is_the_whole_batch_shape():
    """PyTensor's size includes the parameters' batch shape; it is not prepended to it."""
    draw = pm.draw(InverseWishart.dist(dof=[5.0, 6.0], scale=np.eye(1), size=(2,)), random_seed=0)
    assert draw.shape == (2, 1, 1)
    assert pm.draw(InverseWishart.dist(dof=5.0, scale=np.eye(2), size=(3,))).shape == (3, 2, 2)


@pytest.mark.parametrize(
    ("theta", "sigma2", "match"),
    [
        (np.array([[np.nan, 1.0]]), np.ones(1), "theta must be finite"),
        (np.zeros((1, 2)), np.array([np.nan]), "sigma2 must be finite and > 0"),
        (np.zeros((1, 2)), np.zeros(1), "sigma2 must be finite and > 0"),
    ],
)
def test_predictive_draws_reject_non_finite_draws(theta, sigma2, match):
    with pytest.raises(ValueError, match=match):
        predictive_draws(0, theta=theta, sigma2=sigma2, x_new=[0.5])
