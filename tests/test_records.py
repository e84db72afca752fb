"""The record-level sampler: kernels, the interweaving sampler against exact posteriors, the
PyMC node and RecordStep, and the engine path."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.engine.records import sample_records
from pymc_dp.families import Exponential, LogNormal, Normal
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import (
    RecordLaw,
    lattice_for,
    lattice_log_likelihood,
    lattice_record_log_law,
)
from pymc_dp.kernels.records import slice_sample, sweep_records, window_statistic
from pymc_dp.likelihoods.choice import CltWarning
from pymc_dp.model.hierarchical import build_grouped_model
from pymc_dp.model.noisy_suffstat import release_attrs

NIG = (1.0, 1.0, 4.0, 3.0)
"""Normal–Inverse-Gamma prior (m, κ, α, β) of the Normal tests."""


def _nig_model(rel, likelihood="exact", family=pm.Normal, kappa=1.0):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", NIG[2], NIG[3])
        mu = pm.Normal("mu", NIG[0], sigma=pm.math.sqrt(sigma2 / kappa))
        pmdp.NoisySuffStat(
            "y", family.dist(mu, pm.math.sqrt(sigma2)), release=rel, likelihood=likelihood
        )
    return model


def test_slice_sampler_leaves_its_target_invariant():
    """4000 independent chains, 15 updates each from N(0, 1) starts, on a Gamma(3, 1) target
    of log x (log-density with its Jacobian): KS against the target."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    for _ in range(15):
        x, calls = slice_sample(rng, x=x, log_density=lambda v: 3.0 * v - np.exp(v), width=0.3)
    assert calls >= 3
    assert stats.kstest(np.exp(x), stats.gamma(3.0).cdf).pvalue > 1e-3


def test_record_sweep_targets_the_conditional_of_the_records():
    """Two records, one-number statistic: after many sweeps from the prior, each record's
    law given y is the prior reweighted by the noise density (checked by importance weights)."""
    rng = np.random.default_rng(1)
    rows, window, beta, y = 20000, (0.0, 1.0), 0.3, 1.4
    z = rng.exponential(0.5, (rows, 2))
    for _ in range(30):
        z, _ = sweep_records(
            rng,
            records=z,
            proposals=rng.exponential(0.5, (rows, 2)),
            window=window,
            k=1,
            released=np.full((rows, 1), y),
            noise_scale=beta,
        )
    ref = rng.exponential(0.5, (400000, 2))
    s = window_statistic(ref, window, 1).sum(axis=(1, 2))
    w = np.exp(-np.abs(y - s) / beta)
    for q in (0.25, 0.5, 0.75):
        cut = np.quantile(z[:, 0], q)
        want = np.sum(w * (ref[:, 0] <= cut)) / w.sum()
        assert abs(np.mean(z[:, 0] <= cut) - want) < 4 * np.sqrt(q * (1 - q) / rows)


def _lattice_posterior(n, y, beta, window=(0.0, 1.5)):
    lam = np.linspace(0.01, 14.0, 1500)
    lattice = lattice_for(window, n=n, noise_scale=beta)
    log_lik, _ = lattice_log_likelihood(
        lattice_record_log_law(RecordLaw("gamma", 1.0, lam), window, lattice),
        lattice,
        n,
        y,
        NoiseLaw("laplace", beta),
    )
    logw = log_lik + stats.gamma(8, scale=0.5).logpdf(lam)
    w = np.exp(logw - logw.max())
    return lam, np.cumsum(w) / w.sum()


@pytest.mark.parametrize(
    ("n", "epsilon", "y", "ess_share"),
    [(10, 1.0, 1.0, 0.5), (20, 0.1, 6.0, 0.5), (100, 1.0, 30.0, 0.1)],
)
def test_interweaving_matches_lattice_posterior_and_mixes(n, epsilon, y, ess_share):
    """Exponential records: the record-level sampler against the lattice posterior (an
    independent method), KS on every 4th draw of 8 chains; and the ESS share of the draws
    (measured: 0.98, 0.95 and 0.19-0.7 at these settings; plain augmentation's is far lower,
    ``benchmarks/exact_windows_ess.py --mixing``)."""
    import arviz as az

    beta = 1.5 / epsilon
    theta, s = sample_records(
        np.random.default_rng(5),
        ReleaseBatch(
            Exponential(),
            (np.full(8, 8.0), np.full(8, 2.0)),
            np.full(8, y),
            n,
            NoiseLaw("laplace", beta),
            (0.0, 1.5),
        ),
        draws=2000,
        tune=300,
    )
    assert s.shape == (2000, 8, 2)
    grid, cdf = _lattice_posterior(n, y, beta)
    assert stats.kstest(theta[::4].ravel(), lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3
    assert float(az.ess(theta.T)) > ess_share * theta.size


def _normal_reference(n, y, beta, window, size=40000):
    """Posterior mean and sd of (μ, log σ²) by brute force: p(y | θ) = E[k(y - ŝ)] over ``size``
    data sets per θ (common random numbers), on a 131 × 100 grid of (μ, log σ²) wide enough
    for the Inverse-Gamma tail (log σ² is compared, not σ², whose sd has no stable estimate
    under that tail)."""
    mu = np.linspace(-12, 14, 131)
    log_var = np.linspace(np.log(0.02), np.log(200), 100)
    m, lv = np.meshgrid(mu, log_var, indexing="ij")
    e = np.random.default_rng(0).standard_normal((size, n))
    log_lik = np.empty(m.shape)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            t = window_statistic(m[i, j] + np.exp(0.5 * lv[i, j]) * e, window, 2).sum(axis=1)
            log_lik[i, j] = np.log(np.mean(np.exp(-np.abs(y - t).sum(axis=1) / beta)))
    mean, kappa, alpha, beta_ = NIG
    var = np.exp(lv.ravel())
    log_prior = stats.norm.logpdf(m.ravel(), mean, np.sqrt(var / kappa)) + stats.invgamma.logpdf(
        var, alpha, scale=beta_
    )
    logw = log_lik.ravel() + log_prior + lv.ravel()
    w = np.exp(logw - logw.max())
    w /= w.sum()
    coords = np.stack([m.ravel(), lv.ravel()], axis=-1)
    centre = w @ coords
    return centre, np.sqrt(w @ (coords - centre) ** 2)


def _records_and_reference(n, epsilon, y, *, size, draws, seed):
    """Record-level draws of (μ, σ²) and the brute-force moments, Normal records over [-3, 5]."""
    fam, window = Normal(), (-3.0, 5.0)
    beta = fam.release_sensitivity(window) / epsilon
    want = _normal_reference(n, y, beta, window, size=size)
    theta, _ = sample_records(
        np.random.default_rng(seed),
        ReleaseBatch(
            fam,
            tuple(np.full(8, p) for p in NIG),
            np.tile(y, (8, 1)),
            n,
            NoiseLaw("laplace", beta),
            window,
        ),
        draws=draws,
        tune=400,
    )
    return theta, *want


@pytest.mark.slow
def test_normal_records_match_brute_force_posterior():
    """(μ, log σ²) of five Normal records over [-3, 5] at ε = 1: posterior mean within 4 MC sds
    and sd within 6% of the brute-force reference (slow: 13 100 θ × 20 000 simulated data
    sets)."""
    import arviz as az

    theta, want_mean, want_sd = _records_and_reference(
        5, 1.0, np.array([4.0, 9.0]), size=20000, draws=4000, seed=1
    )
    theta = np.stack([theta[..., 0], np.log(theta[..., 1])], axis=-1)
    for j in range(2):  # μ and log σ²
        draws = theta[..., j]
        ess = float(az.ess(draws.T))
        assert abs(draws.mean() - want_mean[j]) < 4 * want_sd[j] / np.sqrt(ess)
        assert draws.std() == pytest.approx(want_sd[j], rel=0.06)


def test_normal_records_match_reference_quickly():
    """The same check on a coarse reference (4000 simulated data sets), for the default suite."""
    theta, want_mean, want_sd = _records_and_reference(
        4, 2.0, np.array([3.0, 8.0]), size=4000, draws=2000, seed=2
    )
    theta = np.stack([theta[..., 0], np.log(theta[..., 1])], axis=-1)
    for j in range(2):  # μ and log σ²
        assert abs(theta[..., j].mean() - want_mean[j]) < 0.1 * want_sd[j]
        assert theta[..., j].std() == pytest.approx(want_sd[j], rel=0.1)


@pytest.mark.parametrize("family", [pm.Normal, pm.LogNormal])
def test_record_step_through_pm_sample(family):
    """pm.sample assigns RecordStep to (μ, σ², records); its posterior matches the batched
    sampler's on the same release (two-sample KS on μ and σ²); attrs say exact."""
    rng = np.random.default_rng(4)
    x = rng.normal(1.0, 1.2, 12) if family is pm.Normal else rng.lognormal(0.5, 0.8, 12)
    bounds = (-3.0, 5.0) if family is pm.Normal else (0.1, 20.0)
    rel = pmdp.release(x, family, epsilon=1.0, bounds=bounds, rng=3)
    model = _nig_model(rel, family=family)
    assert [v.name for v in model.free_RVs] == ["sigma2", "mu", "y_records"]
    with model:
        idata = pm.sample(
            draws=1500,
            tune=300,
            chains=2,
            cores=1,
            progressbar=False,
            random_seed=5,
            compute_convergence_checks=False,
        )
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"
    assert float(idata.sample_stats["accepted"].mean()) > 0.3
    fam = Normal() if family is pm.Normal else LogNormal()
    theta, _ = sample_records(
        np.random.default_rng(6),
        ReleaseBatch(
            fam,
            tuple(np.full(4, p) for p in NIG),
            np.tile(np.asarray(rel.value), (4, 1)),
            12,
            NoiseLaw("laplace", rel.sensitivity / rel.epsilon),
            bounds,
        ),
        draws=3000,
        tune=300,
    )
    for j, name in enumerate(["mu", "sigma2"]):
        got = idata.posterior[name].values.ravel()[::3]
        assert stats.ks_2samp(got, theta[::6, :, j].ravel()).pvalue > 1e-3


def test_record_node_needs_the_conjugate_prior():
    rel = pmdp.release(
        np.random.default_rng(0).normal(0, 1, 10), pm.Normal, epsilon=1.0, bounds=(-3.0, 3.0), rng=1
    )
    with pm.Model():
        mu = pm.Normal("mu", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        with pytest.raises(ValueError, match="Normal–Inverse-Gamma"):
            pmdp.NoisySuffStat("y", pm.Normal.dist(mu, sigma), release=rel, likelihood="exact")
    # auto: the CLT, untrusted at n = 10, said so (it was silent until 2026-12-05), with what
    # the exact likelihood would need; the conjugate model takes the exact one without a word.
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        with pytest.warns(CltWarning, match="record-level sampler, cannot be used here: .*"
                          "Normal–Inverse-Gamma"):  # fmt: skip
            pmdp.NoisySuffStat("y", pm.Normal.dist(mu, sigma), release=rel)
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "clt"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CltWarning)
        assert release_attrs(_nig_model(rel, "auto"))["pymc_dp_likelihood_y"] == "exact"


def test_untrusted_pair_windows_name_the_prior_the_exact_likelihood_needs():
    """Above the record-level sampler's n the advice to pass likelihood='exact' names the
    conjugate prior it needs, and a grouped release's names the groups' size and prior."""
    rng = np.random.default_rng(0)
    rel = pmdp.release(rng.normal(1.0, 2.0, 200), pm.Normal, bounds=(-12.0, 14.0), epsilon=1.0,
                       rng=1)  # fmt: skip
    with pm.Model():
        mu = pm.Normal("mu", 0, 5)
        sigma = pm.HalfNormal("sigma", 5)
        with pytest.warns(CltWarning, match="likelihood='exact' with .*Normal–Inverse-Gamma"):
            pmdp.NoisySuffStat("y", pm.Normal.dist(mu, sigma), release=rel)
    keys = ["a", "b"]
    rs = pmdp.release_grouped(
        rng.normal(1.0, 2.0, 100), pm.Normal, bounds=(-12.0, 14.0), epsilon=1.0,
        by=np.repeat(keys, 50), groups=keys, sizes="public", rng=2,
    )  # fmt: skip
    with pytest.warns(CltWarning, match="at most 100 records, with that group's .*Normal–Inv"):
        build_grouped_model(rs)


def test_engine_exact_normal_shapes_and_auto():
    """sample_gibbs(likelihood="exact") on Normal releases: (chain, draw, batch, 2) draws of θ
    and of the stacked (ŝ, s); "auto" takes it where the CLT is untrusted (n = 10)."""
    fam, window = Normal(), (-3.0, 5.0)
    y = np.array([[10.0, 30.0], [5.0, 20.0]])
    kw = dict(
        family=fam,
        prior=NIG,
        released=y,
        n=10,
        scale=fam.release_sensitivity(window),
        bounds=window,
        draws=50,
        tune=20,
        chains=2,
    )
    tr = sample_gibbs(0, likelihood="exact", **kw)
    assert tr.theta.shape == (2, 50, 2, 2) and tr.suffstat.shape == (2, 50, 2, 4)
    assert tr.noise_variance.shape == (2, 50, 2, 2)
    assert np.all(tr.theta[..., 1] > 0)
    auto = sample_gibbs(0, **kw)
    np.testing.assert_array_equal(auto.theta, tr.theta)


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 30])
@pytest.mark.parametrize("design", ["exponential", "normal"])
def test_exact_engine_is_calibrated_200_trials(design, n):
    """Calibration of the exact (record-level) engine at small n, ε = 1: 200 trials with θ from
    the prior, 500 draws after 300 tuning iterations each; the true θ's posterior quantiles are
    uniform (KS p-value > 0.001 for every component) and the central 90% intervals cover
    within 0.83-0.97 (a 3.5-sd band at 200 trials)."""
    rng = np.random.default_rng([13, n, len(design)])
    trials = 200
    if design == "exponential":
        from pymc_dp.studies.designs import DESIGNS

        d = DESIGNS["exponential"]
        sim = d.simulate(rng, trials=trials, n=n, epsilon=1.0)
        family, prior, bounds = d.family, d.prior, d.bounds
        truth, released, scale = sim.truth[:, None], sim.released, sim.scale
    else:
        family, prior, bounds = Normal(), (0.0, 1.0, 3.0, 2.0), (-3.0, 3.0)
        sigma2 = 2.0 / rng.gamma(3.0, size=trials)
        mu = rng.normal(0.0, np.sqrt(sigma2))
        z = rng.normal(mu[:, None], np.sqrt(sigma2)[:, None], size=(trials, n))
        inside = (z >= -3.0) & (z <= 3.0)
        s_hat = np.stack([np.where(inside, z, 0).sum(1), np.where(inside, z * z, 0).sum(1)], -1)
        scale = family.release_sensitivity(bounds)
        released = s_hat + rng.laplace(0.0, scale, s_hat.shape)
        truth = np.stack([mu, sigma2], axis=-1)
    trace = sample_gibbs(
        rng,
        family=family,
        prior=prior,
        released=released,
        n=n,
        scale=scale,
        bounds=bounds,
        draws=500,
        tune=300,
        likelihood="exact",
    )
    theta = trace.theta.reshape(500, trials, truth.shape[1])
    for j in range(truth.shape[1]):
        q = np.mean(theta[..., j] < truth[:, j], axis=0)
        assert stats.kstest(q, "uniform").pvalue > 1e-3
        assert 0.83 <= np.mean((q > 0.05) & (q < 0.95)) <= 0.97
