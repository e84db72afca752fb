"""Constraints that carve the valid region of a latent statistic out of a box.

A sum of records cannot lie anywhere: Σx² ≥ (Σx)²/n for n real records (Cauchy–Schwarz), and
the records outside a truncation window add a sum of known sign. Every constraint here describes
a convex set, so its intersection with a line through a feasible point is an interval. That is
all the bounded Gibbs fallback of :func:`~pymc_dp.kernels.draw_truncated_normal` needs: the
interval of ``t`` for which ``x + t d`` stays feasible, batched over leading dimensions. Linear,
quadratic (Cauchy–Schwarz) and positive semi-definite matrix constraints are here.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "Constraint",
    "LinearConstraint",
    "PSDConstraint",
    "QuadraticConstraint",
    "window_constraints",
]


class Constraint(Protocol):
    """A convex constraint on vectors ``x`` of shape ``(..., k)``."""

    def contains(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """Whether each ``x`` (shape ``(..., k)``) satisfies the constraint; shape ``(...)``."""
        ...

    def line_interval(
        self, x: npt.NDArray[np.float64], d: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The interval ``[lo, hi]`` of ``t`` with ``x + t d`` feasible; shapes ``(...)``.

        ``x`` need not be feasible itself; an empty interval has ``lo > hi``.
        """
        ...

    def select(self, mask: npt.NDArray[np.bool_]) -> Constraint:
        """The constraint for the batch members where ``mask`` holds (flattened)."""
        ...


class LinearConstraint(NamedTuple):
    """``lower ≤ coef · x ≤ upper``, with ``coef`` shape ``(k,)`` and bounds ``(...)``.

    Examples
    --------
    >>> import numpy as np
    >>> c = LinearConstraint(np.array([-1.0, 1.0]), 0.0, np.inf)   # x[1] >= x[0]
    >>> lo, hi = c.line_interval(np.array([0.0, 1.0]), np.array([1.0, 0.0]))  # x0 up to x1 = 1
    >>> bool(c.contains(np.array([1.0, 2.0]))), float(lo), float(hi)
    (True, -inf, 1.0)
    """

    coef: npt.NDArray[np.float64]
    lower: npt.ArrayLike
    upper: npt.ArrayLike

    def contains(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:  # noqa: D102
        value = x @ self.coef
        return (value >= self.lower) & (value <= self.upper)

    def line_interval(self, x, d):  # noqa: D102
        at, slope = x @ self.coef, d @ self.coef
        with np.errstate(divide="ignore", invalid="ignore"):
            t_lo = (self.lower - at) / slope
            t_hi = (self.upper - at) / slope
        inside = (at >= self.lower) & (at <= self.upper)
        flat = np.where(inside, -np.inf, np.inf)
        lo = np.where(slope > 0, t_lo, np.where(slope < 0, t_hi, flat))
        hi = np.where(slope > 0, t_hi, np.where(slope < 0, t_lo, -flat))
        return lo, hi

    def select(self, mask: npt.NDArray[np.bool_]) -> LinearConstraint:  # noqa: D102
        shape = mask.shape
        return LinearConstraint(
            self.coef,
            np.broadcast_to(self.lower, shape)[mask],
            np.broadcast_to(self.upper, shape)[mask],
        )


class QuadraticConstraint(NamedTuple):
    """``scale · x[linear] ≥ x[square]²``, e.g. n·Σx² ≥ (Σx)² (Cauchy–Schwarz).

    Parameters
    ----------
    square, linear
        Indices of the squared and the linear component.
    scale
        Positive scale, broadcastable to the batch shape ``(...)``.

    Examples
    --------
    >>> import numpy as np
    >>> c = QuadraticConstraint(square=0, linear=1, scale=4.0)   # 4·x1 >= x0²
    >>> lo, hi = c.line_interval(np.array([0.0, 1.0]), np.array([1.0, 0.0]))
    >>> float(lo), float(hi)
    (-2.0, 2.0)
    """

    square: int
    linear: int
    scale: npt.ArrayLike

    def contains(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:  # noqa: D102
        return self.scale * x[..., self.linear] >= x[..., self.square] ** 2

    def line_interval(self, x, d):  # noqa: D102
        # scale·(x_l + t d_l) - (x_s + t d_s)² >= 0  <=>  a t² + b t + c <= 0 with a >= 0.
        xs, xl, ds, dl = (
            x[..., self.square],
            x[..., self.linear],
            d[..., self.square],
            d[..., self.linear],
        )
        a = ds**2
        b = 2 * xs * ds - self.scale * dl
        c = xs**2 - self.scale * xl
        disc = b**2 - 4 * a * c
        with np.errstate(divide="ignore", invalid="ignore"):
            # Roots without cancellation: q = -(b + sign(b)√disc)/2, roots q/a and c/q.
            root = np.sqrt(np.maximum(disc, 0.0))
            q = -0.5 * (b + np.where(b >= 0, root, -root))
            r1, r2 = q / a, c / q
            lin = -c / b
        quad_lo = np.where(disc >= 0, np.minimum(r1, r2), np.inf)
        quad_hi = np.where(disc >= 0, np.maximum(r1, r2), -np.inf)
        # a = 0: the line moves only the linear component, so b·t + c <= 0 holds on a half-line,
        # everywhere (b = 0, c <= 0) or nowhere (b = 0, c > 0).
        flat = np.where(c <= 0, np.inf, -np.inf)
        lin_lo = np.where(b < 0, lin, np.where(b > 0, -np.inf, -flat))
        lin_hi = np.where(b > 0, lin, np.where(b < 0, np.inf, flat))
        degenerate = a <= 1e-300
        return np.where(degenerate, lin_lo, quad_lo), np.where(degenerate, lin_hi, quad_hi)

    def select(self, mask: npt.NDArray[np.bool_]) -> QuadraticConstraint:  # noqa: D102
        return QuadraticConstraint(
            self.square, self.linear, np.broadcast_to(self.scale, mask.shape)[mask]
        )


def window_constraints(
    *,
    size: int,
    out_lower: npt.ArrayLike,
    out_upper: npt.ArrayLike,
    total: npt.ArrayLike,
    quadratic: bool,
) -> list[Constraint]:
    """Constraints on the stacked (ŝ, s) of a truncated family, beyond its box.

    Parameters
    ----------
    size
        Number k of statistic components; the stacked vector has 2k.
    out_lower, out_upper
        Box of s - ŝ (the records outside the window), shape ``(..., k)``.
    total
        Number of records n, shape ``(...)``.
    quadratic
        Whether t = (x, x²): then n·Σx² ≥ (Σx)² holds for ŝ and for s.

    Examples
    --------
    >>> import numpy as np
    >>> cons = window_constraints(size=1, out_lower=[0.0], out_upper=[np.inf], total=10,
    ...                           quadratic=False)
    >>> bool(cons[0].contains(np.array([3.0, 5.0]))), bool(cons[0].contains(np.array([3.0, 2.0])))
    (True, False)
    """
    out_lower = np.asarray(out_lower, dtype=np.float64)
    out_upper = np.asarray(out_upper, dtype=np.float64)
    constraints: list[Constraint] = []
    for j in range(size):
        coef = np.zeros(2 * size)
        coef[size + j], coef[j] = 1.0, -1.0
        constraints.append(LinearConstraint(coef, out_lower[..., j], out_upper[..., j]))
    if quadratic:
        scale = np.asarray(total, dtype=np.float64)
        constraints.append(QuadraticConstraint(square=0, linear=1, scale=scale))
        constraints.append(QuadraticConstraint(square=2, linear=3, scale=scale))
    return constraints


class PSDConstraint(NamedTuple):
    """``B(x) = offset + Σ_r x_r basis_r`` is positive semi-definite (a linear matrix inequality).

    E.g. the regression statistic, whose matrix B = [X, y]ᵀ[X, y] must be PSD for any data set
    to have it (:func:`pymc_dp.regression.kernels.suffstat.psd_constraint`). Eigenvalues down to
    ``−tol·max(1, max_j |B_jj|)`` count as 0, so that matrices made PSD by eigenvalue clipping
    stay inside despite rounding.

    Parameters
    ----------
    offset
        Constant part, shape ``(..., q, q)``, symmetric.
    basis
        One symmetric ``(q, q)`` matrix per component of x, shape ``(k, q, q)``.
    tol
        Relative tolerance of the eigenvalue test.

    Notes
    -----
    The set is convex, so along a line it is an interval. From a point with B(x) positive
    definite, ``B(x + t d) = B(x) + t D ⪰ 0`` exactly when ``1 + t μ ≥ 0`` for every eigenvalue
    μ of ``B(x)^(−1/2) D B(x)^(−1/2)``. :meth:`line_interval` needs ``x`` inside (it returns an
    empty interval otherwise); :func:`~pymc_dp.kernels.draw_truncated_normal` calls it at its
    current, feasible state.

    Examples
    --------
    >>> import numpy as np
    >>> basis = np.array([[[0.0, 1.0], [1.0, 0.0]]])  # B(x) = [[1, x], [x, 1]]
    >>> c = PSDConstraint(np.eye(2), basis)
    >>> bool(c.contains(np.array([0.5]))), bool(c.contains(np.array([1.5])))
    (True, False)
    >>> [round(float(v), 6) for v in c.line_interval(np.array([0.5]), np.array([1.0]))]
    [-1.5, 0.5]
    """

    offset: npt.NDArray[np.float64]
    basis: npt.NDArray[np.float64]
    tol: float = 1e-12

    def matrix(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``B(x)``, shape ``(..., q, q)``."""
        return self.offset + np.einsum("...k,kij->...ij", x, self.basis)

    def _floor(self, b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        diag = np.abs(np.diagonal(b, axis1=-2, axis2=-1))
        return self.tol * np.maximum(1.0, np.max(diag, axis=-1))

    def contains(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:  # noqa: D102
        b = self.matrix(x)
        return np.linalg.eigvalsh(b)[..., 0] >= -self._floor(b)

    def line_interval(self, x, d):  # noqa: D102
        b = self.matrix(x)
        q = b.shape[-1]
        b = b + self._floor(b)[..., None, None] * np.eye(q)
        lam, vec = np.linalg.eigh(b)
        inside = lam[..., 0] > 0
        root = vec / np.sqrt(np.where(inside[..., None], lam, 1.0))[..., None, :]
        step = np.einsum("...k,kij->...ij", d, self.basis)
        mu = np.linalg.eigvalsh(np.swapaxes(root, -1, -2) @ step @ root)
        with np.errstate(divide="ignore"):
            bound = -1.0 / mu
        lo = np.max(np.where(mu > 0, bound, -np.inf), axis=-1)
        hi = np.min(np.where(mu < 0, bound, np.inf), axis=-1)
        return np.where(inside, lo, np.inf), np.where(inside, hi, -np.inf)

    def select(self, mask: npt.NDArray[np.bool_]) -> PSDConstraint:  # noqa: D102
        offset = np.broadcast_to(self.offset, (*mask.shape, *self.offset.shape[-2:]))
        return PSDConstraint(offset[mask], self.basis, self.tol)
