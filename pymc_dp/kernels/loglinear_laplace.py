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
from scipy import linalg, optimize

from pymc_dp.kernels import loglinear_moments
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_tables import TableProducts, prefer_tables

_ROUNDS = 4
"""Re-evaluations of the covariance in :func:`marginals_laplace`."""

__all__ = ["LaplaceFit", "clt_covariance", "marginals_clt_fixed_logp_grad", "marginals_laplace"]


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
    prior_sigma: float | npt.ArrayLike,
    max_iter: int = 1000,
    method: str | None = None,
) -> LaplaceFit:
    """Mode of log p(z | θ) + log N(θ; 0, diag(σ²)) and the inverse Fisher information there.

    The likelihood is the collapsed normal of
    :func:`~pymc_dp.kernels.loglinear.marginals_clt_logp`. With M = n Cov_θ[g, a] (the Jacobian
    of the mean n E_θ[g]) and Σ = n Cov_θ[g] + v I, the information is Mᵀ Σ⁻¹ M + I / σ²
    (the Fisher information of the mean; the O(1) term from Σ's dependence on θ is left out,
    which only matters for the quality of the preconditioner, not for the posterior). The
    mode is found with Σ held fixed and re-evaluated at the mode, up to four rounds
    (:func:`marginals_clt_fixed_logp_grad`), so each optimiser step costs O(C p).

    Parameters
    ----------
    domain
        The log-linear domain of the release.
    z
        The projected release Uᵀ y.
    n, noise_variance
        Records and per-cell noise variance of the release.
    prior_sigma
        Standard deviation of the Normal(0, σ) prior on every θ_k, or one per θ_k.
    max_iter
        Iterations of L-BFGS.
    method
        The feature moments' method (default
        :func:`~pymc_dp.kernels.loglinear_moments.fixed_law_method`): ``"enumerate"``,
        ``"split"``, ``"junction"`` or ``"bethe"``.

    Returns
    -------
    LaplaceFit
    """
    z = np.asarray(z, dtype=float)
    prec0 = 1.0 / np.asarray(prior_sigma, dtype=float) ** 2  # a scalar or one per θ_k
    method = loglinear_moments.fixed_law_method(domain) if method is None else method
    if method != "enumerate":
        engine = loglinear_moments.feature_moments(domain, method)
        return _laplace_by_engine(domain, engine, z, n, noise_variance, prec0, max_iter)
    # The mode under the law with Σ held at the current point, Σ re-evaluated there, a few
    # rounds: each gradient is O(C p) rather than the full law's O(C p²); the fixed point is
    # the full law's mode up to O(1/n) (Σ's θ-dependence), plenty for a preconditioner.
    mode = np.zeros(domain.n_params)
    converged = False
    products = TableProducts(domain) if prefer_tables(domain) else None
    for _ in range(_ROUNDS):
        chol = np.linalg.cholesky(clt_covariance(mode, domain, n=n, noise_variance=noise_variance))

        def negative(theta: np.ndarray, chol: np.ndarray = chol) -> tuple[float, np.ndarray]:
            logp, grad = marginals_clt_fixed_logp_grad(
                theta, domain, z, n=n, chol=chol, products=products
            )
            return -(logp - 0.5 * prec0 * theta @ theta), -(grad - prec0 * theta)

        result = optimize.minimize(
            negative,
            mode,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": 1e-6},
        )
        step = np.max(np.abs(result.x - mode))
        mode, converged = result.x, bool(result.success)
        if step < 1e-4:
            break
    prob = np.exp(domain.log_probs(mode))
    g = domain.projected_features
    a = domain.basis
    gc = g - prob @ g
    ac = a - prob @ a
    jac = n * (gc.T * prob) @ ac
    sigma = n * (gc.T * prob) @ gc + noise_variance * np.eye(domain.n_params)
    info = jac.T @ np.linalg.solve(sigma, jac) + prec0 * np.eye(domain.n_params)
    cov = np.linalg.inv(info)
    return LaplaceFit(mode, 0.5 * (cov + cov.T), converged)


def _laplace_by_engine(
    domain: LogLinearDomain,
    engine: loglinear_moments.FeatureMoments,
    z: np.ndarray,
    n: int,
    noise_variance: float,
    prec0: float | np.ndarray,
    max_iter: int,
) -> LaplaceFit:
    """:func:`marginals_laplace` with an engine's moments (split sums, junction tree, Bethe).

    ``prec0`` is the prior's precision, one for every θ_k or one per θ_k.
    """
    mode = np.zeros(domain.n_params)
    converged = False
    for _ in range(_ROUNDS):
        sigma = loglinear_moments.clt_covariance(
            mode, domain, engine, n=n, noise_variance=noise_variance
        )
        chol = np.linalg.cholesky(sigma)

        def negative(theta: np.ndarray, chol: np.ndarray = chol) -> tuple[float, np.ndarray]:
            logp, grad = loglinear_moments.clt_fixed_logp_grad(
                theta, domain, engine, z, n=n, chol=chol
            )
            return -(logp - 0.5 * prec0 * theta @ theta), -(grad - prec0 * theta)

        result = optimize.minimize(
            negative, mode, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-6}
        )
        step = np.max(np.abs(result.x - mode))
        mode, converged = result.x, bool(result.success)
        if step < 1e-4:
            break
    _, cov_a = engine.moments(mode)
    um = domain.projected_table_map[1]
    jac = n * um @ cov_a
    sigma = n * um @ cov_a @ um.T + noise_variance * np.eye(domain.n_params)
    info = jac.T @ np.linalg.solve(sigma, jac) + prec0 * np.eye(domain.n_params)
    cov = np.linalg.inv(info)
    return LaplaceFit(mode, 0.5 * (cov + cov.T), converged)


def clt_covariance(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    *,
    n: int,
    noise_variance: float,
    method: str | None = None,
) -> npt.NDArray[np.float64]:
    """Σ(θ) = n Cov_θ[g] + v I, the covariance of the collapsed normal law of z at θ.

    ``method`` is the feature moments' method, as in :func:`marginals_laplace`.
    """
    method = loglinear_moments.feature_method(domain) if method is None else method
    if method != "enumerate":
        engine = loglinear_moments.feature_moments(domain, method)
        return loglinear_moments.clt_covariance(
            theta, domain, engine, n=n, noise_variance=noise_variance
        )
    _, cov = domain.moments(theta, domain.projected_features)
    return n * cov + noise_variance * np.eye(domain.n_params)


def marginals_clt_fixed_logp_grad(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    z: npt.ArrayLike,
    *,
    n: int,
    chol: npt.NDArray[np.float64],
    products: TableProducts | None = None,
) -> tuple[float, npt.NDArray[np.float64]]:
    """The log-density N(z; n E_θ[g], Σ₀) and its gradient, Σ₀ = L Lᵀ fixed, in O(C p).

    The collapsed normal of :func:`~pymc_dp.kernels.loglinear.marginals_clt_logp` with its
    covariance held at a reference point (e.g. the Laplace mode): the mean n E_θ[g] carries
    O(n) information about θ, the covariance's dependence on θ O(1), so over a posterior of
    width O(n^-1/2) holding Σ fixed moves the posterior by O(n^-1/2) of its sd. The gradient
    is n Cov_θ[a, g] Σ₀⁻¹ r, one pass over the domain, against O(C p²) for the full law.
    With ``products`` (:class:`~pymc_dp.kernels.loglinear_tables.TableProducts` of the
    domain) the passes are table sums instead of products with the dense feature matrices.
    """
    theta = np.asarray(theta, dtype=float)
    u = domain.projection
    if products is None:
        prob = np.exp(domain.log_probs(theta))
        mean = prob @ domain.projected_features
    else:
        logits = products.logits(theta)
        prob = np.exp(logits - logits.max())
        prob /= prob.sum()
        mean = products.tables(prob) @ u
    r = np.asarray(z, dtype=float) - n * mean
    w = linalg.solve_triangular(chol, r, lower=True, check_finite=False)
    log_det = 2.0 * np.sum(np.log(np.diag(chol)))
    p = domain.n_params
    logp = -0.5 * (w @ w + log_det + p * np.log(2.0 * np.pi))
    sr = linalg.solve_triangular(chol, w, lower=True, trans="T", check_finite=False)
    if products is None:
        per_cell = prob * (domain.projected_features @ sr - mean @ sr)
        a = domain.basis
        grad = n * (a.T @ per_cell - (prob @ a) * per_cell.sum())
    else:
        per_cell = prob * (products.table_sum(u @ sr) - mean @ sr)
        # Σ per_cell = 0 (π sums to one), so Cov[a, g]·Σ₀⁻¹r is Aᵀ per_cell alone
        grad = n * products.basis_transpose(per_cell)
    return float(logp), grad
