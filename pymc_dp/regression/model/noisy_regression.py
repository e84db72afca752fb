"""The ``NoisyRegressionStat`` observed node: a private regression release inside a PyMC model.

The Normal–Inverse-Gamma prior is written with ordinary PyMC distributions; one call adds the
release. By default (``method="auto"`` without fixed moments of x):

* ``{name}_x_cov`` ~ InverseWishart(ν, Ψ) and ``{name}_x_loc`` ~ N(m, Σ_x/κ): the covariates'
  normal model, with a prior from the public box (:func:`~pymc_dp.regression.default_x_prior`)
  unless ``x_prior`` is given;
* ``{name}_s``: the latent statistic with its exact law given θ, σ², μ_x, Σ_x
  (:class:`~pymc_dp.regression.model.distributions.NormalModelSuffStat`, no CLT);
* ``{name}``: the released z | s ~ Laplace(s, Δ/ε) (or Normal(s, σ) for Gaussian noise),
  observed;
* ``{name}_sigma2``: the Laplace mixing variances (one per component; none for Gaussian noise,
  nor under the mixed and cell models of x, whose steps hold the Laplace density itself).

``pm.sample()`` assigns :class:`~pymc_dp.regression.RegressionCollapsedStep` to θ, σ², μ_x, Σ_x
and s, and the mixing-variance step to the rest. ``method="gibbs-ss"`` (or fixed
``x_moments``) is the paper's Algorithm 1 instead: s | θ, σ² ~ N(nμ_t, nΣ_t) restricted to PSD
``B = [X, y]ᵀ[X, y]`` (:class:`~pymc_dp.regression.model.distributions.RegressionSuffStat`), sampled
by the steps of :mod:`pymc_dp.regression.model.steps`. Neither leaves anything to NUTS.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.scalar import Second
from pytensor.tensor.elemwise import Elemwise

from pymc_dp._compat import ancestors
from pymc_dp._validation import check_finite_array, check_int, check_positive
from pymc_dp.curator.regression.record import check_zero_one_columns
from pymc_dp.curator.regression.release import RegressionRelease
from pymc_dp.curator.regression.statistics import d_from_released, released_pairs
from pymc_dp.families.base import rv_op_type
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.distributions import LaplaceNoiseVariance
from pymc_dp.regression.engine.cells import CELLS_MIX_D
from pymc_dp.regression.kernels.cell_model import CELL_KINDS, cell_layout
from pymc_dp.regression.kernels.data_model import NIW, check_niw
from pymc_dp.regression.kernels.level_model import pair_layout
from pymc_dp.regression.kernels.moments import XMoments, check_x_moments, x_moments_from_release
from pymc_dp.regression.kernels.shape_law import check_shape_moments
from pymc_dp.regression.kernels.x_models import ShapePrior, binary_cells
from pymc_dp.regression.model.cell_suffstat import CellModelSuffStat
from pymc_dp.regression.model.default_prior import default_mixed_x_prior, default_x_prior
from pymc_dp.regression.model.distributions import (
    InverseWishart,
    MixedModelSuffStat,
    NormalModelSuffStat,
    RegressionSuffStat,
    SharedCovNormal,
    binary_x_moments_pt,
    normal_x_moments_pt,
)
from pymc_dp.regression.model.level_suffstat import (
    LEVEL_KINDS,
    LevelModelSuffStat,
    factor_mask,
)
from pymc_dp.regression.model.shape_potential import shape_potential

__all__ = [
    "NoisyRegressionInfo",
    "NoisyRegressionStat",
    "coefficient_labels",
    "nig_prior_parameters",
    "regression_attrs",
    "statistic_labels",
]

TAG = "noisy_regression"
"""Attribute on ``rv.tag`` holding the :class:`NoisyRegressionInfo` of the node's own variables,
or a tuple of them on θ and σ² (one per node that they feed)."""


@dataclasses.dataclass(frozen=True)
class NoisyRegressionInfo:
    """What the regression step methods need to know about one node (names, so it pickles)."""

    name: str
    """Name of the observed node z."""
    suffstat: str
    """Name of the latent statistic s."""
    noise_variance: str | None
    """Name of the Laplace mixing variances; ``None`` where the model has none (Gaussian noise,
    and the mixed and cell models of x, whose steps hold Laplace noise by its density)."""
    theta: str
    """Name of the coefficients θ (intercept first)."""
    sigma2: str
    """Name of the regression noise variance σ²."""
    n: int
    d: int
    epsilon: float
    sensitivity: float
    x_loc: str | None = None
    """Name of μ_x of the covariates' normal model, else ``None`` (fixed moments of x)."""
    x_cov: str | None = None
    """Name of Σ_x, else ``None``."""
    x_prior: NIW | None = None
    """The NIW prior of (μ_x, Σ_x), else ``None``."""
    method: str = "gibbs-ss"
    """``"collapsed"`` (the default sampler, exact law of s) or ``"gibbs-ss"`` (Algorithm 1)."""
    noise_sd: float | None = None
    """Standard deviation of Gaussian noise; ``None`` for Laplace noise (mixing variances)."""
    laplace_scale: float | None = None
    """Scale b of Laplace noise; ``None`` for Gaussian noise."""
    x_model: str = "normal"
    """Model of the covariates: ``"normal"``, ``"shape"``, ``"binary"``, ``"factor"``,
    ``"mixed"``, ``"levels"``, ``"pair"`` or ``"moments"`` (fixed moments)."""
    x_probs: str | None = None
    """Binary model: name of the cell probabilities π over ``{0, 1}^d``."""
    x_probs_prior: tuple[float, ...] | None = None
    """Binary model: Dirichlet concentration of π."""
    x_skew: str | None = None
    """Shape model: name of the skewness γ, else ``None``."""
    x_excess: str | None = None
    """Shape model: name of κ − 1 − γ² (the kurtosis above its bound), else ``None``."""
    x_shape_moments: tuple | None = None
    """Shape model: (released sums of x^k, their degrees k, their Laplace scale, the
    :class:`~pymc_dp.regression.kernels.x_models.ShapePrior`)."""
    x_prob: str | None = None
    """Mixed model: name of π = P(x_b = 1); ``x_loc`` then names the other covariates' group
    means ``(2, d − 1)`` and ``x_cov`` their covariance within a group (both ``None`` at
    d = 1), and ``x_prior`` is their NIW prior."""
    binary: int | None = None
    """Mixed model: index of the binary covariate."""
    factor: tuple[int, ...] | None = None
    """Level model (sampled by :class:`~pymc_dp.regression.RegressionLevelStep`): the factor's
    dummy columns, in increasing order; ``x_probs`` names π over its levels (the reference
    first), ``x_loc`` the other covariates' level means ``(K, d₂)``, ``x_cov`` their covariance
    within a level, and ``x_prior`` is their NIW prior. The pair model (``x_model="pair"``,
    the same step): its two binary covariates, π over their four corners, ``x_loc`` the
    means at the first three ``(3, d₂)``."""
    cells: str | None = None
    """Cell model (every covariate binary, sampled by
    :class:`~pymc_dp.regression.RegressionCellStep`): the layout's kind, ``"pair"``, ``"cube"``
    or ``"categories"`` (:func:`~pymc_dp.regression.kernels.cell_model.cell_layout`);
    ``x_probs`` names π over its corners."""


def coefficient_labels(covariates: Sequence[str]) -> list[str]:
    """Labels of θ: ``["intercept", *covariates]``.

    Examples
    --------
    >>> coefficient_labels(["x1", "x2"])
    ['intercept', 'x1', 'x2']
    """
    return ["intercept", *covariates]


def statistic_labels(covariates: Sequence[str], response: str = "y") -> list[str]:
    """Labels of the released components, named by their monomials.

    A product of different variables joins their names with ``_``; a square is ``name^2``.

    Examples
    --------
    >>> statistic_labels(["x1", "x2"])  # doctest: +NORMALIZE_WHITESPACE
    ['sum_x1', 'sum_x2', 'sum_x1^2', 'sum_x1_x2', 'sum_x2^2', 'sum_y', 'sum_x1_y', 'sum_x2_y',
     'sum_y^2']
    """
    names = [None, *covariates, response]  # index 0 of B is the intercept
    rows, cols = released_pairs(len(covariates))
    labels = []
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if i == 0:
            labels.append(f"sum_{names[j]}")
        elif i == j:
            labels.append(f"sum_{names[i]}^2")
        else:
            labels.append(f"sum_{names[i]}_{names[j]}")
    return labels


def nig_prior_parameters(
    model: pm.Model, theta: pt.TensorVariable, sigma2: pt.TensorVariable
) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
    """(μ, Λ, a, b) of a Normal–Inverse-Gamma prior written with PyMC distributions.

    Recognises ``sigma2 = pm.InverseGamma(name, alpha=a, beta=b)`` with either
    ``theta = pm.MvNormal(name, mu, cov=sigma2 * V)`` (any of ``cov``/``chol``/``tau``) or
    ``theta = pm.Normal(name, mu, sigma=pt.sqrt(sigma2 * v), shape=p)`` (diagonal V), where V
    and v are fixed (they may not depend on any other random variable). Then θ | σ² ~ N(μ, σ² V)
    and the precision is Λ = V⁻¹. μ may be a fixed vector or any expression of other variables.

    Raises
    ------
    TypeError
        If ``theta`` or ``sigma2`` is not a free random variable of ``model``.
    ValueError
        If the prior is not of this form.
    """
    for label, rv in (("theta", theta), ("sigma2", sigma2)):
        if not isinstance(rv, pt.TensorVariable) or rv not in model.free_RVs:
            raise TypeError(
                f"{label} must be a free random variable of the model, e.g. "
                f"{label} = pm.{'MvNormal' if label == 'theta' else 'InverseGamma'}(...) "
                f"(got {rv!r})"
            )
    hint = (
        "the prior must be Normal–Inverse-Gamma: sigma2 = pm.InverseGamma('sigma2', a, b) and "
        "theta = pm.MvNormal('theta', mu, cov=sigma2 * V) (or pm.Normal('theta', mu, "
        "sigma=pt.sqrt(sigma2 * v), shape=d + 1)) with fixed V"
    )
    if not isinstance(sigma2.owner.op, rv_op_type(pm.InverseGamma, 1.0, 1.0)):
        raise ValueError(f"sigma2 is a {type(sigma2.owner.op).__name__}; {hint}")
    if theta.type.ndim != 1 or theta.type.shape[0] is None:
        raise ValueError(
            f"theta must be a vector of static length d + 1 (got type {theta.type}); {hint}"
        )
    p = int(theta.type.shape[0])
    op = theta.owner.op
    if isinstance(op, rv_op_type(pm.MvNormal, np.zeros(1), np.eye(1))):
        mu, cov = op.dist_params(theta.owner)
    elif isinstance(op, rv_op_type(pm.Normal, 0.0, 1.0)):
        mu, sd = op.dist_params(theta.owner)
        cov = pt.eye(p) * pt.broadcast_to(pt.sqr(sd), (p,))[None, :]
    else:
        raise ValueError(f"theta is a {type(op).__name__}; {hint}")
    mu = _unbroadcast(mu)
    rvs = set(model.basic_RVs)
    if set(ancestors([cov], blockers=model.basic_RVs)) & rvs != {sigma2}:
        raise ValueError(
            f"theta's covariance must be sigma2 times a fixed matrix, and depend on no other "
            f"random variable; {hint}"
        )
    if {sigma2, theta} & set(ancestors([mu], blockers=model.basic_RVs)):
        raise ValueError(f"theta's mean must not depend on sigma2 or theta; {hint}")
    # Python mode: a probe run twice does not need the C compiler.
    ratio = pytensor.function([sigma2], cov / sigma2, on_unused_input="ignore", mode="FAST_COMPILE")
    low, high = (ratio(np.asarray(v, dtype=sigma2.dtype)) for v in (0.37, 2.9))
    if not (np.all(np.isfinite(low)) and np.allclose(low, high, rtol=1e-6, atol=0.0)):
        raise ValueError(f"theta's covariance is not proportional to sigma2; {hint}")
    try:
        np.linalg.cholesky(low)
    except np.linalg.LinAlgError:
        raise ValueError("theta's prior covariance / sigma2 must be positive definite") from None
    alpha, beta = sigma2.owner.op.dist_params(sigma2.owner)
    precision = pt.constant(np.linalg.inv(low).astype(np.float64))
    return pt.broadcast_to(mu, (p,)), precision, alpha, beta


def _unbroadcast(mu: pt.TensorVariable) -> pt.TensorVariable:
    """``mu`` without the ``pt.second(cov, mu)`` that broadcasts MvNormal's mean.

    PyMC broadcasts the mean against the covariance, so the mean's graph contains σ² without
    depending on it.
    """
    while (
        mu.owner is not None
        and isinstance(mu.owner.op, Elemwise)
        and isinstance(mu.owner.op.scalar_op, Second)
    ):
        mu = mu.owner.inputs[1]
    return mu


class NoisyRegressionStat:
    """Released noisy regression statistics, as an observed node of a PyMC model.

    Parameters
    ----------
    name
        Name of the observed node; the other variables are ``{name}_s``, ``{name}_sigma2``
        and, with a normal model of x, ``{name}_x_loc`` and ``{name}_x_cov``.
    theta, sigma2
        Model variables with a Normal–Inverse-Gamma prior (see :func:`nig_prior_parameters`):
        coefficients, intercept first, and the regression noise variance.
    release
        A :class:`~pymc_dp.regression.RegressionRelease`. Alternatively give ``n``,
        ``epsilon``, ``sensitivity`` and ``observed`` (and ``bounds``) of a Laplace release.
        A ``"discrete-gaussian"`` release is observed as z | s ~ N(s, τ² I) with its
        τ = :attr:`~pymc_dp.regression.RegressionRelease.scale`, without mixing variances.
    x_prior
        :class:`~pymc_dp.regression.NIW` prior of the covariates' normal model. Default: from
        the release's public box (:func:`~pymc_dp.regression.default_x_prior`).
    x_moments
        Fixed moments of x̃ = (1, x), an :class:`~pymc_dp.regression.XMoments`: Gibbs-SS with
        these moments plugged in (``method="gibbs-ss"``). With ``method="gibbs-ss"`` and neither
        ``x_moments`` nor ``x_prior``, they come from the release's noisy moments
        (Gibbs-SS-Noisy, :func:`~pymc_dp.regression.x_moments_from_release`).
    method
        ``"auto"`` (the default): ``"collapsed"`` unless ``x_moments`` is given.
        ``"collapsed"``: the exact law of s under the normal model of x, sampled by collapsed
        moves (:class:`~pymc_dp.regression.RegressionCollapsedStep`); calibrated and fast to mix.
        ``"gibbs-ss"``: the paper's Algorithm 1 (CLT for s, Gibbs steps), as Gibbs-SS-Noisy
        (release moments or ``x_moments``) or Gibbs-SS-Update (``x_prior``).
    x_model
        ``"auto"`` (the default): ``"normal"``, released moments unused (the shape model
        below is level with it on the calibration cells run, not better, where the sums do not
        inform, and mixes at a quarter to a third of the ESS/s: ``docs/regression.md``).
        ``"shape"`` (the collapsed method, d = 1, a Laplace release with ``moments_share``):
        x = μ_x + σ_x u with u of skewness ``{name}_x_skew`` (a Cauchy of scale ¼ truncated
        to (−2, 2): :class:`~pymc_dp.regression.kernels.x_models.ShapePrior`) and kurtosis
        ``{name}_x_kurt`` = 1 + γ² + ``{name}_x_excess``,
        excess ~ U(0, 6) (uniform, normal, exponential and two-point shapes inside); the law
        of the covariate's sums follows (γ, κ), and the released sums of x³ and x⁴ are
        observed with their Laplace noise, never plugged in
        (:mod:`~pymc_dp.regression.kernels.shape_law`; a ``pm.Potential`` ``{name}_x_shape``
        holds both factors). ``"normal"``: x ~ N(μ_x, Σ_x), released moments unused.
        ``"binary"``: every covariate is 0 or 1 (treated/untreated indicators; d ≤ 3): x is
        one of the corners of ``{0, 1}^d`` with probabilities ``{name}_x_probs`` ~
        Dirichlet(1, ..., 1) (dims ``{name}_cell``). Up to d = 2 the release's sums fix the
        cell counts; at d = 3 they fix all but the triple count Σ x₁x₂x₃, which the law sums
        over. So s has an exact law given θ, σ², π (the cell model,
        :mod:`~pymc_dp.regression.kernels.cell_model`), sampled by
        :class:`~pymc_dp.regression.RegressionCellStep`; θ must feed this node alone. With
        ``method="gibbs-ss"`` (d ≤ 2): the CLT law of s with moments that are exact functions
        of π (:class:`~pymc_dp.regression.model.steps.BinaryCovariateStep`). A box of [0, 1] per
        covariate keeps the sensitivity smallest.
        ``"factor"``: the d covariates are the dummy columns of one factor with d + 1 levels
        (never two of them 1 in a record; the reference level all 0): π over the d + 1
        levels, the cell model as for ``"binary"``; any d, with a warning above
        :data:`~pymc_dp.regression.engine.cells.CELLS_MIX_D` = 10 (its sampler is checked up
        to there and slows as d grows).
        ``"auto"`` picks ``"factor"`` when the release declares every covariate a column of
        one factor (``release_regression(..., factor=[...])``) and d ≤ ``CELLS_MIX_D``,
        ``"levels"`` (below) when it declares a factor beside other covariates,
        ``"binary"`` when it declares every one of its two or three covariates binary, and
        ``"pair"`` (below)
        when it declares two binary covariates beside others (or ``binary=`` names two).
        ``"mixed"`` (what ``"auto"`` picks when ``binary`` is given): the covariate ``binary``
        is Bernoulli(``{name}_x_prob``) and the others, given it, normal with a mean per group
        (``{name}_x_loc``, dims ``({name}_group, {name}_covariate)``) and one covariance
        ``{name}_x_cov``; the exact law of s under that model
        (:mod:`~pymc_dp.regression.kernels.mixed_model`: ``Σ x_b² = Σ x_b`` is one whole
        number, read twice by the release), sampled by
        :class:`~pymc_dp.regression.RegressionMixedStep`. π's prior is uniform given both
        groups non-empty (a ``pm.Potential`` ``{name}_x_prob_prior``), the other covariates'
        the box prior. θ must feed this node alone.
        ``"levels"`` (what ``"auto"`` picks when the release declares a factor beside other
        covariates, d ≤ :data:`MIXED_MAX_D`): the covariates ``factor`` are the dummy columns
        of one factor of K levels and the others, given the level, normal with a mean per
        level (``{name}_x_loc``, dims ``({name}_level, {name}_covariate)``) and one covariance
        ``{name}_x_cov``; π over the levels ``{name}_x_probs`` ~ Dirichlet(1, …, 1) (the
        reference level, every column 0, first); the exact law of s under that model
        (:mod:`~pymc_dp.regression.kernels.level_model`), sampled by
        :class:`~pymc_dp.regression.RegressionLevelStep`. θ must feed this node alone.
        ``"pair"`` (what ``"auto"`` picks when the release declares two binary covariates
        beside other covariates, d ≤ :data:`MIXED_MAX_D`): the two covariates ``binary``
        take the four corners of the unit square with probabilities ``{name}_x_probs`` ~
        Dirichlet(1, 1, 1, 1) (dims ``{name}_cell``), and the others, given them, are normal
        with a mean additive in the two (``{name}_x_loc``: the means at the corners (0, 0),
        (1, 0), (0, 1), dims ``({name}_level, {name}_covariate)``; at (1, 1) the mean is
        m₁₀ + m₀₁ − m₀₀) and one covariance ``{name}_x_cov``. The release does not read the
        other covariates' sum at each corner, so a mean per corner would not be identified;
        the additive one is, and the law of s is exact
        (:func:`~pymc_dp.regression.kernels.level_model.pair_layout`), sampled by
        :class:`~pymc_dp.regression.RegressionLevelStep`. θ must feed this node alone.
    binary
        Index or name of a covariate that is 0 or 1 (a treated/untreated indicator): with
        ``x_model="auto"`` or ``"mixed"`` the node uses the mixed model above. Its box must
        hold 0 and 1 ([0, 1] keeps the sensitivity smallest). Default: the covariate the
        release declares binary (``release_regression(..., binary=[j])``, ``pymc-dp release
        --binary``) when it declares exactly one, d ≤ 5 (:data:`MIXED_MAX_D`: above it
        ``binary=`` warns), ``x_model`` and ``method`` are
        ``"auto"``, no ``x_prior`` or ``x_moments`` is given and θ feeds no other node; a
        release that declares several gets the normal model of x with a warning (the mixed
        model takes one binary covariate) unless it declares exactly two beside others (the
        pair model) or every covariate of two or three (the cell model, ``"binary"``). With
        ``x_model="pair"``: the two binary covariates (indices or names).
    factor
        Indices or names of the dummy columns of one factor beside other covariates, for
        ``x_model="levels"`` (their boxes must hold 0 and 1); default: the factor the release
        declares (``release_regression(..., factor=[...])``, ``pymc-dp release --factor``).
        Its levels are in the order of the columns.
    n, epsilon, sensitivity, observed
        The release given explicitly: number of records, ε, L1 sensitivity Δ (noise scale
        Δ/ε), released vector of length (d + 2)(d + 3)/2 − 1.
    bounds
        ``(x_bounds, y_bounds)`` of an explicit release: ``sensitivity`` is checked against the
        one these bounds need, and the default ``x_prior`` comes from ``x_bounds``.
    covariates
        Names of the d covariates for the coordinates (default ``x1, ..., xd``).
    model
        Model to add to; defaults to the model on the context stack.

    Returns
    -------
    TensorVariable
        The observed node z.

    Raises
    ------
    TypeError
        For a release of the wrong type, missing or conflicting arguments.
    ValueError
        If the prior is not Normal–Inverse-Gamma, θ's length is not d + 1, or the moments or
        NIW prior do not fit d.

    Notes
    -----
    Coordinates: ``{name}_stat`` (the statistic's monomials, :func:`statistic_labels`),
    ``{name}_coef`` (``intercept, x1, ...``; given to θ unless it already has dims) and, for
    Gibbs-SS-Update, ``{name}_covariate`` and ``{name}_covariate_bis`` (rows and columns of
    Σ_x).

    ``pm.sample_posterior_predictive(idata)`` redraws the released z | s ~ Laplace(s, Δ/ε) (or
    N(s, τ²) for a Gaussian release) at the trace's s, a check of the noise model. For
    responses at new covariates use :func:`~pymc_dp.regression.posterior_predictive`.

    The default model treats the covariates as normal; the box enters only through the
    sensitivity and the default prior (see :mod:`~pymc_dp.regression.model.default_prior`). Gibbs-SS
    (``method="gibbs-ss"``) draws s from the CLT normal *restricted* to PSD ``B``
    (:mod:`pymc_dp.regression.kernels.suffstat`) and can mix slowly when θ | s is much narrower than
    θ | z (large n with a noisy release); Gibbs-SS-Noisy also treats the noisy moments of x as
    exact, which makes it over-confident for the slopes where they are mostly noise.

    References
    ----------
    Bernstein & Sheldon (2019), "Differentially private Bayesian linear regression",
    Algorithm 1 and §3.4.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pytensor.tensor as pt, pymc_dp as pmdp
    >>> from pymc_dp.regression import release_regression
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, size=(300, 1)); y = 0.2 + 0.5 * x[:, 0] + 0.1 * rng.normal(size=300)
    >>> rel = release_regression(x, np.clip(y, -1, 2), x_bounds=[(0, 1)], y_bounds=(-1, 2),
    ...                          epsilon=2.0, rng=1)
    >>> with pm.Model() as model:
    ...     sigma2 = pm.InverseGamma("sigma2", 2.0, 0.1)
    ...     theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * np.eye(2))
    ...     z = NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel)
    >>> [v.name for v in model.free_RVs]
    ['sigma2', 'theta', 'z_x_cov', 'z_x_loc', 'z_s', 'z_sigma2']
    >>> model.coords["z_stat"]
    ('sum_x1', 'sum_x1^2', 'sum_y', 'sum_x1_y', 'sum_y^2')
    """

    def __new__(
        cls,
        name: str,
        *,
        theta: pt.TensorVariable,
        sigma2: pt.TensorVariable,
        release: RegressionRelease | None = None,
        x_prior: NIW | tuple | None = None,
        x_moments: XMoments | None = None,
        method: str = "auto",
        x_model: str = "auto",
        binary: int | str | Sequence[int | str] | None = None,
        factor: Sequence[int | str] | None = None,
        n: int | None = None,
        epsilon: float | None = None,
        sensitivity: float | None = None,
        observed: npt.ArrayLike | None = None,
        bounds: tuple | None = None,
        covariates: Sequence[str] | None = None,
        model: pm.Model | None = None,
    ) -> pt.TensorVariable:
        """Add the node's variables to the model and return the observed node z."""
        model = pm.modelcontext(model)
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string (got {name!r})")
        n, epsilon, sensitivity, value, rel = _release_settings(
            release,
            n=n,
            epsilon=epsilon,
            sensitivity=sensitivity,
            observed=observed,
            bounds=bounds,
        )
        d = d_from_released(value.shape[0])
        p = d + 1
        nig_prior_parameters(model, theta, sigma2)  # raises unless the prior is NIG
        if int(theta.type.shape[0]) != p:
            raise ValueError(
                f"theta has {theta.type.shape[0]} coefficients but the release is for d={d} "
                f"covariates: theta needs d + 1 = {p} (intercept first)"
            )
        covariates = _covariate_names(covariates, d)
        if (binary is None and factor is None and x_model == "auto" and method == "auto"
                and x_moments is None and x_prior is None):  # fmt: skip
            x_model, binary = _declared_x_model(rel, theta, covariates)
        if (
            x_model == "auto"
            and binary is not None
            and not isinstance(binary, str | int | np.integer)
        ):
            x_model = "pair"  # binary= names two covariates
        levels = _level_columns(factor, x_model, rel, x_moments, method, binary, covariates)
        kind = "factor"
        if x_model == "pair":
            levels, kind = _pair_columns(binary, rel, x_moments, method, covariates), "pair"
            binary = None
        mixed = None if levels else _mixed_index(binary, x_model, x_moments, method, covariates)
        cells, binary = None, False
        if mixed is None and not levels:
            cells, binary = _binary_covariates(x_model, x_moments, x_prior, method, d)
        shape = None
        level_model = "pair" if kind == "pair" else "levels"
        if levels:
            _alone(theta, name, level_model)
            box = rel.x_bounds if rel is not None else bounds and bounds[0]
            if box is not None:
                _zero_one_box(np.asarray(box, dtype=np.float64).reshape(-1, 2)[list(levels)],
                              level_model)  # fmt: skip
            method = "collapsed"
            x_prior = _mixed_x_prior(x_prior, rel, bounds, d, levels)
        elif mixed is not None:
            _alone(theta, name, "mixed")
            method = "collapsed"
            x_prior = _mixed_x_prior(x_prior, rel, bounds, d, mixed)
        elif cells is not None:
            _alone(theta, name, x_model)
            _zero_one_box(rel.x_bounds if rel is not None else bounds and bounds[0], x_model)
            method, x_prior = "collapsed", None
        elif binary:
            method, x_prior = "gibbs-ss", None
        else:
            method = _method(method, x_moments)
            shape = _shape_moments(x_model, method, rel, d)
            if method == "collapsed":
                x_prior = _default_x_prior(x_prior, rel, bounds, d)
            else:
                x_prior = _x_model(x_moments, x_prior, rel, d)
        for other in getattr(theta.tag, TAG, ()):
            if other.x_model in ("mixed", "levels", "pair") or other.cells is not None:
                raise ValueError(
                    f"theta already feeds node {other.name!r}, whose binary covariates "
                    f"(x_model={other.x_model!r}) need theta to themselves: give this node its "
                    "own theta, or build that node with x_model='normal'"
                )
            if other.method != method:
                raise ValueError(
                    f"theta already feeds node {other.name!r} with method={other.method!r}; all "
                    f"nodes of one theta need the same method (got {method!r})"
                )

        stat_dim, coef_dim = f"{name}_stat", f"{name}_coef"
        _add_coord(model, stat_dim, statistic_labels(covariates))
        if not model.named_vars_to_dims.get(theta.name):
            _add_coord(model, coef_dim, coefficient_labels(covariates))
            model.named_vars_to_dims[theta.name] = (coef_dim,)
        gaussian = rel is not None and rel.mechanism == DISCRETE_GAUSSIAN
        scale = rel.scale if rel is not None else sensitivity / epsilon
        s_name, v_name = f"{name}_s", f"{name}_sigma2"
        names: dict[str, Any] = {}
        # Chains start from prior draws (Algorithm 1), so that R-hat sees slow mixing: the
        # regression steps draw the parameters from their prior at a chain's first step. No
        # initval: PyMC's model transforms (pm.do, pm.observe, ...) refuse non-default ones.
        with model:
            if levels:
                probs, x_loc, x_cov, names = _level_variables(model, name, covariates, levels,
                                                              x_prior, kind)  # fmt: skip
            elif mixed is not None:
                prob, x_loc, x_cov, names = _mixed_variables(model, name, covariates, mixed,
                                                             x_prior, n)  # fmt: skip
            elif binary or cells is not None:
                corners = binary_cells(d) if binary else cell_layout(d, cells).corners
                cell_dim = f"{name}_cell"
                _add_coord(model, cell_dim, _cell_labels(covariates, corners))
                alpha = np.ones(len(corners))
                # π's prior is tilted by P(A regular | π) under the cell model; the
                # statistic's law leaves out the same factor (CellModelSuffStat), so the
                # model's joint density is exact.
                probs = pm.Dirichlet(f"{name}_x_probs", a=alpha, dims=cell_dim)
                if binary:
                    second, phi = binary_x_moments_pt(probs, d)
                names = {"x_probs": probs.name, "x_probs_prior": tuple(alpha.tolist())}
                if cells is not None:
                    names["cells"] = cells
            elif isinstance(x_prior, NIW):
                x_dim = f"{name}_covariate"
                _add_coord(model, x_dim, covariates)
                _add_coord(model, f"{x_dim}_bis", covariates)
                x_cov = InverseWishart(
                    f"{name}_x_cov",
                    dof=x_prior.dof,
                    scale=x_prior.scale,
                    dims=(x_dim, f"{x_dim}_bis"),
                )
                x_loc = SharedCovNormal(
                    f"{name}_x_loc",
                    mu=x_prior.loc,
                    cov=x_cov / x_prior.kappa,
                    dims=x_dim,
                )
                if method != "collapsed":
                    second, phi = normal_x_moments_pt(x_loc, x_cov)
                names = {"x_loc": x_loc.name, "x_cov": x_cov.name, "x_prior": x_prior}
                if shape is not None:
                    prior = shape[3]
                    if prior.skew_scale is None:
                        skew = pm.Uniform(f"{name}_x_skew", -prior.skew, prior.skew)
                    else:  # the prior's density is the variable's; the Potential omits it
                        skew = pm.Truncated(f"{name}_x_skew",
                                            pm.Cauchy.dist(0.0, prior.skew_scale),
                                            lower=-prior.skew, upper=prior.skew)  # fmt: skip
                    excess = pm.Uniform(f"{name}_x_excess", 0.0, prior.excess)
                    kurt = pm.Deterministic(f"{name}_x_kurt", 1.0 + skew**2 + excess)
                    names |= {"x_skew": skew.name, "x_excess": excess.name,
                              "x_shape_moments": shape}  # fmt: skip
            else:
                second = pt.constant(np.asarray(x_prior.second, dtype=np.float64))
                phi = pt.constant(np.asarray(x_prior.fourth_cov, dtype=np.float64))
            if levels:
                s = LevelModelSuffStat(s_name, theta, sigma2, probs, x_loc, x_cov, n,
                                       factor_mask(levels), LEVEL_KINDS.index(kind),
                                       dims=stat_dim)  # fmt: skip
            elif mixed is not None:
                s = MixedModelSuffStat(s_name, theta, sigma2, prob, x_loc, x_cov, n, mixed,
                                       dims=stat_dim)  # fmt: skip
            elif cells is not None:
                s = CellModelSuffStat(s_name, theta, sigma2, probs, n, CELL_KINDS.index(cells),
                                      dims=stat_dim)  # fmt: skip
            elif method == "collapsed":
                s = NormalModelSuffStat(s_name, theta, sigma2, x_loc, x_cov, n, dims=stat_dim)
                if shape is not None:
                    pm.Potential(f"{name}_x_shape", shape_potential(
                        s, x_loc, x_cov, skew, kurt, n=n, moments=shape[0], degrees=shape[1],
                        moment_scale=shape[2],
                    ))  # fmt: skip
            else:
                s = RegressionSuffStat(s_name, theta, sigma2, second, phi, n, dims=stat_dim)
            if gaussian:
                # y | s ~ N(s, τ² I): the noise variance is known, so no mixing variances.
                z = pm.Normal(name, mu=s, sigma=scale, observed=value, dims=stat_dim)
            else:
                z = pm.Laplace(name, mu=s, b=scale, observed=value, dims=stat_dim)
            noise = None
            # The mixed and cell sweeps hold Laplace noise by its density: mixing variances
            # there would be a step's work every iteration that no step reads.
            if not gaussian and mixed is None and cells is None and not levels:
                noise = LaplaceNoiseVariance(
                    # The released value, not the node z (see NoisySuffStat): no implicit freeze.
                    v_name,
                    released=model.rvs_to_values[z],
                    suffstat=s,
                    scale=scale,
                    dims=stat_dim,
                )
        info = NoisyRegressionInfo(
            name=name,
            suffstat=s_name,
            noise_variance=None if noise is None else v_name,
            theta=theta.name,
            sigma2=sigma2.name,
            n=n,
            d=d,
            epsilon=epsilon,
            sensitivity=sensitivity,
            method=method,
            noise_sd=scale if gaussian else None,
            laplace_scale=None if gaussian else scale,
            x_model=level_model
            if levels
            else "mixed"
            if mixed is not None
            else x_model
            if cells is not None
            else "binary"
            if binary
            else "shape"
            if shape is not None
            else "normal"
            if isinstance(x_prior, NIW)
            else "moments",
            **names,
        )
        if levels:
            info = dataclasses.replace(info, factor=levels)
        own = (s, *(() if noise is None else (noise,)))
        linked = (
            model[v]
            for k, v in names.items()
            if k in ("x_loc", "x_cov", "x_probs", "x_skew", "x_excess", "x_prob") and v
        )
        for rv in (*own, *linked):
            setattr(rv.tag, TAG, info)
        for rv in (theta, sigma2):
            setattr(rv.tag, TAG, (*getattr(rv.tag, TAG, ()), info))
        return z


def _mixed_index(
    binary: Any, x_model: Any, x_moments: Any, method: Any, covariates: Sequence[str]
) -> int | None:
    """The binary covariate's index under the mixed model of x, else ``None`` (checked)."""
    if x_model not in X_MODELS:
        raise ValueError(f"x_model must be one of {X_MODELS} (got {x_model!r})")
    d = len(covariates)
    if binary is None:
        if x_model != "mixed":
            return None
        if d > 1:
            raise TypeError(
                f"x_model='mixed' needs binary=: the index or name of the covariate that is 0 "
                f"or 1 (one of {covariates})"
            )
        binary = 0
    elif x_model not in ("auto", "mixed"):
        raise TypeError(
            f"binary= names a 0/1 covariate for x_model='mixed' (or 'auto'), not x_model="
            f"{x_model!r}"
        )
    if isinstance(binary, str):
        if binary not in covariates:
            raise ValueError(f"binary={binary!r} is not one of the covariates {covariates}")
        binary = covariates.index(binary)
    elif isinstance(binary, bool) or not isinstance(binary, (int, np.integer)):
        raise TypeError(f"binary must be a covariate's index or name (got {binary!r})")
    elif not 0 <= binary < d:
        raise ValueError(f"binary must be a covariate index in [0, {d - 1}] (got {binary})")
    if x_moments is not None:
        raise TypeError("the mixed model of x (binary=) models x itself: give no x_moments=")
    if method == "gibbs-ss":
        raise ValueError(
            "binary= (the mixed model of x) is sampled by its own collapsed moves: give "
            "method='auto' or 'collapsed'"
        )
    if d > MIXED_MAX_D:
        warnings.warn(
            f"the mixed model of x (binary=) mixes no better than the normal model above "
            f"d = {MIXED_MAX_D} covariates (d = {d}; at d = 10 under pm.sample a smallest bulk "
            "ESS of 59 in 2000 draws, R-hat 1.05): read R-hat and ESS, and run longer chains",
            UserWarning,
            stacklevel=3,
        )
    return int(binary)


def _declared_x_model(
    rel: RegressionRelease | None, theta: pt.TensorVariable, covariates: Sequence[str]
) -> tuple[str, int | None]:
    """``(x_model, binary)`` that the release's declarations choose for ``x_model="auto"``.

    Every covariate a dummy column of one declared factor: the cell model ``"factor"`` (up to
    :data:`~pymc_dp.regression.engine.cells.CELLS_MIX_D` covariates); a declared factor beside
    other covariates: the level model ``"levels"`` (up to :data:`MIXED_MAX_D`); two or three
    covariates, all declared binary: ``"binary"``; two declared binary beside others:
    ``"pair"`` (up to :data:`MIXED_MAX_D`); one declared binary: the mixed model with it. Only
    where θ feeds no other node (these models' steps draw θ).
    """
    if rel is None or getattr(theta.tag, TAG, ()):
        return "auto", None
    d = rel.d
    factor, declared = tuple(getattr(rel, "factor", ())), tuple(rel.binary)
    if factor:
        if sorted(factor) == list(range(d)) and d <= CELLS_MIX_D:
            return "factor", None
        if len(factor) < d and d <= MIXED_MAX_D:
            return "levels", None
        names = ", ".join(covariates[j] for j in factor)
        reason = (
            f"at d = {d} > {CELLS_MIX_D} the cell model is not checked and slows as d grows "
            "(x_model='factor' uses it anyway)"
            if len(factor) == d
            else f"at d = {d} > {MIXED_MAX_D} the level model beside the other covariates is "
            "not checked (x_model='levels' uses it anyway)"
        )
        warnings.warn(
            f"the release declares {names} the dummy columns of one factor, but {reason}; "
            "the default models the covariates as normal",
            UserWarning,
            stacklevel=3,
        )
        return "auto", None
    if len(declared) == d and d in (2, 3):
        return "binary", None
    if len(declared) == 2 and d <= MIXED_MAX_D:
        return "pair", None
    if len(declared) > 1:
        names = ", ".join(covariates[j] for j in declared)
        reason = (
            f"at d = {d} > {MIXED_MAX_D} the pair model is not checked (x_model='pair' uses "
            "it anyway)"
            if len(declared) == 2
            else "the mixed model of x takes one and the pair model two"
        )
        warnings.warn(
            f"the release declares {len(declared)} binary covariates ({names}); {reason}, so "
            "the default models them all as normal. Pass binary= to model one as Bernoulli "
            "(x_model='binary' if every covariate is 0/1 and d <= 3, x_model='factor' if they "
            "are the dummy columns of one factor)",
            UserWarning,
            stacklevel=3,
        )
        return "auto", None
    if d > MIXED_MAX_D or not declared:
        return "auto", None
    return "auto", declared[0]


def _alone(theta: pt.TensorVariable, name: str, x_model: str) -> None:
    """Refuse a mixed or cell-model node on a θ that already feeds another node."""
    others = getattr(theta.tag, TAG, ())
    if others:
        raise ValueError(
            f"theta already feeds node {others[0].name!r}; a node with binary covariates "
            f"({name!r}, x_model={x_model!r}) needs theta to itself: give it its own theta"
        )


def _mixed_x_prior(x_prior: Any, rel: RegressionRelease | None, bounds: Any, d: int,
                   binary: int | tuple[int, ...]) -> NIW:  # fmt: skip
    """The NIW prior of the other covariates' group means and covariance.

    ``binary``: the mixed model's binary covariate, or the level model's factor columns.
    """
    taken = 1 if isinstance(binary, int | np.integer) else len(binary)
    if x_prior is not None:
        if d == taken:
            raise TypeError("with d = 1 the binary covariate is the only one: give no x_prior=")
        return _x_model(None, x_prior, rel, d - taken)
    if rel is not None:
        return default_mixed_x_prior(rel.x_bounds, binary)
    if bounds is None:
        raise TypeError(
            "the mixed model of x needs a prior of the other covariates: give x_prior=NIW(...), "
            "or the release's bounds=(x_bounds, y_bounds) for the default prior from the box"
        )
    return default_mixed_x_prior(bounds[0], binary)


def _mixed_variables(
    model: pm.Model, name: str, covariates: Sequence[str], binary: int, x_prior: NIW, n: int
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """π (with its prior's factor), and the other covariates' group means and covariance."""
    prob = pm.Uniform(f"{name}_x_prob", 0.0, 1.0)
    # π is uniform given both groups non-empty: density ∝ 1 − πⁿ − (1 − π)ⁿ.
    nf = float(n)
    log_z = pt.log(-pt.expm1(pt.logaddexp(nf * pt.log(prob), nf * pt.log1p(-prob))))
    pm.Potential(f"{name}_x_prob_prior", log_z - np.log1p(-2.0 / (nf + 1.0)))
    names: dict[str, Any] = {"x_prob": prob.name, "x_prior": x_prior, "binary": binary}
    others = [c for j, c in enumerate(covariates) if j != binary]
    if not others:
        return prob, pt.zeros((2, 0)), pt.zeros((0, 0)), names
    x_dim, group_dim = f"{name}_covariate", f"{name}_group"
    _add_coord(model, x_dim, others)
    _add_coord(model, f"{x_dim}_bis", others)
    _add_coord(model, group_dim, [f"{covariates[binary]}=0", f"{covariates[binary]}=1"])
    x_cov = InverseWishart(f"{name}_x_cov", dof=x_prior.dof, scale=x_prior.scale,
                           dims=(x_dim, f"{x_dim}_bis"))  # fmt: skip
    x_loc = SharedCovNormal(f"{name}_x_loc", mu=np.tile(x_prior.loc, (2, 1)),
                            cov=x_cov / x_prior.kappa, dims=(group_dim, x_dim))  # fmt: skip
    return prob, x_loc, x_cov, names | {"x_loc": x_loc.name, "x_cov": x_cov.name}


def _level_columns(
    factor: Any,
    x_model: Any,
    rel: RegressionRelease | None,
    x_moments: Any,
    method: Any,
    binary: Any,
    covariates: Sequence[str],
) -> tuple[int, ...] | None:
    """The factor's columns under the level model of x, else ``None`` (checked)."""
    if x_model != "levels":
        if factor is not None:
            raise ValueError(
                f"factor= names the dummy columns of a factor for x_model='levels' (or 'auto'), "
                f"not x_model={x_model!r}"
            )
        return None
    if factor is None:
        factor = getattr(rel, "factor", None) or None
        if factor is None:
            raise TypeError(
                "x_model='levels' needs factor=: the indices or names of the dummy columns of "
                "one factor (or a release that declares them, release_regression(..., factor=))"
            )
    d = len(covariates)
    columns = _column_indices(factor, "factor", covariates)
    if not columns or len(set(columns)) != len(columns):
        raise ValueError(f"factor must name distinct covariates, at least one (got {factor})")
    if len(columns) == d:
        raise ValueError(
            "every covariate is a column of the factor: that is the cell model, "
            "x_model='factor'; the level model is for a factor beside other covariates"
        )
    if binary is not None or x_moments is not None or method not in ("auto", "collapsed"):
        raise TypeError(
            "the level model of x (x_model='levels') models x itself and is sampled by its own "
            "collapsed moves: give no binary=, x_moments= or method= other than 'auto'"
        )
    return tuple(sorted(columns))


def _column_indices(given: Any, name: str, covariates: Sequence[str]) -> list[int]:
    """Covariate indices from ``given`` (indices or names), checked; ``name`` is the argument."""
    d = len(covariates)
    columns = []
    for j in given:
        if isinstance(j, str):
            if j not in covariates:
                raise ValueError(f"{name} names {j!r}, not one of the covariates {covariates}")
            j = covariates.index(j)
        elif isinstance(j, bool) or not isinstance(j, int | np.integer) or not 0 <= j < d:
            raise ValueError(f"{name} must hold covariate indices in [0, {d - 1}] or names")
        columns.append(int(j))
    return columns


def _pair_columns(
    binary: Any,
    rel: RegressionRelease | None,
    x_moments: Any,
    method: Any,
    covariates: Sequence[str],
) -> tuple[int, ...]:
    """The two binary covariates of ``x_model="pair"`` (checked), in increasing order."""
    if binary is None:
        binary = tuple(getattr(rel, "binary", ())) or None
    if binary is None or isinstance(binary, str | int | np.integer):
        raise TypeError(
            "x_model='pair' needs binary=: the indices or names of two binary covariates (or a "
            "release that declares two, release_regression(..., binary=[i, j]))"
        )
    d = len(covariates)
    columns = _column_indices(binary, "binary", covariates)
    if len(columns) != 2 or columns[0] == columns[1]:
        raise ValueError(f"x_model='pair' takes two distinct binary covariates (got {binary})")
    if d == 2:
        raise ValueError(
            "both covariates are binary: that is the cell model, x_model='binary'; the pair "
            "model is for two binary covariates beside other covariates"
        )
    if x_moments is not None or method not in ("auto", "collapsed"):
        raise TypeError(
            "the pair model of x (x_model='pair') models x itself and is sampled by its own "
            "collapsed moves: give no x_moments= or method= other than 'auto'"
        )
    return tuple(sorted(columns))


def _level_variables(
    model: pm.Model, name: str, covariates: Sequence[str], columns: tuple[int, ...], x_prior: NIW,
    kind: str = "factor",
) -> tuple[Any, Any, Any, dict[str, Any]]:  # fmt: skip
    """π over the levels (a pair's corners), and the other covariates' means and covariance."""
    level_dim, x_dim = f"{name}_level", f"{name}_covariate"
    if kind == "pair":  # π over the four corners, the means at the first three
        prob_dim = f"{name}_cell"
        labels = _cell_labels([covariates[j] for j in columns], pair_layout(3).corners)
        _add_coord(model, prob_dim, labels)
        _add_coord(model, level_dim, labels[:3])
    else:
        prob_dim = level_dim
        reference = "none of " + ",".join(covariates[j] for j in columns)
        _add_coord(model, level_dim, [reference, *(covariates[j] for j in columns)])
    others = [c for j, c in enumerate(covariates) if j not in columns]
    _add_coord(model, x_dim, others)
    _add_coord(model, f"{x_dim}_bis", others)
    cells, rows = len(model.coords[prob_dim]), len(model.coords[level_dim])
    # π's prior is tilted by P(every level present | π) (for a pair, three corners or more);
    # the statistic's law leaves out the same factor (LevelModelSuffStat), so the model's joint
    # density is exact.
    probs = pm.Dirichlet(f"{name}_x_probs", a=np.ones(cells), dims=prob_dim)
    x_cov = InverseWishart(f"{name}_x_cov", dof=x_prior.dof, scale=x_prior.scale,
                           dims=(x_dim, f"{x_dim}_bis"))  # fmt: skip
    x_loc = SharedCovNormal(f"{name}_x_loc", mu=np.tile(x_prior.loc, (rows, 1)),
                            cov=x_cov / x_prior.kappa, dims=(level_dim, x_dim))  # fmt: skip
    names = {"x_probs": probs.name, "x_loc": x_loc.name, "x_cov": x_cov.name,
             "x_prior": x_prior}  # fmt: skip
    return probs, x_loc, x_cov, names


X_MODELS = ("auto", "normal", "shape", "binary", "factor", "mixed", "levels", "pair")
MIXED_MAX_D = 5
"""Largest d at which the mixed model of x is a default for a declared binary covariate: up to
it, with its moves along the symmetries (from d = 3), it was measured to mix better per second
than the normal model of x (``pm.sample``, n = 1000, ε = 1, 1000 + 1000 iterations: smallest
bulk ESS 663 against 175 at d = 3, 126 against 34 at d = 5) and to be calibrated
(docs/regression.md, "The mixed model's moves along its symmetries"). At d = 10 it was not
(ESS 59 in 219 s against 46 in 154 s, R-hat 1.05 both): above it a declared binary covariate
keeps the normal model, and ``binary=`` warns."""


def _shape_moments(
    x_model: str, method: str, rel: RegressionRelease | None, d: int
) -> tuple | None:
    """(sums, degrees, Laplace scale, shape prior) of the released moments the node observes."""
    usable = (
        method == "collapsed"
        and d == 1
        and rel is not None
        and rel.fourth_moments is not None
        and rel.mechanism != DISCRETE_GAUSSIAN
    )
    if x_model == "shape" and not usable:
        raise ValueError(
            "x_model='shape' observes the release's noisy degree 3-4 sums of x: it needs the "
            "default method (collapsed), d = 1 and a Laplace release made with moments_share= "
            "(use x_model='auto' or 'normal' otherwise)"
        )
    # "auto" keeps the normal model: on the calibration cells run the shape model (with γ's
    # prior near 0) is level with it, not better, and slower (docs/regression.md), so it is
    # opt-in.
    if x_model != "shape" or not usable:
        return None
    fm = rel.fourth_moments
    values, degrees, scale = check_shape_moments(
        fm.value[None], fm.powers, fm.sensitivity / fm.epsilon, 1
    )
    return (tuple(values[0].tolist()), tuple(degrees.tolist()), float(scale[0]), ShapePrior())


def _binary_covariates(
    x_model: Any, x_moments: Any, x_prior: Any, method: Any, d: int
) -> tuple[str | None, bool]:
    """``(cell layout kind, Gibbs-SS binary model)`` of the node, after checking the combination.

    ``x_model="binary"`` or ``"factor"`` give the cell model's kind, except ``"binary"`` with
    ``method="gibbs-ss"``, the CLT model of the cell probabilities (True).
    """
    if x_model not in X_MODELS:
        raise ValueError(f"x_model must be one of {X_MODELS} (got {x_model!r})")
    if x_model not in ("binary", "factor"):
        return None, False
    if x_moments is not None or x_prior is not None:
        raise TypeError(
            f"x_model={x_model!r} models x itself (cell probabilities with a Dirichlet prior): "
            "give neither x_moments= nor x_prior="
        )
    if x_model == "binary":
        if d > 3:
            raise ValueError(
                f"x_model='binary' supports d <= 3 covariates (got d={d}): for more, the "
                "released sums leave more than one count of the cells free. If the covariates "
                "are the dummy columns of one factor, use x_model='factor'"
            )
        if method == "gibbs-ss":
            if d > 2:
                raise ValueError(
                    "x_model='binary' with method='gibbs-ss' takes d <= 2 covariates (the "
                    f"released sums fix the cell counts only there; got d={d}): give "
                    "method='auto' for the exact cell model"
                )
            return None, True
        return {1: "categories", 2: "pair", 3: "cube"}[d], False
    if method == "gibbs-ss":
        raise ValueError(
            "x_model='factor' is sampled by the cell model's own moves: give method='auto' "
            "or 'collapsed'"
        )
    if d > CELLS_MIX_D:
        warnings.warn(
            f"the cell model of x (x_model='factor') is checked up to d = {CELLS_MIX_D} "
            f"covariates (d = {d}) and slows as d grows (at d = 10 a bulk ESS of 123 in 2 x 1000 "
            "draws under pm.sample, R-hat 1.02): read R-hat and ESS, or run longer chains",
            UserWarning,
            stacklevel=3,
        )
    return "categories", False


def _zero_one_box(x_bounds: Any, x_model: str) -> None:
    """Refuse binary covariates whose public box does not hold 0 and 1 (when it is known)."""
    if x_bounds is not None:
        box = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
        check_zero_one_columns(f"x_model={x_model!r}", range(box.shape[0]), box)


def _cell_labels(covariates: Sequence[str], corners: npt.NDArray) -> list[str]:
    """Labels of the cells at ``corners`` ``(C, d)``, e.g. ``x1=0,x2=1``."""
    return [
        ",".join(f"{c}={int(v)}" for c, v in zip(covariates, cell, strict=True)) for cell in corners
    ]


def regression_attrs(model: pm.Model | None = None) -> dict[str, str]:
    """Trace attributes naming each regression node's sampler and model of x.

    ``idata.attrs.update(regression_attrs(model))`` records, per node ``{name}``,
    ``pymc_dp_x_model_{name}`` (``"normal"``, ``"shape"`` (released moments used),
    ``"binary"``, ``"factor"``, ``"mixed"``, ``"levels"``, ``"pair"`` or ``"moments"`` for fixed
    moments)
    and ``pymc_dp_method_{name}`` (``"collapsed"``: an exact law of s, or ``"gibbs-ss"``);
    ``pymc-dp fit`` does so.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as model:
    ...     sigma2 = pm.InverseGamma("sigma2", 2.0, 0.1)
    ...     theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * np.eye(2))
    ...     z = NoisyRegressionStat("z", theta=theta, sigma2=sigma2, n=50, epsilon=1.0,
    ...                             sensitivity=16.0, observed=np.ones(5), x_model="binary")
    >>> regression_attrs(model)
    {'pymc_dp_x_model_z': 'binary', 'pymc_dp_method_z': 'collapsed'}
    """
    model = pm.modelcontext(model)
    attrs = {}
    for rv in model.free_RVs:
        info = getattr(rv.tag, TAG, None)
        if isinstance(info, NoisyRegressionInfo) and info.suffstat == rv.name:
            attrs[f"pymc_dp_x_model_{info.name}"] = info.x_model
            attrs[f"pymc_dp_method_{info.name}"] = info.method
    return attrs


def _add_coord(model: pm.Model, dim: str, labels: Sequence[str]) -> None:
    """Add a coordinate, or check that an existing one has the same labels."""
    existing = model.coords.get(dim)
    if existing is None:
        model.add_coord(dim, list(labels))
    elif list(existing) != list(labels):
        raise ValueError(
            f"the model already has a coordinate {dim!r} with other labels {list(existing)}; "
            "choose another node name"
        )


def _covariate_names(covariates: Sequence[str] | None, d: int) -> list[str]:
    if covariates is None:
        return [f"x{j + 1}" for j in range(d)]
    if isinstance(covariates, str) or not all(isinstance(c, str) for c in covariates):
        raise TypeError(f"covariates must be a sequence of strings (got {covariates!r})")
    names = list(covariates)
    if len(names) != d or len(set(names)) != d or "y" in names or "intercept" in names:
        raise ValueError(
            f"covariates must be {d} distinct names other than 'y' and 'intercept' (got {names})"
        )
    return names


METHODS = ("auto", "collapsed", "gibbs-ss")


def _method(method: Any, x_moments: Any) -> str:
    """The sampler a node gets: ``"collapsed"`` or ``"gibbs-ss"``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} (got {method!r})")
    if method == "collapsed" and x_moments is not None:
        raise TypeError(
            "method='collapsed' models x as normal, so it takes x_prior=, not fixed x_moments= "
            "(those need method='gibbs-ss')"
        )
    if method == "auto":
        return "gibbs-ss" if x_moments is not None else "collapsed"
    return method


def _default_x_prior(x_prior: Any, rel: RegressionRelease | None, bounds: Any, d: int) -> NIW:
    """The given NIW prior, checked for d, or the default one from the public box."""
    if x_prior is not None:
        return _x_model(None, x_prior, rel, d)
    if rel is not None:
        return default_x_prior(rel.x_bounds)
    if bounds is None:
        raise TypeError(
            "the covariates' normal model needs a prior: give x_prior=NIW(...), or the release's "
            "bounds=(x_bounds, y_bounds) for the default prior from the box"
        )
    return default_x_prior(bounds[0])


def _x_model(x_moments: Any, x_prior: Any, rel: RegressionRelease | None, d: int) -> Any:
    """The fixed XMoments (Gibbs-SS) or the NIW prior (Gibbs-SS-Update), checked for d."""
    p = d + 1
    if x_moments is not None and x_prior is not None:
        raise TypeError("give x_moments (Gibbs-SS) or x_prior (Gibbs-SS-Update), not both")
    if x_prior is not None:
        niw = check_niw(x_prior)
        if niw.batch_shape != () or niw.loc.shape != (d,):
            raise ValueError(
                f"x_prior must be an unbatched NIW for d={d} covariates: loc of shape ({d},) "
                f"and scale ({d}, {d}) (got loc {niw.loc.shape}, scale {niw.scale.shape})"
            )
        return niw
    if x_moments is None:
        if rel is None or rel.fourth_moments is None:
            raise TypeError(
                "the moments of x are needed: give x_moments=XMoments(...), x_prior=NIW(...) "
                "(Gibbs-SS-Update), or a release made with moments_share= (Gibbs-SS-Noisy)"
            )
        return x_moments_from_release(rel)
    mom = check_x_moments(x_moments, p)
    if mom.second.shape != (p, p):
        raise ValueError(
            f"x_moments must be unbatched for one node: second ({p}, {p}) (got {mom.second.shape})"
        )
    return mom


def _release_settings(
    release: Any, *, n: Any, epsilon: Any, sensitivity: Any, observed: Any, bounds: Any
) -> tuple[int, float, float, npt.NDArray[np.float64], RegressionRelease | None]:
    """(n, ε, Δ, z, release) from a RegressionRelease or from explicit arguments."""
    explicit = {"n": n, "epsilon": epsilon, "sensitivity": sensitivity, "observed": observed}
    if release is not None:
        if not isinstance(release, RegressionRelease):
            raise TypeError(
                "release must be a pymc_dp.regression.RegressionRelease (got "
                f"{type(release).__name__}); a pymc_dp.Release goes to pmdp.NoisySuffStat"
            )
        given = [k for k, v in {**explicit, "bounds": bounds}.items() if v is not None]
        if given:
            raise TypeError(f"pass either release= or {given}, not both")
        return release.n, release.epsilon, release.sensitivity, release.value, release
    missing = [k for k, v in explicit.items() if v is None]
    if missing:
        raise TypeError(
            "NoisyRegressionStat needs release= or all of n, epsilon, sensitivity, observed; "
            f"missing {missing}"
        )
    value = check_finite_array(observed, "observed", ndim=1).astype(np.float64)
    try:
        d = d_from_released(value.shape[0])
    except ValueError as err:
        raise ValueError(f"observed: {err}") from None
    n = check_int(n, "n", minimum=d + 2)
    epsilon = check_positive(epsilon, "epsilon")
    sensitivity = check_positive(sensitivity, "sensitivity")
    if bounds is not None:
        try:
            x_bounds, y_bounds = bounds
        except (TypeError, ValueError):
            raise TypeError(
                f"bounds must be a pair (x_bounds, y_bounds) (got {bounds!r})"
            ) from None
        # The release class checks the bounds against d and the sensitivity against them.
        RegressionRelease(
            value=value,
            n=n,
            epsilon=epsilon,
            sensitivity=sensitivity,
            x_bounds=x_bounds,
            y_bounds=y_bounds,
        )
    return n, epsilon, sensitivity, value, None
