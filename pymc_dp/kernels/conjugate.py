"""Exact conjugate posterior draws of θ given s (Algorithm 1, line 3).

The families compute the updated hyperparameters; these kernels draw from the resulting
distribution for a whole batch at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["draw_beta", "draw_dirichlet"]


def draw_beta(
    rng: np.random.Generator, *, alpha: npt.ArrayLike, beta: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Draw θ ~ Beta(alpha, beta), broadcasting over batch dimensions.

    Examples
    --------
    >>> import numpy as np
    >>> draw_beta(np.random.default_rng(0), alpha=[1.0, 2.0], beta=3.0).shape
    (2,)
    """
    alpha, beta = np.broadcast_arrays(
        np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    )
    return rng.beta(alpha, beta)


def draw_dirichlet(rng: np.random.Generator, *, alpha: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Draw θ ~ Dirichlet(alpha) for ``alpha`` of shape ``(..., K)``.

    Gamma variates are drawn on the log scale, ``log G = log Gamma(a + 1) + log(U) / a``, so that
    small concentrations do not underflow to an all-zero vector (which NumPy's
    ``Generator.dirichlet`` would turn into NaN) and leading batch dimensions are supported.

    Examples
    --------
    >>> import numpy as np
    >>> theta = draw_dirichlet(np.random.default_rng(0), alpha=[[1.0, 2.0, 3.0]] * 4)
    >>> theta.shape, bool(np.allclose(theta.sum(-1), 1))
    ((4, 3), True)
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    log_g = np.log(rng.gamma(alpha + 1.0)) + np.log(rng.uniform(size=alpha.shape)) / alpha
    log_g -= np.max(log_g, axis=-1, keepdims=True)
    g = np.exp(log_g)
    return g / np.sum(g, axis=-1, keepdims=True)
