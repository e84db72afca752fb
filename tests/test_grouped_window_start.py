"""A windowed scalar family's grouped model starts μ and τ at the released values.

A Poisson window's sum is also explained by λ_g above the window, whose few records inside
make up the same sum. With sums alone (no counts), PyMC's and nutpie's start (μ at its prior's
centre, τ at its prior's scale, every z_g jittered by up to ±1) put one nutpie chain of two
there at 50 groups, where PyMC's chains are freed by the group jumps
(:func:`~pymc_dp.model.hierarchical.window_start`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.initial_point import make_initial_point_fn

import pymc_dp as pmdp
from pymc_dp.model.hierarchical import (
    GROUPED_LINKS,
    between_group_variance,
    build_grouped_model,
    released_scales,
    window_start,
)

GROUPS = 50


def _release(epsilon: float, seed: int = 0, family: str = "poisson") -> pmdp.ReleaseSet:
    """50 groups of 50–500 records, λ_g = exp(log 5 + 0.3 z_g), as benchmarks/grouped_speed.py."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 501, size=GROUPS)
    keys = [f"g{g:03d}" for g in range(GROUPS)]
    theta = np.log(5.0) + 0.3 * rng.normal(size=GROUPS)
    if family == "poisson":
        x = rng.poisson(np.repeat(np.exp(theta), sizes))
        settings = {"bounds": (0.0, 40.0)}
        dist = pm.Poisson
    else:
        x = rng.binomial(3, np.repeat(1.0 / (1.0 + np.exp(-theta + 1.6)), sizes))
        settings = {"trials": 3}
        dist = pm.Binomial
    return pmdp.release_grouped(
        x, dist, by=np.repeat(keys, sizes), groups=keys, sizes="public", epsilon=epsilon,
        rng=seed + 1, **settings,
    )  # fmt: skip


def test_the_start_is_the_released_median_and_spread_within_the_prior():
    release = _release(1.0)
    link, family = GROUPED_LINKS["log"], release.first.get_family()
    values = link.defaults(family, release)
    estimate, information = link.information(family, release)
    tau = np.sqrt(float(between_group_variance(estimate, information)))
    expected = (np.median(estimate), np.clip(tau, values["tau_sd"] / 10, 2 * values["tau_sd"]))
    np.testing.assert_allclose(window_start(estimate, information, values), expected, rtol=1e-12)
    start = make_initial_point_fn(model=build_grouped_model(release), return_transformed=False)(0)
    np.testing.assert_allclose([start["mu"], start["tau"]], expected, rtol=1e-12)
    assert abs(expected[0] - np.log(5.0)) < 0.1  # the records' own population mean
    # Noise a thousand times wider: the median can lie anywhere; the start stays within 2 sd.
    wide = _release(1e-3)
    mu, tau = window_start(*link.information(family, wide), values)
    assert abs(mu - values["mu_mean"]) <= 2 * values["mu_sd"]
    assert values["tau_sd"] / 10 <= tau <= 2 * values["tau_sd"]


def test_a_family_without_a_window_keeps_pymcs_start():
    release = _release(1.0, family="binomial")
    model = build_grouped_model(release)
    values = GROUPED_LINKS["logit"].defaults(release.first.get_family(), release)
    start = model.initial_point()
    assert isinstance(model["mu"].owner.op, type(pm.Normal.dist(0.0, 1.0).owner.op))
    np.testing.assert_allclose(
        [start["mu"], np.exp(start["tau_log__"])], [values["mu_mean"], values["tau_sd"]]
    )  # PyMC's own value variables: no start, no scale


@pytest.mark.parametrize("family", ["poisson", "binomial"])
def test_pymcs_model_transforms_take_the_model_and_keep_its_start(family):
    """The start is the support point of μ and τ, not an initial value, which PyMC's model
    transforms (pm.do, copy, freeze_dims_and_data: nutpie's JAX backend) refuse."""
    from pymc.model.transform.optimization import freeze_dims_and_data

    model = build_grouped_model(_release(1.0, family=family))
    assert all(value is None for value in model.rvs_to_initial_values.values())
    point = model.initial_point()
    logp = model.compile_logp()(point)
    for changed in (freeze_dims_and_data(model), model.copy()):
        start = changed.initial_point()
        assert start.keys() == point.keys()
        for name in point:
            np.testing.assert_array_equal(start[name], point[name])
        np.testing.assert_allclose(changed.compile_logp()(point), logp, rtol=1e-12)
    fixed = pm.do(model, {"tau": 0.5})
    assert not any(name.startswith("tau_") for name in fixed.initial_point())


def test_the_population_is_sampled_in_released_units_with_the_same_posterior():
    """μ and log τ are the sampler's (x − start)/scale (scales from released_scales): they
    start at 0, and the density is the plain model's plus the constant log-Jacobian, so the
    posterior is the same."""
    from pymc.model.transform.conditioning import remove_value_transforms

    release = _release(1.0)
    model = build_grouped_model(release)
    link, family = GROUPED_LINKS["log"], release.first.get_family()
    values = link.defaults(family, release)
    estimate, information = link.information(family, release)
    mu0, tau0 = window_start(estimate, information, values)
    s_mu, s_tau = released_scales(estimate, information, tau0, values["mu_sd"])
    assert 0.0 < s_mu < values["mu_sd"] and 0.0 < s_tau <= 1.0
    start = model.initial_point()
    assert set(start) == {"mu_standardised__", "tau_chain__", "z"}
    assert start["mu_standardised__"] == 0.0 and start["tau_chain__"] == 0.0
    new, plain = model.compile_logp(), remove_value_transforms(model).compile_logp()
    rng = np.random.default_rng(3)
    for _ in range(5):
        u, v, z = rng.normal(), rng.normal(), rng.normal(size=GROUPS)
        log_tau = np.log(tau0) + s_tau * v
        point = {"mu": mu0 + s_mu * u, "tau": np.exp(log_tau), "z": z}
        jacobian = np.log(s_mu) + log_tau + np.log(s_tau)  # dμ/du, dτ/dv = τ s_τ
        got = new({"mu_standardised__": u, "tau_chain__": v, "z": z})
        np.testing.assert_allclose(got, plain(point) + jacobian, rtol=1e-12)


def test_the_released_scales_are_the_spreads_of_the_population_estimates():
    """On estimates e_g ~ N(μ, τ² + 1/I_g) of 500 groups: the sd of μ̂ and of log τ̂ (maximum
    likelihood, 400 data sets) is released_scales' within 10 % (Monte Carlo sd of an sd about
    3.5 %); wider than the prior, a scale is the prior's."""
    from scipy import optimize

    rng = np.random.default_rng(5)
    info = 1.0 / rng.uniform(0.005, 0.05, size=500)
    mu, tau = 1.6, 0.34
    fits = []
    for _ in range(400):
        e = mu + rng.normal(size=500) * np.sqrt(tau**2 + 1.0 / info)

        def nll(x, e=e):
            var = np.exp(2.0 * x[1]) + 1.0 / info
            return 0.5 * np.sum(np.log(var) + (e - x[0]) ** 2 / var)

        fits.append(optimize.minimize(nll, [mu, np.log(tau)], method="BFGS").x)
    spread = np.std(fits, axis=0)
    np.testing.assert_allclose(released_scales(e, info, tau, 1.0), spread, rtol=0.1)
    assert released_scales(e[:2], info[:2] * 1e-6, tau, 0.5) == (0.5, 1.0)


@pytest.mark.slow
def test_nutpie_chains_agree_where_the_prior_centre_start_traps_one():
    """nutpie, 2 chains × (500 + 500), seeds 0 and 1: each chain's mean of μ within 0.1 of
    log 5 (posterior sd about 0.04); from PyMC's default start one chain goes to the far mode."""
    pytest.importorskip("nutpie")
    release = _release(1.0)

    def chain_means(model: pm.Model, seed: int) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with model:
                idata = pm.sample(
                    500, tune=500, chains=2, nuts_sampler="nutpie", random_seed=seed,
                    progressbar=False, compute_convergence_checks=False,
                )  # fmt: skip
        return idata.posterior["mu"].mean("draw").values

    for seed in (0, 1):
        np.testing.assert_allclose(
            chain_means(build_grouped_model(release), seed), np.log(5.0), atol=0.1
        )
    # The check can fail: from the prior's centre one chain of two goes above the window.
    model = build_grouped_model(release)
    values = GROUPED_LINKS["log"].defaults(release.first.get_family(), release)
    model.set_initval(model["mu"], values["mu_mean"])  # PyMC's own start: μ's and τ's priors'
    model.set_initval(model["tau"], values["tau_sd"])
    trapped = [np.max(np.abs(chain_means(model, seed) - np.log(5.0))) > 0.5 for seed in (0, 1)]
    assert any(trapped)


def test_nutpies_jax_backend_samples_the_model_from_its_start():
    """nutpie's JAX backend freezes the model first (freeze_dims_and_data), which refused the
    initial values this start used to be; its chains now start at it (jittered by up to ±1
    in units of the released scales of μ and log τ) and stay with the records (μ near log 5)."""
    nutpie = pytest.importorskip("nutpie")
    pytest.importorskip("jax")
    model = build_grouped_model(_release(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
        trace = nutpie.sample(compiled, draws=100, tune=100, chains=1, seed=1, progress_bar=False)
    np.testing.assert_allclose(float(trace.posterior["mu"].mean()), np.log(5.0), atol=0.1)
