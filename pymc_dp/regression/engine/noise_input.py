"""The batched engines' noise argument: a Laplace scale or a Gaussian sd per release."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["noise_spread"]


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
