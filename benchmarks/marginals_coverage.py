"""Downstream coverage of noise-aware synthetic data from noisy marginal tables.

Three binary columns (y, x1, x2) drawn from a log-linear model with all 2-way interactions and no
3-way one, so the logistic regression y ~ x1 + x2 is correctly specified and its true
coefficients are the log-linear parameters (θ_y, θ_{y,x1}, θ_{y,x2}). Each trial draws θ from
the prior, n records, and releases the three 2-way tables with Laplace noise (seeded float, ε);
then

* **noise-aware**: the posterior of θ under the collapsed normal likelihood, computed by
  importance sampling from a Student-t around the mode (the cheap path of the calibration test;
  exact up to Monte Carlo error), m synthetic data sets of n records, each from a posterior
  draw, a logistic regression on each, pooled by :func:`pymc_dp.combine`;
* **naive**: the tables treated as exact (noise variance 10⁻⁴), the mode as a point estimate,
  one synthetic data set of n records and its logistic regression's own 90% interval (what a
  point-estimate generator gives).

Prints the coverage of the 90% intervals of the three coefficients over the trials.

Run: ``PYTHONPATH=. python benchmarks/marginals_coverage.py [trials] [epsilon] [n]``
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy import optimize, stats

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import (
    LogLinearDomain,
    marginals_clt_logp,
    marginals_clt_logp_grad,
)

SIGMA = 1.0


def posterior_draws(dom, z, n, var, rng, draws=4000):
    """Importance-resampled posterior draws of θ (prior N(0, SIGMA²))."""

    def logpost(t):
        return marginals_clt_logp(t, dom, z, n=n, noise_variance=var) - np.sum(t * t, -1) / (
            2 * SIGMA**2
        )

    def grad(t):
        return marginals_clt_logp_grad(t, dom, z, n=n, noise_variance=var)[1] - t / SIGMA**2

    p = dom.n_params
    res = optimize.minimize(lambda t: -logpost(t), np.zeros(p), jac=lambda t: -grad(t))
    h = 1e-5
    hess = np.array([(grad(res.x + h * e) - grad(res.x - h * e)) / (2 * h) for e in np.eye(p)])
    cov = np.linalg.inv(-0.5 * (hess + hess.T))
    prop = stats.multivariate_t(loc=res.x, shape=2.0 * cov, df=5)
    x = prop.rvs(draws, random_state=rng)
    logw = logpost(x) - prop.logpdf(x)
    w = np.exp(logw - logw.max())
    return res.x, x[rng.choice(draws, size=draws, p=w / w.sum())]


def logistic(y, x):
    x = np.column_stack([np.ones(len(y)), x])
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        info = x.T @ (x * (p * (1 - p))[:, None]) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(info, x.T @ (y - p))
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta, np.diag(np.linalg.inv(info))


def synthetic_fit(dom, theta, n, rng):
    cells = dom.cells[rng.choice(dom.n_cells, n, p=np.exp(dom.log_probs(theta)))]
    return logistic(cells[:, 0].astype(float), cells[:, 1:].astype(float))


def coverage(trials=200, epsilon=1.0, n=500, m=20, seed=1):
    """Per-trial coverage (trials × 3 booleans) of the noise-aware and the naive intervals."""
    dom = LogLinearDomain((2, 2, 2), ((0, 1), (0, 2), (1, 2)))
    # the coefficients of y ~ x1 + x2 are these log-linear terms
    index = [dom.basis_terms.index(t) for t in [((0,), (1,)), ((0, 1), (1, 1)), ((0, 2), (1, 1))]]
    rng = np.random.default_rng(seed)
    aware = np.zeros((trials, 3), bool)
    naive = np.zeros((trials, 3), bool)
    start = time.perf_counter()
    for i in range(trials):
        theta = rng.normal(size=dom.n_params) * SIGMA
        codes = dom.cells[rng.choice(dom.n_cells, n, p=np.exp(dom.log_probs(theta)))]
        rel = pmdp.release_marginals(
            {c: codes[:, k] for k, c in enumerate("yab")},
            columns=list("yab"),
            domains={c: [0, 1] for c in "yab"},
            marginals=[("y", "a"), ("y", "b"), ("a", "b")],
            epsilon=epsilon,
            rng=rng.integers(2**32),
        )
        z = rel.y @ dom.projection
        truth = theta[index]
        _, draws = posterior_draws(dom, z, n, 2 * rel.noise_scale**2, rng)
        fits = [synthetic_fit(dom, draws[j], n, rng) for j in rng.choice(len(draws), m)]
        lo, hi = pmdp.combine([f[0] for f in fits], [f[1] for f in fits]).interval(0.9)
        aware[i] = (lo <= truth) & (truth <= hi)
        mode, _ = posterior_draws(dom, z, n, 1e-4, rng, draws=10)
        beta, var = synthetic_fit(dom, mode, n, rng)
        half = stats.norm.ppf(0.95) * np.sqrt(var)
        naive[i] = (beta - half <= truth) & (truth <= beta + half)
    return aware, naive, time.perf_counter() - start


def main(trials=200, epsilon=1.0, n=500, m=20, seed=1):
    aware, naive, seconds = coverage(trials, epsilon, n, m, seed)
    band = stats.binom.interval(0.95, trials, 0.9)
    print(
        f"{trials} releases, n = {n}, epsilon = {epsilon}, m = {m} synthetic sets; "
        f"{seconds:.0f} s; 95% binomial band of 0.9: "
        f"[{band[0] / trials:.3f}, {band[1] / trials:.3f}]"
    )
    print("| coefficient | noise-aware synthetic | naive (point estimate) |")
    print("|---|---|---|")
    for k, name in enumerate(["intercept", "x1", "x2"]):
        print(f"| {name} | {aware[:, k].mean():.3f} | {naive[:, k].mean():.3f} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        trials=int(args[0]) if args else 200,
        epsilon=float(args[1]) if len(args) > 1 else 1.0,
        n=int(args[2]) if len(args) > 2 else 500,
    )
