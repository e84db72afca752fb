"""What the batched engines share: the noise argument, and chains laid out as extra batch rows.

Every engine runs its chains as extra rows of the batch, chain-major (row ``c * releases + r``
is chain c of release r), so that its draws reshape to ``(chain, draw, release, ...)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.data_model import NIW

__all__ = ["by_chain", "chain_rows", "noise_spread", "tiled_priors"]


def noise_spread(
    scale: npt.ArrayLike | None, noise_sd: npt.ArrayLike | None, releases: int
) -> tuple[bool, npt.NDArray[np.float64]]:
    """Whether the noise is Laplace, and its scale (or sd) per release, ``(releases,)``.

    Raises
    ------
    TypeError
        Unless exactly one of ``scale`` (Laplace) and ``noise_sd`` (Gaussian) is given.
    ValueError
        If it does not broadcast to ``(releases,)`` or is not finite and > 0.

    Examples
    --------
    >>> noise_spread(2.0, None, 3)
    (True, array([2., 2., 2.]))
    """
    if (scale is None) == (noise_sd is None):
        raise TypeError("give exactly one of scale (Laplace noise) and noise_sd (Gaussian noise)")
    laplace = scale is not None
    spread = np.asarray(scale if laplace else noise_sd, dtype=np.float64)
    try:
        spread = np.broadcast_to(spread, (releases,)).copy()
    except ValueError:
        raise ValueError(f"scale/noise_sd must be scalar or ({releases},)") from None
    if not np.all(np.isfinite(spread)) or np.any(spread <= 0):
        raise ValueError("scale/noise_sd must be finite and > 0")
    return laplace, spread


def chain_rows(
    a: npt.ArrayLike, chains: int, *, releases: int | None = None, core: int = 0
) -> npt.NDArray[np.float64]:
    """``a`` with one row per (chain, release), chain-major: ``(chains * releases, *core)``.

    With ``releases`` given, ``a``'s last ``core`` axes are its core and it is first broadcast
    to ``(releases, *core)`` (a prior shared by every release); else its first axis is the
    release axis already.

    Examples
    --------
    >>> chain_rows([1.0, 2.0], 2)
    array([1., 2., 1., 2.])
    >>> chain_rows(np.eye(2), 2, releases=3, core=2).shape
    (6, 2, 2)
    """
    a = np.asarray(a, dtype=np.float64)
    if releases is not None:
        a = np.broadcast_to(a, (releases, *(a.shape[a.ndim - core :] if core else ())))
    return np.tile(a, (chains, *(1,) * (a.ndim - 1)))


def by_chain(a: npt.ArrayLike, chains: int, releases: int) -> np.ndarray:
    """Draws kept as ``(draw, chains * releases, ...)`` as ``(chain, draw, release, ...)``.

    Examples
    --------
    >>> by_chain(np.arange(12.0).reshape(2, 6), 2, 3)[1, 0]
    array([3., 4., 5.])
    """
    a = np.asarray(a)
    draws = a.shape[0]
    return np.moveaxis(a.reshape(draws, chains, releases, *a.shape[2:]), 0, 1)


def tiled_priors(
    prior: NIG, x_prior: NIW | None, coef: npt.ArrayLike, chains: int, releases: int
) -> tuple[NIG, NIW | None]:
    """The priors with one row per (chain, release), θ's coordinates reordered by ``coef``.

    ``prior`` is the NIG prior of (θ, σ²) in the user's order of the covariates; ``coef`` the
    kernels' order of θ (:func:`chain_rows` for the rows). ``x_prior`` (a NIW of the normal
    covariates, already in the kernels' order) is tiled alike; ``None`` stays ``None``.

    Examples
    --------
    >>> nig = NIG(np.arange(3.0), np.eye(3), np.array(3.0), np.array(1.0))
    >>> tiled, _ = tiled_priors(nig, None, [0, 2, 1], chains=2, releases=1)
    >>> tiled.mean.tolist()
    [[0.0, 2.0, 1.0], [0.0, 2.0, 1.0]]
    """
    coef = np.asarray(coef)

    def tile(a: npt.ArrayLike, core: int) -> np.ndarray:
        return chain_rows(a, chains, releases=releases, core=core)

    nig = NIG(tile(prior.mean[..., coef], 1), tile(prior.precision[..., coef[:, None], coef], 2),
              tile(prior.shape, 0), tile(prior.scale, 0))  # fmt: skip
    if x_prior is None:
        return nig, None
    niw = NIW(tile(x_prior.loc, 1), tile(x_prior.kappa, 0), tile(x_prior.dof, 0),
              tile(x_prior.scale, 2))  # fmt: skip
    return nig, niw
