"""Exact L1 sensitivity of sums of monomials of degree <= 2 over a box (pure NumPy kernel).

For replace-one neighbours the L1 sensitivity of ``s = Σ_i t(v_i)`` is::

    Δ₁ = max_{v, v' in box} Σ_c |t_c(v) − t_c(v')| = max_{σ ∈ {±1}^C} [max_v σ·t(v) − min_v σ·t(v)],

since ``Σ_c |a_c| = max_σ σ·a``. For the regression statistic every component is a monomial of
degree 1 or 2 in ``v = (x_1, ..., x_d, y)``, so ``f_σ(v) = σ·t(v) = a_σ·v + ½ vᵀ H_σ v`` is a
quadratic. Its extremes over the box are found on the box's faces: at a maximiser, the
coordinates strictly inside their intervals (the free set ``S``) make the gradient of the
restriction vanish, so the maximiser is the stationary point of the face, ``H_SS v_S = −(a_S +
H_SF v_F)``. When ``H_SS`` is singular, ``f`` is constant along its null space through the
maximiser, and moving along it to the boundary gives a maximiser on a smaller face; such faces
are skipped. Every one of the ``3^q`` faces (each coordinate at its lower bound, its upper bound,
or free) is enumerated, and stationary points outside the box are discarded; each candidate is a
point of the box, so the result never exceeds the true maximum, and it contains a maximiser, so
it is never below it (up to rounding, covered by a relative margin of 1e-9).

Cost: ``2^(C−1)`` sign vectors (``σ`` and ``−σ`` give the same range) times ``3^q`` faces, with
``C = (d + 2)(d + 3)/2 − 1`` and ``q = d + 1`` for the regression statistic: 16 × 9 at d = 1,
256 × 27 at d = 2, 8192 × 81 at d = 3, and 524 288 × 243 at d = 4, too slow for a release. Above
:data:`MAX_EXACT_COMPONENTS` components the caller falls back to the sum of ranges.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_EXACT_COMPONENTS", "RELATIVE_MARGIN", "exact_l1_sensitivity", "quadratic_box_range"]

MAX_EXACT_COMPONENTS = 14
"""Largest number of components enumerated exactly (the regression statistic at d = 3)."""
RELATIVE_MARGIN = 1e-9
"""Relative safety margin added to the enumerated maximum (rounding in the candidates)."""


def quadratic_box_range(
    linear: npt.ArrayLike,
    hessian: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Minimum and maximum of ``f(v) = a·v + ½ vᵀ H v`` over the box ``lower <= v <= upper``.

    Faces enumerated as in :mod:`pymc_dp.curator.regression.exact_l1`; leading batch dimensions of
    ``linear`` and ``hessian`` give one quadratic each.

    Parameters
    ----------
    linear
        ``a``, shape ``(..., q)``.
    hessian
        Symmetric ``H``, shape ``(..., q, q)``.
    lower, upper
        Finite bounds of the ``q`` variables, shape ``(q,)``.

    Returns
    -------
    low, high : numpy.ndarray
        Minimum and maximum of each quadratic, shape ``(...)``.

    Examples
    --------
    ``x² − y²`` over ``[−1, 1]²``: the saddle at 0 is neither; extremes at the edges' centres.

    >>> low, high = quadratic_box_range([0.0, 0.0], [[2.0, 0.0], [0.0, -2.0]], [-1, -1], [1, 1])
    >>> float(low), float(high)
    (-1.0, 1.0)
    """
    a = np.asarray(linear, dtype=np.float64)
    h = np.asarray(hessian, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    q = lo.shape[0]
    batch = a.shape[:-1]
    a = a.reshape(-1, q)
    h = np.broadcast_to(h, (*batch, q, q)).reshape(-1, q, q)
    best_low = np.full(a.shape[0], np.inf)
    best_high = np.full(a.shape[0], -np.inf)
    tol = 1e-12 * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))
    for free_mask in range(2**q):
        free = np.array([(free_mask >> j) & 1 == 1 for j in range(q)])
        fixed = ~free
        # Every assignment of the fixed coordinates to a bound: (A, q) with free ones at 0.
        corners = _corners(lo[fixed], hi[fixed])
        points = np.zeros((1, corners.shape[0], q))
        points[..., fixed] = corners
        points = np.broadcast_to(points, (a.shape[0], corners.shape[0], q)).copy()
        valid = np.ones(points.shape[:2], dtype=bool)
        if free.any():
            h_ss = h[:, free][:, :, free]
            rhs = -(a[:, None, free] + points[:, :, fixed] @ h[:, fixed][:, :, free])
            # Singular faces are skipped (see the module docstring); a near-zero pivot test on
            # the determinant relative to Hadamard's bound.
            det = np.linalg.det(h_ss)
            hadamard = np.prod(np.linalg.norm(h_ss, axis=-1), axis=-1)
            regular = np.abs(det) > 1e-10 * np.maximum(hadamard, 1e-300)
            h_safe = np.where(regular[:, None, None], h_ss, np.eye(int(free.sum())))
            v_free = np.linalg.solve(h_safe[:, None], rhs[..., None])[..., 0]
            inside = np.all(
                (v_free >= lo[free] - tol[free]) & (v_free <= hi[free] + tol[free]), axis=-1
            )
            valid = regular[:, None] & inside
            points[:, :, free] = np.clip(v_free, lo[free], hi[free])
        # Clipped to the box, every candidate is a feasible point: values never overshoot.
        values = np.einsum("bq,baq->ba", a, points) + 0.5 * np.einsum(
            "baq,bqr,bar->ba", points, h, points
        )
        best_high = np.maximum(best_high, np.where(valid, values, -np.inf).max(axis=1))
        best_low = np.minimum(best_low, np.where(valid, values, np.inf).min(axis=1))
    return best_low.reshape(batch), best_high.reshape(batch)


def _corners(lower: npt.NDArray[np.float64], upper: npt.NDArray[np.float64]) -> npt.NDArray:
    """All ``2^k`` vertices of a k-dimensional box, shape ``(2^k, k)``."""
    k = lower.shape[0]
    bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1
    return np.where(bits == 1, upper, lower)


def exact_l1_sensitivity(
    powers: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
) -> float:
    """Exact L1 sensitivity of the sums of monomials of degree 1-2 over a box, with a margin.

    Parameters
    ----------
    powers
        Non-negative integer exponents of each monomial, shape ``(C, q)``, every row of total
        degree 1 or 2, ``C <=`` :data:`MAX_EXACT_COMPONENTS`.
    lower, upper
        Finite box of the ``q`` variables, ``lower < upper``.

    Returns
    -------
    float
        ``max_{v, v'} ||t(v) − t(v')||₁`` times ``1 + 1e-9``.

    Raises
    ------
    ValueError
        If a monomial's degree is not 1 or 2, or there are more than
        :data:`MAX_EXACT_COMPONENTS` components (use the sum of ranges there).

    Examples
    --------
    Regression statistic ``(x, x², y, xy, y²)`` with x, y in [−1, 1]: 16/3, where the sum of
    the ranges is 8.

    >>> from pymc_dp.curator.regression.statistics import statistic_powers
    >>> round(exact_l1_sensitivity(statistic_powers(1), [-1.0, -1.0], [1.0, 1.0]), 6)
    5.333333
    """
    powers = np.asarray(powers, dtype=np.int64)
    lo = tuple(float(v) for v in np.asarray(lower, dtype=np.float64))
    hi = tuple(float(v) for v in np.asarray(upper, dtype=np.float64))
    if powers.ndim != 2 or powers.shape[1] != len(lo) or len(lo) != len(hi):
        raise ValueError(
            f"powers must have shape (C, q) for q = {len(lo)} bounds (got {powers.shape})"
        )
    degree = powers.sum(axis=1)
    if np.any(powers < 0) or np.any((degree < 1) | (degree > 2)):
        raise ValueError(f"powers must hold monomials of degree 1 or 2 (got degrees {degree})")
    if powers.shape[0] > MAX_EXACT_COMPONENTS:
        raise ValueError(
            f"exact enumeration covers at most {MAX_EXACT_COMPONENTS} components (got "
            f"{powers.shape[0]}); use sum_of_ranges for larger statistics"
        )
    return _exact_l1(tuple(map(tuple, powers.tolist())), lo, hi)


@functools.lru_cache(maxsize=64)
def _exact_l1(
    powers: tuple[tuple[int, ...], ...], lower: tuple[float, ...], upper: tuple[float, ...]
) -> float:
    """Cached enumeration (a release's validation recomputes the same box)."""
    p = np.array(powers, dtype=np.int64)
    n_comp, q = p.shape
    linear_basis = np.zeros((n_comp, q))
    hessian_basis = np.zeros((n_comp, q, q))
    for c, row in enumerate(p):
        (idx,) = np.nonzero(row)
        if row.sum() == 1:
            linear_basis[c, idx[0]] = 1.0
        elif idx.size == 1:  # v_j²: Hessian 2 on the diagonal
            hessian_basis[c, idx[0], idx[0]] = 2.0
        else:  # v_i v_j
            hessian_basis[c, idx[0], idx[1]] = hessian_basis[c, idx[1], idx[0]] = 1.0
    # σ and −σ give the same range: fix σ_0 = +1.
    bits = (np.arange(2 ** (n_comp - 1))[:, None] >> np.arange(n_comp - 1)[None, :]) & 1
    signs = np.column_stack([np.ones(bits.shape[0]), 2.0 * bits - 1.0])
    low, high = quadratic_box_range(
        signs @ linear_basis,
        np.einsum("bc,cqr->bqr", signs, hessian_basis),
        np.array(lower),
        np.array(upper),
    )
    return float(np.max(high - low)) * (1.0 + RELATIVE_MARGIN)
