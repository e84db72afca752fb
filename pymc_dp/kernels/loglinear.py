"""Log-linear models over a product of categorical columns: features, moments, likelihoods.

A set of marginal count tables of categorical columns is the sufficient statistic of the
log-linear (maximum-entropy) family p(x | θ) ∝ exp(θᵀ a(x)) over the product domain of the
columns, where a(x) holds the indicators of the queried marginal cells on an independent basis
(corner constraints: for each subset S of the downward closure of the marginals, the indicators
of x_S = v with every v_k above the first level). This module holds the NumPy side: the domain,
the feature matrices, E_θ[a] and Cov_θ[a] by summing over the full domain, the projection of
the released tables onto the directions that carry information about θ, the collapsed normal
likelihood of that projection and the exact likelihood of a tiny release (enumeration of the
histograms).

The full domain is enumerated up to :data:`MAX_CELLS` cells; above that only the parts that
need no enumeration are available (the terms, the table map, the projection), and the moments
come from message passing (:mod:`pymc_dp.kernels.loglinear_moments`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import linalg

from pymc_dp.kernels.numeric import log_sum_exp

__all__ = [
    "MAX_CELLS",
    "MAX_HISTOGRAMS",
    "LogLinearDomain",
    "discrete_gaussian_logpmf",
    "discrete_gaussian_variance",
    "discrete_laplace_logpmf",
    "discrete_laplace_variance",
    "enumerate_histograms",
    "exact_marginals_logp",
    "exact_marginals_setup",
    "marginal_table_map",
    "marginals_clt_logp",
    "marginals_clt_logp_grad",
]

MAX_CELLS = 100_000
"""Largest product domain summed over cell by cell."""
MAX_HISTOGRAMS = 200_000
"""Largest number of histograms the exact likelihood enumerates."""


_ENUMERATED = ("cells", "table_features", "basis", "projected_features")
"""The cached attributes of :class:`LogLinearDomain` with a row per cell."""


@dataclasses.dataclass(frozen=True)
class LogLinearDomain:
    """The product domain of categorical columns and the features of a set of marginals.

    Parameters
    ----------
    sizes
        Number of levels of each column (each at least 2).
    marginals
        The queried marginals, each a tuple of distinct column indices.

    Attributes
    ----------
    basis_terms : tuple
        For each log-linear parameter, its subset of columns and levels,
        ``((k, ...), (v, ...))``: the feature a_j(x) is the indicator of x_k = v for each pair.

    Notes
    -----
    ``cells``, ``table_features`` (F), ``basis`` (A), ``projection`` (U) and
    ``projected_features`` (G = F U) are built on first use; all but U enumerate the domain and
    are refused above :data:`MAX_CELLS` cells, where the features' moments come from
    :func:`pymc_dp.kernels.loglinear_moments.feature_moments` instead.
    """

    sizes: tuple[int, ...]
    marginals: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        sizes = tuple(int(s) for s in self.sizes)
        if not sizes or min(sizes) < 2:
            raise ValueError(f"every column needs at least 2 levels (got sizes {sizes})")
        marginals = []
        for m in self.marginals:
            m = tuple(int(k) for k in m)
            if not m or len(set(m)) != len(m) or min(m) < 0 or max(m) >= len(sizes):
                raise ValueError(f"a marginal must list distinct column indices (got {m})")
            marginals.append(m)
        if not marginals:
            raise ValueError("marginals must name at least one marginal")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "marginals", tuple(marginals))
        object.__setattr__(self, "basis_terms", _corner_terms(sizes, marginals))

    def __getstate__(self) -> dict[str, Any]:
        """The domain without its enumerated arrays, which are rebuilt on first use.

        They hold C rows each (388 MB pickled at 10 ternary columns), and PyTensor's Numba
        backend (nutpie) runs a Python ``Op`` in object mode from its pickle, whose bytes
        Numba copies on every call: with them a gradient of ``CLTLogp`` cost 0.76 s there
        against 1.5 ms on the C backend (``benchmarks/marginals_backends.py 10``).
        """
        return {k: v for k, v in self.__dict__.items() if k not in _ENUMERATED}

    # The enumerated attributes are built on first use, and only for domains of at most
    # MAX_CELLS cells; larger domains use the table map and a message-passing feature method
    # (pymc_dp.kernels.loglinear_moments.feature_moments).

    def _enumerable(self, what: str) -> None:
        if self.n_cells > MAX_CELLS:
            raise ValueError(
                f"{what} enumerates the product domain, which has {self.n_cells} cells, above "
                f"{MAX_CELLS}; large domains go through "
                "pymc_dp.kernels.loglinear_moments.feature_moments (junction tree or Bethe)"
            )

    @functools.cached_property
    def cells(self) -> npt.NDArray[np.int64]:
        """Every cell of the domain, shape (C, K), row-major (enumerated domains only)."""
        self._enumerable("cells")
        return np.indices(self.sizes).reshape(len(self.sizes), -1).T

    @functools.cached_property
    def table_features(self) -> npt.NDArray[np.float64]:
        """F, shape (C, T): each cell's one-hot indicators in the tables (enumerated only)."""
        self._enumerable("table_features")
        return np.concatenate([_one_hot(self.cells, self.sizes, m) for m in self.marginals], axis=1)

    @functools.cached_property
    def basis(self) -> npt.NDArray[np.float64]:
        """A, shape (C, p): the corner features of every cell (enumerated domains only)."""
        self._enumerable("basis")
        return _corner_columns(self.cells, self.basis_terms)

    @functools.cached_property
    def table_map(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(c, M) with F(x) = c + M a(x): the tables as affine functions of the features.

        Each indicator of a marginal cell is a function of that marginal's columns, so it is
        solved for on the marginal's own small domain: c has shape (T,), M shape (T, p).
        """
        return marginal_table_map(self.sizes, self.marginals, self.basis_terms)

    @functools.cached_property
    def projection(self) -> npt.NDArray[np.float64]:
        """U, shape (T, p): an orthonormal basis of the directions the tables vary in.

        On an enumerated domain the right singular vectors of the centred F; otherwise an
        orthonormal basis of the columns of M (:attr:`table_map`), the same subspace (F - E F
        = M (a - E a) and the centred corner features are linearly independent).
        """
        if self.n_cells > MAX_CELLS:
            q, _ = np.linalg.qr(self.table_map[1])
            return q
        features = self.table_features
        centred = features - features.mean(axis=0)
        _, sv, vt = np.linalg.svd(centred, full_matrices=False)
        rank = int(np.sum(sv > 1e-9 * max(sv.max(), 1.0)))
        if rank != self.n_params:  # pragma: no cover - a property of the corner basis
            raise AssertionError(f"table rank {rank} != basis size {self.n_params}")
        return vt[:rank].T

    @functools.cached_property
    def projected_table_map(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(Uᵀc, UᵀM): g(x) = Uᵀ F(x) as an affine function of a(x), shapes (p,) and (p, p)."""
        c, m = self.table_map
        return self.projection.T @ c, self.projection.T @ m

    @functools.cached_property
    def projected_features(self) -> npt.NDArray[np.float64]:
        """G = F U, shape (C, p) (enumerated domains only)."""
        return self.table_features @ self.projection

    @property
    def n_cells(self) -> int:
        """C, the number of cells of the product domain."""
        return math.prod(self.sizes)

    @property
    def n_params(self) -> int:
        """p, the number of free log-linear parameters."""
        return len(self.basis_terms)

    @property
    def table_sizes(self) -> tuple[int, ...]:
        """Number of cells of each marginal table."""
        return tuple(math.prod(self.sizes[k] for k in m) for m in self.marginals)

    def cell_index(self, codes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Row-major cell index of records given as level codes, shape (N, K) → (N,)."""
        codes = np.asarray(codes, dtype=np.int64)
        return np.ravel_multi_index(tuple(codes.T), self.sizes)

    def tables(self, codes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The exact marginal tables (concatenated) of records given as level codes."""
        codes = np.asarray(codes, dtype=np.int64)
        out = []
        for m, size in zip(self.marginals, self.table_sizes, strict=True):
            sub = tuple(self.sizes[k] for k in m)
            index = np.ravel_multi_index(tuple(codes[:, k] for k in m), sub)
            out.append(np.bincount(index, minlength=size))
        return np.concatenate(out).astype(np.int64)

    def log_probs(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log p(x | θ) of every cell, shape (..., C)."""
        logits = np.asarray(theta, dtype=float) @ self.basis.T
        return logits - log_sum_exp(logits, keepdims=True)

    def log_partition(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """A(θ) = log Σ_x exp(θᵀ a(x))."""
        return log_sum_exp(np.asarray(theta, dtype=float) @ self.basis.T)

    def moments(
        self, theta: npt.ArrayLike, features: npt.NDArray[np.float64] | None = None
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """E_θ[g(x)] and Cov_θ[g(x)] of features g (default a(x)), summed over the domain."""
        g = self.basis if features is None else features
        prob = np.exp(self.log_probs(theta))
        mean = prob @ g
        second = np.einsum("...c,ci,cj->...ij", prob, g, g)
        return mean, second - mean[..., :, None] * mean[..., None, :]


def _one_hot(cells: np.ndarray, sizes: Sequence[int], marginal: Sequence[int]) -> np.ndarray:
    sub = tuple(sizes[k] for k in marginal)
    index = np.ravel_multi_index(tuple(cells[:, k] for k in marginal), sub)
    out = np.zeros((cells.shape[0], math.prod(sub)))
    out[np.arange(cells.shape[0]), index] = 1.0
    return out


def _corner_terms(sizes: Sequence[int], marginals: Sequence[tuple[int, ...]]) -> tuple:
    subsets: set[tuple[int, ...]] = set()
    for m in marginals:
        for r in range(1, len(m) + 1):
            subsets.update(tuple(sorted(s)) for s in itertools.combinations(m, r))
    return tuple(
        (s, levels)
        for s in sorted(subsets, key=lambda s: (len(s), s))
        for levels in itertools.product(*(range(1, sizes[k]) for k in s))
    )


def _corner_columns(cells: np.ndarray, terms: Sequence[tuple]) -> np.ndarray:
    columns = []
    for s, levels in terms:
        hit = np.ones(cells.shape[0], dtype=bool)
        for k, v in zip(s, levels, strict=True):
            hit &= cells[:, k] == v
        columns.append(hit.astype(float))
    return np.stack(columns, axis=1)


def marginal_table_map(
    sizes: Sequence[int], marginals: Sequence[tuple[int, ...]], terms: Sequence[tuple]
) -> tuple[np.ndarray, np.ndarray]:
    """(c, M) with the marginal tables' indicators F(x) = c + M a(x), a the corner ``terms``.

    Every subset of each marginal must be among ``terms``; each table is solved for on its
    own columns' domain (never the product domain).
    """
    index = {t: j for j, t in enumerate(terms)}
    consts, rows = [], []
    for m in marginals:
        local_sizes = tuple(sizes[k] for k in m)
        local_cells = np.indices(local_sizes).reshape(len(m), -1).T
        # the corner terms on subsets of m, in m's local column numbering
        local_terms, where = [], []
        for (s, levels), j in index.items():
            if set(s) <= set(m):
                local_terms.append((tuple(m.index(k) for k in s), levels))
                where.append(j)
        # local columns of a term listed in global column order: reorder to local order
        design = np.ones((local_cells.shape[0], 1 + len(local_terms)))
        for c, (s, levels) in enumerate(local_terms):
            hit = np.ones(local_cells.shape[0], dtype=bool)
            for k, v in zip(s, levels, strict=True):
                hit &= local_cells[:, k] == v
            design[:, 1 + c] = hit
        # indicator of local cell i = design @ coef[:, i]
        coef = np.linalg.solve(design, np.eye(local_cells.shape[0]))
        block = np.zeros((local_cells.shape[0], len(terms)))
        block[:, where] = coef[1:].T
        consts.append(coef[0])
        rows.append(block)
    const = np.concatenate(consts)
    const[np.abs(const) < 1e-12] = 0.0
    matrix = np.concatenate(rows)
    matrix[np.abs(matrix) < 1e-12] = 0.0
    return const, np.rint(matrix) if np.allclose(matrix, np.rint(matrix)) else matrix


# --- noise laws on the integers ---


def discrete_laplace_logpmf(k: npt.ArrayLike, scale: float) -> npt.NDArray[np.float64]:
    """Log P(noise = k) of the discrete Laplace law, P(k) ∝ exp(-abs(k) / scale)."""
    t = 1.0 / scale
    return np.log(np.tanh(t / 2.0)) - t * np.abs(np.asarray(k, dtype=float))


def discrete_laplace_variance(scale: float) -> float:
    """Var of the discrete Laplace law: 2 e^{-1/b} / (1 - e^{-1/b})²."""
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (1.0 - q) ** 2


def _gaussian_support(sigma: float) -> np.ndarray:
    half = math.ceil(12.0 * sigma) + 2
    return np.arange(-half, half + 1, dtype=float)


def discrete_gaussian_logpmf(k: npt.ArrayLike, sigma: float) -> npt.NDArray[np.float64]:
    """Log P(noise = k) of the discrete Gaussian law, P(k) ∝ exp(-k² / (2σ²))."""
    support = _gaussian_support(sigma)
    log_norm = float(log_sum_exp(-(support**2) / (2.0 * sigma**2)))
    return -(np.asarray(k, dtype=float) ** 2) / (2.0 * sigma**2) - log_norm


def discrete_gaussian_variance(sigma: float) -> float:
    """Var of the discrete Gaussian law (slightly below σ² for σ < 1), by summation."""
    support = _gaussian_support(sigma)
    w = np.exp(-(support**2) / (2.0 * sigma**2))
    return float(np.sum(w * support**2) / np.sum(w))


# --- likelihoods ---


def marginals_clt_logp(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    z: npt.ArrayLike,
    *,
    n: int,
    noise_variance: float,
) -> npt.NDArray[np.float64]:
    """Collapsed normal log p(z | θ) of the projected release z = Uᵀ y.

    z = Uᵀ s + Uᵀ e with s ≈ N(n E_θ[g], n Cov_θ[g]) (g = Fᵀ U, the CLT over the n records) and
    e the noise, Cov(Uᵀ e) = v I (U is orthonormal and the noise is independent per cell; for
    Gaussian noise the collapse is exact, for Laplace noise a normal approximation).
    """
    mean, cov = domain.moments(theta, domain.projected_features)
    p = domain.n_params
    cov = n * cov + noise_variance * np.eye(p)
    r = np.asarray(z, dtype=float) - n * mean
    chol = np.linalg.cholesky(cov)
    w = np.linalg.solve(chol, r[..., None])[..., 0]
    log_det = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * (np.sum(w**2, axis=-1) + log_det + p * math.log(2.0 * math.pi))


def marginals_clt_logp_grad(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    z: npt.ArrayLike,
    *,
    n: int,
    noise_variance: float,
) -> tuple[float, npt.NDArray[np.float64]]:
    """:func:`marginals_clt_logp` of one θ and its gradient, analytically, in O(C p²).

    With Σ = n Cov[g] + v I, r = z - n E[g] and W = Σ⁻¹ r rᵀ Σ⁻¹ - Σ⁻¹, the derivative along θ_k
    is n Σ_x π_x (a_k(x) - E a_k) [(g(x) - E g)ᵀ Σ⁻¹ r + ½ (g(x) - E g)ᵀ W (g(x) - E g)], since
    ∂E[g]/∂θ_k and ∂Cov[g]/∂θ_k are covariances with a_k.
    """
    theta = np.asarray(theta, dtype=float)
    prob = np.exp(domain.log_probs(theta))
    g = domain.projected_features
    mean = prob @ g
    gc = g - mean
    p = domain.n_params
    cov = n * (gc.T * prob) @ gc + noise_variance * np.eye(p)
    r = np.asarray(z, dtype=float) - n * mean
    chol = np.linalg.cholesky(cov)
    w = _solve_lower(chol, r)
    log_det = 2.0 * np.sum(np.log(np.diag(chol)))
    logp = -0.5 * (w @ w + log_det + p * math.log(2.0 * math.pi))
    sr = np.linalg.solve(chol.T, w)
    # gcᵀ W gc = (gc·Σ⁻¹r)² - |L⁻¹ gc|², by one triangular solve (BLAS) rather than an einsum
    proj = gc @ sr
    whitened = _solve_lower(chol, gc.T)
    per_cell = proj + 0.5 * (proj**2 - np.sum(whitened**2, axis=0))
    a = domain.basis
    ac = a - prob @ a
    grad = n * (ac.T @ (prob * per_cell))
    return float(logp), grad


def _solve_lower(chol: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return linalg.solve_triangular(chol, rhs, lower=True, check_finite=False)


def enumerate_histograms(n: int, n_cells: int) -> npt.NDArray[np.int64]:
    """Every histogram of n records over ``n_cells`` cells (compositions of n), shape (H, C)."""
    count = math.comb(n + n_cells - 1, n_cells - 1)
    if count > MAX_HISTOGRAMS:
        raise ValueError(
            f"the exact likelihood would enumerate {count} histograms (n={n}, {n_cells} cells), "
            f"above {MAX_HISTOGRAMS}; use the collapsed normal likelihood"
        )
    out = np.zeros((count, n_cells), dtype=np.int64)
    for row, bars in enumerate(itertools.combinations(range(n + n_cells - 1), n_cells - 1)):
        edges = (-1, *bars, n + n_cells - 1)
        out[row] = np.diff(edges) - 1
    return out


def exact_marginals_setup(
    domain: LogLinearDomain,
    y: npt.ArrayLike,
    *,
    n: int,
    noise_logpmf: np.ufunc | object,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The histograms h and the θ-free part c_h of the exact log-likelihood.

    log p(y | θ) = logsumexp_h (c_h + hᵀ log π_θ), with c_h = log n!/∏h! + Σ_j log p_noise(y_j -
    (Fᵀh)_j); ``noise_logpmf`` maps integer noise to its log-probability.
    """
    hist = enumerate_histograms(n, domain.n_cells)
    tables = hist @ domain.table_features
    log_coef = math.lgamma(n + 1) - np.sum(
        np.vectorize(math.lgamma)(hist + 1.0), axis=1, dtype=float
    )
    noise = np.sum(noise_logpmf(np.asarray(y, dtype=float) - tables), axis=1)  # type: ignore[operator]
    return hist, log_coef + noise


def exact_marginals_logp(
    theta: npt.ArrayLike, domain: LogLinearDomain, hist: np.ndarray, const: np.ndarray
) -> npt.NDArray[np.float64]:
    """The exact log p(y | θ) from :func:`exact_marginals_setup`'s histograms and constants."""
    terms = const + domain.log_probs(theta) @ hist.T
    return log_sum_exp(terms)
