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

import pymc_dp as pmdp
from pymc_dp.model.hierarchical import (
    GROUPED_LINKS,
    between_group_variance,
    build_grouped_model,
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
    start = build_grouped_model(release).initial_point()
    np.testing.assert_allclose([start["mu"], np.exp(start["tau_log__"])], expected, rtol=1e-12)
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
    )


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
    assert "tau_log__" not in fixed.initial_point()


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
    on μ's and log τ's scales) and stay with the records (μ near log 5)."""
    nutpie = pytest.importorskip("nutpie")
    pytest.importorskip("jax")
    model = build_grouped_model(_release(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
        trace = nutpie.sample(compiled, draws=100, tune=100, chains=1, seed=1, progress_bar=False)
    np.testing.assert_allclose(float(trace.posterior["mu"].mean()), np.log(5.0), atol=0.1)
