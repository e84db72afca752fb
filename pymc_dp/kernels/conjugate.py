"""Exact conjugate posterior draws of θ given s (Algorithm 1, line 3).

The families compute the updated hyperparameters; these kernels draw from the resulting
distribution for a whole batch at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "draw_beta",
    "draw_dirichlet",
    "draw_gamma",
    "draw_normal",
    "draw_normal_inverse_gamma",
    "open_positive",
    "open_simplex",
    "open_unit_interval",
]

# Draws are kept strictly inside the support: a vague prior (Beta(0.01, 0.01)) puts so much mass
# near the edges that a float draw rounds to exactly 0 or 1, where the CLT variance is 0 and
# PyMC's logit, log and simplex transforms are infinite. Moving such a draw to the nearest
# normal float inside changes it by less than the float resolution at that point.
_TINY = np.finfo(np.float64).tiny
_BELOW_ONE = np.nextafter(1.0, 0.0)
_HUGE = np.finfo(np.float64).max


def open_unit_interval(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """θ moved into the open interval (0, 1) by at most the float resolution at its edges.

    Examples
    --------
    >>> p = open_unit_interval([0.0, 0.5, 1.0])
    >>> bool(0 < p[0] < 1e-300), float(p[1]), bool(p[2] < 1)
    (True, 0.5, True)
    """
    return np.clip(np.asarray(theta, dtype=np.float64), _TINY, _BELOW_ONE)


def open_positive(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """θ moved into (0, ∞) and kept finite: [smallest normal float, largest float].

    Examples
    --------
    >>> x = open_positive([0.0, 2.0, np.inf])
    >>> bool(x[0] > 0), float(x[1]), bool(np.isfinite(x[2]))
    (True, 2.0, True)
    """
    return np.clip(np.asarray(theta, dtype=np.float64), _TINY, _HUGE)


def open_simplex(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Probabilities (last axis) with every entry > 0, still summing to 1.

    Entries that rounded to 0 become the smallest normal float; the others are unchanged up to
    rounding.

    Examples
    --------
    >>> p = open_simplex([1.0, 0.0, 0.0])
    >>> bool(np.all(p > 0)), float(p.sum())
    (True, 1.0)
    """
    theta = np.maximum(np.asarray(theta, dtype=np.float64), _TINY)
    return theta / np.sum(theta, axis=-1, keepdims=True)


def draw_beta(
    rng: np.random.Generator, *, alpha: npt.ArrayLike, beta: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Draw θ ~ Beta(alpha, beta), broadcasting over batch dimensions, inside (0, 1).

    A draw that rounds to 0 or 1 (small alpha or beta) is moved inside by
    :func:`open_unit_interval`.

    Examples
    --------
    >>> import numpy as np
    >>> draw_beta(np.random.default_rng(0), alpha=[1.0, 2.0], beta=3.0).shape
    (2,)
    """
    alpha, beta = np.broadcast_arrays(
        np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    )
    return open_unit_interval(rng.beta(alpha, beta))


def draw_dirichlet(rng: np.random.Generator, *, alpha: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Draw θ ~ Dirichlet(alpha) for ``alpha`` of shape ``(..., K)``.

    Gamma variates are drawn on the log scale, ``log G = log Gamma(a + 1) + log(U) / a``, so that
    small concentrations do not underflow to an all-zero vector (which NumPy's
    ``Generator.dirichlet`` would turn into NaN) and leading batch dimensions are supported.
    Components that still round to 0 are moved inside by :func:`open_simplex`.

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
    return open_simplex(g / np.sum(g, axis=-1, keepdims=True))


def draw_gamma(
    rng: np.random.Generator, *, shape: npt.ArrayLike, rate: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Draw θ ~ Gamma(shape, rate) (mean shape/rate), batched, inside (0, ∞) (open_positive).

    Examples
    --------
    >>> import numpy as np
    >>> draw_gamma(np.random.default_rng(0), shape=[2.0, 3.0], rate=4.0).shape
    (2,)
    """
    shape, rate = np.broadcast_arrays(
        np.asarray(shape, dtype=np.float64), np.asarray(rate, dtype=np.float64)
    )
    return open_positive(rng.gamma(shape) / rate)


def draw_normal(
    rng: np.random.Generator, *, mean: npt.ArrayLike, var: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Draw θ ~ N(mean, var), broadcasting over batch dimensions.

    Examples
    --------
    >>> import numpy as np
    >>> draw_normal(np.random.default_rng(0), mean=[0.0, 1.0], var=2.0).shape
    (2,)
    """
    mean, var = np.broadcast_arrays(
        np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    )
    return mean + np.sqrt(var) * rng.standard_normal(mean.shape)


def draw_normal_inverse_gamma(
    rng: np.random.Generator,
    *,
    mean: npt.ArrayLike,
    kappa: npt.ArrayLike,
    alpha: npt.ArrayLike,
    beta: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Draw (μ, σ²) with σ² ~ InverseGamma(alpha, beta) and μ | σ² ~ N(mean, σ²/kappa).

    Returns
    -------
    numpy.ndarray
        Shape ``(..., 2)``: μ then σ².

    Examples
    --------
    >>> import numpy as np
    >>> draw_normal_inverse_gamma(np.random.default_rng(0), mean=0.0, kappa=1.0,
    ...                           alpha=[3.0, 4.0], beta=2.0).shape
    (2, 2)
    """
    mean, kappa, alpha, beta = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (mean, kappa, alpha, beta))
    )
    sigma2 = open_positive(beta / rng.gamma(alpha))
    mu = mean + np.sqrt(sigma2 / kappa) * rng.standard_normal(mean.shape)
    return np.stack([mu, sigma2], axis=-1)
