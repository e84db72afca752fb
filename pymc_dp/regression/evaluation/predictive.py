"""Posterior predictive of a private regression at new covariates (pure NumPy).

Given posterior draws of (θ, σ²) from any method (Gibbs-SS, naive, non-private, MCMC-Ind), a new
response is y* = (1, x*)ᵀθ + σ z with z ~ N(0, 1) (Bernstein & Sheldon 2019, §4.3). The intervals
are the central intervals of those draws, as in the paper's Figure 4.

:func:`posterior_predictive` applies :func:`predictive_draws` to the posterior of a PyMC model
with a :class:`~pymc_dp.NoisyRegressionStat` node (``pm.sample`` output, ArviZ 0.x
``InferenceData`` or ArviZ 1.x ``DataTree``) and returns labelled draws. The released statistic's
own predictive is ``pm.sample_posterior_predictive`` on the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from pymc_dp._compat import posterior_dataset
from pymc_dp._validation import check_rng

__all__ = ["posterior_predictive", "predictive_coverage", "predictive_draws"]


def _design(x_new: npt.ArrayLike, p: int) -> npt.NDArray[np.float64]:
    """Rows (1, x*) for ``x_new`` of shape ``(k, d)`` or ``(k,)`` when d = 1."""
    x = np.asarray(x_new, dtype=np.float64)
    if x.ndim == 1 and p == 2:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != p - 1:
        raise ValueError(
            f"x_new must have shape (k, {p - 1}) to match theta's {p} coefficients (intercept "
            f"first) (got shape {x.shape})"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("x_new must be finite")
    return np.concatenate([np.ones((x.shape[0], 1)), x], axis=1)


def predictive_draws(
    rng: int | np.random.Generator,
    *,
    theta: npt.ArrayLike,
    sigma2: npt.ArrayLike,
    x_new: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Draw y* at new covariates, one per posterior draw of (θ, σ²).

    Parameters
    ----------
    rng
        Random generator or seed.
    theta
        Coefficient draws, intercept first, shape ``(..., p)`` (e.g. ``(chain, draw, p)``).
    sigma2
        Noise-variance draws with the same leading shape ``(...)``.
    x_new
        New covariates without the intercept column, shape ``(k, p - 1)`` (or ``(k,)`` if p = 2).

    Returns
    -------
    numpy.ndarray
        Predictive draws, shape ``(..., k)``.

    Raises
    ------
    ValueError
        If shapes do not match or σ² is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> y = predictive_draws(0, theta=np.zeros((4, 100, 2)), sigma2=np.ones((4, 100)),
    ...                      x_new=[0.1, 0.5, 0.9])
    >>> y.shape
    (4, 100, 3)
    """
    rng = check_rng(rng)
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    if theta.ndim < 1 or theta.shape[-1] < 2:
        raise ValueError(f"theta must have shape (..., p) with p ≥ 2 (got {theta.shape})")
    if sigma2.shape != theta.shape[:-1]:
        raise ValueError(
            f"sigma2 must have theta's leading shape {theta.shape[:-1]} (got {sigma2.shape})"
        )
    if not np.all(np.isfinite(theta)):
        raise ValueError("theta must be finite in every draw")
    if not np.all(np.isfinite(sigma2) & (sigma2 > 0)):
        raise ValueError("sigma2 must be finite and > 0 in every draw")
    design = _design(x_new, theta.shape[-1])
    mean = theta @ design.T
    return mean + np.sqrt(sigma2)[..., None] * rng.standard_normal(mean.shape)


def predictive_coverage(
    draws: npt.ArrayLike,
    y_true: npt.ArrayLike,
    levels: npt.ArrayLike = (0.5, 0.9),
    *,
    sample_axes: int = 2,
) -> npt.NDArray[np.bool_]:
    """Whether each true response lies in the central predictive interval at each level.

    Parameters
    ----------
    draws
        Predictive draws whose first ``sample_axes`` axes index posterior draws (e.g.
        ``(chain, draw)``); the remaining axes index test points.
    y_true
        True responses, shape of the test-point axes.
    levels
        Interval probabilities in (0, 1).
    sample_axes
        Number of leading axes holding posterior draws.

    Returns
    -------
    numpy.ndarray
        Booleans of shape ``(len(levels), *test_shape)``; their mean is the coverage.

    Examples
    --------
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(1, 4000, 500))
    >>> hit = predictive_coverage(draws, np.zeros(500), (0.5, 0.9))
    >>> bool(hit.all())
    True
    """
    draws = np.asarray(draws, dtype=np.float64)
    levels = np.atleast_1d(np.asarray(levels, dtype=np.float64))
    if np.any((levels <= 0) | (levels >= 1)):
        raise ValueError(f"levels must lie in (0, 1) (got {levels})")
    flat = draws.reshape(-1, *draws.shape[sample_axes:])
    y_true = np.asarray(y_true, dtype=np.float64)
    if y_true.shape != flat.shape[1:]:
        raise ValueError(
            f"y_true must have the test-point shape {flat.shape[1:]} (got {y_true.shape})"
        )
    tails = np.stack([(1 - levels) / 2, (1 + levels) / 2], axis=-1)
    bounds = np.quantile(flat, tails, axis=0)  # (len(levels), 2, *test_shape)
    return (bounds[:, 0] <= y_true) & (y_true <= bounds[:, 1])


def posterior_predictive(
    idata: Any,
    x_new: npt.ArrayLike,
    rng: int | np.random.Generator | None = None,
    *,
    theta: str = "theta",
    sigma2: str = "sigma2",
    name: str = "y_new",
    dim: str = "x_new",
) -> xr.DataArray:
    """Posterior predictive draws of the response at new covariates, from ``pm.sample`` output.

    One draw ``y* = (1, x*)ᵀθ + σ z`` per posterior draw of (θ, σ²)
    (:func:`predictive_draws`); pass it to :func:`predictive_coverage` (as ``.values``) or to
    ArviZ summaries.

    Parameters
    ----------
    idata
        Result of ``pm.sample`` (``InferenceData`` or ``DataTree``) with a posterior group.
    x_new
        New covariates without the intercept, shape ``(k, d)`` (or ``(k,)`` when d = 1).
    rng
        Seed or generator.
    theta, sigma2
        Names of the coefficient (intercept first) and noise-variance variables.
    name, dim
        Name of the result and of its test-point dimension.

    Returns
    -------
    xarray.DataArray
        Dimensions ``(chain, draw, dim)``, with the posterior's chain and draw coordinates.

    Raises
    ------
    KeyError
        If the posterior lacks ``theta`` or ``sigma2``.
    ValueError
        If ``x_new`` does not match θ's length.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> post = xr.Dataset({"theta": (("chain", "draw", "coef"), np.zeros((2, 50, 2))),
    ...                    "sigma2": (("chain", "draw"), np.ones((2, 50)))})
    >>> y = posterior_predictive(post, [0.1, 0.5, 0.9], rng=0)
    >>> y.dims, y.shape
    (('chain', 'draw', 'x_new'), (2, 50, 3))
    """
    post = idata if isinstance(idata, xr.Dataset) else posterior_dataset(idata)
    for var in (theta, sigma2):
        if var not in post:
            raise KeyError(
                f"the posterior has no variable {var!r} (has {sorted(post.data_vars)}); pass "
                "theta= and sigma2= with the names of the model's coefficients and σ²"
            )
    th, s2 = post[theta], post[sigma2]
    extra = [dim_ for dim_ in s2.dims if dim_ not in ("chain", "draw")]
    if extra or th.ndim != s2.ndim + 1:
        raise ValueError(
            f"{theta!r} must have dims (chain, draw, coefficient) and {sigma2!r} (chain, draw) "
            f"(got {th.dims} and {s2.dims})"
        )
    draws = predictive_draws(check_rng(rng), theta=th.values, sigma2=s2.values, x_new=x_new)
    return xr.DataArray(
        draws,
        dims=(*s2.dims, dim),
        coords={k: s2.coords[k] for k in s2.dims if k in s2.coords},
        name=name,
    )
