"""What the batched engines share: the noise argument, and chains laid out as extra batch rows.

Every engine runs its chains as extra rows of the batch, chain-major (row ``c * releases + r``
is chain c of release r), so that its draws reshape to ``(chain, draw, release, ...)``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["by_chain", "chain_rows", "noise_spread"]


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
