"""Small real data sets shipped inside the package (nothing is downloaded at run time).

:func:`load_cirrhosis` loads the cirrhosis/drinking data of Bernstein & Sheldon (2019, §4.3):
46 US states with their wine and liquor consumption per capita and cirrhosis death rate
(Brownlee 1965; Spaeth 1991, data set x20), read from ``cirrhosis.csv`` with
:mod:`importlib.resources` (package data, so it is there after ``pip install``).

Public bounds for the [0, 1] scaling
------------------------------------
A DP release needs bounds on every record that do not depend on the data. The paper scales the
covariate and the response to [0, 1], presumably with the data's minimum and maximum, which
would leak them. Here the scaling uses fixed round-number ranges (:data:`CIRRHOSIS_BOUNDS`),
treated as public domain knowledge: wine consumption per capita in [0, 40], liquor in [0, 160],
cirrhosis death rate in [0, 150]. They were written down by us with the listing in view (as any
curator's bounds come from some knowledge of the domain), but they are constants of the
package, so no train/test split or release sees data-dependent bounds; every record lies
inside them (checked on load).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from importlib import resources

import numpy as np
import numpy.typing as npt

__all__ = ["CIRRHOSIS_BOUNDS", "CirrhosisData", "load_cirrhosis"]

CIRRHOSIS_BOUNDS: dict[str, tuple[float, float]] = {
    "wine": (0.0, 40.0),
    "liquor": (0.0, 160.0),
    "cirrhosis_death_rate": (0.0, 150.0),
}
"""Public ranges of the drinking covariates and of the response, used to scale them to [0, 1]."""

_COLUMNS = ("state", "urban_population", "late_births", "wine", "liquor", "cirrhosis_death_rate")


@dataclasses.dataclass(frozen=True, eq=False)
class CirrhosisData:
    """Covariate and response of the cirrhosis data, one entry per state (read-only arrays).

    Attributes
    ----------
    x : numpy.ndarray
        The chosen drinking covariate, shape ``(46,)``.
    y : numpy.ndarray
        Cirrhosis death rate, shape ``(46,)``.
    covariate : str
        ``"wine"`` or ``"liquor"``.
    x_bounds, y_bounds : tuple of float
        Ranges of ``x`` and ``y``: the public ranges of :data:`CIRRHOSIS_BOUNDS` on the raw
        scale, ``(0.0, 1.0)`` when scaled.
    scaled : bool
        Whether ``x`` and ``y`` were mapped to [0, 1] with the public ranges.
    """

    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    covariate: str
    x_bounds: tuple[float, float]
    y_bounds: tuple[float, float]
    scaled: bool


def _read_table() -> dict[str, npt.NDArray[np.float64]]:
    text = resources.files(__name__).joinpath("cirrhosis.csv").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    reader = csv.reader(io.StringIO("\n".join(rows)))
    header = next(reader)
    if tuple(header) != _COLUMNS:
        raise RuntimeError(f"cirrhosis.csv has unexpected columns {header}")
    values = np.array([[float(v) for v in row] for row in reader], dtype=np.float64)
    return {name: values[:, j] for j, name in enumerate(_COLUMNS)}


def load_cirrhosis(covariate: str = "wine", *, scaled: bool = True) -> CirrhosisData:
    """Load the cirrhosis/drinking data set (46 US states) shipped with the package.

    The paper (Bernstein & Sheldon 2019, §4.3) regresses the cirrhosis death rate on "drinking
    rate" with both scaled to [0, 1]. The default covariate is **wine** consumption per capita:
    of the two drinking columns it has by far the stronger linear relation with the response
    (correlation 0.84 against 0.68 for liquor), its scaled least-squares fit (intercept ≈ 0.2,
    slope ≈ 0.8) is close to the paper's prior mean (intercept 0, slope 1), and the liquor column
    has one extreme value (149, state 36) that dominates its range.

    Parameters
    ----------
    covariate
        ``"wine"`` (default) or ``"liquor"``.
    scaled
        Map ``x`` and ``y`` to [0, 1] with the fixed public ranges :data:`CIRRHOSIS_BOUNDS`
        (not the data's minimum and maximum, which are not public).

    Returns
    -------
    CirrhosisData

    Raises
    ------
    ValueError
        If ``covariate`` is not ``"wine"`` or ``"liquor"``.
    TypeError
        If ``scaled`` is not a bool.

    References
    ----------
    K. A. Brownlee (1965), *Statistical Theory and Methodology*, Wiley, pp. 464-465.
    H. Spaeth (1991), *Mathematical Algorithms for Linear Regression*, Academic Press, data set
    x20. G. Bernstein & D. Sheldon (2019), *Differentially Private Bayesian Linear Regression*,
    NeurIPS, §4.3.

    Examples
    --------
    >>> data = load_cirrhosis()
    >>> data.x.shape, data.y.shape, data.covariate, data.x_bounds
    ((46,), (46,), 'wine', (0.0, 1.0))
    >>> bool(data.x.min() >= 0 and data.y.max() <= 1)
    True
    >>> raw = load_cirrhosis("liquor", scaled=False)
    >>> float(raw.x[0]), float(raw.y[0]), raw.y_bounds
    (30.0, 41.2, (0.0, 150.0))
    """
    if covariate not in ("wine", "liquor"):
        raise ValueError(f"covariate must be 'wine' or 'liquor' (got {covariate!r})")
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool (got {type(scaled).__name__})")
    table = _read_table()
    x, y = table[covariate], table["cirrhosis_death_rate"]
    x_bounds, y_bounds = CIRRHOSIS_BOUNDS[covariate], CIRRHOSIS_BOUNDS["cirrhosis_death_rate"]
    for name, v, (lo, hi) in (("x", x, x_bounds), ("y", y, y_bounds)):
        if v.min() < lo or v.max() > hi:  # a corrupted file, not a user error
            raise RuntimeError(f"cirrhosis.csv: {name} leaves its public range {(lo, hi)}")
    if scaled:
        x = (x - x_bounds[0]) / (x_bounds[1] - x_bounds[0])
        y = (y - y_bounds[0]) / (y_bounds[1] - y_bounds[0])
        x_bounds = y_bounds = (0.0, 1.0)
    x, y = np.array(x), np.array(y)
    x.setflags(write=False)
    y.setflags(write=False)
    return CirrhosisData(x, y, covariate, x_bounds, y_bounds, scaled)
