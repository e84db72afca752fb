"""PyMC distribution of the regression statistic with a factor or a pair beside normal covariates.

:class:`LevelModelSuffStat` is the latent s of a :class:`~pymc_dp.NoisyRegressionStat` node with
``x_model="levels"`` or ``"pair"``: the law of
:func:`~pymc_dp.regression.kernels.level_model.level_statistic_logpdf` in PyTensor (tested equal),
and draws from :func:`~pymc_dp.regression.kernels.level_model.draw_level_statistic`. The factor's
columns are a graph constant, as a bit mask (column j is in the factor when bit j is set), so
its levels are in the order of their columns; so is the kind (:data:`LEVEL_KINDS`).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.distribution import Continuous
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.model.distributions.suffstat import rv_size_is_none
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    columns_first,
    draw_level_statistic,
    level_layout,
    pair_layout,
)
from pymc_dp.regression.model.distributions import (
    design_location_logp_pt,
    location_logp_pt,
    model_statistic_pt,
    response_logp_pt,
    static_d,
    statistic_support_shape,
    unpack_statistic_pt,
)

__all__ = [
    "LEVEL_KINDS",
    "LevelModelSuffStat",
    "LevelModelSuffStatRV",
    "factor_columns",
    "factor_mask",
]

LEVEL_KINDS = ("factor", "pair")
"""The layouts of :class:`LevelModelSuffStat` (its ``kind`` is the index): the dummy columns of
one factor, or two binary covariates with all four corners (additive means)."""


def factor_mask(columns: tuple[int, ...] | list[int]) -> int:
    """The bit mask of the factor's columns (the node's graph constant).

    Examples
    --------
    >>> factor_mask([0, 2]), factor_columns(5, 3)
    (5, (0, 2))
    """
    return int(sum(1 << int(j) for j in set(columns)))


def _constant(value: object, what: str) -> int:
    if not isinstance(value, int | np.integer):
        try:
            value = int(pt.get_underlying_scalar_constant_value(value))
        except NotScalarConstantError:
            raise ValueError(f"the {what} must be a constant") from None
    return int(value)


def _kind(kind: object) -> str:
    code = _constant(kind, "kind of level model")
    if not 0 <= code < len(LEVEL_KINDS):
        raise ValueError(f"kind must index LEVEL_KINDS = {LEVEL_KINDS} (got {code})")
    return LEVEL_KINDS[code]


def _layout(d: int, columns: tuple[int, ...], kind: str):
    if kind == "pair":
        if len(columns) != 2:
            raise ValueError(f"a pair's mask names two columns (got {columns})")
        return pair_layout(d)
    return level_layout(d, len(columns) + 1)


def factor_columns(mask: object, d: int) -> tuple[int, ...]:
    """The factor's columns from its bit mask (an int or a scalar constant of the graph)."""
    mask = _constant(mask, "factor's columns")
    columns = tuple(j for j in range(d) if int(mask) >> j & 1)
    if not columns or int(mask) >> d:
        raise ValueError(f"the factor's mask {mask} names no column, or one beyond d = {d}")
    return columns


def _order(d: int, columns: tuple[int, ...]) -> np.ndarray:
    """Record indices (intercept, the factor's columns, the others, response)."""
    others = [j + 1 for j in range(d) if j not in columns]
    return np.array([0, *(j + 1 for j in columns), *others, d + 1])


class LevelModelSuffStatRV(RandomVariable):
    """s with its exact law given θ, σ², π over the levels, their means, Σ and n."""

    name = "level_model_suffstat"
    signature = "(p),(),(c),(r,e),(e,e),(),(),()->(m)"
    dtype = "floatX"
    _print_name = ("LevelModelSuffStat", "\\operatorname{LevelModelSuffStat}")

    _supp_shape_from_params = statistic_support_shape

    @classmethod
    def rng_fn(cls, rng, theta, sigma2, probs, group_loc, x_cov, n, mask, kind, size):  # noqa: D102
        d = theta.shape[-1] - 1
        columns = factor_columns(int(mask), d)
        coef = _order(d, columns)[: d + 1]
        par = LevelParameters(theta[..., coef], sigma2, probs, group_loc, x_cov)
        layout = _layout(d, columns, _kind(int(kind)))
        s = draw_level_statistic(rng, par, int(n), layout, size=() if size is None else tuple(size))
        return columns_first(s, columns, inverse=True)


level_model_suffstat = LevelModelSuffStatRV()


class LevelModelSuffStat(Continuous):
    """Latent statistic s of n records with a factor (or a pair of binaries) beside normal ones.

    Parameters
    ----------
    theta, sigma2
        Coefficients (intercept first, static length d + 1) and noise variance.
    probs
        π over the K levels: the reference level (every column of the factor 0) first, then
        the levels of the factor's columns in the order of the columns. For a pair, over the
        corners (0, 0), (1, 0), (0, 1), (1, 1) of its two columns in their order.
    group_loc, x_cov
        The other covariates' mean at each level ``(K, d₂)`` (for a pair at the corners (0, 0),
        (1, 0), (0, 1), ``(3, d₂)``: the mean is additive in the two) and their covariance
        within a level ``(d₂, d₂)``.
    n
        Number of records.
    mask
        The factor's (or pair's) columns as a bit mask (:func:`factor_mask`; a constant).
    kind
        Index in :data:`LEVEL_KINDS` (a constant; default 0, a factor).

    Notes
    -----
    The log density is :func:`~pymc_dp.regression.kernels.level_model.level_statistic_logpdf`
    in PyTensor: the level counts Multinomial(n, π) (not renormalised to every level present:
    the node's prior of π is tilted by the same probability, as the cell model's), the level
    sums of the other covariates normal, their pooled scatter Wishart(n − K, Σ) (for a pair:
    :func:`~pymc_dp.regression.kernels.level_model.design_location_logpdf`), and the
    responses as in :class:`~pymc_dp.regression.model.distributions.NormalModelSuffStat`; −∞
    where a count is not a whole number of at least 1, a column's square sum differs from its
    sum, two columns of the factor are 1 together, or the statistic is not valid. With respect
    to counting measure on the counts and Lebesgue measure on the other entries.
    """

    rv_op = level_model_suffstat

    @classmethod
    def dist(cls, theta, sigma2, probs, group_loc, x_cov, n, mask, kind=0, **kwargs):  # noqa: D102
        return super().dist([theta, sigma2, probs, group_loc, x_cov, n, mask, kind], **kwargs)

    def support_point(rv, size, theta, sigma2, probs, group_loc, x_cov, n, mask, kind):  # noqa: D102
        # A statistic of the model: counts nπ rounded (each at least 1, the reference level
        # taking the rest), the level sums at their means, W = (n − K)Σ, b = Aθ, R = (n − p)σ².
        d = static_d(theta)
        columns = factor_columns(mask, d)
        if _kind(kind) == "pair":
            return _pair_support_point(size, theta, sigma2, probs, group_loc, x_cov, n, columns)
        f = len(columns)
        others = pt.maximum(pt.round(n * probs[1:]), 1.0)
        counts = pt.concatenate([(n - pt.sum(others))[None], others])
        sums = second = None
        if d > f:
            sums = counts[:, None] * group_loc
            second = (n - f - 1.0) * x_cov + pt.sum(
                sums[:, :, None] * sums[:, None, :] / counts[:, None, None], axis=0
            )
        return _point(size, theta, sigma2, n, columns, others, pt.diag(others), sums, second)

    def logp(value, theta, sigma2, probs, group_loc, x_cov, n, mask, kind):  # noqa: D102
        d = static_d(theta)
        columns = factor_columns(mask, d)
        if _kind(kind) == "pair":
            return _pair_logp(value, theta, sigma2, probs, group_loc, x_cov, n, columns)
        f = len(columns)
        d2, levels = d - f, f + 1
        n = pt.cast(n, "float64")  # a Python float n would be float32: gammaln at 1e-6
        order = _order(d, columns)
        b_user = unpack_statistic_pt(value, n, d)
        b = b_user[order][:, order]
        ones = b[0, 1 : f + 1]
        counts = pt.concatenate([(n - pt.sum(ones))[None], ones])
        factor = np.arange(1, f + 1)
        upper = np.triu_indices(f, 1)
        valid = (
            pt.all(pt.eq(ones, pt.round(ones)))
            & pt.all(counts >= 1.0)
            & pt.all(pt.eq(b[factor, factor], ones))
        )
        if upper[0].size:
            valid = valid & pt.all(pt.eq(b[1:, 1:][upper], 0.0))
        safe = pt.switch(valid, counts, n / levels)
        logp = pt.gammaln(n + 1.0) - pt.sum(pt.gammaln(safe + 1.0)) + pt.sum(safe * pt.log(probs))
        if d2:
            normal = slice(f + 1, d + 1)
            level_sums = b[1 : f + 1, normal]
            sums = [b[0, normal] - pt.sum(level_sums, axis=0), *(level_sums[j] for j in range(f))]
            location, location_ok = location_logp_pt(
                sums, [safe[g] for g in range(levels)], b[normal, normal], group_loc, x_cov, d2
            )
            logp, valid = logp + location, valid & location_ok
        response, response_ok = response_logp_pt(b_user, theta, sigma2, n)
        return pt.switch(valid & response_ok, logp + response, -np.inf)


def _pair_cells(k1, k2, k12, n):
    """The four corners' counts from Σx₁, Σx₂, Σx₁x₂ (PyTensor)."""
    return pt.stack([n - k1 - k2 + k12, k1 - k12, k2 - k12, k12])


def _pair_gram(cells, d):
    """G = DᵀD from the corners' counts (PyTensor), D's rows :attr:`LevelLayout.design`."""
    design = pair_layout(d).design
    return pt.dot(design.T * cells[None, :], design)


def _pair_logp(value, theta, sigma2, probs, group_loc, x_cov, n, columns):
    """:func:`~pymc_dp.regression.kernels.level_model.level_statistic_logpdf` of a pair."""
    d = static_d(theta)
    d2 = d - 2
    n = pt.cast(n, "float64")
    order = _order(d, columns)
    b_user = unpack_statistic_pt(value, n, d)
    b = b_user[order][:, order]
    k1, k2, k12 = b[0, 1], b[0, 2], b[1, 2]
    ones = pt.stack([k1, k2, k12])
    cells = _pair_cells(k1, k2, k12, n)
    valid = (
        pt.all(pt.eq(ones, pt.round(ones)))
        & pt.all(cells >= 0.0)
        & (pt.sum(cells >= 1.0) >= 3)
        & pt.eq(b[1, 1], k1)
        & pt.eq(b[2, 2], k2)
    )
    safe = pt.switch(valid, cells, n / 4.0)
    logp = pt.gammaln(n + 1.0) - pt.sum(pt.gammaln(safe + 1.0)) + pt.sum(safe * pt.log(probs))
    if d2:
        normal = slice(3, d + 1)
        sums = pt.stack([b[0, normal] - b[1, normal] - b[2, normal], b[1, normal], b[2, normal]])
        location, location_ok = design_location_logp_pt(
            sums, _pair_gram(safe, d), b[normal, normal], group_loc, x_cov, n, d2
        )
        logp, valid = logp + location, valid & location_ok
    response, response_ok = response_logp_pt(b_user, theta, sigma2, n)
    return pt.switch(valid & response_ok, logp + response, -np.inf)


def _pair_support_point(size, theta, sigma2, probs, group_loc, x_cov, n, columns):
    """A statistic of the pair's model (its support point).

    Corners' counts nπ rounded (each at least 1, the corner (0, 0) taking the rest), T = G M,
    W = (n − 3)Σ, b = Aθ, R = (n − p)σ².
    """
    d = static_d(theta)
    others = pt.maximum(pt.round(n * probs[1:]), 1.0)
    cells = pt.concatenate([(n - pt.sum(others))[None], others])
    corners = pair_layout(d).corners
    cross = pt.dot(corners.T * cells[None, :], corners)
    sums = second = None
    if d > 2:
        g = _pair_gram(cells, d)
        sums = pt.dot(g, group_loc)
        second = (n - 3.0) * x_cov + pt.dot(sums.T, pt.linalg.solve(g, sums))
    return _point(size, theta, sigma2, n, columns, pt.dot(cells, corners), cross, sums, second)


def _point(size, theta, sigma2, n, columns, ones, cross, sums, second):
    """The statistic (user's order) with A from its parts, b = Aθ and R = (n − p)σ².

    ``ones`` Σ x_j and ``cross`` Σ x_i x_j of the binary columns, ``sums`` T (its rows summing
    to Σ x₂, the others Σ x_j x₂) and ``second`` Σ x₂x₂ᵀ of the other covariates (``None``
    when there are none).
    """
    d = static_d(theta)
    p, f = d + 1, len(columns)
    order = _order(d, columns)
    back = np.argsort(order)
    gram = pt.zeros((p, p))
    gram = pt.set_subtensor(gram[0, 0], n)
    gram = pt.set_subtensor(gram[0, 1 : f + 1], ones)
    gram = pt.set_subtensor(gram[1 : f + 1, 0], ones)
    gram = pt.set_subtensor(gram[1 : f + 1, 1 : f + 1], cross)
    if sums is not None:
        total = pt.sum(sums, axis=0)
        gram = pt.set_subtensor(gram[0, f + 1 :], total)
        gram = pt.set_subtensor(gram[f + 1 :, 0], total)
        gram = pt.set_subtensor(gram[1 : f + 1, f + 1 :], sums[1:])
        gram = pt.set_subtensor(gram[f + 1 :, 1 : f + 1], sums[1:].T)
        gram = pt.set_subtensor(gram[f + 1 :, f + 1 :], second)
    b = model_statistic_pt(gram, theta[order[:p]], sigma2, n)
    rows, cols = released_pairs(d)
    point = b[back][:, back][rows, cols]
    if not rv_size_is_none(size):
        point = pt.full((*size, rows.size), point)
    return point
