"""MCMC-Ind (NUTS over latent records): model structure, and a run at moderate ε."""

import numpy as np
import pytest

from pymc_dp._compat import posterior_dataset
from pymc_dp.regression import NIG, NIW, regression_statistic, release_regression
from pymc_dp.regression.engine.gibbs_ss import sample_gibbs_ss
from pymc_dp.regression.model.mcmc_ind import mcmc_ind_model, sample_mcmc_ind

PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))
X_PRIOR = NIW(np.zeros(1), np.array(4.0), np.array(20.0), np.array([[1.8]]))


def _release(epsilon, seed=5, n=20, d=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.3, size=(n, d))
    y = 0.1 + x @ np.full(d, 0.5) + 0.3 * rng.standard_normal(n)
    rel = release_regression(
        x, y, x_bounds=[(-2, 2)] * d, y_bounds=(-3, 3), epsilon=epsilon, rng=rng
    )
    return rel, x, y


def test_model_statistic_is_the_records_exact_statistic_d2():
    rel, x, y = _release(1.0, d=2)
    prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0))
    x_prior = NIW(np.zeros(2), np.array(1.0), np.array(5.0), np.eye(2))
    model = mcmc_ind_model(rel, prior=prior, x_prior=x_prior)
    names = [v.name for v in model.free_RVs]
    assert names == [
        "sigma2",
        "theta",
        "x_precision_bartlett_diag",
        "x_precision_bartlett_offdiag",
        "x_loc",
        "x",
        "y",
    ]
    point = model.initial_point()
    point["x"], point["y"] = x, y
    fn = model.compile_fn(
        model["suffstat"], inputs=[model["x"], model["y"]], on_unused_input="ignore"
    )
    np.testing.assert_allclose(fn({"x": x, "y": y}), regression_statistic(x, y), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(release="z"), TypeError, "RegressionRelease"),
        (dict(truncate=True, d=2), ValueError, r"truncate=True needs d = 1"),
        (dict(prior=NIG(np.zeros(3), np.eye(3), 1.0, 1.0)), ValueError, "prior.mean must have 2"),
        (dict(x_prior=NIW(np.zeros((2, 1)), 1.0, 5.0, [[1.0]])), ValueError, "unbatched"),
    ],
)
def test_model_rejects_bad_arguments(kwargs, exc, match):
    d = kwargs.pop("d", 1)
    rel, _, _ = _release(1.0, d=d)
    args = dict(release=rel, prior=PRIOR, x_prior=X_PRIOR)
    if d == 2:
        args.update(
            prior=NIG(np.zeros(3), np.eye(3), 1.0, 1.0),
            x_prior=NIW(np.zeros(2), 1.0, 5.0, np.eye(2)),
        )
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        mcmc_ind_model(args.pop("release"), **args)


def test_truncated_model_keeps_records_in_the_box():
    rel, _, _ = _release(1.0)
    model = mcmc_ind_model(rel, prior=PRIOR, x_prior=X_PRIOR, truncate=True)
    assert model["x"].owner is not None and model.rvs_to_transforms[model["x"]] is not None
    assert np.isfinite(model.compile_logp()(model.initial_point()))


@pytest.mark.slow
@pytest.mark.xfail(
    reason="Borderline: on PyMC 6 (Python 3.12) θ_0's posterior mean of MCMC-Ind and "
    "Gibbs-SS-Update differ by 0.36 posterior sd (-0.014 vs -0.199, sd 0.51) against the 0.3 "
    "allowed, about 5 Monte Carlo standard errors, so the CLT at n = 20 rather than noise; it "
    "passes on PyMC 5. The exact small-n likelihood (issue 13) and the regression issue (17) "
    "address it.",
    strict=False,
)
def test_runs_at_moderate_epsilon_and_agrees_with_gibbs_ss_update():
    """n = 20, d = 1, ε = 1 (Δ = 24.33): NUTS (2 chains × 500 after 500) has no divergences and
    R̂ < 1.05; its posterior means of θ_0, θ_1, σ² are within 0.3 posterior sd of Gibbs-SS-Update
    (same model up to the CLT for s; 10 chains × 1000), and the sds agree within 30 %.
    Tolerances are loose because the CLT at n = 20 is itself an approximation and NUTS has
    only a few hundred effective draws."""
    import arviz as az

    rel, _, _ = _release(1.0)
    idata = sample_mcmc_ind(
        rel,
        prior=PRIOR,
        x_prior=X_PRIOR,
        draws=500,
        tune=500,
        chains=2,
        random_seed=3,
        cores=1,
        progressbar=False,
        compute_convergence_checks=False,
    )
    post = posterior_dataset(idata)
    assert int(np.asarray(idata["sample_stats"]["diverging"]).sum()) == 0
    rhat = az.rhat(post[["theta", "sigma2"]])
    assert float(rhat["theta"].max()) < 1.05 and float(rhat["sigma2"]) < 1.05
    tr = sample_gibbs_ss(
        4,
        released=rel.value[None],
        n=rel.n,
        scale=rel.scale,
        prior=PRIOR,
        x_prior=X_PRIOR,
        draws=1000,
        tune=300,
        chains=10,
    )
    pairs = [
        (np.asarray(post["theta"])[..., 0], tr.theta[:, :, 0, 0]),
        (np.asarray(post["theta"])[..., 1], tr.theta[:, :, 0, 1]),
        (np.asarray(post["sigma2"]), tr.sigma2[:, :, 0]),
    ]
    for nuts, gibbs in pairs:
        assert abs(nuts.mean() - gibbs.mean()) < 0.3 * gibbs.std()
        assert abs(nuts.std() / gibbs.std() - 1) < 0.3


@pytest.mark.parametrize("target_accept", [1.0, 1.5, 0.0])
def test_sampler_rejects_target_accept_outside_zero_one(target_accept):
    rel, _, _ = _release(1.0)
    with pytest.raises(ValueError, match="target_accept"):
        sample_mcmc_ind(rel, prior=PRIOR, x_prior=X_PRIOR, target_accept=target_accept)
