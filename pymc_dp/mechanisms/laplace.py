"""The floating-point Laplace mechanism (``"laplace-float"``): studies and tests only.

Real releases draw vetted noise (OpenDP's discrete samplers on fixed-point integers,
:mod:`pymc_dp.mechanisms.vetted` via :mod:`pymc_dp.curator.noise`). This seedable, fast
sampler serves the studies that simulate many releases, and releases made with a seed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_noise_scale, check_positive

__all__ = ["MECHANISM_NAME", "laplace_mechanism", "noise_scale"]

MECHANISM_NAME = "laplace"

_MIN_NOISE_ULPS = 2.0**20


def laplace_mechanism(
    value: npt.ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    magnitude: float = 1.0,
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
    magnitude
        The largest ``|value|`` that any data set could give, computed from public values only
        (n, the family, the window), e.g. ``n · max |t|``. Releases refuse noise finer than
        2²⁰ float spacings at this magnitude, since it would publish the statistic almost
        exactly; the decision never looks at ``value`` itself, so it does not depend on the
        data. Values below 1 count as 1.

    Returns
    -------
    numpy.ndarray
        ``value + Laplace(0, sensitivity / epsilon)``, same shape as ``value``.

    Notes
    -----
    This draws noise as ``rng.laplace``, i.e. in floating point. Mironov (2012) shows that the
    low-order bits of such samples can leak the exact statistic; real releases use
    :func:`~pymc_dp.mechanisms.vetted.discrete_laplace_mechanism` instead.

    References
    ----------
    Dwork, McSherry, Nissim & Smith (2006), "Calibrating noise to sensitivity in private data
    analysis". Definition 3 of Bernstein & Sheldon (2018).

    Raises
    ------
    ValueError
        If the noise scale Δ/ε is not finite or above 1e150 (ε too small), or below the
        float resolution at ``magnitude`` (ε too large), or ``value`` is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> y = laplace_mechanism(10.0, sensitivity=1.0, epsilon=0.5, rng=np.random.default_rng(0))
    >>> y.shape
    ()
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (got {type(rng).__name__})")
    scale = noise_scale(sensitivity=sensitivity, epsilon=epsilon, magnitude=magnitude)
    exact = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(exact)):
        raise ValueError("value must be finite before noise is added")
    return exact + rng.laplace(0.0, scale, size=exact.shape)


def noise_scale(*, sensitivity: float, epsilon: float, magnitude: float = 1.0) -> float:
    """The Laplace scale Δ/ε, after the checks :func:`laplace_mechanism` makes.

    Callers that draw noise several times check every scale with this first, so that a
    refusal never comes after some noise was drawn. Only public values enter.

    Raises
    ------
    TypeError, ValueError
        As :func:`laplace_mechanism`.

    Examples
    --------
    >>> noise_scale(sensitivity=1.0, epsilon=0.75, magnitude=2.0**32)
    1.3333333333333333
    >>> noise_scale(sensitivity=1.0, epsilon=0.75, magnitude=2.0**33)
    Traceback (most recent call last):
    ...
    ValueError: epsilon=0.75 is too large: the noise scale 1.33 is below ...
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_positive(epsilon, "epsilon")
    magnitude = max(check_positive(magnitude, "magnitude"), 1.0)
    scale = check_noise_scale(sensitivity, epsilon)
    # Noise far below the float spacing of the statistic would publish s itself. The spacing
    # is taken at the largest possible |s| (public), never at s: the refusal must not depend
    # on the data.
    resolution = _MIN_NOISE_ULPS * float(np.spacing(magnitude))
    if scale < resolution:
        raise ValueError(
            f"epsilon={epsilon:g} is too large: the noise scale {scale:.3g} is below the "
            f"floating-point resolution {resolution:.3g} of a statistic as large as "
            f"{magnitude:.3g}, so the release would be the exact statistic"
        )
    return scale
