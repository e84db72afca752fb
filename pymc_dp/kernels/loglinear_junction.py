"""Exact moments of log-linear features by message passing over a junction tree.

The log-linear density p(x | θ) ∝ exp(θᵀ a(x)) of
:class:`~pymc_dp.kernels.loglinear.LogLinearDomain` factorises over the queried marginals:
each corner feature is an indicator on a subset of one marginal's columns. The columns'
interaction graph (an edge between two columns of a marginal) is triangulated by greedy
min-fill elimination; its maximal cliques, joined by a maximum-weight spanning tree on the
separators' sizes, form a junction tree. Two passes of log-space sum-product over it give
every clique's marginal, hence E_θ[a] and log Z, at a cost of the cliques' sizes
rather than the product domain's.

Derivatives are taken by the complex step: the whole pass is analytic in θ, so for a real
direction v, Im E_{θ + i h v}[a] / h = Cov_θ[a] v to rounding (no cancellation, h = 1e-30). A
batch of p directions gives the covariance in one vectorised pass. Forward sampling from the
calibrated tree draws exact records.

With all 2-way marginals the graph is complete and the one clique is the whole domain: there this
gains nothing (see :mod:`pymc_dp.kernels.loglinear_bethe` for the approximate route).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.loglinear import LogLinearDomain

__all__ = ["JunctionTree", "min_fill_cliques"]

_STEP = 1e-30
"""The complex step h: far below rounding of any θ, and far above underflow of h·|v|."""


def min_fill_cliques(
    sizes: Sequence[int], marginals: Sequence[Sequence[int]]
) -> list[tuple[int, ...]]:
    """Maximal cliques of the min-fill triangulation of the columns' interaction graph.

    Columns are eliminated greedily, each time the one whose elimination adds the fewest fill
    edges (ties: the smallest clique, by cells, then the lowest index). Every column appears
    in some clique (isolated columns in their own).
    """
    adj: dict[int, set[int]] = {k: set() for k in range(len(sizes))}
    for m in marginals:
        for a, b in itertools.combinations(m, 2):
            adj[a].add(b)
            adj[b].add(a)
    cliques: list[frozenset[int]] = []
    while adj:

        def cost(v: int) -> tuple[int, int, int]:
            nb = adj[v]
            fill = sum(1 for a, b in itertools.combinations(nb, 2) if b not in adj[a])
            return fill, math.prod(sizes[k] for k in nb | {v}), v

        v = min(adj, key=cost)
        nb = adj.pop(v)
        cliques.append(frozenset(nb | {v}))
        for a, b in itertools.combinations(nb, 2):
            adj[a].add(b)
            adj[b].add(a)
        for a in nb:
            adj[a].discard(v)
    maximal = [c for c in cliques if not any(c < d for d in cliques)]
    unique = list(dict.fromkeys(maximal))
    return [tuple(sorted(c)) for c in unique]


def _spanning_tree(cliques: Sequence[tuple[int, ...]]) -> list[tuple[int, int]]:
    # Kruskal on |Ci ∩ Cj|, largest first: a junction tree for the cliques of a chordal graph
    pairs = sorted(
        itertools.combinations(range(len(cliques)), 2),
        key=lambda ij: -len(set(cliques[ij[0]]) & set(cliques[ij[1]])),
    )
    parent = list(range(len(cliques)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = []
    for i, j in pairs:
        ri, rj = root(i), root(j)
        if ri != rj:
            parent[ri] = rj
            edges.append((i, j))
    return edges


def _lse(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Compute log Σ exp over ``axes``, complex-safe (the shift uses the real part only)."""
    if not axes:
        return x
    top = np.max(x.real, axis=axes, keepdims=True)
    out = np.log(np.sum(np.exp(x - top), axis=axes, keepdims=True)) + top
    return np.squeeze(out, axis=axes)


class JunctionTree:
    """Exact E_θ[a], Cov_θ[a], log Z and samples of a log-linear domain by a junction tree.

    Parameters
    ----------
    domain
        The domain; only its sizes, marginals and terms are read (never its cells).

    Attributes
    ----------
    cliques : list of tuple
        The cliques' columns (sorted), the first the root.
    clique_cells : int
        Σ over cliques of their cells: the size of one pass.
    """

    def __init__(self, domain: LogLinearDomain) -> None:
        self.sizes = domain.sizes
        self.n_params = domain.n_params
        self.cliques = min_fill_cliques(domain.sizes, domain.marginals)
        self.clique_cells = sum(math.prod(self.sizes[k] for k in c) for c in self.cliques)
        edges = _spanning_tree(self.cliques)
        nbrs: dict[int, list[int]] = {i: [] for i in range(len(self.cliques))}
        for i, j in edges:
            nbrs[i].append(j)
            nbrs[j].append(i)
        # breadth-first order from the root: parents before children
        self.order, self.parent = [0], {0: -1}
        for i in self.order:
            for j in nbrs[i]:
                if j not in self.parent:
                    self.parent[j] = i
                    self.order.append(j)
        # each term goes to the smallest clique holding its columns; its indicator on the
        # clique's cells is a column of that clique's 0/1 matrix
        self.terms: list[list[int]] = [[] for _ in self.cliques]
        for j, (s, _) in enumerate(domain.basis_terms):
            holders = [c for c, cl in enumerate(self.cliques) if set(s) <= set(cl)]
            self.terms[min(holders, key=lambda c: len(self.cliques[c]))].append(j)
        self.indicators = []
        for c, cl in enumerate(self.cliques):
            cells = np.indices(self.shape(c)).reshape(len(cl), -1).T
            ind = np.zeros((cells.shape[0], len(self.terms[c])))
            for t, j in enumerate(self.terms[c]):
                s, levels = domain.basis_terms[j]
                hit = np.ones(cells.shape[0], dtype=bool)
                for k, v in zip(s, levels, strict=True):
                    hit &= cells[:, cl.index(k)] == v
                ind[:, t] = hit
            self.indicators.append(ind)

    def shape(self, c: int) -> tuple[int, ...]:
        """The table shape of clique c."""
        return tuple(self.sizes[k] for k in self.cliques[c])

    def _separator(self, c: int) -> tuple[int, ...]:
        p = self.parent[c]
        return tuple(k for k in self.cliques[c] if k in self.cliques[p])

    def _marginalise(self, table: np.ndarray, c: int, keep: tuple[int, ...]) -> np.ndarray:
        batch = table.ndim - len(self.cliques[c])
        axes = tuple(batch + a for a, k in enumerate(self.cliques[c]) if k not in keep)
        return _lse(table, axes)

    def _expand(self, sep: np.ndarray, keep: tuple[int, ...], c: int) -> np.ndarray:
        batch = sep.shape[: sep.ndim - len(keep)]
        shape = [self.sizes[k] if k in keep else 1 for k in self.cliques[c]]
        return sep.reshape(*batch, *shape)

    def calibrate(self, theta: npt.ArrayLike) -> tuple[list[np.ndarray], np.ndarray]:
        """Log clique marginals (normalised) and log Z for θ of shape (..., p), real or complex."""
        theta = np.asarray(theta)
        if theta.shape[-1] != self.n_params:
            raise ValueError(f"theta must have {self.n_params} entries on its last axis")
        batch = theta.shape[:-1]
        up = [
            (theta[..., self.terms[c]] @ self.indicators[c].T).reshape(*batch, *self.shape(c))
            for c in range(len(self.cliques))
        ]
        messages: dict[int, np.ndarray] = {}
        for c in reversed(self.order[1:]):  # leaves first
            sep = self._separator(c)
            messages[c] = self._marginalise(up[c], c, sep)
            up[self.parent[c]] = up[self.parent[c]] + self._expand(messages[c], sep, self.parent[c])
        log_z = _lse(up[0], tuple(range(len(batch), up[0].ndim)))
        beliefs = {0: up[0]}
        for c in self.order[1:]:  # root first
            p, sep = self.parent[c], self._separator(c)
            down = self._marginalise(beliefs[p], p, sep) - messages[c]
            beliefs[c] = up[c] + self._expand(down, sep, c)
        out = []
        for c in range(len(self.cliques)):
            z = log_z.reshape(*batch, *([1] * len(self.cliques[c])))
            out.append(beliefs[c] - z)
        return out, log_z

    def log_partition(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The log partition function log Z(θ), shape (...)."""
        return self.calibrate(np.asarray(theta, dtype=float))[1]

    def _mean(self, beliefs: list[np.ndarray], batch: tuple[int, ...]) -> np.ndarray:
        dtype = np.result_type(*[b.dtype for b in beliefs])
        mean = np.zeros((*batch, self.n_params), dtype=dtype)
        for c, b in enumerate(beliefs):
            flat = np.exp(b).reshape(*batch, -1)
            mean[..., self.terms[c]] = flat @ self.indicators[c]
        return mean

    def mean(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """E_θ[a], shape (..., p)."""
        theta = np.asarray(theta, dtype=float)
        return self._mean(self.calibrate(theta)[0], theta.shape[:-1])

    def mean_and_jvp(
        self, theta: npt.ArrayLike, v: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """E_θ[a] and Cov_θ[a] v (the derivative of the mean along v), one complex pass."""
        theta = np.asarray(theta, dtype=float)
        v = np.asarray(v, dtype=float)
        z = theta + 1j * _STEP * v
        mean = self._mean(self.calibrate(z)[0], z.shape[:-1])
        return mean.real, mean.imag / _STEP

    def moments(
        self, theta: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """E_θ[a] and Cov_θ[a] of one θ vector (p directions in one batched pass)."""
        theta = np.asarray(theta, dtype=float)
        mean, cov = self.mean_and_jvp(
            np.broadcast_to(theta, (self.n_params, self.n_params)), np.eye(self.n_params)
        )
        return mean[0], 0.5 * (cov + cov.T)

    def sample(
        self, theta: npt.ArrayLike, n: int, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        """Draw n exact records (level codes, shape (n, K)) by forward sampling from the root."""
        beliefs, _ = self.calibrate(np.asarray(theta, dtype=float))
        codes = np.zeros((n, len(self.sizes)), dtype=np.int64)
        for c in self.order:
            cl = self.cliques[c]
            prob = np.exp(beliefs[c])
            sep = () if c == 0 else self._separator(c)
            rest = tuple(k for k in cl if k not in sep)
            # rows: the separator's configuration; columns: the rest of the clique
            perm = [cl.index(k) for k in (*sep, *rest)]
            rows = np.transpose(prob, perm).reshape(math.prod(self.sizes[k] for k in sep), -1)
            if sep:
                row = np.ravel_multi_index(
                    tuple(codes[:, k] for k in sep), tuple(self.sizes[k] for k in sep)
                )
            else:
                row = np.zeros(n, dtype=np.int64)
            cdf = np.cumsum(rows, axis=1)
            cdf /= cdf[:, -1:]
            u = rng.random(n)
            pick = np.minimum(np.sum(u[:, None] > cdf[row], axis=1), rows.shape[1] - 1)
            if rest:
                levels = np.unravel_index(pick, tuple(self.sizes[k] for k in rest))
                for k, lv in zip(rest, levels, strict=True):
                    codes[:, k] = lv
        return codes
