"""Approximate moments of pairwise log-linear features: tree-reweighted belief propagation (TRW).

**An approximation**, the convex counterpart of :mod:`pymc_dp.kernels.loglinear_bethe`
(Wainwright, Jaakkola & Willsky 2005). The Bethe entropy is replaced by a convex combination of
the entropies of the graph's spanning trees, with edge appearance probabilities ρ_e: on the
corner coordinates μ, Φ(μ) = Σ_e ρ_e Σ τ_e log τ_e + Σ_i (1 - Σ_{e ∋ i} ρ_e) Σ τ_i log τ_i (the
Bethe form with edge weights ρ_e in place of 1). Φ is convex on the local polytope, so θ ↦ μ(θ)
has exactly one stationary point for every θ, and the linear-response covariance (∇²Φ(μ))⁻¹
is positive definite wherever μ is interior. Here ρ_e is the probability that edge e lies in a
uniformly random spanning tree (its effective resistance; 2/K on the complete graph of K
columns, 1 on a forest, where TRW is exact). The mean is found by damped TRW message passing
(reweighted messages, compiled); it too is biased on loopy graphs, differently from Bethe: the
tests and ``benchmarks/marginals_trw_accuracy.py`` measure it against full-domain sums.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge, BetheMoments

__all__ = ["TRWMoments", "spanning_tree_edge_probabilities", "trw_sweeps"]


def spanning_tree_edge_probabilities(
    n_nodes: int, edges: list[tuple[int, int]]
) -> npt.NDArray[np.float64]:
    """P(edge in a uniformly random spanning forest): each edge's effective resistance.

    Kirchhoff: with unit conductances, the effective resistance L⁺_aa + L⁺_bb - 2 L⁺_ab of an
    edge is the probability that it lies in a uniform random spanning tree of its component.
    """
    lap = np.zeros((n_nodes, n_nodes))
    for a, b in edges:
        lap[a, a] += 1.0
        lap[b, b] += 1.0
        lap[a, b] -= 1.0
        lap[b, a] -= 1.0
    pinv = np.linalg.pinv(lap, hermitian=True)
    rho = np.array([pinv[a, a] + pinv[b, b] - 2.0 * pinv[a, b] for a, b in edges])
    return np.clip(rho, 0.0, 1.0)


@numba.njit(cache=True)
def trw_sweeps(
    single, oriented, weight, src, dst, rev, msg, damping, tol, max_iter
):  # pragma: no cover
    """Damped synchronous TRW message sweeps; returns (messages, sweeps run, last change).

    As :func:`~pymc_dp.kernels.loglinear_bethe_jit.bp_sweeps`, with the incoming messages of a
    column weighted by their edges' appearance probabilities ``weight[d]`` and the pair
    log-potentials ``oriented`` already divided by them: m_{s→t}(x_t) = log Σ_{x_s}
    exp(θ_s(x_s) + Σ_{u} ρ_us m_{u→s}(x_s) - m_{t→s}(x_s) + θ_st(x_s, x_t) / ρ_st).
    """
    n_edges, width = msg.shape
    k_cols = single.shape[0]
    msg = msg.copy()
    new = np.empty_like(msg)
    incoming = np.empty((k_cols, width))
    cavity = np.empty(width)
    delta = 0.0
    sweeps = 0
    for _ in range(max_iter):
        sweeps += 1
        incoming[:, :] = 0.0
        for d in range(n_edges):
            for v in range(width):
                incoming[dst[d], v] += weight[d] * msg[d, v]
        delta = 0.0
        for d in range(n_edges):
            s, r = src[d], rev[d]
            for v in range(width):
                cavity[v] = single[s, v] + incoming[s, v] - msg[r, v]
            top = -np.inf
            for v in range(width):
                for w in range(width):
                    x = cavity[v] + oriented[d, v, w]
                    if x > top:
                        top = x
            best = -np.inf
            for w in range(width):
                total = 0.0
                for v in range(width):
                    total += math.exp(cavity[v] + oriented[d, v, w] - top)
                new[d, w] = math.log(total) + top
                if new[d, w] > best:
                    best = new[d, w]
            for w in range(width):
                value = (1.0 - damping) * (new[d, w] - best) + damping * msg[d, w]
                change = abs(value - msg[d, w])
                if math.isnan(change) or math.isnan(delta):
                    delta = math.nan
                elif change > delta:
                    delta = change
                new[d, w] = value
        msg, new = new, msg
        if not math.isfinite(delta) or delta < tol:
            break
    return msg, sweeps, delta


class TRWMoments(BetheMoments):
    """TRW pseudo-marginal means and linear-response covariances of pairwise features.

    The same interface as :class:`~pymc_dp.kernels.loglinear_bethe.BetheMoments` (``mean``,
    ``mean_and_jvp``, ``moments``, ``hessian``, ``log_partition``, which here is an upper
    bound on log Z), with the tree-reweighted free energy.

    Parameters
    ----------
    domain
        A domain whose marginals have one or two columns each.
    rho
        Edge appearance probabilities, one per pair of :attr:`pairs` (sorted); default: those of
        the uniform distribution over spanning trees (:func:`spanning_tree_edge_probabilities`).
    tol, max_iter, damping
        As in :class:`~pymc_dp.kernels.loglinear_bethe.BetheMoments`.
    """

    def __init__(
        self,
        domain: LogLinearDomain,
        *,
        rho: npt.ArrayLike | None = None,
        tol: float = 1e-10,
        max_iter: int = 1000,
        damping: float = 0.5,
    ) -> None:
        super().__init__(domain, tol=tol, max_iter=max_iter, damping=damping)
        k_cols = len(self.sizes)
        if rho is None:
            rho = spanning_tree_edge_probabilities(k_cols, self.pairs)
        rho = np.asarray(rho, dtype=float)
        if rho.shape != (len(self.pairs),) or np.any(rho <= 0.0) or np.any(rho > 1.0):
            raise ValueError(f"rho must hold {len(self.pairs)} probabilities in (0, 1]")
        self.rho = rho
        node_weight = np.ones(k_cols)
        for (a, b), r in zip(self.pairs, rho, strict=True):
            node_weight[a] -= r
            node_weight[b] -= r
        sizes = self.sizes
        weights = [
            np.full(sizes[a] * sizes[b], r) for (a, b), r in zip(self.pairs, rho, strict=True)
        ]
        weights += [np.full(sizes[k], node_weight[k]) for k in range(k_cols)]
        self.region_weight = np.concatenate(weights)
        self._edge_weight = np.concatenate([rho, rho])

    def beliefs(self, theta: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Normalised single (K, L) and pair (E, L, L) TRW beliefs at the fixed point."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must be a vector of {self.n_params} entries")
        single, pair = self._potentials(theta)
        e = len(self.pairs)
        scaled = pair / self.rho[:, None, None]
        oriented = np.concatenate([scaled, np.swapaxes(scaled, 1, 2)])
        weight = self._edge_weight
        for start, damping in ((self.messages, self.damping), (None, max(self.damping, 0.8))):
            msg = np.zeros_like(self.messages) if start is None else start
            msg, sweeps, delta = trw_sweeps(
                single,
                oriented,
                weight,
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
                f"TRW message passing did not converge in {self.max_iter} sweeps (last change "
                f"{delta:.2e})"
            )
        self.messages, self.iterations = msg, sweeps
        incoming = np.zeros((len(self.sizes), self.width))
        np.add.at(incoming, self.dst, weight[:, None] * msg)
        node = single + incoming
        node = np.exp(node - node.max(axis=1, keepdims=True))
        node /= node.sum(axis=1, keepdims=True)
        a, b = self.src[:e], self.dst[:e]
        x = (
            (single[a] + incoming[a] - msg[e:])[:, :, None]
            + (single[b] + incoming[b] - msg[:e])[:, None, :]
            + scaled
        )
        x = np.exp(x - x.max(axis=(1, 2), keepdims=True))
        x /= x.sum(axis=(1, 2), keepdims=True)
        return node, x
