"""Which method computes the log-linear features' moments, and the likelihood pieces built on it.

:func:`feature_method` chooses, for a :class:`~pymc_dp.kernels.loglinear.LogLinearDomain`:

* ``"enumerate"``: sums over the full product domain, up to
  :data:`~pymc_dp.kernels.loglinear.MAX_CELLS` cells (exact; the only method that also gives the
  third moments the full ``"clt"`` likelihood's gradient needs);
* ``"split"``: above that, exact sums over the domain laid out as a matrix of its two halves'
  cells (:class:`~pymc_dp.kernels.loglinear_split.SplitMoments`), up to
  :data:`~pymc_dp.kernels.loglinear_split.MAX_SPLIT_CELLS` cells, where the junction tree's
  cliques hold more than 1/:data:`SPLIT_RATIO` of the domain (all 2-way tables: one clique of
  every column);
* ``"junction"``: otherwise, exact message passing over a junction tree of the marginals
  (:class:`~pymc_dp.kernels.loglinear_junction.JunctionTree`) while its cliques hold at most
  :data:`MAX_CLIQUE_CELLS` cells in all;
* ``"bethe"``: above both, for marginals of at most two columns, the Bethe approximation by
  loopy belief propagation (:class:`~pymc_dp.kernels.loglinear_bethe.BetheMoments`):
  **approximate**, biased on loopy graphs;
* otherwise a ValueError.

The fixed-covariance law needs only the first two moments, which the split sums give in well
under a millisecond on any domain :func:`feature_method` enumerates:
:func:`fixed_law_method` takes them there (the enumerated sums cost 22–43 ms a gradient at 15
binary or 10 ternary columns, the split sums under 1 ms).

The functions here are the NumPy side of the fixed-covariance collapsed likelihood
(:func:`clt_fixed_logp_grad`), its covariance (:func:`clt_covariance`) and synthetic records
(:func:`sample_records`) for any method, written through the table map F(x) = c + M a(x) so
nothing enumerates the domain.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from scipy import linalg

from pymc_dp.kernels.loglinear import MAX_CELLS, LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheMoments
from pymc_dp.kernels.loglinear_junction import JunctionTree, min_fill_cliques
from pymc_dp.kernels.loglinear_split import MAX_SPLIT_CELLS, SplitMoments
from pymc_dp.kernels.loglinear_tables import prefer_tables

__all__ = [
    "FIXED_ENUMERATE_CELLS",
    "MAX_CLIQUE_CELLS",
    "MAX_SAMPLE_CELLS",
    "SPLIT_RATIO",
    "FeatureMoments",
    "clt_covariance",
    "clt_fixed_logp",
    "clt_fixed_logp_grad",
    "feature_method",
    "feature_moments",
    "fixed_law_method",
    "likelihood_method",
    "sample_records",
]

MAX_CLIQUE_CELLS = 1_000_000
"""Largest junction tree (cells summed over its cliques) passed over exactly."""
MAX_SAMPLE_CELLS = 50_000_000
"""Largest domain whose cell probabilities are built in full to draw records (400 MB)."""
FIXED_ENUMERATE_CELLS = 1024
"""Largest domain the fixed-covariance law may enumerate (:func:`fixed_law_method`)."""
SPLIT_RATIO = 16
"""The split sums replace a junction tree whose cliques hold more than C / SPLIT_RATIO cells.

Measured on 12 ternary columns, 2-way tables of each column with its next w (a derivative pass
``mean_and_jvp``, default BLAS threads, a loaded 2-core machine): the split sums cost about
0.1 s whatever the graph; the junction tree 0.026 s at w = 6 (cliques 13 122 cells in all,
C/40) and 0.12 s at w = 7 (32 805, C/16), 0.43 s at w = 8 (78 732, C/7) and seconds on the
complete graph. Measured before the split pass was cut to fewer sweeps over the cells (about 2x
faster since), so the ratio errs towards the junction tree."""


class FeatureMoments(Protocol):
    """E_θ[a] and its derivative (Cov_θ[a] times a vector) of a log-linear domain."""

    def mean(self, theta: Any) -> np.ndarray:
        """E_θ[a]."""

    def mean_and_jvp(self, theta: Any, v: Any) -> tuple[np.ndarray, np.ndarray]:
        """E_θ[a] and Cov_θ[a] v."""

    def moments(self, theta: Any) -> tuple[np.ndarray, np.ndarray]:
        """E_θ[a] and Cov_θ[a]."""


class _Enumerated:
    """The full-domain sums of :class:`LogLinearDomain` behind the :class:`FeatureMoments` API."""

    def __init__(self, domain: LogLinearDomain) -> None:
        self.domain = domain

    def mean(self, theta: Any) -> np.ndarray:
        return np.exp(self.domain.log_probs(theta)) @ self.domain.basis

    def mean_and_jvp(self, theta: Any, v: Any) -> tuple[np.ndarray, np.ndarray]:
        prob = np.exp(self.domain.log_probs(theta))
        a = self.domain.basis
        mean = prob @ a
        return mean, ((a - mean) @ np.asarray(v, dtype=float) * prob) @ a

    def moments(self, theta: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.domain.moments(theta)


def feature_method(domain: LogLinearDomain) -> str:
    """``"enumerate"``, ``"split"``, ``"junction"`` or ``"bethe"``: see the module docstring."""
    if domain.n_cells <= MAX_CELLS:
        return "enumerate"
    cliques = min_fill_cliques(domain.sizes, domain.marginals)
    clique_cells = sum(math.prod(domain.sizes[k] for k in c) for c in cliques)
    if domain.n_cells <= MAX_SPLIT_CELLS and SPLIT_RATIO * clique_cells > domain.n_cells:
        return "split"
    if clique_cells <= MAX_CLIQUE_CELLS:
        return "junction"
    if max(len(m) for m in domain.marginals) <= 2:
        return "bethe"
    raise ValueError(
        f"the product domain has {domain.n_cells} cells and the junction tree of the "
        f"marginals holds more than {MAX_CLIQUE_CELLS} cells, with marginals of more than two "
        "columns (no approximation is implemented for those): release fewer, coarser or "
        "sparser marginals"
    )


def fixed_law_method(domain: LogLinearDomain) -> str:
    """The moments' method for the fixed-covariance law, which needs E_θ[a] and Cov_θ[a] v only.

    :func:`feature_method`, except that a domain of two or more columns it would enumerate is
    split, unless it has at most :data:`FIXED_ENUMERATE_CELLS` cells and the dense feature
    matrices beat the table sums there (:func:`~pymc_dp.kernels.loglinear_tables.prefer_tables`
    false: binary columns). The split sums are the same sums to rounding, as a few BLAS
    products. One logp and gradient of ``CLTLogp``, enumerated against split (CPU, one process,
    one BLAS thread, ``benchmarks/marginals_fixed_law.py``): 43.1 against 0.55 ms at 10 ternary
    columns, 22.1 against 0.58 ms at 15 binary, 1.84 against 0.39 ms at 5 ternary; at 10 binary
    columns (1024 cells) the dense sums take 0.24 ms, the split ones 0.4.
    """
    method = feature_method(domain)
    small = domain.n_cells <= FIXED_ENUMERATE_CELLS and not prefer_tables(domain)
    if method == "enumerate" and len(domain.sizes) >= 2 and not small:
        return "split"
    return method


def likelihood_method(domain: LogLinearDomain, kind: str) -> str:
    """The moments' method the marginals likelihood ``kind`` takes on ``domain`` by default.

    The full CLT law (``"clt"``) needs the enumerated third moments, so it takes
    :func:`feature_method`; the fixed-covariance law (``"clt-fixed"``) takes the cheapest
    engine, :func:`fixed_law_method`. The one place this rule lives: the likelihood and the
    benchmarks that report its route read it here.
    """
    if kind == "clt":
        return feature_method(domain)
    if kind == "clt-fixed":
        return fixed_law_method(domain)
    raise ValueError(f"kind must be 'clt' or 'clt-fixed' (got {kind!r})")


def feature_moments(domain: LogLinearDomain, method: str | None = None) -> FeatureMoments:
    """The moment engine of ``method`` (default :func:`feature_method`) for ``domain``."""
    method = feature_method(domain) if method is None else method
    if method == "enumerate":
        return _Enumerated(domain)
    if method == "split":
        return SplitMoments(domain)
    if method == "junction":
        return JunctionTree(domain)
    if method == "bethe":
        return BetheMoments(domain)
    raise ValueError(f"method must be 'enumerate', 'split', 'junction' or 'bethe' (got {method!r})")


def clt_covariance(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    engine: FeatureMoments,
    *,
    n: int,
    noise_variance: float,
) -> npt.NDArray[np.float64]:
    """Σ(θ) = n Uᵀ M Cov_θ[a] Mᵀ U + v I (Cov[g] through the table map)."""
    _, cov = engine.moments(theta)
    um = domain.projected_table_map[1]
    return n * um @ cov @ um.T + noise_variance * np.eye(domain.n_params)


def clt_fixed_logp(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    engine: FeatureMoments,
    z: npt.ArrayLike,
    *,
    n: int,
    chol: npt.NDArray[np.float64],
) -> float:
    """The log-density N(z; n E_θ[g], L Lᵀ) alone (one pass of the engine, no gradient)."""
    mu = engine.mean(np.asarray(theta, dtype=float))
    return _fixed_normal(mu, domain, z, n, chol)[0]


def _fixed_normal(
    mu: np.ndarray, domain: LogLinearDomain, z: npt.ArrayLike, n: int, chol: np.ndarray
) -> tuple[float, np.ndarray]:
    """The log-density N(z; n E[g], L Lᵀ) at E[a] = μ, and L⁻¹ r (r = z - n E[g])."""
    uc, um = domain.projected_table_map
    r = np.asarray(z, dtype=float) - n * (uc + um @ mu)
    w = linalg.solve_triangular(chol, r, lower=True, check_finite=False)
    log_det = 2.0 * np.sum(np.log(np.diag(chol)))
    return float(-0.5 * (w @ w + log_det + domain.n_params * math.log(2.0 * math.pi))), w


def clt_fixed_logp_grad(
    theta: npt.ArrayLike,
    domain: LogLinearDomain,
    engine: FeatureMoments,
    z: npt.ArrayLike,
    *,
    n: int,
    chol: npt.NDArray[np.float64],
) -> tuple[float, npt.NDArray[np.float64]]:
    """The log-density N(z; n E_θ[g], L Lᵀ) and its gradient n Cov_θ[a] Mᵀ U Σ₀⁻¹ r, by ``engine``.

    E[g] = Uᵀ (c + M E[a]); the gradient is the derivative of the mean along Mᵀ U Σ₀⁻¹ r,
    one pass of the engine (:meth:`FeatureMoments.mean_and_jvp`).
    """
    theta = np.asarray(theta, dtype=float)
    # the mean first (the direction needs it), then its derivative: a real and a complex
    # pass for the junction tree; for Bethe the second starts at the fixed point
    logp, w = _fixed_normal(engine.mean(theta), domain, z, n, chol)
    sr = linalg.solve_triangular(chol, w, lower=True, trans="T", check_finite=False)
    _, jvp = engine.mean_and_jvp(theta, domain.projected_table_map[1].T @ sr)
    return logp, n * jvp


def _logits(domain: LogLinearDomain, theta: np.ndarray) -> np.ndarray:
    """θᵀ a(x) over the full domain, built column by column (each term added at its last column)."""
    by_last: dict[int, list[int]] = {}
    for j, (s, _) in enumerate(domain.basis_terms):
        by_last.setdefault(max(s), []).append(j)
    sizes = domain.sizes
    out = np.zeros(())
    for k in range(len(sizes)):
        out = np.repeat(out[..., None], sizes[k], axis=-1)
        for j in by_last.get(k, []):
            s, levels = domain.basis_terms[j]
            index = tuple(levels[s.index(i)] if i in s else slice(None) for i in range(k + 1))
            out[index] += theta[j]
    return out.reshape(-1)


def sample_records(
    domain: LogLinearDomain,
    theta: npt.ArrayLike,
    n: int,
    rng: np.random.Generator,
    method: str | None = None,
) -> npt.NDArray[np.int64]:
    """Draw n records (level codes, shape (n, K)) drawn exactly from p(x | θ).

    Enumerated and split domains draw cells from their probabilities; a junction tree samples
    forward from its root;
    otherwise (the Bethe case) the cell probabilities are built in full, up to
    :data:`MAX_SAMPLE_CELLS` cells (15 ternary columns: 1.4·10⁷ cells, a few seconds a draw).
    """
    theta = np.asarray(theta, dtype=float)
    method = feature_method(domain) if method is None else method
    if method == "enumerate":
        prob = np.exp(domain.log_probs(theta))
        cells = rng.choice(domain.n_cells, size=n, p=prob / prob.sum())
        return domain.cells[cells]
    if method == "split":
        return SplitMoments(domain).sample(theta, n, rng)
    if method == "junction":
        return JunctionTree(domain).sample(theta, n, rng)
    if domain.n_cells > MAX_SAMPLE_CELLS:
        raise ValueError(
            f"drawing records needs the {domain.n_cells} cell probabilities (above "
            f"{MAX_SAMPLE_CELLS}); no approximate sampler is implemented"
        )
    logits = _logits(domain, theta)
    logits -= logits.max()
    prob = np.exp(logits, out=logits)
    prob /= prob.sum()
    cells = rng.choice(domain.n_cells, size=n, p=prob)
    return np.stack(np.unravel_index(cells, domain.sizes), axis=1).astype(np.int64)
