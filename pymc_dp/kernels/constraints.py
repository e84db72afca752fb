"""Constraints that carve the valid region of a latent statistic out of a box.

A sum of records cannot lie anywhere: Σx² ≥ (Σx)²/n for n real records (Cauchy–Schwarz), and
the records outside a truncation window add a sum of known sign. Every constraint here describes
a convex set, so its intersection with a line through a feasible point is an interval. That is
all the bounded Gibbs fallback of :func:`~pymc_dp.kernels.draw_truncated_normal` needs: the
interval of ``t`` for which ``x + t d`` stays feasible, batched over leading dimensions.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Constraint", "LinearConstraint", "QuadraticConstraint", "window_constraints"]


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
