"""The sufficient statistics of linear regression and their released vector.

A record is ``w = (1, x_1, ..., x_d, y)``: an intercept, ``d`` covariates and the response. For
``A = [X, y]`` (with the intercept column in ``X``) every sufficient statistic of the
Normal–Inverse-Gamma regression model is an entry of the symmetric ``(d + 2) × (d + 2)`` matrix
``B = AᵀA = Σ_i w_i w_iᵀ`` (Bernstein & Sheldon 2019, §3.4.3).

Released vs public entries
--------------------------
``B[0, 0] = n`` is the only entry that does not depend on the data beyond n, which is public under
replace-one neighbours, so it is *not* released. Every other unique entry is released, in the
paper's order t(x, y) = (x xᵀ, x y, y²):

1. the upper triangle of the ``x xᵀ`` block, row by row, without ``(0, 0)``: ``Σ x_j`` then
   ``Σ x_i x_j`` (``1 <= i <= j <= d``);
2. ``Σ x_i y`` for ``i = 0, ..., d`` (``i = 0`` is ``Σ y``);
3. ``Σ y²``.

That is ``m = (d + 2)(d + 3)/2 - 1`` components. Each component is a monomial in
``(x_1, ..., x_d, y)``; :func:`statistic_powers` gives its exponents, from which the sensitivity
is computed (:mod:`pymc_dp.curator.regression.sensitivity`).

This module is shared by the curator and the analyst; it imports no inference code.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import numpy.typing as npt

__all__ = [
    "check_released_batch",
    "covariate_powers",
    "d_from_released",
    "monomial_sums",
    "n_released",
    "pack_statistic",
    "regression_statistic",
    "released_pairs",
    "statistic_powers",
    "unpack_statistic",
]


def n_released(d: int) -> int:
    """Number ``m = (d + 2)(d + 3)/2 - 1`` of released components for ``d`` covariates.

    Examples
    --------
    >>> n_released(1), n_released(2)
    (5, 9)
    """
    return (d + 2) * (d + 3) // 2 - 1


@functools.cache
def released_pairs(d: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Row and column indices into ``B`` of the released components, in release order.

    Index 0 of ``B`` is the intercept, ``1..d`` the covariates, ``d + 1`` the response.

    Examples
    --------
    >>> rows, cols = released_pairs(1)
    >>> [(int(i), int(j)) for i, j in zip(rows, cols)]
    [(0, 1), (1, 1), (0, 2), (1, 2), (2, 2)]
    """
    p = d + 1
    pairs = [(i, j) for i in range(p) for j in range(i, p) if (i, j) != (0, 0)]
    pairs += [(i, p) for i in range(p)]
    pairs.append((p, p))
    rows = np.array([i for i, _ in pairs], dtype=np.intp)
    cols = np.array([j for _, j in pairs], dtype=np.intp)
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols


def statistic_powers(d: int) -> npt.NDArray[np.int64]:
    """Exponents of ``(x_1, ..., x_d, y)`` in each released component, shape ``(m, d + 1)``.

    Examples
    --------
    >>> statistic_powers(1).tolist()
    [[1, 0], [2, 0], [0, 1], [1, 1], [0, 2]]
    """
    rows, cols = released_pairs(d)
    powers = np.zeros((rows.size, d + 2), dtype=np.int64)
    np.add.at(powers, (np.arange(rows.size), rows), 1)
    np.add.at(powers, (np.arange(rows.size), cols), 1)
    return powers[:, 1:]


def d_from_released(m: int) -> int:
    """Number of covariates ``d`` whose statistic has ``m`` components.

    Raises
    ------
    ValueError
        If no ``d >= 1`` gives ``m`` components.

    Examples
    --------
    >>> d_from_released(9)
    2
    """
    d = 1
    while n_released(d) < m:
        d += 1
    if n_released(d) != m:
        raise ValueError(
            f"a regression statistic has (d+2)(d+3)/2 - 1 components for d covariates "
            f"(5, 9, 14, ...); got {m}"
        )
    return d


def check_released_batch(released: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], int]:
    """Released statistics of a batch of releases as floats, and their number of covariates.

    Raises
    ------
    ValueError
        If ``released`` is not of shape ``(batch, m)``, not finite, or ``m`` is no statistic's
        length.

    Examples
    --------
    >>> z, d = check_released_batch(np.zeros((3, 9)))
    >>> z.shape, d
    ((3, 9), 2)
    """
    z = np.asarray(released, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"released must have shape (batch, m) (got {z.shape})")
    if not np.all(np.isfinite(z)):
        raise ValueError("released must be finite")
    return z, d_from_released(z.shape[1])


def pack_statistic(b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Released vector from ``B`` of shape ``(..., d + 2, d + 2)``; drops ``B[0, 0] = n``.

    Examples
    --------
    >>> b = np.arange(9.0).reshape(3, 3); b = b + b.T
    >>> pack_statistic(b).tolist()
    [4.0, 8.0, 8.0, 12.0, 16.0]
    """
    b = np.asarray(b, dtype=np.float64)
    rows, cols = released_pairs(b.shape[-1] - 2)
    return b[..., rows, cols]


def unpack_statistic(s: npt.ArrayLike, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Symmetric ``B`` of shape ``(..., d + 2, d + 2)`` from the released vector and n.

    Parameters
    ----------
    s
        Released (or latent) statistic, shape ``(..., m)``.
    n
        Number of records, the public entry ``B[0, 0]``; broadcastable to ``(...)``.

    Examples
    --------
    >>> b = unpack_statistic([2.0, 3.0, 4.0, 5.0, 6.0], 10)
    >>> b.tolist()
    [[10.0, 2.0, 4.0], [2.0, 3.0, 5.0], [4.0, 5.0, 6.0]]
    """
    s = np.asarray(s, dtype=np.float64)
    d = d_from_released(s.shape[-1])
    rows, cols = released_pairs(d)
    b = np.empty((*s.shape[:-1], d + 2, d + 2))
    b[..., rows, cols] = s
    b[..., cols, rows] = s
    b[..., 0, 0] = n
    return b


def regression_statistic(x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The exact released statistic ``s = Σ_i t(x_i, y_i)`` of covariates ``x`` (n, d) and ``y``.

    ``x`` holds the covariates only; the intercept column is added here.

    Examples
    --------
    >>> regression_statistic([[1.0], [2.0]], [3.0, 5.0]).tolist()
    [3.0, 5.0, 8.0, 13.0, 34.0]
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    a = np.column_stack([np.ones(x.shape[0]), x, y])
    return pack_statistic(a.T @ a)


@functools.cache
def covariate_powers(d: int, degrees: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """Exponent vectors of all monomials in ``x_1..x_d`` of the given total degrees.

    Graded order: degree by degree, and within a degree in the order of
    :func:`itertools.combinations_with_replacement`.

    Examples
    --------
    >>> covariate_powers(2, (1, 2)).tolist()
    [[1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
    """
    rows = []
    for k in degrees:
        for combo in itertools.combinations_with_replacement(range(d), k):
            rows.append(np.bincount(np.array(combo, dtype=np.intp), minlength=d))
    out = np.array(rows, dtype=np.int64).reshape(-1, d)
    out.setflags(write=False)
    return out


def monomial_sums(x: npt.ArrayLike, powers: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``Σ_i Π_j x_ij^powers[k, j]`` for each monomial ``k``; ``x`` has shape ``(n, d)``.

    Examples
    --------
    >>> monomial_sums([[1.0, 2.0], [3.0, 1.0]], [[1, 0], [1, 1]]).tolist()
    [4.0, 5.0]
    """
    x = np.asarray(x, dtype=np.float64)
    powers = np.asarray(powers)
    return np.prod(x[:, None, :] ** powers[None, :, :], axis=-1).sum(axis=0)
