"""Exact moments of log-linear features by splitting the columns into two halves (matrix sums).

With all 2-way marginals the columns' interaction graph is complete, so a junction tree
(:mod:`pymc_dp.kernels.loglinear_junction`) has one clique holding the whole domain and gains
nothing. The domain still has structure: split the columns into a first half A and a second
half B and lay the cells out as an #A × #B matrix (#A, #B: the cells of each half). Each
corner feature is an indicator on a few columns, so it lies inside A, inside B, or is a product
h_A(x_A) h_B(x_B) of an indicator on its A-columns and one on its B-columns. The logits are then

    θᵀ a(x) = (G_A θ)(x_A) + (G_B θ)(x_B) + [H_A Θ H_Bᵀ](x_A, x_B),

with G the inside features, H the distinct cross indicators and Θ the cross parameters
scattered into a small matrix: one matrix product of rank dim Θ builds all C logits, and every
feature sum is a row sum, a column sum or H_Aᵀ W H_B of a C-cell matrix W. The arithmetic is
the full domain's (O(C) per pass), but as BLAS products and contiguous sums rather than a
clique's indicator matrix: on 12 ternary columns with all 2-way tables (531 441 cells) a
gradient takes milliseconds where the junction tree's takes seconds
(``benchmarks/marginals_exact_law.py``).

Derivatives are exact sums too: Cov_θ[a] v = E_θ[a (a - E a)ᵀ v], the mean formula applied to
the matrix π ∘ (A v - E[A v]).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.loglinear import LogLinearDomain

__all__ = ["MAX_SPLIT_CELLS", "SplitMoments", "split_point"]

MAX_SPLIT_CELLS = 10_000_000
"""Largest product domain laid out as one matrix (80 MB a float64 matrix)."""

_CHUNK_CELLS = 4_000_000
"""Cells held at once (directions × C) when the full covariance is built."""


def split_point(sizes: tuple[int, ...]) -> int:
    """The h whose halves (columns < h, ≥ h) have the most balanced numbers of cells.

    Balanced halves keep the cross indicator matrices small (#A + #B rows, not C).
    """
    total = math.prod(sizes)
    best, best_gap = 1, math.inf
    for h in range(1, len(sizes)):
        left = math.prod(sizes[:h])
        gap = abs(math.log(left) - math.log(total / left))
        if gap < best_gap:
            best, best_gap = h, gap
    return best


def _indicator(cells: np.ndarray, cols: tuple[int, ...], levels: tuple[int, ...]) -> np.ndarray:
    hit = np.ones(cells.shape[0], dtype=bool)
    for k, v in zip(cols, levels, strict=True):
        hit &= cells[:, k] == v
    return hit.astype(float)


class SplitMoments:
    """Exact E_θ[a], Cov_θ[a], log Z and records of a log-linear domain as #A × #B matrices.

    Implements the :class:`~pymc_dp.kernels.loglinear_moments.FeatureMoments` protocol
    (``mean``, ``mean_and_jvp``, ``moments``) with the same numbers as the junction tree and
    the enumerated sums, to rounding.

    Parameters
    ----------
    domain
        The domain; only its sizes and terms are read (never its cells or feature matrices).
    max_cells
        The largest domain accepted (default :data:`MAX_SPLIT_CELLS`; a larger one is for
        measuring the cost, each matrix of probabilities taking 8 bytes a cell).

    Raises
    ------
    ValueError
        If the domain has one column or more than ``max_cells`` cells.

    Examples
    --------
    >>> from pymc_dp.kernels.loglinear import LogLinearDomain
    >>> dom = LogLinearDomain((2, 3, 2), ((0, 1), (1, 2), (0, 2)))
    >>> theta = np.linspace(-1.0, 1.0, dom.n_params)
    >>> mean, cov = SplitMoments(dom).moments(theta)
    >>> exact_mean, exact_cov = dom.moments(theta)
    >>> bool(np.allclose(mean, exact_mean) and np.allclose(cov, exact_cov))
    True
    """

    def __init__(self, domain: LogLinearDomain, *, max_cells: int = MAX_SPLIT_CELLS) -> None:
        sizes = domain.sizes
        if len(sizes) < 2:
            raise ValueError("domain must have at least two columns to split")
        if domain.n_cells > max_cells:
            raise ValueError(
                f"domain has {domain.n_cells} cells, above max_cells = {max_cells} "
                f"(default MAX_SPLIT_CELLS)"
            )
        self.sizes = sizes
        self.n_params = p = domain.n_params
        self.h = h = split_point(sizes)
        self.shape = (math.prod(sizes[:h]), math.prod(sizes[h:]))
        cells_a = np.indices(sizes[:h]).reshape(h, -1).T
        cells_b = np.indices(sizes[h:]).reshape(len(sizes) - h, -1).T
        self.inside_a = np.zeros((self.shape[0], p))
        self.inside_b = np.zeros((self.shape[1], p))
        parts_a: dict[tuple, int] = {}
        parts_b: dict[tuple, int] = {}
        cross: list[tuple[int, int, int]] = []
        for j, (s, levels) in enumerate(domain.basis_terms):
            a = tuple((k, v) for k, v in zip(s, levels, strict=True) if k < h)
            b = tuple((k - h, v) for k, v in zip(s, levels, strict=True) if k >= h)
            if not b:
                self.inside_a[:, j] = _indicator(cells_a, *zip(*a, strict=True))
            elif not a:
                self.inside_b[:, j] = _indicator(cells_b, *zip(*b, strict=True))
            else:
                ia = parts_a.setdefault(a, len(parts_a))
                ib = parts_b.setdefault(b, len(parts_b))
                cross.append((j, ia, ib))
        self.cross_a = np.zeros((self.shape[0], len(parts_a)))
        for part, i in parts_a.items():
            self.cross_a[:, i] = _indicator(cells_a, *zip(*part, strict=True))
        self.cross_b = np.zeros((self.shape[1], len(parts_b)))
        for part, i in parts_b.items():
            self.cross_b[:, i] = _indicator(cells_b, *zip(*part, strict=True))
        self.ones_cross_b = np.column_stack([np.ones(self.shape[1]), self.cross_b])
        self._last: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.cross_terms = np.array([j for j, _, _ in cross], dtype=np.int64)
        self.cross_flat = np.array([ia * len(parts_b) + ib for _, ia, ib in cross], dtype=np.int64)

    def _logits(self, theta: np.ndarray, shift: Any = 0.0) -> np.ndarray:
        """θᵀ a(x) + shift as an (..., #A, #B) matrix, written by one matrix product.

        [H_A, G_A θ, 1] @ [Θ H_Bᵀ; 1ᵀ; (G_B θ + shift)ᵀ]: the inside terms ride in the product
        instead of two more passes over the C cells.
        """
        batch = theta.shape[:-1]
        n_a, n_b = self.cross_a.shape[1], self.cross_b.shape[1]
        pair = np.zeros((*batch, n_a * n_b))
        pair[..., self.cross_flat] = theta[..., self.cross_terms]
        right_cross = pair.reshape(*batch, n_a, n_b) @ self.cross_b.T
        inside_b = theta @ self.inside_b.T + np.asarray(shift)[..., None]
        right = np.concatenate(
            [
                right_cross,
                np.ones((*batch, 1, self.shape[1])),
                inside_b[..., None, :],
            ],
            axis=-2,
        )
        left = np.concatenate(
            [
                np.broadcast_to(self.cross_a, (*batch, *self.cross_a.shape)),
                (theta @ self.inside_a.T)[..., :, None],
                np.ones((*batch, self.shape[0], 1)),
            ],
            axis=-1,
        )
        return left @ right

    def _feature_sums(self, w: np.ndarray) -> np.ndarray:
        """Σ_x w(x) a(x) for weights w of shape (..., #A, #B): shape (..., p).

        Two passes over the cells: w [1, H_B] (row sums and the cross sums' first factor) and
        the column sums.
        """
        rows = w @ self.ones_cross_b
        out = rows[..., 0] @ self.inside_a + w.sum(axis=-2) @ self.inside_b
        pair = (self.cross_a.T @ rows[..., 1:]).reshape(*w.shape[:-2], -1)
        out[..., self.cross_terms] += pair[..., self.cross_flat]
        return out

    def _probs(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """p(x | θ) as an (..., #A, #B) matrix, and log Z(θ)."""
        prob = self._logits(theta)
        top = prob.max(axis=(-2, -1), keepdims=True)
        prob -= top
        np.exp(prob, out=prob)
        total = prob.sum(axis=(-2, -1), keepdims=True)
        prob /= total
        return prob, (np.log(total) + top)[..., 0, 0]

    def _probs_and_mean(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # NUTS's gradient asks for the mean, then its derivative at the same θ
        # (clt_fixed_logp_grad): the last vector θ's probabilities are kept, not built twice
        if self._last is not None and theta.ndim == 1 and np.array_equal(theta, self._last[0]):
            return self._last[1], self._last[2]
        prob, _ = self._probs(theta)
        mean = self._feature_sums(prob)
        if theta.ndim == 1:
            self._last = (theta.copy(), prob, mean)
        return prob, mean

    def log_probs(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log p(x | θ) as an (..., #A, #B) matrix (row-major cell order when flattened)."""
        theta = np.asarray(theta, dtype=float)
        log_z = self.log_partition(theta)
        return self._logits(theta, -log_z)

    def log_partition(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The log partition function log Z(θ), shape (...)."""
        return self._probs(np.asarray(theta, dtype=float))[1]

    def mean(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """E_θ[a], shape (..., p)."""
        return self._probs_and_mean(np.asarray(theta, dtype=float))[1].copy()

    def mean_and_jvp(
        self, theta: npt.ArrayLike, v: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """E_θ[a] and Cov_θ[a] v (the derivative of the mean along v)."""
        theta = np.asarray(theta, dtype=float)
        v = np.asarray(v, dtype=float)
        prob, mean = self._probs_and_mean(theta)
        # vᵀ(a(x) - E a), with E[aᵀv] from the mean already in hand
        weight = self._logits(v, -np.sum(mean * v, axis=-1))
        weight *= prob
        return mean.copy(), self._feature_sums(weight)

    def moments(
        self, theta: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """E_θ[a] and Cov_θ[a] of one θ vector (the p directions in chunks of cells)."""
        theta = np.asarray(theta, dtype=float)
        if theta.ndim != 1 or theta.shape[0] != self.n_params:
            raise ValueError(f"theta must be a vector of {self.n_params} entries")
        prob, mean = self._probs_and_mean(theta)
        cov = np.empty((self.n_params, self.n_params))
        step = max(1, _CHUNK_CELLS // prob.size)
        eye = np.eye(self.n_params)
        for start in range(0, self.n_params, step):
            rows = slice(start, min(start + step, self.n_params))
            weight = self._logits(eye[rows], -mean[rows])  # a_j(x) - E a_j over the cells
            weight *= prob
            cov[rows] = self._feature_sums(weight)
        return mean.copy(), 0.5 * (cov + cov.T)

    def sample(
        self, theta: npt.ArrayLike, n: int, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        """Draw n exact records (level codes, shape (n, K)) from the cell probabilities."""
        prob = self._probs(np.asarray(theta, dtype=float))[0].reshape(-1)
        cells = rng.choice(prob.size, size=n, p=prob)
        return np.stack(np.unravel_index(cells, self.sizes), axis=1).astype(np.int64)
