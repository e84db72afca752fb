"""The exact law of a pairwise log-linear release at ~10⁶ cells, fast enough for NUTS (JAX).

At 12 ternary columns with all 2-way tables the library's exact engine is the junction tree,
whose one clique is the full domain (531 441 cells): its ``mean_and_jvp`` takes about 7 s a call
here, so NUTS (~10⁴ gradients) on ``marginals_model(rel, features="junction")`` is out of
reach. The same exact sums go through matrix products instead: split the columns into two
halves A and B; the logits of the 729 × 729 cells are g_A(a) + g_B(b) + h_A(a)ᵀ Θ h_B(b),
with g the terms inside a half, h the one-hot levels and Θ the cross-half pair terms. Then
log Z(θ) is a log-sum-exp over one 729 × 729 matrix, E_θ[a] = ∇ log Z, Cov_θ[a] = ∇² log Z,
and the gradient of the collapsed likelihood is a Hessian-vector product, all by JAX autodiff
(about 0.04 s a log density and gradient here, float64; checked against the junction tree).

The law sampled is the library's default at 12 columns: ``"clt-fixed"`` (z ~ N(n(c + M E_θ[a]),
Σ(θ̂)), Σ held at the mode) under the N(0, sd²) prior, whitened by the Laplace fit at the exact
mode (as ``marginals_model`` does), with NumPyro's NUTS.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TensorMoments", "log_partition_fn", "nuts_exact"]


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def log_partition_fn(dom):
    """log Z(θ) of a domain whose terms have at most two columns, as a JAX function."""
    jax = _jax()
    jnp = jax.numpy
    sizes, k = tuple(dom.sizes), len(dom.sizes)
    half = k // 2
    groups = [tuple(range(half)), tuple(range(half, k))]
    cells = [np.indices([sizes[c] for c in g]).reshape(len(g), -1).T for g in groups]
    offsets = [np.cumsum([0] + [sizes[c] for c in g])[:-1] for g in groups]
    onehot = []
    for g, cl, off in zip(groups, cells, offsets, strict=True):
        h = np.zeros((cl.shape[0], sum(sizes[c] for c in g)))
        for pos in range(len(g)):
            h[np.arange(cl.shape[0]), off[pos] + cl[:, pos]] = 1
        onehot.append(h)
    inside = [np.zeros((cl.shape[0], dom.n_params)) for cl in cells]
    width = onehot[1].shape[1]
    cross = np.zeros((dom.n_params, onehot[0].shape[1] * width))
    for j, (s, levels) in enumerate(dom.basis_terms):
        if len(s) > 2:
            raise ValueError("only terms of one or two columns")
        sides = {0 if c < half else 1 for c in s}
        if len(sides) == 1:
            g = sides.pop()
            hit = np.ones(cells[g].shape[0], dtype=bool)
            for c, v in zip(s, levels, strict=True):
                hit &= cells[g][:, groups[g].index(c)] == v
            inside[g][:, j] = hit
        else:
            (i, a), (m, b) = sorted(zip(s, levels, strict=True))
            row = offsets[0][groups[0].index(i)] + a
            col = offsets[1][groups[1].index(m)] + b
            cross[j, row * width + col] = 1
    ga, gb, ha, hb, cross = map(jnp.asarray, (*inside, *onehot, cross))
    shape = (ha.shape[1], hb.shape[1])

    def log_z(theta):
        pair = ha @ (theta @ cross).reshape(shape) @ hb.T
        return jax.nn.logsumexp((ga @ theta)[:, None] + (gb @ theta)[None, :] + pair)

    return log_z


class TensorMoments:
    """Exact E_θ[a] and Cov_θ[a] by :func:`log_partition_fn` (for ``gauss_newton``)."""

    def __init__(self, dom):
        jax = _jax()
        self.log_z = log_partition_fn(dom)
        self._mean = jax.jit(jax.grad(self.log_z))
        self._cov = jax.jit(jax.hessian(self.log_z))

    def mean(self, theta):
        return np.asarray(self._mean(np.asarray(theta, dtype=float)))

    def moments(self, theta):
        theta = np.asarray(theta, dtype=float)
        return self.mean(theta), np.asarray(self._cov(theta))


def nuts_exact(dom, moments, z, *, n, chol_sigma, mode, chol_cov, prior_sd, draws, seed):
    """NUTS on the exact ``"clt-fixed"`` posterior of θ, whitened at the Laplace fit.

    Returns θ draws (2 chains × ``draws``, after as many warm-up steps), the mean number of
    leapfrog steps a draw and the number of divergences.
    """
    jax = _jax()
    jnp = jax.numpy
    from numpyro.infer import MCMC, NUTS

    uc, um = (jnp.asarray(x) for x in dom.projected_table_map)
    inv_sigma = jnp.asarray(np.linalg.inv(chol_sigma))
    mode, chol_cov = jnp.asarray(mode), jnp.asarray(chol_cov)
    prec = jnp.asarray(1 / np.asarray(prior_sd, dtype=float) ** 2)
    mean_fn = jax.grad(moments.log_z)

    def potential(white):
        theta = mode + chol_cov @ white
        resid = inv_sigma @ (jnp.asarray(z) - n * (uc + um @ mean_fn(theta)))
        return 0.5 * resid @ resid + 0.5 * jnp.sum(prec * theta**2)

    mcmc = MCMC(
        NUTS(potential_fn=potential),
        num_warmup=draws,
        num_samples=draws,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(
        jax.random.PRNGKey(seed),
        init_params=jnp.zeros((2, dom.n_params)),
        extra_fields=(
            "num_steps",
            "diverging",
        ),
    )
    white = np.asarray(mcmc.get_samples()).reshape(-1, dom.n_params)
    extra = mcmc.get_extra_fields()
    theta = np.asarray(mode) + white @ np.asarray(chol_cov).T
    return theta, float(np.mean(extra["num_steps"])), int(np.sum(extra["diverging"]))
