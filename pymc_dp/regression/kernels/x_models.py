"""Models of the covariates beyond the normal one: their CLT moments and conditional updates.

The CLT law of the regression statistic needs ``E[x̃x̃ᵀ]`` and the fourth moments of x̃ = (1, x)
(:func:`~pymc_dp.regression.suffstat_moments`). Under the normal model they follow from (μ_x,
Σ_x) by Isserlis; for bounded, skewed or binary covariates they do not. Two other families:

* ``"shape"``: ``x = μ + L u`` with ``L`` the Cholesky factor of Σ_x and the ``u_j`` independent,
  standardised (mean 0, variance 1), with common skewness ``γ = E u³`` and kurtosis ``κ = E u⁴``
  (``κ ≥ 1 + γ²``, the bound of any distribution). The uniform has (0, 1.8), the normal (0, 3),
  the exponential (2, 9). Fourth moments are closed-form in (μ, Σ, γ, κ): with ``A = [[1, 0], [μ,
  L]]`` and ``v = (1, u)``, ``E[x̃⊗4] = A⊗4 E[v⊗4]`` and ``E[v_a v_b v_c v_e] = γ^{N₃} κ^{N₄}``
  when no ``u_j`` appears exactly once (``N_k`` = number of ``u_j`` appearing k times), else 0.
* ``"binary"``: ``x ∈ {0, 1}^d`` with cell probabilities π over the ``2^d`` cells; every moment
  is linear in π (``x_j^k = x_j``). For d ≤ 2 the statistic's sums fix the cell counts, so π | s
  is Dirichlet (Beta for d = 1).

Pure NumPy; batch dimensions first.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special

from pymc_dp.curator.regression.statistics import covariate_powers, unpack_statistic
from pymc_dp.regression.kernels.moments import XMoments, x_moments_from_monomial_means

__all__ = [
    "ShapePrior",
    "binary_cell_counts",
    "binary_cell_tensor",
    "binary_cells",
    "binary_x_moments",
    "moment_log_likelihood",
    "shape_monomial_means",
    "shape_x_moments",
]


class ShapePrior(NamedTuple):
    """Prior of the shape family: γ on ``(−skew, skew)``, ``κ − 1 − γ² ~ U(0, excess)``.

    γ has the density of a Cauchy of scale ``skew_scale`` truncated to ``(−skew, skew)``
    (uniform there when ``skew_scale`` is ``None``). Why a peak at 0 with heavy tails: the
    public box bounds the skewness only through the covariate's place in it, ``γ ≤ u − 1/u``
    and ``γ ≥ 1/l − l`` with ``u = (b − μ)/σ``, ``l = (μ − a)/σ`` (from ``E[(u − v)(v + 1/u)²] ≥
    0`` for the standardised v), which is about 4 for the spread the box prior of x expects
    (σ ≈ h/4.3, μ at the centre), so the box alone rules out little; and where the released
    sums are lost in their noise the posterior of γ is its prior, which the law of (x̄, S)
    averages over (a uniform prior's mass at ``|γ| ≈ 1–2`` tied x̄ to S for symmetric covariates
    and cost the intercept coverage, docs/regression.md). The Cauchy puts half its mass at
    ``|γ| < 0.22`` (scale ¼: symmetric and mildly skewed covariates) and keeps a tail ∝ γ⁻² out
    to the exponential's 2, so informative sums can still pull γ there. κ's range covers
    two-point-like (κ near 1), uniform (1.8), normal (3) and heavier tails up to
    κ = 1 + γ² + excess.
    """

    skew: float = 2.0
    excess: float = 6.0
    skew_scale: float | None = 0.25

    def log_skew(self, skew: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log density of γ up to a constant (inside ``(−skew, skew)``; the caller checks)."""
        g = np.asarray(skew, dtype=np.float64)
        if self.skew_scale is None:
            return np.zeros(g.shape)
        return -np.log1p((g / self.skew_scale) ** 2)

    def draw(
        self, rng: np.random.Generator, size: int | tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(γ, κ) drawn from the prior.

        Examples
        --------
        >>> g, k = ShapePrior().draw(np.random.default_rng(0), 10_000)
        >>> bool(np.all(np.abs(g) < 2.0) and np.all(k > 1.0 + g**2))
        True
        """
        if self.skew_scale is None:
            skew = rng.uniform(-self.skew, self.skew, size)
        else:  # the Cauchy's inverse CDF on the truncated range
            edge = np.arctan(self.skew / self.skew_scale)
            skew = self.skew_scale * np.tan(rng.uniform(-edge, edge, size))
        return skew, 1.0 + skew**2 + rng.uniform(0.0, self.excess, size)


@functools.cache
def _shape_counts(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p,)*4 tables: any ``u_j`` once (zero), number of ``u_j`` thrice, number four times."""
    p = d + 1
    once = np.zeros((p,) * 4, dtype=bool)
    three = np.zeros((p,) * 4, dtype=np.int64)
    four = np.zeros((p,) * 4, dtype=np.int64)
    for abce in itertools.product(range(p), repeat=4):
        counts = np.bincount([a - 1 for a in abce if a > 0], minlength=d)
        once[abce] = np.any(counts == 1)
        three[abce] = np.sum(counts == 3)
        four[abce] = np.sum(counts == 4)
    return once, three, four


def shape_x_moments(
    loc: npt.ArrayLike, cov: npt.ArrayLike, skew: npt.ArrayLike, kurt: npt.ArrayLike
) -> XMoments:
    """:class:`XMoments` of x̃ = (1, x) for ``x = μ + L u`` (the ``"shape"`` family).

    Parameters
    ----------
    loc, cov
        μ (..., d) and Σ_x (..., d, d).
    skew, kurt
        γ and κ of every standardised component, shape ``(...)``.

    Examples
    --------
    γ = 0, κ = 3 is the normal model:

    >>> from pymc_dp.regression.kernels.data_model import normal_x_moments
    >>> a = shape_x_moments([0.5, -1.0], [[1.0, 0.3], [0.3, 2.0]], 0.0, 3.0)
    >>> b = normal_x_moments(np.array([0.5, -1.0]), np.array([[1.0, 0.3], [0.3, 2.0]]))
    >>> bool(np.allclose(a.fourth_cov, b.fourth_cov))
    True
    """
    loc = np.asarray(loc, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    skew = np.asarray(skew, dtype=np.float64)
    kurt = np.asarray(kurt, dtype=np.float64)
    d = loc.shape[-1]
    p = d + 1
    batch = np.broadcast_shapes(loc.shape[:-1], cov.shape[:-2], skew.shape, kurt.shape)
    chol = np.linalg.cholesky(np.broadcast_to(cov, (*batch, d, d)))
    a = np.zeros((*batch, p, p))
    a[..., 0, 0] = 1.0
    a[..., 1:, 0] = np.broadcast_to(loc, (*batch, d))
    a[..., 1:, 1:] = chol
    once, three, four = _shape_counts(d)
    g = np.broadcast_to(skew, batch)[..., None, None, None, None]
    k = np.broadcast_to(kurt, batch)[..., None, None, None, None]
    ev = np.where(once, 0.0, g**three * k**four)
    e4 = np.einsum("...ai,...bj,...ck,...el,...ijkl->...abce", a, a, a, a, ev, optimize=True)
    second = a @ np.swapaxes(a, -1, -2)
    phi = e4 - second[..., :, :, None, None] * second[..., None, None, :, :]
    return XMoments(second, phi)


def shape_monomial_means(
    loc: npt.ArrayLike, cov: npt.ArrayLike, skew: npt.ArrayLike, kurt: npt.ArrayLike,
    powers: npt.ArrayLike,
) -> npt.NDArray[np.float64]:  # fmt: skip
    """Means of the covariate monomials of degree ≤ 4 with exponents ``powers`` (K, d).

    Read off ``E[x̃⊗4]`` (the extra factors are the intercept's 1).
    """
    mom = shape_x_moments(loc, cov, skew, kurt)
    e4 = mom.fourth_cov + mom.second[..., :, :, None, None] * mom.second[..., None, None, :, :]
    idx = []
    for row in np.asarray(powers, dtype=np.int64).tolist():
        factors = [j + 1 for j, k in enumerate(row) for _ in range(k)]
        if len(factors) > 4:
            raise ValueError(f"monomials of degree at most 4 (got exponents {row})")
        idx.append(tuple(factors + [0] * (4 - len(factors))))
    return np.stack([e4[(..., *i)] for i in idx], axis=-1)


@functools.cache
def binary_cells(d: int) -> npt.NDArray[np.float64]:
    """The ``2^d`` points of ``{0, 1}^d``, shape ``(2^d, d)``, in binary order (x_1 slowest)."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=d)))


def binary_x_moments(probs: npt.ArrayLike) -> XMoments:
    """:class:`XMoments` of x̃ = (1, x) for x on ``{0, 1}^d`` with cell probabilities (..., 2^d).

    Examples
    --------
    >>> mom = binary_x_moments([0.7, 0.3])  # d = 1, P(x = 1) = 0.3: every E x^k = 0.3
    >>> mom.second.tolist(), round(float(mom.fourth_cov[1, 1, 1, 1]), 4)
    ([[1.0, 0.3], [0.3, 0.3]], 0.21)
    """
    probs = np.asarray(probs, dtype=np.float64)
    d = int(probs.shape[-1]).bit_length() - 1
    if 2**d != probs.shape[-1] or d < 1:
        raise ValueError(f"probs must have 2^d entries, d >= 1 (got {probs.shape[-1]})")
    powers = covariate_powers(d, (0, 1, 2, 3, 4))
    cells = binary_cells(d)
    # Monomial value at each cell: x^k = x for k >= 1.
    values = np.prod(np.where(powers[:, None, :] > 0, cells[None, :, :], 1.0), axis=-1)
    return x_moments_from_monomial_means(probs @ values.T, d=d)


@functools.cache
def binary_cell_tensor(d: int) -> npt.NDArray[np.float64]:
    """``x̃_a x̃_b x̃_c x̃_e`` at each cell of ``{0, 1}^d``, shape ``(2^d, p, p, p, p)``.

    ``E[x̃⊗4] = Σ_c π_c T[c]``: the fourth (and, at ``[..., 0, 0, :, :]``, second) moments of
    binary covariates are linear in the cell probabilities.
    """
    cells = np.concatenate([np.ones((2**d, 1)), binary_cells(d)], axis=1)
    out = np.einsum("ia,ib,ic,ie->iabce", cells, cells, cells, cells)
    out.setflags(write=False)
    return out


def binary_cell_counts(s: npt.ArrayLike, n: npt.ArrayLike, d: int) -> npt.NDArray[np.float64]:
    """Cell counts of binary covariates fixed by the statistic's sums (d ≤ 2), clipped at 0.

    With ``n_j = Σ x_j`` and ``n_12 = Σ x_1 x_2``: d = 1 gives ``(n − n_1, n_1)``; d = 2 gives
    ``(n − n_1 − n_2 + n_12, n_2 − n_12, n_1 − n_12, n_12)``. A latent s of the CLT is not
    integer and may fall slightly off the counts' polytope: the counts are clipped at 0.
    """
    if d not in (1, 2):
        raise ValueError(
            f"binary covariates: the statistic fixes the cell counts only for d <= 2 (d={d})"
        )
    b = unpack_statistic(np.asarray(s, dtype=np.float64), n)
    n = b[..., 0, 0]
    if d == 1:
        n1 = b[..., 0, 1]
        counts = np.stack([n - n1, n1], axis=-1)
    else:
        n1, n2, n12 = b[..., 0, 1], b[..., 0, 2], b[..., 1, 2]
        counts = np.stack([n - n1 - n2 + n12, n2 - n12, n1 - n12, n12], axis=-1)
    return np.maximum(counts, 0.0)


def moment_log_likelihood(
    released: npt.ArrayLike, expected: npt.ArrayLike, variance: npt.ArrayLike, scale: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Log density of released sums = sum + Laplace(0, b), the sum ~ N(expected, variance).

    The normal–Laplace convolution, in closed form (Reed 2006): with ``r = z − m`` and ``τ² = v``,
    ``f(r) = (1/4b) Σ± exp(τ²/2b² ∓ r/b) erfc(a±)``, ``a± = (τ²/b ∓ r)/(√2 τ)``; summed over the
    last axis. Where ``a ≥ 0`` the exponent and ``erfc(a) = exp(−a²) erfcx(a)`` are combined
    exactly, ``τ²/2b² ∓ r/b − a² = −r²/2τ²``, so that no two large terms cancel: written as
    the sum of ``τ²/2b²`` and ``−a²`` (as before issue 34's fix), the rounding error grew as
    τ²/2b² · 10⁻¹⁶ and reached +8 · 10³ nats at τ² = 10²² (b = 10), which carried the shape
    model's chains to σ_x² of 10⁵–10¹⁹ (the sums' sampling variance grows as σ_x⁸).

    Examples
    --------
    A tiny sampling variance gives the Laplace density back:

    >>> got = moment_log_likelihood([1.0], [0.0], [1e-12], 2.0)
    >>> bool(np.isclose(got, -np.log(4.0) - 0.5))
    True

    A huge one gives the normal density (the Laplace noise is negligible beside it):

    >>> got = moment_log_likelihood([300.0], [0.0], [1e22], 10.0)
    >>> bool(np.isclose(got, -0.5 * np.log(2 * np.pi * 1e22)))
    True
    """
    r = np.asarray(released, dtype=np.float64) - np.asarray(expected, dtype=np.float64)
    tau = np.sqrt(np.maximum(np.asarray(variance, dtype=np.float64), 1e-300))
    b = np.asarray(scale, dtype=np.float64)
    out = []
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for sign in (1.0, -1.0):
            arg = (tau**2 / b - sign * r) / (np.sqrt(2.0) * tau)
            # arg ≥ 0: −r²/2τ² + log erfcx(arg), the exponent and erfc's e^(−arg²) combined
            # exactly (docstring). arg < 0 (±r > τ²/b): the exponent is below −τ²/2b² and its
            # two terms do not cancel; erfc(arg) lies in (1, 2].
            safe = np.maximum(arg, 0.0)
            upper = -0.5 * (r / tau) ** 2 + np.log(special.erfcx(safe))
            lower = tau**2 / (2 * b**2) - sign * r / b + np.log(special.erfc(np.minimum(arg, 0.0)))
            out.append(np.where(arg >= 0.0, upper, lower))
    return np.sum(np.logaddexp(out[0], out[1]) - np.log(4.0 * b), axis=-1)
