"""PyMC distribution of the regression statistic when every covariate is binary (the cell model).

:class:`CellModelSuffStat` is the latent s of a :class:`~pymc_dp.NoisyRegressionStat` node with
``x_model="binary"`` or ``"factor"``: the law of
:func:`~pymc_dp.regression.kernels.cell_model.cell_statistic_logpdf` in PyTensor (tested equal),
and draws from :func:`~pymc_dp.regression.kernels.cell_model.draw_cell_statistic`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.distribution import Continuous
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.model.distributions.suffstat import rv_size_is_none
from pymc_dp.regression.kernels.cell_model import (
    CELL_KINDS,
    CellLayout,
    CellParameters,
    cell_layout,
    draw_cell_statistic,
)
from pymc_dp.regression.model.distributions import (
    model_statistic_pt,
    response_logp_pt,
    static_d,
    statistic_support_shape,
    unpack_statistic_pt,
)

__all__ = ["CellModelSuffStat", "CellModelSuffStatRV"]


def _layout(d: int, kind: object) -> CellLayout:
    """The layout named by the kind's index into :data:`CELL_KINDS` (a graph constant)."""
    if not isinstance(kind, int | np.integer):
        try:
            kind = int(pt.get_underlying_scalar_constant_value(kind))
        except NotScalarConstantError:
            raise ValueError("the cell layout's kind must be a constant") from None
    return cell_layout(d, CELL_KINDS[int(kind)])


class CellModelSuffStatRV(RandomVariable):
    """s with its exact law given θ, σ², the cell probabilities π and n (every x binary)."""

    name = "cell_model_suffstat"
    signature = "(p),(),(c),(),()->(m)"
    dtype = "floatX"
    _print_name = ("CellModelSuffStat", "\\operatorname{CellModelSuffStat}")

    _supp_shape_from_params = statistic_support_shape

    @classmethod
    def rng_fn(cls, rng, theta, sigma2, probs, n, kind, size):  # noqa: D102
        layout = _layout(theta.shape[-1] - 1, int(kind))
        par = CellParameters(theta, sigma2, probs)
        return draw_cell_statistic(rng, par, int(n), layout,
                                   size=() if size is None else tuple(size))  # fmt: skip


cell_model_suffstat = CellModelSuffStatRV()


class CellModelSuffStat(Continuous):
    """Latent statistic s of n records whose covariates are all binary.

    Parameters
    ----------
    theta, sigma2
        Coefficients (intercept first, static length d + 1) and noise variance.
    probs
        π, the cells' probabilities, in the order of
        :func:`~pymc_dp.regression.kernels.cell_model.cell_layout`'s corners.
    n
        Number of records.
    kind
        Index into :data:`~pymc_dp.regression.kernels.cell_model.CELL_KINDS` (a constant):
        0 for the dummy columns of one factor, 1 for two binary covariates, 2 for three.

    Notes
    -----
    The log density is
    :func:`~pymc_dp.regression.kernels.cell_model.cell_statistic_logpdf` in PyTensor:
    ``Multinomial(counts; n, π)`` of the counts the integer coordinates fix (for three binary
    covariates summed over the triple counts they allow), times the
    responses' law given A (as
    :class:`~pymc_dp.regression.model.distributions.NormalModelSuffStat`);
    −∞ where s is not a statistic of binary records or A is singular. With respect to counting
    measure on the counts and Lebesgue measure on the responses' part. The multinomial is not
    renormalised to the regular counts: the node's prior of π is tilted by the same probability
    (the kernel's module docstring), so the model's joint density is exact, and the draws
    (``pm.sample_prior_predictive``) are of the counts restricted to a regular A.
    """

    rv_op = cell_model_suffstat

    @classmethod
    def dist(cls, theta, sigma2, probs, n, kind=0, **kwargs):  # noqa: D102
        return super().dist([theta, sigma2, probs, n, kind], **kwargs)

    def support_point(rv, size, theta, sigma2, probs, n, kind):  # noqa: D102
        # The statistic at counts n·π rounded, each cell at least 1 (so A is regular), the
        # reference cell taking the rest, with b = Aθ and R = (n − p)σ².
        d = static_d(theta)
        layout = _layout(d, kind)
        others = pt.maximum(pt.round(n * probs[1:]), 1.0)
        counts = pt.concatenate([(n - pt.sum(others))[None], others])
        gram = pt.tensordot(counts, pt.constant(np.einsum("ci,cj->cij", layout.records,
                                                          layout.records)), axes=1)  # fmt: skip
        rows, cols = released_pairs(d)
        point = model_statistic_pt(gram, theta, sigma2, n)[rows, cols]
        if not rv_size_is_none(size):
            point = pt.full((*size, rows.size), point)
        return point

    def logp(value, theta, sigma2, probs, n, kind):  # noqa: D102
        d = static_d(theta)
        layout = _layout(d, kind)
        n = pt.cast(n, "float64")  # a Python float n would be float32: gammaln at 1e-6
        k = value[layout.positions]
        full = pt.concatenate([n[None], k])
        reads = np.maximum(layout.reads, 0)
        expected = pt.switch(layout.reads >= 0, k[reads], 0.0)
        valid = pt.all(pt.eq(k, pt.round(k))) & pt.all(
            pt.eq(value[layout.covariate_positions], expected)
        )
        if layout.hidden:
            law, regular = _fiber_law(layout, full, n, probs)
            valid = valid & regular
        else:
            counts = pt.round(pt.dot(pt.constant(layout.to_counts), full))
            valid = valid & pt.all(counts >= 0) & (pt.sum(counts > 0) >= d + 1)  # regular A
            safe = pt.switch(counts > 0, counts, 1.0)
            law = (
                pt.gammaln(n + 1.0)
                - pt.sum(pt.gammaln(counts + 1.0))
                + pt.sum(pt.switch(counts > 0, safe * pt.log(probs), 0.0))
            )
        response, response_ok = response_logp_pt(unpack_statistic_pt(value, n, d), theta, sigma2, n)
        return pt.switch(valid & response_ok, law + response, -np.inf)


def _fiber_law(
    layout: CellLayout, full: pt.TensorVariable, n: pt.TensorVariable, probs: pt.TensorVariable
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """The cube's ``log Σ_t Multinomial(N(t); n, π)`` and whether A is regular, in PyTensor.

    As :func:`~pymc_dp.regression.kernels.cell_model.cell_fiber` and
    :meth:`~pymc_dp.regression.kernels.cell_model.CellLayout.regular`.
    """
    base = pt.round(pt.dot(pt.constant(layout.to_counts[:, :-1]), full))
    step = layout.to_counts[:, -1]
    least = pt.max(pt.switch(step > 0, -base, -np.inf))
    most = pt.min(pt.switch(step < 0, base, np.inf))
    t = least + pt.arange(pt.maximum(most - least + 1.0, 1.0).astype("int64"))
    counts = base[None, :] + t[:, None] * pt.constant(step)[None, :]
    ok = pt.all(counts >= 0, axis=1)
    safe = pt.switch(counts > 0, counts, 1.0)
    each = -pt.sum(pt.gammaln(pt.maximum(counts, 0.0) + 1.0), axis=1) + pt.sum(
        pt.switch(counts > 0, safe * pt.log(probs)[None, :], 0.0), axis=1
    )
    each = pt.switch(ok, each, -np.inf)
    top = pt.max(each)
    law = pt.gammaln(n + 1.0) + top + pt.log(pt.sum(pt.exp(each - top)))
    occupied = pt.cast(counts[0] > 0, "float64")
    spread = pt.dot(pt.constant(layout.records.T) * occupied[None, :], pt.constant(layout.records))
    regular = pt.any(ok) & (pt.linalg.det(spread) > 0.5)
    return law, regular
