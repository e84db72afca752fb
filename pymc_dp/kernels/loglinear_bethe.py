"""Approximate moments of pairwise log-linear features: loopy belief propagation (Bethe).

**An approximation.** Where every queried marginal has at most two columns but the graph is too
dense for a junction tree (all 2-way marginals of 15 ternary columns: one clique of 3¹⁵ ≈ 1.4·10⁷
cells, about 10 s per gradient by full-domain sums), E_θ[a] is replaced by the Bethe
pseudo-marginals, the stationary point of the Bethe free energy found by damped loopy belief
propagation (the relaxation Private-PGM uses for dense measurement sets), and Cov_θ[a] by its
linear-response estimate (Welling & Teh 2004): on the minimal (corner) coordinates μ of the
local polytope, θ = ∇Φ(μ) with Φ(μ) = Σ_edges Σ τ_e log τ_e − Σ_i (d_i − 1) Σ τ_i log τ_i the
negative Bethe entropy (τ the pair and single tables, affine in μ; d_i the degree of column i), so
∂μ/∂θ = (∇²Φ)⁻¹, in closed form. Both are exact on a tree-structured (forest) set of pairs; on
loopy graphs they are biased, the more so the stronger the couplings; the bias of the mean is
what moves the posterior. The tests measure the error against full-domain sums.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

from pymc_dp.kernels.loglinear import LogLinearDomain, marginal_table_map
from pymc_dp.kernels.loglinear_bethe_jit import bp_sweeps

__all__ = ["BetheDidNotConverge", "BetheMoments"]

_PAD = -1e4
"""Log-potential of the padding levels of columns with fewer levels than the largest."""


class BetheDidNotConverge(RuntimeError):
    """Loopy belief propagation found no fixed point (couplings too strong for Bethe)."""


class BetheMoments:
    """Bethe pseudo-marginal means and linear-response covariances of pairwise features.

    Parameters
    ----------
    domain
        A domain whose marginals have one or two columns each.
    tol, max_iter, damping
        Loopy BP stops when no log-message moves by more than ``tol``; it is damped (new =
        (1 - damping) · update + damping · old) and warm-started from the last θ's messages.
        Not converging within ``max_iter`` sweeps is a RuntimeError.
    """

    def __init__(
        self,
        domain: LogLinearDomain,
        *,
        tol: float = 1e-10,
        max_iter: int = 500,
        damping: float = 0.3,
    ) -> None:
        if max(len(m) for m in domain.marginals) > 2:
            raise ValueError(
                "the Bethe approximation here handles marginals of at most two columns (got "
                f"{max(domain.marginals, key=len)})"
            )
        self.tol, self.max_iter, self.damping = tol, max_iter, damping
        sizes = domain.sizes
        self.sizes = sizes
        self.n_params = domain.n_params
        k_cols, width = len(sizes), max(sizes)
        self.width = width
        pairs = sorted({tuple(s) for s, _ in domain.basis_terms if len(s) == 2})
        self.pairs = pairs
        # parameter positions: singles (col, level) and pairs (edge, v, w), -1 where none
        self.single_index = np.full((k_cols, width), -1)
        self.pair_index = np.full((len(pairs), width, width), -1)
        edge_of = {e: i for i, e in enumerate(pairs)}
        for j, (s, lv) in enumerate(domain.basis_terms):
            if len(s) == 1:
                self.single_index[s[0], lv[0]] = j
            else:
                self.pair_index[edge_of[tuple(s)], lv[0], lv[1]] = j
        self.pad = np.array([[0.0 if v < n else _PAD for v in range(width)] for n in sizes])
        # directed edges d = (src → dst); rev[d] is the opposite direction
        src = [a for a, _ in pairs] + [b for _, b in pairs]
        dst = [b for _, b in pairs] + [a for a, _ in pairs]
        self.src, self.dst = np.array(src, dtype=int), np.array(dst, dtype=int)
        e = len(pairs)
        self.rev = np.concatenate([np.arange(e, 2 * e), np.arange(e)])
        self.messages = np.zeros((2 * e, width))
        # the regions' tables as affine maps of μ, for the Bethe Hessian
        regions = [tuple(p) for p in pairs] + [(k,) for k in range(k_cols)]
        const, matrix = marginal_table_map(sizes, regions, domain.basis_terms)
        degree = np.zeros(k_cols)
        for a, b in pairs:
            degree[a] += 1
            degree[b] += 1
        weights = [np.full(sizes[a] * sizes[b], 1.0) for a, b in pairs]
        weights += [np.full(sizes[k], 1.0 - degree[k]) for k in range(k_cols)]
        # sparse: each table cell involves a few terms (15 ternary columns: a 990 x 450 matrix
        # with 2580 entries), and the Hessian's sparse solve takes 3 ms against 10-250 ms dense
        self.region_const, self.region_matrix = const, sparse.csr_matrix(matrix)
        self.region_weight = np.concatenate(weights)
        self._hessian_structure()
        self.iterations = 0
        # the last θ and its mean: a gradient asks for the mean, then for the mean and its
        # derivative at the same θ (one BP run, not two)
        self._last: tuple[np.ndarray, np.ndarray] | None = None

    def _hessian_structure(self) -> None:
        # ∇²Φ = Mᵀ diag(d) M has a fixed sparsity: each table cell i adds M[i, a] M[i, b] d_i
        # to entry (a, b). Its pairs, their coefficients and their places in the CSC data are
        # found once; building the Hessian is then one bincount (the sparse product with its
        # format checks took 9 ms a gradient on 15 ternary columns)
        m = self.region_matrix
        rows, a_idx, b_idx, coef = [], [], [], []
        for i in range(m.shape[0]):
            cols = m.indices[m.indptr[i] : m.indptr[i + 1]]
            vals = m.data[m.indptr[i] : m.indptr[i + 1]]
            rows.append(np.full(len(cols) ** 2, i))
            a_idx.append(np.repeat(cols, len(cols)))
            b_idx.append(np.tile(cols, len(cols)))
            coef.append(np.outer(vals, vals).ravel())
        p = self.n_params
        a_all, b_all = np.concatenate(a_idx), np.concatenate(b_idx)
        key = b_all * p + a_all  # column-major: CSC order
        unique, self._h_pos = np.unique(key, return_inverse=True)
        self._h_row, self._h_coef = np.concatenate(rows), np.concatenate(coef)
        self._h_indices = unique % p
        self._h_indptr = np.searchsorted(unique // p, np.arange(p + 1))
        self._h_nnz = len(unique)

    def _potentials(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        th = np.append(theta, 0.0)  # index -1 reads the 0
        single = th[self.single_index] + self.pad
        pair = th[self.pair_index]
        return single, pair

    def beliefs(self, theta: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Normalised single (K, L) and pair (E, L, L) beliefs at the loopy BP fixed point."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must be a vector of {self.n_params} entries")
        single, pair = self._potentials(theta)
        e = len(self.pairs)
        # pair potentials oriented (src level, dst level) per directed edge
        oriented = np.concatenate([pair, np.swapaxes(pair, 1, 2)])
        k_cols = len(self.sizes)
        # warm start from the last θ's messages; failing that, from zero, damped harder
        for start, damping in ((self.messages, self.damping), (None, max(self.damping, 0.6))):
            msg = np.zeros_like(self.messages) if start is None else start
            msg, sweeps, delta = bp_sweeps(
                single,
                oriented,
                self.src,
                self.dst,
                self.rev,
                msg,
                damping,
                self.tol,
                self.max_iter,
            )
            if np.isfinite(delta) and delta < self.tol:
                break
        else:
            self.messages = np.zeros_like(self.messages)
            raise BetheDidNotConverge(
                f"loopy belief propagation did not converge in {self.max_iter} sweeps (last "
                f"change {delta:.2e}); the couplings are too strong for the Bethe approximation"
            )
        self.messages, self.iterations = msg, sweeps
        incoming = np.zeros((k_cols, self.width))
        np.add.at(incoming, self.dst, msg)
        node = single + incoming
        node = np.exp(node - node.max(axis=1, keepdims=True))
        node /= node.sum(axis=1, keepdims=True)
        a, b = self.src[:e], self.dst[:e]
        x = (
            (single[a] + incoming[a] - msg[e:])[:, :, None]
            + (single[b] + incoming[b] - msg[:e])[:, None, :]
            + pair
        )
        x = np.exp(x - x.max(axis=(1, 2), keepdims=True))
        x /= x.sum(axis=(1, 2), keepdims=True)
        return node, x

    def _mu(self, node: np.ndarray, pair: np.ndarray) -> np.ndarray:
        mean = np.zeros(self.n_params)
        hit = self.single_index >= 0
        mean[self.single_index[hit]] = node[hit]
        hit = self.pair_index >= 0
        mean[self.pair_index[hit]] = pair[hit]
        return mean

    def mean(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The Bethe approximation of E_θ[a]."""
        theta = np.array(theta, dtype=float)
        if self._last is not None and np.array_equal(theta, self._last[0]):
            return self._last[1].copy()
        mu = self._mu(*self.beliefs(theta))
        self._last = (theta, mu.copy())
        return mu

    def hessian(self, mean: npt.ArrayLike) -> sparse.csc_matrix:
        """∇²Φ(μ), the inverse linear-response covariance, at pseudo-marginal means μ (sparse)."""
        tau = self.region_const + self.region_matrix @ np.asarray(mean, dtype=float)
        if np.any(tau <= 0.0):
            raise ValueError("the pseudo-marginals leave the local polytope (a table cell ≤ 0)")
        d = self.region_weight / tau
        data = np.bincount(self._h_pos, self._h_coef * d[self._h_row], minlength=self._h_nnz)
        p = self.n_params
        return sparse.csc_matrix((data, self._h_indices, self._h_indptr), shape=(p, p))

    def bethe_theta(self, mean: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """∇Φ(μ): the θ whose Bethe stationary point is μ (the inverse of :meth:`mean`)."""
        tau = self.region_const + self.region_matrix @ np.asarray(mean, dtype=float)
        return self.region_matrix.T @ (self.region_weight * (np.log(tau) + 1.0))

    def log_partition(self, theta: npt.ArrayLike) -> float:
        """The Bethe approximation of log Z(θ): θᵀμ − Φ(μ) at the stationary point."""
        mu = self.mean(theta)
        tau = self.region_const + self.region_matrix @ mu
        return float(np.asarray(theta) @ mu - np.sum(self.region_weight * tau * np.log(tau)))

    def mean_and_jvp(
        self, theta: npt.ArrayLike, v: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """μ(θ) and its linear-response derivative along v, (∇²Φ)⁻¹ v."""
        mu = self.mean(theta)
        return mu, sparse_linalg.spsolve(self.hessian(mu), np.asarray(v, dtype=float))

    def moments(
        self, theta: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """μ(θ) and the linear-response covariance (∇²Φ(μ))⁻¹."""
        mu = self.mean(theta)
        cov = np.linalg.inv(self.hessian(mu).toarray())
        return mu, 0.5 * (cov + cov.T)
