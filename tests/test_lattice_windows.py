"""Lattice likelihood of window sums of continuous records: kernel, bound, Op, pm.sample."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, special, stats

import pymc_dp as pmdp
from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.records import sample_records
from pymc_dp.families import Exponential, Gamma, LogNormalKnownSigma, NormalKnownSigma
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import (
    Lattice,
    RecordLaw,
    discretisation_bound,
    draw_lattice_window_sum,
    lattice_for,
    lattice_log_likelihood,
    lattice_record_log_law,
)
from pymc_dp.likelihoods.lattice_windows import LatticeWindowLogLikelihood
from pymc_dp.model.noisy_suffstat import release_attrs

CASES = [
    ("gamma", 1.0, 2.0, stats.expon(scale=0.5), (0.0, 1.5)),
    ("gamma", 2.5, 3.0, stats.gamma(2.5, scale=1 / 3), (0.2, 1.5)),
    ("normal", 0.5, 1.0, stats.norm(0.5, 1.0), (-1.0, 2.0)),
    ("normal", 3.0, 0.7, stats.norm(3.0, 0.7), (1.0, 2.0)),  # 0 outside the window
]


def _brute_force(dist, window: tuple[float, float], n: int, y: float, beta: float) -> float:
    """log p(y | θ) by adaptive quadrature over one or two records (no lattice)."""
    a, b = window

    def k(d):
        return math.exp(-abs(d) / beta) / (2 * beta)

    def one(target):
        points = [target] if a < target < b else None
        return integrate.quad(
            lambda z: dist.pdf(z) * k(target - z), a, b, points=points, limit=200, epsrel=1e-12
        )[0]

    out = dist.cdf(a) + dist.sf(b)
    if n == 1:
        return math.log(out * k(y) + one(y))
    two = integrate.quad(lambda z: dist.pdf(z) * one(y - z), a, b, limit=400, epsrel=1e-11)[0]
    return math.log(out**2 * k(y) + 2 * out * one(y) + two)


@pytest.mark.parametrize(("kind", "a", "b", "dist", "window"), CASES)
@pytest.mark.parametrize("n", [1, 2])
def test_lattice_likelihood_within_its_bound_of_quadrature(kind, a, b, dist, window, n):
    """log p_h against quadrature: inside [-lower, upper] of the stated bound at two lattices,
    and second order in h (ten times finer, at least 30 times closer)."""
    beta = 0.5
    errors = []
    for tol in (0.01, 0.001):
        lattice = lattice_for(window, n=n, noise_scale=beta, tolerance=tol)
        log_q = lattice_record_log_law(RecordLaw(kind, a, b), window, lattice)
        lower, upper = discretisation_bound(n, lattice.step, beta)
        assert lower + upper <= tol * (1 + 1e-12)
        for y in (0.3, 1.7, -0.5):
            got, _ = lattice_log_likelihood(log_q, lattice, n, y, NoiseLaw("laplace", beta))
            err = float(got) - _brute_force(dist, window, n, y, beta)
            assert -lower <= err <= upper
            errors.append(abs(err))
    assert max(errors[3:]) < max(errors[:3]) / 30


def test_lattice_law_keeps_mass_and_mean():
    """The rounding is without bias: q sums to 1 and keeps E[t̂] exactly, deep tails included."""
    window = (0.2, 1.5)
    lattice = lattice_for(window, n=50, noise_scale=0.3)
    points = lattice.step * (lattice.first + np.arange(lattice.size))
    rates = np.array([0.01, 1.0, 30.0, 900.0])
    q = np.exp(lattice_record_log_law(RecordLaw("gamma", 2.0, rates), window, lattice))
    np.testing.assert_allclose(q.sum(axis=-1), 1.0, rtol=1e-12)
    for rate, row in zip(rates, q, strict=True):
        # E[z; a ≤ z ≤ b] = (2/λ)(Q(3, λa) - Q(3, λb)) for Gamma(2, λ) records.
        want = 2 / rate * (special.gammaincc(3, rate * 0.2) - special.gammaincc(3, rate * 1.5))
        assert row @ points == pytest.approx(want, rel=1e-8, abs=1e-300)
    # Far in the upper tail the masses keep their relative accuracy (no underflow to 0).
    log_q = lattice_record_log_law(RecordLaw("gamma", 2.0, 900.0), window, lattice)
    inside = log_q[int(np.ceil(0.2 / lattice.step)) - lattice.first :][: int(1.3 / lattice.step)]
    assert np.all(np.isfinite(inside)) and inside[-1] < -1200


def test_lattice_for_refuses_an_empty_window():
    with pytest.raises(ValueError, match="a < b"):
        lattice_for((1.0, 1.0), n=3, noise_scale=1.0)


def test_lattice_sum_draws_follow_their_conditional():
    """Draws of the rounded window sum given θ, y: chi-square against the exact weights."""
    window, n, beta, y = (0.0, 1.0), 4, 0.4, 1.3
    lattice = Lattice(0.05, 0, 21)
    log_q = lattice_record_log_law(RecordLaw("gamma", 1.0, 2.0), window, lattice)
    draws = draw_lattice_window_sum(
        np.random.default_rng(0),
        np.broadcast_to(log_q, (20000, 21)),
        lattice,
        n,
        y,
        NoiseLaw("laplace", beta),
    )
    q = np.exp(log_q)
    law = np.ones(1)
    for _ in range(n):
        law = np.convolve(law, q)
    s = lattice.step * np.arange(law.size)
    w = law * np.exp(-np.abs(y - s) / beta)
    w /= w.sum()
    counts = np.bincount(np.rint(draws / lattice.step).astype(int), minlength=law.size)
    keep = w * draws.size > 5
    observed = np.r_[counts[keep], counts[~keep].sum()]
    expected = np.r_[w[keep], w[~keep].sum()] * draws.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_op_gradient_matches_finite_differences():
    fam, window, n, beta = Exponential(), (0.0, 1.5), 20, 1.5
    lattice = lattice_for(window, n=n, noise_scale=beta)
    op = LatticeWindowLogLikelihood(fam, n, window, lattice, beta)
    theta, y = pt.dvector("theta"), pt.dscalar("y")
    value = op(y, theta)
    fn = pytensor.function([y, theta], [value, pytensor.grad(value.sum(), theta)])
    at = np.array([1.0, 2.0, 3.0])
    _, grad = fn(6.0, at)
    h = 1e-5
    numeric = (fn(6.0, at + h)[0] - fn(6.0, at - h)[0]) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5)
    assert fn(6.0, np.array([-1.0, 0.0]))[0].tolist() == [-np.inf, -np.inf]


def _posterior_by_quadrature(log_lik, log_prior, grid):
    logw = log_lik + log_prior
    w = np.exp(logw - logw.max())
    return np.cumsum(w) / w.sum()


def test_gridstep_on_exact_exponential_release_matches_record_sampler():
    """pm.sample (GridStep on the lattice likelihood) against the record-level sampler, an
    independent exact method: the same posterior (two-sample KS, 4000 vs 16 000 draws)."""
    rng = np.random.default_rng(3)
    rel = pmdp.release(
        rng.exponential(0.5, 20), pm.Exponential, epsilon=1.0, bounds=(0.0, 1.5), rng=1
    )
    with pm.Model() as model:
        lam = pm.Gamma("lam", 8.0, 2.0)
        pmdp.NoisySuffStat("y", pm.Exponential.dist(lam), release=rel, likelihood="exact")
        idata = pm.sample(
            draws=2000,
            tune=50,
            chains=2,
            cores=1,
            progressbar=False,
            random_seed=1,
            compute_convergence_checks=False,
        )
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"
    grid_draws = idata.posterior["lam"].values.ravel()
    theta, _ = sample_records(
        np.random.default_rng(2),
        ReleaseBatch(
            Exponential(),
            (np.full(8, 8.0), np.full(8, 2.0)),
            np.full(8, float(rel.value)),
            20,
            NoiseLaw("laplace", rel.sensitivity / rel.epsilon),
            (0.0, 1.5),
        ),
        draws=2000,
        tune=300,
    )
    assert stats.ks_2samp(grid_draws, theta.ravel()).pvalue > 1e-3


@pytest.mark.parametrize(
    ("family", "dist_of", "x_of", "bounds"),
    [
        (
            Gamma(alpha=2.0),
            lambda t: pm.Gamma.dist(alpha=2.0, beta=t),
            lambda r: r.gamma(2.0, 0.4, 15),
            (0.1, 2.0),
        ),
        (
            NormalKnownSigma(sigma=1.0),
            lambda t: pm.Normal.dist(t, 1.0),
            lambda r: r.normal(0.5, 1.0, 15),
            (-2.0, 3.0),
        ),
        (
            LogNormalKnownSigma(sigma=0.5),
            lambda t: pm.LogNormal.dist(t, 0.5),
            lambda r: r.lognormal(0.2, 0.5, 15),
            (0.5, 4.0),
        ),
    ],
)
def test_exact_posterior_of_each_family_matches_quadrature(family, dist_of, x_of, bounds):
    """GridStep draws against quadrature of the same likelihood's kernel on a θ grid, per family
    (the likelihood itself is checked against brute force above)."""
    rng = np.random.default_rng(7)
    rel = pmdp.release(
        x_of(rng), family.pymc_distribution, epsilon=0.5, bounds=bounds, rng=2, **family.params()
    )
    gamma_rate = isinstance(family, Gamma)
    with pm.Model():
        theta = pm.Gamma("theta", 4.0, 2.0) if gamma_rate else pm.Normal("theta", 0.0, 2.0)
        pmdp.NoisySuffStat("y", dist_of(theta), release=rel, likelihood="exact")
        idata = pm.sample(
            draws=1500,
            tune=50,
            chains=2,
            cores=1,
            progressbar=False,
            random_seed=3,
            compute_convergence_checks=False,
        )
    draws = idata.posterior["theta"].values.ravel()
    grid = np.linspace(1e-3, 12.0, 3000) if gamma_rate else np.linspace(-8.0, 8.0, 3000)
    window = family.latent_window(bounds)
    beta = rel.sensitivity / rel.epsilon
    lattice = lattice_for(window, n=rel.n, noise_scale=beta)
    law = RecordLaw("gamma", 2.0, grid) if gamma_rate else RecordLaw("normal", grid, family.sigma)
    log_lik, _ = lattice_log_likelihood(
        lattice_record_log_law(law, window, lattice),
        lattice,
        rel.n,
        float(rel.value),
        NoiseLaw("laplace", beta),
    )
    prior = (
        stats.gamma(4.0, scale=0.5).logpdf(grid) if gamma_rate else stats.norm(0, 2).logpdf(grid)
    )
    cdf = _posterior_by_quadrature(log_lik, prior, grid)
    assert stats.kstest(draws, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3


def test_sample_latent_draws_the_window_sum_on_the_lattice():
    """After an exact fit, sample_latent adds ŝ: near y where the noise is small (ε = 4)."""
    rng = np.random.default_rng(8)
    rel = pmdp.release(
        rng.exponential(0.5, 12), pm.Exponential, epsilon=4.0, bounds=(0.0, 1.5), rng=3
    )
    with pm.Model() as model:
        lam = pm.Gamma("lam", 8.0, 2.0)
        pmdp.NoisySuffStat("y", pm.Exponential.dist(lam), release=rel, likelihood="exact")
        idata = pm.sample(
            draws=300,
            tune=20,
            chains=1,
            progressbar=False,
            random_seed=1,
            compute_convergence_checks=False,
        )
    idata = pmdp.sample_latent(idata, model, random_seed=2)
    s_hat = idata.posterior["y_s"].values
    assert s_hat.shape == (1, 300) and np.all((s_hat >= 0) & (s_hat <= 12 * 1.5 + 1e-9))
    scale = rel.sensitivity / rel.epsilon
    assert abs(np.mean(s_hat) - float(rel.value)) < 2 * scale


@pytest.mark.parametrize("family", [pm.Exponential, pm.Normal])
def test_cli_fit_with_exact_likelihood_on_vetted_releases(tmp_path, capsys, family):
    """pymc-dp fit --likelihood exact on OpenDP releases of continuous records (discrete
    Laplace on the statistic's quantum, modelled as Laplace within q/(2β))."""
    from pymc_dp.cli import main
    from pymc_dp.curator.release_file import write_release

    rng = np.random.default_rng(2)
    x = rng.exponential(0.5, 15) if family is pm.Exponential else rng.normal(1.0, 1.0, 15)
    bounds = (0.0, 1.5) if family is pm.Exponential else (-3.0, 5.0)
    path = write_release(pmdp.release(x, family, epsilon=1.0, bounds=bounds), tmp_path / "r.json")
    argv = ["fit", str(path), "--draws", "200", "--tune", "100", "--chains", "2", "--seed", "1"]
    argv += ["--no-progress", "--likelihood", "exact", "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 0
    assert "exact likelihood" in capsys.readouterr().out
    summary = (tmp_path / "out" / "summary.csv").read_text()
    assert ("lam" in summary) if family is pm.Exponential else ("sigma2" in summary)
