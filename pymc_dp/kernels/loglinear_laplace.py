"""The Laplace approximation of a noisy-marginals posterior, used to precondition NUTS.

At n = 10⁴ records the posterior of the log-linear parameters θ is close to normal but strongly
correlated on the corner basis (a 2-way term moves with the 1-way terms of its columns), and
NUTS with a diagonal mass matrix builds long trajectories (measured: 64 leapfrog steps per draw
for 5 ternary columns). The mode and the inverse Fisher information there give an affine map
θ = θ̂ + L η under which the posterior of η is close to standard normal; sampling η and reading
θ off it leaves the posterior of θ unchanged (the map is linear, its Jacobian constant).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import optimize

from pymc_dp.kernels.loglinear import LogLinearDomain, marginals_clt_logp_grad

__all__ = ["LaplaceFit", "marginals_laplace"]


class LaplaceFit(NamedTuple):
    """Mode and approximate posterior covariance of θ (:func:`marginals_laplace`)."""

    mode: npt.NDArray[np.float64]
    """θ̂, the maximum of the collapsed normal log-likelihood plus the Normal prior."""
    cov: npt.NDArray[np.float64]
    """The inverse of the Fisher information at θ̂ plus the prior precision."""
    converged: bool
    """Whether the optimiser met its tolerance (the map is only a preconditioner either way)."""


def marginals_laplace(
    domain: LogLinearDomain,
    z: npt.ArrayLike,
    *,
    n: int,
    noise_variance: float,
    prior_sigma: float,
    max_iter: int = 1000,
) -> LaplaceFit:
    """Mode of log p(z | θ) + log N(θ; 0, σ² I) and the inverse Fisher information there.

    The likelihood is the collapsed normal of
    :func:`~pymc_dp.kernels.loglinear.marginals_clt_logp`. With M = n Cov_θ[g, a] (the Jacobian
    of the mean n E_θ[g]) and Σ = n Cov_θ[g] + v I, the information is Mᵀ Σ⁻¹ M + I / σ²
    (the Fisher information of the mean; the O(1) term from Σ's dependence on θ is left out,
    which only matters for the quality of the preconditioner, not for the posterior).

    Parameters
    ----------
    domain
        The log-linear domain of the release.
    z
        The projected release Uᵀ y.
    n, noise_variance
        Records and per-cell noise variance of the release.
    prior_sigma
        Standard deviation of the Normal(0, σ) prior on every θ_k.
    max_iter
        Iterations of L-BFGS.

    Returns
    -------
    LaplaceFit
    """
    z = np.asarray(z, dtype=float)
    prec0 = 1.0 / prior_sigma**2

    def negative(theta: np.ndarray) -> tuple[float, np.ndarray]:
        logp, grad = marginals_clt_logp_grad(theta, domain, z, n=n, noise_variance=noise_variance)
        return -(logp - 0.5 * prec0 * theta @ theta), -(grad - prec0 * theta)

    result = optimize.minimize(
        negative,
        np.zeros(domain.n_params),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": 1e-6},
    )
    mode = result.x
    prob = np.exp(domain.log_probs(mode))
    g = domain.projected_features
    a = domain.basis
    gc = g - prob @ g
    ac = a - prob @ a
    jac = n * (gc.T * prob) @ ac
    sigma = n * (gc.T * prob) @ gc + noise_variance * np.eye(domain.n_params)
    info = jac.T @ np.linalg.solve(sigma, jac) + prec0 * np.eye(domain.n_params)
    cov = np.linalg.inv(info)
    return LaplaceFit(mode, 0.5 * (cov + cov.T), bool(result.success))
