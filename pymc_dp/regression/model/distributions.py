"""PyMC distributions for the latent variables of a :class:`~pymc_dp.NoisyRegressionStat` node.

* :class:`RegressionSuffStat`: the latent regression statistic s, ``N(nμ_t, nΣ_t)`` restricted
  to the statistics whose ``B = [X, y]ᵀ[X, y]`` is PSD (Bernstein & Sheldon 2019, §3.4), with
  ``μ_t, Σ_t`` the CLT moments at (θ, σ²) and the moments of x.
* :class:`NormalModelSuffStat`: the latent statistic with its exact law under the covariates'
  normal model (:mod:`pymc_dp.regression.kernels.normal_model`), the default sampler's model;
* :class:`InverseWishart`: ``Σ_x ~ InverseWishart(ν, Ψ)`` of the covariates' normal model
  (PyMC has no inverse Wishart).

Their log densities are PyTensor translations of :func:`~pymc_dp.regression.suffstat_moments`
and :func:`~pymc_dp.regression.normal_x_moments` (tested equal), so the model's logp is the
model's; the Gibbs steps call the NumPy kernels themselves.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters, multigammaln
from pymc.distributions.distribution import Continuous
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.curator.regression.statistics import (
    n_released,
    pack_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.model.distributions.suffstat import rv_size_is_none
from pymc_dp.regression.kernels.data_model import NIW, draw_niw
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    binary_first,
    covariate_order,
    draw_mixed_statistic,
)
from pymc_dp.regression.kernels.moments import XMoments, suffstat_moments
from pymc_dp.regression.kernels.normal_model import draw_statistic
from pymc_dp.regression.kernels.psd import project_psd
from pymc_dp.regression.kernels.suffstat import is_valid_statistic
from pymc_dp.regression.kernels.x_models import binary_cell_tensor

__all__ = [
    "InverseWishart",
    "InverseWishartRV",
    "MixedModelSuffStat",
    "MixedModelSuffStatRV",
    "NormalModelSuffStat",
    "NormalModelSuffStatRV",
    "RegressionSuffStat",
    "RegressionSuffStatRV",
    "binary_x_moments_pt",
    "clt_moments_pt",
    "design_location_logp_pt",
    "location_logp_pt",
    "model_statistic_pt",
    "normal_x_moments_pt",
    "response_logp_pt",
    "static_d",
    "statistic_support_shape",
    "unpack_statistic_pt",
]

# Relative jitter on nΣ_t in the log density only: moments of x made valid by eigenvalue
# clipping can leave Σ_t singular, where the normal has no density on the full space.
_JITTER = 1e-10
_PSD_TOL = 1e-12  # as pymc_dp.regression.kernels.suffstat.is_valid_statistic
_START_FLOOR = 1e-6  # as pymc_dp.regression.engine.gibbs_ss: a start strictly inside the PSD cone
_PROPOSALS = 32


def clt_moments_pt(
    theta: pt.TensorVariable,
    sigma2: pt.TensorVariable,
    second: pt.TensorVariable,
    fourth_cov: pt.TensorVariable,
    d: int,
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """``μ_t`` (m,) and ``Σ_t`` (m, m) of one record's statistic, as PyTensor expressions.

    The same formulas as :func:`~pymc_dp.regression.suffstat_moments` (§3.4.1 of Bernstein &
    Sheldon 2019), unbatched: θ (p,), σ² (), E[x̃x̃ᵀ] (p, p), Φ (p, p, p, p), p = d + 1.
    """
    p = d + 1
    rows, cols = released_pairs(d)
    m_mat = pt.concatenate([pt.eye(p), theta[None, :]], axis=0)  # (p + 1, p)
    s_mat = m_mat @ second @ m_mat.T
    u = np.zeros(p + 1)
    u[p] = 1.0
    ui, uj = u[rows], u[cols]
    mean = s_mat[rows, cols] + sigma2 * (ui * uj)
    g = (m_mat[rows, :, None] * m_mat[cols, None, :]).reshape((rows.size, p * p))
    cov = g @ pt.reshape(fourth_cov, (p * p, p * p)) @ g.T
    cross = (
        s_mat[rows[:, None], rows[None, :]] * np.outer(uj, uj)
        + s_mat[rows[:, None], cols[None, :]] * np.outer(uj, ui)
        + s_mat[cols[:, None], rows[None, :]] * np.outer(ui, uj)
        + s_mat[cols[:, None], cols[None, :]] * np.outer(ui, ui)
    )
    cov = cov + sigma2 * cross + 2.0 * pt.sqr(sigma2) * np.outer(ui * uj, ui * uj)
    return mean, 0.5 * (cov + cov.T)


def normal_x_moments_pt(
    loc: pt.TensorVariable, cov: pt.TensorVariable
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """E[x̃x̃ᵀ] and Φ of x̃ = (1, x) for x ~ N(loc, cov) (Isserlis), as PyTensor expressions.

    The same formulas as :func:`~pymc_dp.regression.normal_x_moments`, unbatched.
    """
    mu = pt.concatenate([pt.ones((1,)), loc])
    size = mu.type.shape[0] if mu.type.shape[0] is not None else mu.shape[0]
    sig = pt.zeros((size, size))
    sig = pt.set_subtensor(sig[1:, 1:], cov)
    mm = pt.outer(mu, mu)
    second = mm + sig
    # Axes (a, b, c, e) of Φ = Cov(x̃_a x̃_b, x̃_c x̃_e).
    phi = (
        mm[:, None, :, None] * sig[None, :, None, :]
        + mm[:, None, None, :] * sig[None, :, :, None]
        + mm[None, :, :, None] * sig[:, None, None, :]
        + mm[None, :, None, :] * sig[:, None, :, None]
        + sig[:, None, :, None] * sig[None, :, None, :]
        + sig[:, None, None, :] * sig[None, :, :, None]
    )
    return second, phi


def binary_x_moments_pt(
    probs: pt.TensorVariable, d: int
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """E[x̃x̃ᵀ] and Φ of x̃ = (1, x) for binary x with cell probabilities π (2^d,), in PyTensor.

    Linear in π (:func:`~pymc_dp.regression.kernels.x_models.binary_cell_tensor`); the same as
    :func:`~pymc_dp.regression.kernels.x_models.binary_x_moments`.
    """
    e4 = pt.tensordot(probs, pt.constant(binary_cell_tensor(d)), axes=1)
    second = e4[0, 0]
    return second, e4 - second[:, :, None, None] * second[None, None, :, :]


def unpack_statistic_pt(
    value: pt.TensorVariable, n: pt.TensorVariable, d: int
) -> pt.TensorVariable:
    """``B`` (d + 2, d + 2) from the statistic, as :func:`~pymc_dp.regression.unpack_statistic`."""
    rows, cols = released_pairs(d)
    b = pt.zeros((d + 2, d + 2))
    b = pt.set_subtensor(b[rows, cols], value)
    b = pt.set_subtensor(b[cols, rows], value)
    return pt.set_subtensor(b[0, 0], n)


def model_statistic_pt(gram, theta, sigma2, n):
    """B with Gram block ``gram`` ``(p, p)``, ``b = Aθ`` and ``R = (n − p)σ²``, ``(p + 1, p + 1)``.

    The response entries a data set with residuals of mean square σ² orthogonal to X would have:
    the steps' support points, a statistic the exact law gives positive density.
    """
    p = static_d(theta) + 1
    xty = gram @ theta
    b = pt.zeros((p + 1, p + 1))
    b = pt.set_subtensor(b[:p, :p], gram)
    b = pt.set_subtensor(b[:p, p], xty)
    b = pt.set_subtensor(b[p, :p], xty)
    return pt.set_subtensor(b[p, p], pt.dot(xty, theta) + (n - p) * sigma2)


def _mean_statistic(mean, n, size, d):
    """``n`` times the mean of one record's t, broadcast to ``size`` (a support point)."""
    point = n * mean
    if not rv_size_is_none(size):
        point = pt.full((*size, n_released(d)), point)
    return point


def statistic_support_shape(self, dist_params, param_shapes=None):
    """Support shape ``(m,)`` of a statistic RV whose first parameter is θ of length p."""
    shapes = param_shapes or [p.shape for p in dist_params]
    p = shapes[0][-1]
    return ((p + 1) * (p + 2) // 2 - 1,)


def static_d(theta: pt.TensorVariable) -> int:
    """d, the number of covariates, from θ's static length d + 1."""
    p = theta.type.shape[-1]
    if p is None:
        raise ValueError("theta must have a static length d + 1 (intercept first)")
    return int(p) - 1


def _normal_logp_pt(chol, centred):
    """The log density N(x; μ, LLᵀ) of each column of ``centred`` = x − μ, ``(k,)`` or ``(k, m)``.

    Written out rather than ``pm.MvNormal``'s: the diagonal indexed by constants (``L``'s size
    must be static) keeps the symbolic gradient that ``pm.sample`` builds small.
    """
    k = chol.type.shape[-1]
    diag = np.arange(k)
    white = pt.linalg.solve_triangular(chol, centred, lower=True)
    return (
        -0.5 * k * np.log(2.0 * np.pi)
        - pt.sum(pt.log(chol[diag, diag]))
        - 0.5 * pt.sum(pt.sqr(white), axis=0)
    )


class RegressionSuffStatRV(RandomVariable):
    """s ~ N(nμ_t, nΣ_t) restricted to PSD ``B(s)``; parameters θ, σ², E[x̃x̃ᵀ], Φ, n."""

    name = "regression_suffstat"
    signature = "(p),(),(p,p),(p,p,p,p),()->(m)"
    dtype = "floatX"
    _print_name = ("RegressionSuffStat", "\\operatorname{RegressionSuffStat}")

    _supp_shape_from_params = statistic_support_shape

    @classmethod
    def rng_fn(cls, rng, theta, sigma2, second, fourth_cov, n, size):
        """Draw the normal restricted to valid statistics, else project its mean.

        The first valid of 32 proposals; failing that, the projection of the CLT mean, strictly
        inside the PSD cone (a valid start for the Gibbs chain).
        """
        mean, cov = suffstat_moments(theta, sigma2, XMoments(second, fourth_cov))
        n = float(n)
        mean, cov = n * mean, n * cov
        if size is not None:
            mean = np.broadcast_to(mean, (*size, mean.shape[-1]))
        lam, vec = np.linalg.eigh(cov)
        factor = vec * np.sqrt(np.maximum(lam, 0.0))[..., None, :]
        noise = rng.standard_normal((_PROPOSALS, *mean.shape))
        cand = mean + np.einsum("...ij,k...j->k...i", factor, noise)
        valid = is_valid_statistic(cand, n)
        first = np.argmax(valid, axis=0)
        picked = np.take_along_axis(cand, first[None, ..., None], axis=0)[0]
        fallback = pack_statistic(project_psd(unpack_statistic(mean, n), floor=_START_FLOOR * n))
        return np.where(np.any(valid, axis=0)[..., None], picked, fallback)


regression_suffstat = RegressionSuffStatRV()


class RegressionSuffStat(Continuous):
    """Latent regression statistic s of n records (released layout, ``B[0, 0] = n`` left out).

    Parameters
    ----------
    theta
        Coefficients θ, intercept first, shape ``(p,)`` with a static ``p = d + 1``.
    sigma2
        Regression noise variance σ².
    second, fourth_cov
        Moments of x̃ = (1, x): ``E[x̃x̃ᵀ]`` (p, p) and ``Φ = Cov(x̃_a x̃_b, x̃_c x̃_e)``.
    n
        Number of records.

    Notes
    -----
    The log density is the CLT normal ``N(s; nμ_t, nΣ_t)`` on the PSD set, not renormalised
    there (as the Gibbs-SS restricted draw), and −∞ outside it.
    """

    rv_op = regression_suffstat

    @classmethod
    def dist(cls, theta, sigma2, second, fourth_cov, n, **kwargs):  # noqa: D102
        return super().dist([theta, sigma2, second, fourth_cov, n], **kwargs)

    def support_point(rv, size, theta, sigma2, second, fourth_cov, n):  # noqa: D102
        d = static_d(theta)
        mean, _ = clt_moments_pt(theta, sigma2, second, fourth_cov, d)
        return _mean_statistic(mean, n, size, d)

    def logp(value, theta, sigma2, second, fourth_cov, n):  # noqa: D102
        d = static_d(theta)
        k = n_released(d)
        diag = np.arange(k)
        mean, cov = clt_moments_pt(theta, sigma2, second, fourth_cov, d)
        cov = n * cov
        jitter = pytensor.gradient.zero_grad(_JITTER * pt.max(cov[diag, diag]))
        chol = pt.linalg.cholesky(cov + jitter * np.eye(k))
        logp = _normal_logp_pt(chol, value - n * mean)
        b = unpack_statistic_pt(value, n, d)
        edge = b[1:, 0]
        schur = b[1:, 1:] - pt.outer(edge, edge) / n
        lowest = pt.linalg.eigh(schur)[0][0]
        # The tolerance scales with B, as in is_valid_statistic.
        scale = pt.maximum(n, pt.max(pt.abs(pt.diagonal(b))))
        return pt.switch(lowest >= -_PSD_TOL * scale, logp, -np.inf)


class NormalModelSuffStatRV(RandomVariable):
    """s with its exact law given θ, σ², μ_x, Σ_x and n (normal covariates)."""

    name = "normal_model_suffstat"
    signature = "(p),(),(d),(d,d),()->(m)"
    dtype = "floatX"
    _print_name = ("NormalModelSuffStat", "\\operatorname{NormalModelSuffStat}")

    _supp_shape_from_params = statistic_support_shape

    @classmethod
    def rng_fn(cls, rng, theta, sigma2, x_loc, x_cov, n, size):  # noqa: D102
        return draw_statistic(
            rng, theta=theta, sigma2=sigma2, x_loc=x_loc, x_cov=x_cov, n=int(n),
            size=() if size is None else tuple(size),
        )  # fmt: skip


normal_model_suffstat = NormalModelSuffStatRV()


class NormalModelSuffStat(Continuous):
    """Latent statistic s of n records whose covariates are N(μ_x, Σ_x), with its exact law.

    Parameters
    ----------
    theta, sigma2
        Coefficients (intercept first, static length d + 1) and noise variance.
    x_loc, x_cov
        μ_x (d,) and Σ_x (d, d) of the covariates' normal model.
    n
        Number of records.

    Notes
    -----
    The log density is :func:`~pymc_dp.regression.kernels.normal_model.statistic_logpdf` in
    PyTensor: ``x̄ ~ N(μ_x, Σ_x/n)``, ``C ~ Wishart(n − 1, Σ_x)``, ``X̃ᵀy | X̃ᵀX̃ ~ N(Aθ, σ²A)`` and
    the residual sum of squares ``σ²χ²(n − d − 1)``; −∞ off the valid statistics.
    """

    rv_op = normal_model_suffstat

    @classmethod
    def dist(cls, theta, sigma2, x_loc, x_cov, n, **kwargs):  # noqa: D102
        return super().dist([theta, sigma2, x_loc, x_cov, n], **kwargs)

    def support_point(rv, size, theta, sigma2, x_loc, x_cov, n):  # noqa: D102
        d = static_d(theta)
        mean, _ = _record_mean_pt(theta, sigma2, x_loc, x_cov, d)
        return _mean_statistic(mean, n, size, d)

    def logp(value, theta, sigma2, x_loc, x_cov, n):  # noqa: D102
        d = static_d(theta)
        p = d + 1
        diag_d = np.arange(d)
        b = unpack_statistic_pt(value, n, d)
        gram = b[:p, :p]
        mean = gram[0, 1:] / n
        scatter = gram[1:, 1:] - n * pt.outer(mean, mean)
        response, response_ok = response_logp_pt(b, theta, sigma2, n)
        cov_chol = pt.linalg.cholesky(x_cov)
        logdet_cov = 2.0 * pt.sum(pt.log(cov_chol[diag_d, diag_d]))
        centred = pt.linalg.solve_triangular(cov_chol, mean - x_loc, lower=True)
        half_c = pt.linalg.solve_triangular(cov_chol, scatter, lower=True)
        whitened = pt.linalg.solve_triangular(cov_chol, half_c.T, lower=True)
        trace = pt.sum(whitened[diag_d, diag_d])
        scatter_chol = pt.linalg.cholesky(scatter)
        logdet_scatter = 2.0 * pt.sum(pt.log(scatter_chol[diag_d, diag_d]))
        logp = (
            -0.5 * d * (np.log(2.0 * np.pi) + pt.log(n))
            - 0.5 * logdet_cov
            - 0.5 * n * pt.sum(pt.sqr(centred))
            + 0.5 * (n - d - 2) * logdet_scatter
            - 0.5 * trace
            - 0.5 * (n - 1) * d * np.log(2.0)
            - 0.5 * (n - 1) * logdet_cov
            - multigammaln(0.5 * (n - 1), d)
            + response
        )
        valid = ~pt.any(pt.isnan(scatter_chol)) & response_ok
        return pt.switch(valid, logp, -np.inf)


def response_logp_pt(b, theta, sigma2, n):
    """The responses' log density log N(b; Aθ, σ²A) + log Gamma(R; (n − p)/2, 2σ²), and validity.

    :func:`~pymc_dp.regression.kernels.normal_model.response_logpdf` in PyTensor; the same
    whatever the model of x (the normal and the mixed models use it).
    """
    p = theta.type.shape[-1]
    diag_p = np.arange(p)
    gram = b[:p, :p]
    xty = b[:p, p]
    gram_chol = pt.linalg.cholesky(gram)
    half_b = pt.linalg.solve_triangular(gram_chol, xty, lower=True)
    rss = b[p, p] - pt.sum(pt.sqr(half_b))
    resid = pt.linalg.solve_triangular(gram_chol, xty - gram @ theta, lower=True)
    half = 0.5 * (n - p)
    logp = (
        -0.5 * p * pt.log(2.0 * np.pi * sigma2)
        - pt.sum(pt.log(gram_chol[diag_p, diag_p]))
        - 0.5 * pt.sum(pt.sqr(resid)) / sigma2
        + (half - 1.0) * pt.log(rss)
        - rss / (2.0 * sigma2)
        - half * pt.log(2.0 * sigma2)
        - pt.gammaln(half)
    )
    return logp, ~pt.any(pt.isnan(gram_chol)) & (rss > 0)


def _static_index(binary: pt.TensorVariable, d: int) -> int:
    """The binary covariate's index, which must be a constant of the graph."""
    try:
        j = int(pt.get_underlying_scalar_constant_value(binary))
    except NotScalarConstantError:
        raise ValueError("the binary covariate's index must be a constant") from None
    covariate_order(d, j)  # raises unless 0 <= j < d
    return j


class MixedModelSuffStatRV(RandomVariable):
    """s with its exact law given θ, σ², π, the group means, Σ and n (one binary covariate)."""

    name = "mixed_model_suffstat"
    signature = "(p),(),(),(g,e),(e,e),(),()->(m)"
    dtype = "floatX"
    _print_name = ("MixedModelSuffStat", "\\operatorname{MixedModelSuffStat}")

    _supp_shape_from_params = statistic_support_shape

    @classmethod
    def rng_fn(cls, rng, theta, sigma2, prob, group_loc, x_cov, n, binary, size):  # noqa: D102
        d = theta.shape[-1] - 1
        coef = covariate_order(d, int(binary))[: d + 1]
        par = MixedParameters(theta[..., coef], sigma2, prob, group_loc, x_cov)
        s = draw_mixed_statistic(rng, par, int(n), size=() if size is None else tuple(size))
        return binary_first(s, int(binary), inverse=True)


mixed_model_suffstat = MixedModelSuffStatRV()


class MixedModelSuffStat(Continuous):
    """Latent statistic s of n records with one binary covariate beside normal ones.

    Parameters
    ----------
    theta, sigma2
        Coefficients (intercept first, static length d + 1) and noise variance.
    prob
        π = P(x_b = 1).
    group_loc, x_cov
        The other covariates' means where x_b = 0 and where x_b = 1, ``(2, d − 1)``, and
        their covariance within a group, ``(d − 1, d − 1)``.
    n
        Number of records.
    binary
        Index of the binary covariate (a constant).

    Notes
    -----
    The log density is :func:`~pymc_dp.regression.kernels.mixed_model.mixed_statistic_logpdf`
    in PyTensor: k = Σ x_b from Binomial(n, π) restricted to [1, n − 1], the group sums of the
    other covariates normal, their pooled scatter Wishart(n − 2, Σ), and the responses as in
    :class:`NormalModelSuffStat`; −∞ where ``Σ x_b² ≠ Σ x_b``, k is not a whole number in
    [1, n − 1] or the statistic is not valid. The density is with respect to counting measure
    on k and Lebesgue measure on the other entries.
    """

    rv_op = mixed_model_suffstat

    @classmethod
    def dist(cls, theta, sigma2, prob, group_loc, x_cov, n, binary=0, **kwargs):  # noqa: D102
        return super().dist([theta, sigma2, prob, group_loc, x_cov, n, binary], **kwargs)

    def support_point(rv, size, theta, sigma2, prob, group_loc, x_cov, n, binary):  # noqa: D102
        # A statistic of the model: k = nπ rounded into [1, n − 1], the group sums at their
        # means, W = (n − 2)Σ, b = Aθ and R = (n − p)σ².
        d = static_d(theta)
        p = d + 1
        order = covariate_order(d, _static_index(binary, d))
        back = np.argsort(order)
        inner = theta[order[:p]]
        k = pt.clip(pt.round(n * prob), 1.0, n - 1.0)
        gram = pt.zeros((p, p))
        gram = pt.set_subtensor(gram[0, 0], n)
        gram = pt.set_subtensor(gram[0, 1], k)
        gram = pt.set_subtensor(gram[1, 0], k)
        gram = pt.set_subtensor(gram[1, 1], k)
        if d > 1:
            sums0, sums1 = (n - k) * group_loc[0], k * group_loc[1]
            second = (n - 2.0) * x_cov + pt.outer(sums0, sums0) / (n - k)
            second = second + pt.outer(sums1, sums1) / k
            gram = pt.set_subtensor(gram[0, 2:p], sums0 + sums1)
            gram = pt.set_subtensor(gram[2:p, 0], sums0 + sums1)
            gram = pt.set_subtensor(gram[1, 2:p], sums1)
            gram = pt.set_subtensor(gram[2:p, 1], sums1)
            gram = pt.set_subtensor(gram[2:p, 2:p], second)
        b = model_statistic_pt(gram, inner, sigma2, n)
        rows, cols = released_pairs(d)
        point = b[back][:, back][rows, cols]
        if not rv_size_is_none(size):
            point = pt.full((*size, n_released(d)), point)
        return point

    def logp(value, theta, sigma2, prob, group_loc, x_cov, n, binary):  # noqa: D102
        d = static_d(theta)
        p, d2 = d + 1, d - 1
        n = pt.cast(n, "float64")  # a Python float n would be float32: gammaln at 1e-6
        order = covariate_order(d, _static_index(binary, d))
        b_user = unpack_statistic_pt(value, n, d)
        b = b_user[order][:, order]
        k, tie = b[0, 1], b[1, 1]
        log_z = pt.log(-pt.expm1(pt.logaddexp(n * pt.log(prob), n * pt.log1p(-prob))))
        logp = (
            pt.gammaln(n + 1.0) - pt.gammaln(k + 1.0) - pt.gammaln(n - k + 1.0)
            + k * pt.log(prob) + (n - k) * pt.log1p(-prob) - log_z
        )  # fmt: skip
        valid = pt.eq(tie, k) & pt.eq(k, pt.round(k)) & (k >= 1) & (k <= n - 1)
        if d2:
            sums1 = b[1, 2:p]
            location, location_ok = location_logp_pt(
                [b[0, 2:p] - sums1, sums1], [n - k, k], b[2:p, 2:p], group_loc, x_cov, d2
            )
            logp, valid = logp + location, valid & location_ok
        response, response_ok = response_logp_pt(b_user, theta, sigma2, n)
        return pt.switch(valid & response_ok, logp + response, -np.inf)


def location_logp_pt(sums, sizes, second, group_loc, x_cov, d2):
    """The level sums' and W's log density given the sizes, and whether it is defined (PyTensor).

    :func:`~pymc_dp.regression.kernels.level_model.location_logpdf` for the groups ``g`` of
    ``sums`` (a list of ``(d₂,)`` tensors) and ``sizes`` (scalars): ``second`` is the normal
    covariates' Σ x₂x₂ᵀ, from which W = second − Σ_g S_g S_gᵀ / n_g; W ~ Wishart(n − K, Σ).
    """
    diag = np.arange(d2)
    cov_chol = pt.linalg.cholesky(x_cov)
    logdet_cov = 2.0 * pt.sum(pt.log(cov_chol[diag, diag]))
    logp = pt.as_tensor_variable(0.0)
    scatter = second
    for g, (level_sums, size) in enumerate(zip(sums, sizes, strict=True)):
        centred = pt.linalg.solve_triangular(cov_chol, level_sums / size - group_loc[g],
                                             lower=True)  # fmt: skip
        logp = logp - 0.5 * d2 * (np.log(2.0 * np.pi) + pt.log(size))
        logp = logp - 0.5 * logdet_cov - 0.5 * size * pt.sum(pt.sqr(centred))
        scatter = scatter - pt.outer(level_sums, level_sums) / size
    wishart, defined = _wishart_logp_pt(scatter, cov_chol, logdet_cov, sum(sizes) - len(sizes), d2)
    return logp + wishart, defined


def _wishart_logp_pt(scatter, cov_chol, logdet_cov, dof, d2):
    """The log Wishart(W; dof, Σ) given Σ's Cholesky factor and log det, and W's definiteness."""
    diag = np.arange(d2)
    scatter_chol = pt.linalg.cholesky(scatter)
    logdet_w = 2.0 * pt.sum(pt.log(scatter_chol[diag, diag]))
    half_w = pt.linalg.solve_triangular(cov_chol, scatter, lower=True)
    whitened = pt.linalg.solve_triangular(cov_chol, half_w.T, lower=True)
    logp = (
        0.5 * (dof - d2 - 1) * logdet_w
        - 0.5 * pt.sum(whitened[diag, diag])
        - 0.5 * dof * d2 * np.log(2.0)
        - 0.5 * dof * logdet_cov
        - multigammaln(0.5 * dof, d2)
    )
    return logp, ~pt.any(pt.isnan(scatter_chol))


def design_location_logp_pt(sums, gram, second, group_loc, x_cov, n, d2):
    """T's and W's log density given G = DᵀD, and whether it is defined (PyTensor).

    :func:`~pymc_dp.regression.kernels.level_model.design_location_logpdf`: ``sums`` T
    ``(r, d₂)``, ``gram`` G ``(r, r)``, ``second`` the normal covariates' Σ x₂x₂ᵀ, from which
    W = second − TᵀG⁻¹T ~ Wishart(n − r, Σ); T ~ MatrixNormal(G M, G, Σ).
    """
    r = int(gram.type.shape[0])
    diag, diag_r = np.arange(d2), np.arange(r)
    cov_chol = pt.linalg.cholesky(x_cov)
    logdet_cov = 2.0 * pt.sum(pt.log(cov_chol[diag, diag]))
    gram_chol = pt.linalg.cholesky(gram)
    logdet_g = 2.0 * pt.sum(pt.log(gram_chol[diag_r, diag_r]))
    half = pt.linalg.solve_triangular(gram_chol, sums - pt.dot(gram, group_loc), lower=True)
    white = pt.linalg.solve_triangular(cov_chol, half.T, lower=True)
    logp = (
        -0.5 * r * d2 * np.log(2.0 * np.pi)
        - 0.5 * d2 * logdet_g
        - 0.5 * r * logdet_cov
        - 0.5 * pt.sum(pt.sqr(white))
    )
    fitted = pt.linalg.solve_triangular(gram_chol, sums, lower=True)
    scatter = second - pt.dot(fitted.T, fitted)
    wishart, defined = _wishart_logp_pt(scatter, cov_chol, logdet_cov, n - r, d2)
    return logp + wishart, defined & ~pt.any(pt.isnan(gram_chol))


def _record_mean_pt(theta, sigma2, x_loc, x_cov, d):
    """E t of one record under the normal model, as :func:`record_moments`' mean (PyTensor)."""
    p = d + 1
    rows, cols = released_pairs(d)
    mean = pt.concatenate([pt.ones((1,)), x_loc, (theta[0] + pt.dot(theta[1:], x_loc))[None]])
    second = pt.outer(mean, mean)
    cov_xy = x_cov @ theta[1:]
    extra = pt.zeros((p + 1, p + 1))
    extra = pt.set_subtensor(extra[1:p, 1:p], x_cov)
    extra = pt.set_subtensor(extra[1:p, p], cov_xy)
    extra = pt.set_subtensor(extra[p, 1:p], cov_xy)
    extra = pt.set_subtensor(extra[p, p], pt.dot(theta[1:], cov_xy) + sigma2)
    second = second + extra
    return second[rows, cols], second


class InverseWishartRV(RandomVariable):
    """Σ ~ InverseWishart(ν, Ψ): E Σ = Ψ / (ν − d − 1)."""

    name = "inverse_wishart"
    signature = "(),(d,d)->(d,d)"
    dtype = "floatX"
    _print_name = ("InverseWishart", "\\operatorname{InverseWishart}")

    @classmethod
    def rng_fn(cls, rng, dof, scale, size):  # noqa: D102
        d = scale.shape[-1]
        dof = np.asarray(dof, dtype=np.float64)
        if size is not None:  # PyTensor's size is the whole batch shape, parameters included
            dof = np.broadcast_to(dof, tuple(size))
            scale = np.broadcast_to(scale, (*size, d, d))
        batch = np.broadcast_shapes(dof.shape, scale.shape[:-2])
        niw = NIW(np.zeros((*batch, d)), np.ones(batch), dof, scale)
        return draw_niw(rng, niw)[1]


inverse_wishart = InverseWishartRV()


class InverseWishart(Continuous):
    """Inverse-Wishart distribution of a d × d covariance matrix.

    Parameters
    ----------
    dof
        Degrees of freedom ν > d − 1.
    scale
        Scale matrix Ψ, symmetric positive definite.
    """

    rv_op = inverse_wishart

    @classmethod
    def dist(cls, dof, scale, **kwargs):  # noqa: D102
        return super().dist([dof, scale], **kwargs)

    def support_point(rv, size, dof, scale):  # noqa: D102
        # The mode Ψ / (ν + d + 1): always defined, unlike the mean.
        d = scale.shape[-1]
        point = scale / (dof + d + 1)
        if not rv_size_is_none(size):
            point = pt.full((*size, d, d), point)
        return point

    def logp(value, dof, scale):  # noqa: D102
        d = value.type.shape[-1]
        if d is None:
            raise ValueError("InverseWishart needs a static matrix size")
        diag = np.arange(d)
        chol = pt.linalg.cholesky(value)
        logdet = 2.0 * pt.sum(pt.log(chol[diag, diag]))
        logdet_scale = 2.0 * pt.sum(pt.log(pt.linalg.cholesky(scale)[diag, diag]))
        trace = pt.sum(pt.linalg.solve(value, scale)[diag, diag])
        logp = (
            0.5 * dof * logdet_scale
            - 0.5 * dof * d * np.log(2.0)
            - multigammaln(0.5 * dof, d)
            - 0.5 * (dof + d + 1) * logdet
            - 0.5 * trace
        )
        symmetric = pt.all(pt.abs(value - value.T) <= 1e-8 * pt.max(pt.abs(value)))
        logp = pt.switch(symmetric & ~pt.any(pt.isnan(chol)), logp, -np.inf)
        return check_parameters(logp, dof > d - 1, msg="dof > d - 1")


class SharedCovNormalRV(RandomVariable):
    """x ~ N(μ, Σ) along the last axis, every row of μ with the same Σ."""

    name = "shared_cov_normal"
    signature = "(e),(e,e)->(e)"
    dtype = "floatX"
    _print_name = ("SharedCovNormal", "\\operatorname{SharedCovNormal}")

    @classmethod
    def rng_fn(cls, rng, mu, cov, size):
        e = cov.shape[-1]
        if size is None:
            batch = np.broadcast_shapes(mu.shape[:-1], cov.shape[:-2])
        else:  # PyTensor's size is the whole batch shape
            batch = tuple(size)
        chol = np.linalg.cholesky(cov)
        return mu + (chol @ rng.standard_normal((*batch, e, 1)))[..., 0]


shared_cov_normal = SharedCovNormalRV()


class SharedCovNormal(Continuous):
    """Multivariate normal rows N(μ_g, Σ) with one covariance Σ: ``pm.MvNormal``'s law.

    Parameters
    ----------
    mu
        Means ``(..., e)``.
    cov
        The covariance ``(e, e)``, of a static size, shared by every row.

    Notes
    -----
    The log density is written out (one Cholesky factor of Σ itself, one triangular solve of
    every row, the diagonal indexed by constants) rather than ``pm.MvNormal``'s, which factors
    Σ broadcast to the rows: the gradient of such a batched factor, which PyMC builds for
    every variable before it assigns the steps, is vectorised by PyTensor with the static
    shapes of the whole model folded, about 2 s of each ``pm.sample`` of the level models.
    """

    rv_op = shared_cov_normal

    @classmethod
    def dist(cls, mu, cov, **kwargs):
        cov = pt.as_tensor_variable(cov)
        if cov.type.ndim != 2 or cov.type.shape[-1] is None:
            raise ValueError("SharedCovNormal's cov must be one matrix of a static size")
        return super().dist([mu, cov], **kwargs)

    def support_point(rv, size, mu, cov):
        return pt.broadcast_to(mu, rv.shape)

    def logp(value, mu, cov):
        e = cov.type.shape[-1]
        # The node broadcasts Σ to the rows' batch dims (of length 1): back to the matrix.
        chol = pt.linalg.cholesky(pt.reshape(cov, (e, e)))
        logp = _normal_logp_pt(chol, pt.reshape(value - mu, (-1, e)).T)
        logp = pt.reshape(logp, pt.broadcast_shape(value, mu)[:-1])
        return pt.switch(pt.any(pt.isnan(chol)), -np.inf, logp)
