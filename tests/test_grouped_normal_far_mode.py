"""NUTS on the grouped Normal window's default model stays where the records are.

A window's sums (Σx, Σx²) with n public can also be explained by σ_g several windows wide, the
few records inside the window making up the noisy sums. Under the earlier default prior
ν ~ N(log(w/4), 1), started at the prior's centre, one NUTS chain of two settled there in most
seeds (50 groups whose records fill a sixth of the window, ε = 1). The default prior
ν ~ N(log(w/8), 0.75) and a start at the released estimates keep both chains at the records'
σ.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.initial_point import make_initial_point_fn

import pymc_dp as pmdp

WINDOW = (-12.0, 14.0)  # the population mean ± 6 sd of a record, as benchmarks/grouped_speed.py
GROUPS = 50


def _release(seed: int) -> pmdp.ReleaseSet:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 501, size=GROUPS)
    keys = [f"g{g}" for g in range(GROUPS)]
    mu_g = 1.0 + rng.normal(size=GROUPS)
    sigma_g = np.exp(np.log(2.0) + 0.2 * rng.normal(size=GROUPS))
    x = rng.normal(np.repeat(mu_g, sizes), np.repeat(sigma_g, sizes))
    return pmdp.release_grouped(
        x, pm.Normal, by=np.repeat(keys, sizes), groups=keys, sizes="public", bounds=WINDOW,
        epsilon=1.0, rng=seed + 1,
    )  # fmt: skip


def _chain_means(model: pm.Model, seed: int) -> np.ndarray:
    """Each chain's mean of ν = log_sigma, 2 chains × (300 + 300)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with model:
            idata = pm.sample(
                300, tune=300, chains=2, cores=1, random_seed=[seed, seed + 7],
                progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
    return idata.posterior["log_sigma"].mean("draw").values


@pytest.mark.slow
def test_default_chains_stay_at_the_records_sigma_where_the_earlier_prior_split_them():
    from pymc_dp.model.hierarchical import GROUPED_LINKS, build_grouped_model

    release = _release(3)
    for seed in (0, 1):
        means = _chain_means(build_grouped_model(release), seed)
        np.testing.assert_allclose(means, np.log(2.0), atol=0.3)
    # The check can fail: the earlier prior, started at its centre and sampled on PyMC's own
    # coordinates (as before 2026-12-06; in the release's units it no longer splits them),
    # splits the chains.
    from pymc.distributions.transforms import log
    from pymc.model.transform.conditioning import change_value_transforms

    earlier = {"log_sigma_mean": float(np.log(26.0 / 4.0)), "log_sigma_sd": 1.0}
    model = change_value_transforms(
        build_grouped_model(release, prior=earlier),
        {"mu": None, "tau": log, "log_sigma": None, "tau_sigma": log},
    )
    link = GROUPED_LINKS["location-scale"]
    values = link.defaults(release.first.get_family(), release)
    model.set_initval(model["mu"], values["mu_mean"])  # PyMC's own start: the priors' centres
    model.set_initval(model["log_sigma"], earlier["log_sigma_mean"])
    trapped = [np.max(_chain_means(model, seed)) > 3.0 for seed in (0, 1, 2)]
    assert any(trapped)


def test_the_start_is_the_released_medians_kept_inside_the_window():
    from pymc_dp.model.hierarchical import GROUPED_LINKS, build_grouped_model

    release = _release(3)
    link, family = GROUPED_LINKS["location-scale"], release.first.get_family()
    value = np.asarray(release.value).reshape(GROUPS, 2)
    mean = value[:, 0] / release.n
    var = np.maximum(value[:, 1] / release.n - mean**2, (26.0 / 20.0) ** 2)
    expected = (np.median(mean), np.median(0.5 * np.log(var)))
    np.testing.assert_allclose(link.released_start(family, release), expected, rtol=1e-12)
    start = make_initial_point_fn(model=build_grouped_model(release), return_transformed=False)(0)
    np.testing.assert_allclose([start["mu"], start["log_sigma"]], expected, rtol=1e-12)
    # Noise a thousand times wider: the medians can lie outside the window; the start cannot.
    rng = np.random.default_rng(4)
    sizes = np.full(GROUPS, 20)
    keys = [f"g{g}" for g in range(GROUPS)]
    wide = pmdp.release_grouped(
        rng.normal(1.0, 2.0, size=sizes.sum()), pm.Normal, by=np.repeat(keys, sizes),
        groups=keys, sizes="public", bounds=WINDOW, epsilon=1e-3, rng=5,
    )  # fmt: skip
    mu, log_sigma = link.released_start(family, wide)
    assert mu == 14.0  # the medians put μ at 232
    reach = np.log(26.0 / 8.0) + np.array([-1.5, 1.5])  # 2 sd of the default prior of ν
    assert reach[0] <= log_sigma <= reach[1]
    # The bounds follow the prior in use, not the default's.
    values = dict(link.defaults(family, wide), log_sigma_mean=-3.0, log_sigma_sd=0.1)
    assert link.released_start(family, wide, values)[1] == pytest.approx(-2.8)


def test_the_spreads_start_at_their_released_estimates_within_the_prior():
    # τ and τ_σ started at the prior's scale (τ = w/4 = 6.5, six times the truth here); with
    # the jitter of every z_g that spread the groups over ±6.5 and put some in the far mode.
    from pymc_dp.model.hierarchical import GROUPED_LINKS, build_grouped_model

    release = _release(3)  # records' μ_g ~ N(1, 1²), log σ_g ~ N(log 2, 0.2²)
    link, family = GROUPED_LINKS["location-scale"], release.first.get_family()
    values = link.defaults(family, release)
    tau, tau_sigma = link.released_spreads(family, release, values)
    assert 0.5 < tau < 2.0
    assert values["tau_sigma_sd"] / 10.0 <= tau_sigma < 0.4
    start = make_initial_point_fn(model=build_grouped_model(release), return_transformed=False)(0)
    np.testing.assert_allclose([start["tau"], start["tau_sigma"]], [tau, tau_sigma], rtol=1e-12)
    # Kept within [a tenth, twice] the prior's scale whatever the estimate.
    narrow = dict(values, tau_sd=0.01, tau_sigma_sd=10.0)
    tau, tau_sigma = link.released_spreads(family, release, narrow)
    assert tau == pytest.approx(0.02) and tau_sigma == pytest.approx(1.0)
    assert link.released_spreads(family, None, values) == (None, None)
