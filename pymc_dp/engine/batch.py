"""A batch of releases of one family and size: what every batched sampler takes.

:func:`~pymc_dp.engine.gibbs.sample_gibbs` checks its arguments once and hands the samplers of
:mod:`~pymc_dp.engine.collapsed`, :mod:`~pymc_dp.engine.exact`, :mod:`~pymc_dp.engine.pair` and
:mod:`~pymc_dp.engine.records` one :class:`ReleaseBatch`: the releases, the law of their noise
and a conjugate prior per release.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.families import ExponentialFamily
from pymc_dp.kernels.exact_counts import NoiseLaw

__all__ = ["ReleaseBatch"]


class ReleaseBatch(NamedTuple):
    """B releases of one family, size and noise law, each with its conjugate prior.

    Examples
    --------
    >>> from pymc_dp.families import Binomial
    >>> batch = ReleaseBatch(Binomial(trials=5), (np.full(2, 3.0), np.full(2, 5.0)),
    ...                      np.array([1500.0, 400.0]), 1000, NoiseLaw("laplace", 50.0))
    >>> batch.size, batch.gaussian
    (2, False)
    """

    family: ExponentialFamily
    params: tuple[npt.NDArray[np.float64], ...]
    """Conjugate prior hyperparameters, each with the releases first (``(B,)``, ``(B, K)``)."""
    released: npt.NDArray[np.float64]
    """The released values y, shape ``(B, *family.stat_shape)``."""
    n: int
    """Records per release."""
    noise: NoiseLaw
    """The releases' noise law (its scale Δ/ε, or the Gaussian's σ)."""
    bounds: tuple[float, float] | None = None
    """The window of a windowed family's releases, else ``None``."""

    @property
    def size(self) -> int:
        """B, the number of releases."""
        return int(np.shape(self.released)[0])

    @property
    def gaussian(self) -> bool:
        """Whether the noise is Gaussian (modelled under the CLT by the normal of its σ)."""
        return self.noise.kind == "discrete-gaussian"
