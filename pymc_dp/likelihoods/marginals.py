"""p(y | θ) of noisy marginal tables under a log-linear model, in PyTensor.

Two laws of a :class:`~pymc_dp.curator.marginals.MarginalRelease` given the log-linear
parameters θ (:mod:`pymc_dp.kernels.loglinear` holds the NumPy side):

* :func:`marginals_clt_logp`, the collapsed normal: the projection z = Uᵀ y onto the directions
  in which the tables vary with the data is N(n E_θ[g], n Cov_θ[g] + v I), the CLT law of the
  exact tables convolved with the noise (v its per-cell variance). Exact-collapsed for Gaussian
  noise up to the CLT; for Laplace noise, the noise is replaced by a normal of the same variance.
* :func:`marginals_clt_fixed_logp`, the same with its covariance held at a reference θ (the
  Laplace mode): the gradient costs O(C p) instead of O(C p²), for large domains.
* :func:`marginals_clt_fixed_split_graph`, the fixed-covariance law as a plain PyTensor graph of
  the split sums (:class:`~pymc_dp.kernels.loglinear_split.SplitMoments`): log Z is a
  log-sum-exp over the #A × #B matrix of logits, E_θ[a] its gradient, and NUTS's gradient a
  second derivative, all by PyTensor's autodiff, so it compiles on the C, Numba and JAX backends.
* :func:`marginals_exact_logp`, the exact law for a tiny release: a log-sum-exp over every
  histogram of the n records (:func:`~pymc_dp.kernels.loglinear.exact_marginals_setup`).

The moments are sums over the enumerated domain (a softmax of A θ), so NUTS gets gradients;
above :data:`~pymc_dp.kernels.loglinear.MAX_CELLS` cells the fixed-covariance law takes them
from the split sums or a junction tree (exact) or the Bethe approximation
(:func:`~pymc_dp.kernels.loglinear_moments.feature_method`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from threadpoolctl import ThreadpoolController

from pymc_dp._compat import pullback_op
from pymc_dp.kernels.loglinear import (
    LogLinearDomain,
    discrete_gaussian_logpmf,
    discrete_gaussian_variance,
    discrete_laplace_logpmf,
    discrete_laplace_variance,
    exact_marginals_setup,
    marginals_clt_logp_grad,
)
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge
from pymc_dp.kernels.loglinear_laplace import marginals_clt_fixed_logp_grad
from pymc_dp.kernels.loglinear_moments import (
    clt_fixed_logp_grad,
    feature_moments,
    likelihood_method,
)
from pymc_dp.kernels.loglinear_split import SplitMoments
from pymc_dp.kernels.loglinear_tables import TableProducts, prefer_tables

__all__ = [
    "CLTLogp",
    "FeatureMean",
    "marginals_clt_fixed_logp",
    "marginals_clt_fixed_split_graph",
    "marginals_clt_logp",
    "marginals_clt_logp_graph",
    "marginals_exact_logp",
    "noise_variance",
    "projected_release",
    "split_log_partition_graph",
]


def noise_variance(release: Any) -> float:
    """The per-cell variance of the release's noise (exact for the discrete laws)."""
    if release.mechanism == "discrete-gaussian":
        return discrete_gaussian_variance(release.noise_scale)
    if release.mechanism == "discrete-laplace":
        return discrete_laplace_variance(release.noise_scale)
    return 2.0 * release.noise_scale**2  # laplace-float


def projected_release(release: Any) -> tuple[LogLinearDomain, np.ndarray]:
    """The release's domain and z = Uᵀ y, the part of y that carries information about θ."""
    dom = release.domain
    return dom, release.y @ dom.projection


_BLAS = ThreadpoolController()


@pullback_op
class CLTLogp(Op):
    """Collapsed normal log p(z | θ) of one θ vector and its gradient, in one NumPy call.

    The Op has two outputs, the log-density and its gradient
    (:func:`~pymc_dp.kernels.loglinear.marginals_clt_logp_grad`, analytic); its ``grad`` reads
    the second, so NUTS's value-and-gradient function runs one pass over the domain per
    leapfrog step. BLAS runs on one thread inside it: the matrices are small (p ≤ a few
    hundred), and a multi-threaded BLAS on a busy machine was measured 40x slower (47 ms
    against 1 ms per call, 10 binary columns); parallelism comes from the chains.
    PyTensor's own graph (:func:`marginals_clt_logp_graph`) gives the same value.
    """

    def __init__(
        self,
        dom: LogLinearDomain,
        z: Any,
        n: int,
        noise_variance: float,
        chol: np.ndarray | None = None,
        method: str | None = None,
    ):
        self.args = (dom, np.asarray(z, dtype=float), int(n), float(noise_variance))
        self.chol = chol
        if method is None:
            method = likelihood_method(dom, "clt" if chol is None else "clt-fixed")
        self.engine = None if method == "enumerate" else feature_moments(dom, method)
        if self.engine is not None and chol is None:
            raise ValueError(
                f"the moments come from {method!r} (the domain has {dom.n_cells} cells): only "
                "the fixed-covariance likelihood ('clt-fixed') is available with them"
            )
        use_tables = chol is not None and self.engine is None and prefer_tables(dom)
        self.products = TableProducts(dom) if use_tables else None

    def make_node(self, theta: Any) -> Apply:
        """θ (a vector) in; the scalar log-density and its gradient out."""
        theta = pt.as_tensor_variable(theta)
        return Apply(self, [theta], [pt.dscalar(), theta.type()])

    def perform(self, node: Any, inputs: Any, outputs: Any) -> None:
        """Evaluate the log-density and its gradient in NumPy."""
        dom, z, n, var = self.args
        with _BLAS.limit(limits=1, user_api="blas"):
            if self.engine is not None:
                try:
                    logp, grad = clt_fixed_logp_grad(
                        inputs[0], dom, self.engine, z, n=n, chol=self.chol
                    )
                except BetheDidNotConverge:
                    # far from the posterior (a sampler's early excursion) the Bethe law is
                    # undefined: the point is rejected (NUTS counts a divergence)
                    logp, grad = -np.inf, np.zeros_like(inputs[0])
            elif self.chol is None:
                logp, grad = marginals_clt_logp_grad(inputs[0], dom, z, n=n, noise_variance=var)
            else:
                logp, grad = marginals_clt_fixed_logp_grad(
                    inputs[0], dom, z, n=n, chol=self.chol, products=self.products
                )
        outputs[0][0] = np.asarray(logp)
        outputs[1][0] = np.asarray(grad, dtype=node.outputs[1].dtype)

    def pullback(self, inputs: Any, outputs: Any, output_grads: Any) -> list[Any]:
        """The analytic gradient (the second output); no second derivatives."""
        if not isinstance(output_grads[1].type, DisconnectedType):
            return [grad_not_implemented(self, 0, inputs[0], "second derivatives of CLTLogp")]
        return [output_grads[0] * self(inputs[0])[1]]

    def connection_pattern(self, node: Any) -> list[list[bool]]:
        """Both outputs depend on θ."""
        return [[True, True]]


@pullback_op
class FeatureMean(Op):
    """E_θ[a] of a log-linear domain as a differentiable PyTensor Op, by any feature method.

    The derivative of the mean is the covariance, so the vector-Jacobian product gᵀ ∂E[a]/∂θ
    is Cov_θ[a] g (Cov is symmetric), one more pass of the engine
    (:meth:`~pymc_dp.kernels.loglinear_moments.FeatureMoments.mean_and_jvp`): the junction
    tree's complex step, the enumerated sums, or Bethe's linear response (whose "covariance" is
    the derivative of the Bethe mean, so the gradient is consistent with the value).

    Parameters
    ----------
    dom
        The domain.
    method
        ``"enumerate"``, ``"split"``, ``"junction"``, ``"bethe"`` or None
        (:func:`~pymc_dp.kernels.loglinear_moments.feature_method`).
    """

    def __init__(self, dom: LogLinearDomain, method: str | None = None):
        self.engine = feature_moments(dom, method)
        self.jvp = _FeatureJVP(self.engine)

    def make_node(self, theta: Any) -> Apply:
        """θ (a vector) in, E_θ[a] out."""
        theta = pt.as_tensor_variable(theta)
        return Apply(self, [theta], [theta.type()])

    def perform(self, node: Any, inputs: Any, outputs: Any) -> None:
        """E_θ[a] in NumPy."""
        outputs[0][0] = np.asarray(self.engine.mean(inputs[0]), dtype=node.outputs[0].dtype)

    def pullback(self, inputs: Any, outputs: Any, output_grads: Any) -> list[Any]:
        """Cov_θ[a] times the output gradient."""
        return [self.jvp(inputs[0], output_grads[0])]


@pullback_op
class _FeatureJVP(Op):
    """Cov_θ[a] v (no further derivatives)."""

    def __init__(self, engine: Any):
        self.engine = engine

    def make_node(self, theta: Any, v: Any) -> Apply:
        theta, v = pt.as_tensor_variable(theta), pt.as_tensor_variable(v)
        return Apply(self, [theta, v], [theta.type()])

    def perform(self, node: Any, inputs: Any, outputs: Any) -> None:
        _, jvp = self.engine.mean_and_jvp(inputs[0], inputs[1])
        outputs[0][0] = np.asarray(jvp, dtype=node.outputs[0].dtype)

    def pullback(self, inputs: Any, outputs: Any, output_grads: Any) -> list[Any]:
        return [grad_not_implemented(self, i, inputs[i], "third moments") for i in range(2)]


def marginals_clt_logp(
    theta: Any, dom: LogLinearDomain, z: Any, *, n: int, noise_variance: float
) -> pt.TensorVariable:
    """Collapsed normal log p(z | θ) (see the module docstring), for one θ vector (an Op)."""
    return CLTLogp(dom, z, n, noise_variance)(theta)[0]


def marginals_clt_fixed_logp(
    theta: Any, dom: LogLinearDomain, z: Any, *, n: int, cov: Any, method: str | None = None
) -> pt.TensorVariable:
    """Collapsed normal log p(z | θ) with its covariance held at ``cov`` (an Op, O(C p)).

    See :func:`~pymc_dp.kernels.loglinear_laplace.marginals_clt_fixed_logp_grad`; ``method``
    is the feature moments' method (default
    :func:`~pymc_dp.kernels.loglinear_moments.feature_method`).
    """
    chol = np.linalg.cholesky(np.asarray(cov, dtype=float))
    return CLTLogp(dom, z, n, 0.0, chol, method)(theta)[0]


def marginals_clt_logp_graph(
    theta: Any, dom: LogLinearDomain, z: Any, *, n: int, noise_variance: float
) -> pt.TensorVariable:
    """The same as :func:`marginals_clt_logp` as a PyTensor graph (JAX/Numba backends)."""
    basis = pt.as_tensor_variable(dom.basis)
    g = pt.as_tensor_variable(dom.projected_features)
    logits = pt.dot(basis, theta)
    prob = pt.special.softmax(logits)
    mean = pt.dot(prob, g)
    cov = pt.dot(g.T * prob, g) - pt.outer(mean, mean)
    p = dom.n_params
    cov = n * cov + noise_variance * pt.eye(p)
    chol = pt.linalg.cholesky(cov)
    r = pt.as_tensor_variable(z) - n * mean
    w = pt.linalg.solve_triangular(chol, r, lower=True)
    log_det = 2.0 * pt.sum(pt.log(pt.diagonal(chol)))
    return -0.5 * (pt.sum(w**2) + log_det + p * math.log(2.0 * math.pi))


def split_log_partition_graph(theta: Any, engine: SplitMoments) -> pt.TensorVariable:
    """The log partition function log Z(θ) as a PyTensor graph of the split sums.

    A log-sum-exp over the #A × #B logits H_A Θ H_Bᵀ + G_A θ 1ᵀ + 1 (G_B θ)ᵀ
    (:class:`~pymc_dp.kernels.loglinear_split.SplitMoments`); E_θ[a] is ``pytensor.grad`` of
    the result and Cov_θ[a] its Hessian.
    """
    theta = pt.as_tensor_variable(theta)
    n_a, n_b = engine.cross_a.shape[1], engine.cross_b.shape[1]
    pair = pt.zeros(n_a * n_b)[engine.cross_flat].set(theta[engine.cross_terms])
    logits = (
        pt.dot(pt.dot(pt.constant(engine.cross_a), pair.reshape((n_a, n_b))), engine.cross_b.T)
        + pt.dot(pt.constant(engine.inside_a), theta)[:, None]
        + pt.dot(pt.constant(engine.inside_b), theta)[None, :]
    )
    return pt.logsumexp(logits)


def marginals_clt_fixed_split_graph(
    theta: Any, dom: LogLinearDomain, z: Any, *, n: int, cov: Any
) -> pt.TensorVariable:
    """:func:`marginals_clt_fixed_logp` by the split sums, as a plain PyTensor graph.

    N(z; n Uᵀ(c + M E_θ[a]), Σ₀) with E_θ[a] = ∇ log Z(θ) of :func:`split_log_partition_graph`;
    NUTS's gradient is PyTensor's second derivative of log Z (no ``Op``), so the graph compiles
    on every backend. Measured on 10 ternary columns, all 2-way tables
    (``benchmarks/marginals_split_engine.py``): see docs/marginals.md.
    """
    engine = SplitMoments(dom)
    mean = pytensor.grad(split_log_partition_graph(theta, engine), theta)
    uc, um = dom.projected_table_map
    chol = np.linalg.cholesky(np.asarray(cov, dtype=float))
    inv_chol = np.linalg.inv(chol)
    centre = inv_chol @ (np.asarray(z, dtype=float) - n * uc)
    w = pt.constant(centre) - pt.dot(pt.constant(n * inv_chol @ um), mean)
    log_det = 2.0 * float(np.sum(np.log(np.diag(chol))))
    return -0.5 * (pt.sum(w**2) + log_det + dom.n_params * math.log(2.0 * math.pi))


def exact_setup(release: Any) -> tuple[LogLinearDomain, np.ndarray, np.ndarray]:
    """Histograms and θ-free constants of the exact likelihood of an integer-noise release."""
    dom = release.domain
    if release.mechanism == "discrete-gaussian":
        sigma = release.noise_scale

        def law(k: np.ndarray) -> np.ndarray:
            return discrete_gaussian_logpmf(k, sigma)
    elif release.mechanism == "discrete-laplace":
        b = release.noise_scale

        def law(k: np.ndarray) -> np.ndarray:
            return discrete_laplace_logpmf(k, b)
    else:
        b = release.noise_scale

        def law(k: np.ndarray) -> np.ndarray:
            return -np.log(2.0 * b) - np.abs(k) / b

    hist, const = exact_marginals_setup(dom, release.y, n=release.n, noise_logpmf=law)
    return dom, hist, const


def marginals_exact_logp(
    theta: Any, dom: LogLinearDomain, hist: np.ndarray, const: np.ndarray
) -> pt.TensorVariable:
    """Exact log p(y | θ) = logsumexp_h (c_h + hᵀ log π_θ)."""
    log_prob = pt.special.log_softmax(pt.dot(pt.as_tensor_variable(dom.basis), theta))
    terms = pt.as_tensor_variable(const) + pt.dot(
        pt.as_tensor_variable(hist.astype(float)), log_prob
    )
    return pt.logsumexp(terms)
