"""The collapsed normal of noisy marginal tables in JAX: :class:`CLTLogp` for NumPyro and BlackJAX.

``pm.sample(nuts_sampler="numpyro" | "blackjax")`` compiles the model with JAX, where
:class:`~pymc_dp.likelihoods.marginals.CLTLogp` (a NumPy ``perform``) has no implementation.
:func:`clt_logp_jax` gives it one, chosen by the Op's moment engine:

* the full collapsed normal on an enumerated domain (``"clt"``): softmax of A θ, the mean and
  covariance of g over the C cells, a Cholesky factor; the gradient by :func:`jax.grad`;
* the fixed-covariance law (``"clt-fixed"``) on an enumerated domain or by the split sums:
  log Z(θ) as a log-sum-exp over the #A × #B matrix of logits
  (:class:`~pymc_dp.kernels.loglinear_split.SplitMoments`, as in
  :func:`~pymc_dp.likelihoods.marginals.split_log_partition_graph`), E_θ[a] = ∇ log Z and the
  gradient a Hessian-vector product, both by JAX's autodiff (a one-column domain: the dense
  softmax);
* the junction tree and the Bethe approximation, whose message passing has no array form here:
  the Op's own NumPy ``perform`` through :func:`jax.pure_callback` (a host call per gradient,
  the numbers of the default backend).

Every form returns the Op's two outputs, log p and its gradient, under a :func:`jax.custom_vjp`
whose backward pass is the cotangent of log p times that gradient: as the Op's own ``grad``,
no second derivatives (the gradient output's cotangent, zero in NUTS, is ignored). Nothing here
imports JAX at module level.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pymc_dp.kernels.loglinear_split import MAX_SPLIT_CELLS, SplitMoments

__all__ = ["clt_logp_jax"]


def _full_law(op: Any) -> Callable[[Any], Any]:
    """The log-density N(z; n E_θ[g], n Cov_θ[g] + v I) over the enumerated domain, in jax.numpy."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    dom, z, n, var = op.args
    basis = jnp.asarray(dom.basis)
    g = jnp.asarray(dom.projected_features)
    z = jnp.asarray(z)
    p = dom.n_params
    const = p * math.log(2.0 * math.pi)

    def logp(theta: Any) -> Any:
        prob = jax.nn.softmax(basis @ theta)
        mean = prob @ g
        cov = n * ((g.T * prob) @ g - jnp.outer(mean, mean)) + var * jnp.eye(p)
        chol = jnp.linalg.cholesky(cov)
        w = solve_triangular(chol, z - n * mean, lower=True)
        return -0.5 * (w @ w + 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol))) + const)

    return logp


def _split_log_partition(engine: SplitMoments) -> Callable[[Any], Any]:
    """Log Z(θ), the log partition function, by the split sums (as in the PyTensor graph)."""
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    n_a, n_b = engine.cross_a.shape[1], engine.cross_b.shape[1]
    cross_a, cross_b = jnp.asarray(engine.cross_a), jnp.asarray(engine.cross_b)
    inside_a, inside_b = jnp.asarray(engine.inside_a), jnp.asarray(engine.inside_b)
    flat, terms = jnp.asarray(engine.cross_flat), jnp.asarray(engine.cross_terms)

    def log_partition(theta: Any) -> Any:
        pair = jnp.zeros(n_a * n_b, dtype=theta.dtype).at[flat].set(theta[terms])
        logits = (
            cross_a @ pair.reshape(n_a, n_b) @ cross_b.T
            + (inside_a @ theta)[:, None]
            + (inside_b @ theta)[None, :]
        )
        return logsumexp(logits)

    return log_partition


def _fixed_law(op: Any) -> Callable[[Any], Any]:
    """The log-density N(z; n Uᵀ(c + M E_θ[a]), L Lᵀ) with E_θ[a] = ∇ log Z(θ), in jax.numpy."""
    import jax
    import jax.numpy as jnp

    dom, z, n, _ = op.args
    chol = op.chol
    inv_chol = np.linalg.inv(chol)
    uc, um = dom.projected_table_map
    centre = jnp.asarray(inv_chol @ (z - n * uc))
    slope = jnp.asarray(n * inv_chol @ um)
    const = 2.0 * float(np.sum(np.log(np.diag(chol)))) + dom.n_params * math.log(2.0 * math.pi)
    engine = op.engine if isinstance(op.engine, SplitMoments) else None
    if engine is None and len(dom.sizes) >= 2 and dom.n_cells <= MAX_SPLIT_CELLS:
        engine = SplitMoments(dom)  # an enumerated domain: the same sums, one small matrix
    if engine is not None:
        mean_features = jax.grad(_split_log_partition(engine))
    else:
        basis = jnp.asarray(dom.basis)

        def mean_features(theta: Any) -> Any:
            return jax.nn.softmax(basis @ theta) @ basis

    def logp(theta: Any) -> Any:
        w = centre - slope @ mean_features(theta)
        return -0.5 * (w @ w + const)

    return logp


def _host_law(op: Any, node: Any) -> Callable[[Any], Any]:
    """The Op's NumPy ``perform`` (junction tree, Bethe) as a host call returning (logp, grad)."""
    import jax
    import jax.numpy as jnp

    p = op.args[0].n_params
    specs = (jax.ShapeDtypeStruct((), jnp.float64), jax.ShapeDtypeStruct((p,), jnp.float64))

    def host(theta: Any) -> tuple[np.ndarray, np.ndarray]:
        storage: list[list[Any]] = [[None], [None]]
        op.perform(node, [np.asarray(theta, dtype=np.float64)], storage)
        return np.asarray(storage[0][0], dtype=np.float64), np.asarray(storage[1][0], np.float64)

    return lambda theta: jax.pure_callback(host, specs, theta, vmap_method="sequential")


def clt_logp_jax(op: Any, node: Any) -> Callable[[Any], tuple[Any, Any]]:
    """A JAX function θ ↦ (log p, ∇ log p) computing what ``op``'s ``perform`` computes.

    Parameters
    ----------
    op
        A :class:`~pymc_dp.likelihoods.marginals.CLTLogp`.
    node
        Its application (the host call of the junction tree and Bethe engines runs it).

    Returns
    -------
    callable
        θ (a float64 vector) to the log-density and its gradient, differentiable once (the
        cotangent of the gradient output is ignored, as the Op's ``grad`` refuses it).
    """
    import jax

    if op.engine is None and op.chol is None:
        value_and_grad = jax.value_and_grad(_full_law(op))
    elif op.engine is None or isinstance(op.engine, SplitMoments):
        value_and_grad = jax.value_and_grad(_fixed_law(op))
    else:
        value_and_grad = _host_law(op, node)

    @jax.custom_vjp
    def apply(theta: Any) -> tuple[Any, Any]:
        return value_and_grad(theta)

    def forward(theta: Any) -> tuple[tuple[Any, Any], Any]:
        logp, grad = value_and_grad(theta)
        return (logp, grad), grad

    def backward(grad: Any, cotangent: tuple[Any, Any]) -> tuple[Any]:
        return (cotangent[0] * grad,)

    apply.defvjp(forward, backward)
    return apply
