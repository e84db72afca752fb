"""The Laplace mechanism: the one place where release noise is drawn.

All privacy noise in pymc_dp is drawn by :func:`laplace_mechanism`. A floating-point-safe sampler
(snapping, or OpenDP's discrete samplers) can replace the body of this function without touching
any caller.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_positive

__all__ = ["MECHANISM_NAME", "laplace_mechanism"]

MECHANISM_NAME = "laplace"

_MIN_NOISE_ULPS = 2.0**20


def laplace_mechanism(
    value: npt.ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> npt.NDArray[np.float64]:
    """Add independent Laplace(0, Δ/ε) noise to every component of ``value``.

    Parameters
    ----------
    value
        The exact statistic, any shape.
    sensitivity
        L1 sensitivity Δ of the statistic over all released components.
    epsilon
        Privacy parameter ε > 0.
    rng
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        ``value + Laplace(0, sensitivity / epsilon)``, same shape as ``value``.

    Notes
    -----
    This draws noise as ``rng.laplace``, i.e. in floating point. Mironov (2012) shows that the
    low-order bits of such samples can leak the exact statistic; a release meant for real use
    should swap in a secure sampler here.

    References
    ----------
    Dwork, McSherry, Nissim & Smith (2006), "Calibrating noise to sensitivity in private data
    analysis". Definition 3 of Bernstein & Sheldon (2018).

    Examples
    --------
    >>> import numpy as np
    >>> y = laplace_mechanism(10.0, sensitivity=1.0, epsilon=0.5, rng=np.random.default_rng(0))
    >>> y.shape
    ()
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_positive(epsilon, "epsilon")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (got {type(rng).__name__})")
    exact = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(exact)):
        raise ValueError("value must be finite before noise is added")
    scale = sensitivity / epsilon
    # Noise far below the float spacing of the statistic would publish s itself.
    resolution = _MIN_NOISE_ULPS * np.spacing(max(float(np.max(np.abs(exact))), 1.0))
    if scale < resolution:
        raise ValueError(
            f"epsilon={epsilon} is too large: the noise scale {scale:.3g} is below the "
            f"floating-point resolution {resolution:.3g} of the statistic, so the release "
            "would be the exact statistic"
        )
    return exact + rng.laplace(0.0, scale, size=exact.shape)
