"""How far the noisy-marginals posterior is from the Laplace normal NUTS is whitened by.

On the release of ``benchmarks/marginals_speed.py`` (K columns of L levels, all 2-way tables,
n = 10⁴, ε = 1), the target NUTS samples (the fixed-covariance collapsed posterior, Normal(0, 2)
prior) against the Laplace normal N(θ̂, L Lᵀ) of
:func:`~pymc_dp.kernels.loglinear_laplace.marginals_laplace` (Fisher information at the mode):

* the observed Hessian at the mode (central differences of the analytic gradient along the
  columns of L): the eigenvalues of -Lᵀ H L, all 1 where the whitening is the Hessian's, so a
  dense mass matrix from the Hessian would change nothing;
* the mean drop of the log-density from the mode at draws θ̂ + s L w, w ~ N(0, I), against the
  normal's s² p / 2: the ratio grows with s where the posterior is not normal;
* the drop along single eigen-directions of L Lᵀ at ±0.5, 1, 2 sd (normal: 0.125, 0.5, 2).

Run: ``PYTHONPATH=. python benchmarks/marginals_geometry.py [KxL,...]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time

import numpy as np
from marginals_speed import release

from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import (
    clt_covariance,
    clt_fixed_logp,
    clt_fixed_logp_grad,
    feature_method,
    feature_moments,
)
from pymc_dp.likelihoods.marginals import noise_variance, projected_release

PRIOR_SIGMA = 2.0


def case(spec, draws=30, seed=1):
    k, levels = (int(v) for v in spec.split("x"))
    rel = release(k, levels, 10_000, seed=0)
    dom, z = projected_release(rel)
    var = noise_variance(rel)
    method = feature_method(dom)
    fit = marginals_laplace(dom, z, n=rel.n, noise_variance=var, prior_sigma=PRIOR_SIGMA)
    engine = feature_moments(dom, method)
    chol = np.linalg.cholesky(clt_covariance(fit.mode, dom, engine, n=rel.n, noise_variance=var))
    prec = 1.0 / PRIOR_SIGMA**2

    def logp(theta):
        try:
            return clt_fixed_logp(theta, dom, engine, z, n=rel.n, chol=chol) - 0.5 * prec * (
                theta @ theta
            )
        except BetheDidNotConverge:
            return -np.inf

    def grad(theta):
        return clt_fixed_logp_grad(theta, dom, engine, z, n=rel.n, chol=chol)[1] - prec * theta

    lower = np.linalg.cholesky(fit.cov)
    p, h = dom.n_params, 1e-4
    start = time.perf_counter()
    white = np.column_stack(
        [lower.T @ (grad(fit.mode + h * c) - grad(fit.mode - h * c)) / (2 * h) for c in lower.T]
    )
    ev = np.linalg.eigvalsh(-0.5 * (white + white.T))
    print(
        f"{spec} ({method}, p = {p}): eigenvalues of -Lᵀ H L (1: Hessian = Fisher) min "
        f"{ev.min():.2f}, 5-95% {np.quantile(ev, 0.05):.2f}-{np.quantile(ev, 0.95):.2f}, "
        f"max {ev.max():.2f} ({time.perf_counter() - start:.0f} s); Laplace sd of θ median "
        f"{np.median(np.sqrt(np.diag(fit.cov))):.2f}, max {np.sqrt(fit.cov.diagonal().max()):.2f}",
        flush=True,
    )
    top = logp(fit.mode)
    rng = np.random.default_rng(seed)
    cells = []
    for s in (0.05, 0.1, 0.2, 0.3, 0.5, 1.0):
        drop = np.mean(
            [top - logp(fit.mode + s * lower @ rng.standard_normal(p)) for _ in range(draws)]
        )
        cells.append(f"s = {s}: {drop / (s * s * p / 2):.2f}")
    print("  log-density drop at θ̂ + s L w over the normal's: " + ", ".join(cells), flush=True)
    val, vec = np.linalg.eigh(fit.cov)
    for i in (p - 1, p - 2, p - 5, p // 2, 0):
        u = vec[:, i] * np.sqrt(val[i])
        drops = [
            f"{top - logp(fit.mode + t * u):.2f}/{top - logp(fit.mode - t * u):.2f}"
            for t in (0.5, 1, 2)
        ]
        print(f"  eigen-direction {i} (sd {np.sqrt(val[i]):.2f}): drop at ±0.5, 1, 2 sd {drops}")


if __name__ == "__main__":
    for spec in (sys.argv[1] if len(sys.argv) > 1 else "10x2,15x2,15x3").split(","):
        case(spec)
