"""Which likelihood of a release to use: the exact sum over s, or the CLT normal for s.

``likelihood="exact"`` sums p(s | θ) over every s (:mod:`pymc_dp.kernels.exact_counts`), with
the noise law of the mechanism that made the release; ``"clt"`` approximates s | θ by
N(nμ(θ), nΣ(θ)) (the paper's method); ``"auto"`` (the default) takes the exact likelihood only
where it changes the answer: where the CLT is outside the region where it was measured to be
accurate (:func:`clt_trust`, one rule for counts and window sums alike) and the exact sum costs
at most :data:`EXACT_MAX_TERMS` terms, with a warning where the CLT is untrusted and the exact
sum too dear. Where the CLT is trusted it is also the cheaper: one closed-form term per
release, against a sum over s. K released counts (Categorical) are the exception: their CLT
keeps s latent, so there the exact sum is taken wherever it is affordable (one release: its
exact sum is drawn by ``IndependenceStep``). Grouped Categorical releases decide group by group
with the KS distance computed (:func:`pymc_dp.likelihoods.count_trust.counts_clt_trust`).

The rule comes from ``benchmarks/clt_accuracy.py``: the KS distance between the CLT law of a
released Binomial count and its exact law is below 0.01 when the smallest expected count m and
the noise-to-spread ratio r = b / sd(s) satisfy m · (1 + r)² ≥ 50 and r ≥ 0.1 (or m ≥ 1000);
elsewhere it reaches 0.37 (m = 1, no noise). Below m = 10 the paper's Gibbs sampler is
miscalibrated whatever the noise (:data:`CLT_MIN_COUNT`). Exact likelihoods exist today for
Bernoulli, Binomial and Categorical releases (counts, with noise on the integers or the reals)
and for windowed Poisson and Geometric releases (the n-fold convolution of one record's windowed
statistic, :mod:`pymc_dp.kernels.exact_windows`), and for windowed releases of continuous
records (Exponential, Gamma, Normal and LogNormal): the window sum's law on a fine lattice, with a
stated error bound, for a one-number statistic (:mod:`pymc_dp.kernels.lattice_windows`), and the
records as latent variables for (Σz, Σz²) (:mod:`pymc_dp.engine.records`). Window sums have
their own measured rule (:func:`pymc_dp.likelihoods.window_trust.window_clt_trust`): for continuous
records ``"auto"`` takes the exact likelihood where the CLT is untrusted and the exact one
affordable.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.families import (
    Binomial,
    Categorical,
    ExponentialFamily,
    Geometric,
    Poisson,
    TruncatedFamily,
)
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.kernels.count_window import kept_counts
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.multinomial_window import WINDOW_MAX_TERMS
from pymc_dp.likelihoods.window_trust import continuous_exact_cost, window_clt_trust

__all__ = [
    "CLT_MIN_COUNT",
    "CLT_MIN_SMOOTHING",
    "CLT_TRUST_LEVEL",
    "CONVOLUTION_PRODUCT_COST",
    "ENGINE_EXACT_BUDGET",
    "EXACT_FAMILIES",
    "EXACT_MAX_TERMS",
    "LIKELIHOODS",
    "TABLE_TERM_COST",
    "TRUSTED_TABLE_MAX_TERMS",
    "CltWarning",
    "LikelihoodChoice",
    "choose_likelihood",
    "clt_trust",
    "exact_cost",
    "exact_supported",
    "noise_law",
    "windowed_counts",
]

LIKELIHOODS = ("auto", "clt", "exact")
"""Values of ``NoisySuffStat(likelihood=...)``, ``sample_gibbs(likelihood=...)`` and
``pymc-dp fit --likelihood``."""

EXACT_MAX_TERMS = 100_000
"""Largest cost per evaluation of the exact likelihood that ``"auto"`` takes where the CLT is
untrusted, in log-space
terms (:func:`exact_cost`): N + 1 for a Binomial count, or the 2⌊40 b⌋ + 2 within the noise's
reach of y where fewer, n·b + 1 for a window sum of counts over
[a, b], and for K categories (K - 2)(n + 1)² products of a linear convolution at
:data:`CONVOLUTION_PRODUCT_COST` each, plus n + 1 (n ≤ 1047 for K = 3), or, where fewer, the
count vectors within the noise's reach of y at :data:`TABLE_TERM_COST` each (about (40 b)^(K - 1)
/ (K - 2) of them: any n for K = 3 at b ≤ 15 and K = 4 at b ≤ 2.2, as at ε ≥ 0.14 and 0.9 with
Δ = 2)."""

CONVOLUTION_PRODUCT_COST = 0.09
"""Cost of one product of the Multinomial recursion's linear convolution, in log-space terms:
log density and gradient took 2.8 ms for K = 3, n = 1000 (10⁶ products) against 3.1 ms for a
Bernoulli sum of 10⁵ terms (``python benchmarks/exact_cost.py``, in one process). A batch of
releases (the engine) runs the recursion in log space, at one term per product."""

TABLE_TERM_COST = 0.25
"""Cost of one count vector of the noise's window (those within 40 scales of y,
:mod:`pymc_dp.likelihoods.multinomial_window`), in log-space terms: log density and gradient of
one release took 0.09-0.26 Bernoulli terms per vector for tables of 2·10⁴-2.5·10⁵ vectors (K = 3
and 4, n = 5000-10⁵, ε = 0.5-2, at θ uniform and at the shares that made the data), and up to
0.48 on a table of 2900, where the call's fixed cost dominates."""

TRUSTED_TABLE_MAX_TERMS = 25_000
"""Largest cost of the sum over the count vectors within the noise's reach of y that ``"auto"``
takes for one Categorical release whose CLT is trusted, where the exact sum buys speed only.
Measured ESS/s of the whole ``pm.sample`` call, that sum with ``IndependenceStep`` against the
CLT with its counts latent (``python benchmarks/collapsed_ess.py``, n = 10⁶, one process each):
2.1× at 6.5·10⁴ vectors (16 000 terms; K = 3, ε = 0.25), 0.81× at 1.8·10⁵ (K = 3, ε = 0.15) and
0.67-0.84× at 2.3·10⁵ (K = 4, ε = 1); the sum's evaluations are the cost (one kernel pass over
every vector, about 16 ns each at ``IndependenceStep``'s proposals). The CLT untrusted,
``"auto"`` takes the sum up to :data:`EXACT_MAX_TERMS`."""

CLT_TRUST_LEVEL = 50.0
"""The CLT is trusted where m · (1 + r)² ≥ this (m: smallest expected count, r = b / sd(s))."""

CLT_MIN_SMOOTHING = 0.1
"""…and r ≥ this, unless m ≥ 1000: with less noise, y keeps the lattice of s."""

CLT_MIN_COUNT = 10.0
"""…and, for the paper's Gibbs sampler (Algorithm 1), m ≥ this whatever the noise: it pairs the
CLT s | θ with the exact conjugate θ | s, and at a few expected counts per category the two
disagree enough to miscalibrate it even when the noise hides s (Multinomial, n = 10: KS
0.044–0.049 over 1000 trials at ε = 0.01 and 0.1, 90% coverage 0.874–0.879). Samplers that use
the CLT likelihood alone (collapsed, partially collapsed) are consistent and need no such bound."""

ENGINE_EXACT_BUDGET = 200_000
"""The batched engine takes the exact sum only if the batch costs at most this many terms per
evaluation (releases × terms per release): n ≤ 30 for 200 releases of three categories."""


class CltWarning(UserWarning):
    """The CLT normal for s is used where it is not accurate (``likelihood="auto"``)."""


class LikelihoodChoice(NamedTuple):
    """The likelihood a node uses, and why."""

    likelihood: str
    """``"exact"`` or ``"clt"``."""
    reason: str


EXACT_FAMILIES = (
    "Bernoulli, Binomial, Categorical, and windowed Poisson, Geometric, Exponential, Gamma, "
    "Normal and LogNormal"
)
"""The releases with an exact likelihood, for messages."""


def exact_supported(family: ExponentialFamily) -> bool:
    """Whether ``family`` has an exact likelihood (:data:`EXACT_FAMILIES`)."""
    return isinstance(family, (Binomial, Categorical, Poisson, Geometric)) or continuous_window(
        family
    )


def windowed_counts(family: ExponentialFamily) -> bool:
    """Whether ``family`` releases a window sum of counts (Poisson, Geometric)."""
    return isinstance(family, (Poisson, Geometric))


def exact_cost(
    family: ExponentialFamily,
    n: int,
    bounds: tuple[float, float] | None = None,
    *,
    batched: bool = False,
    scale: float | None = None,
    released: npt.ArrayLike | None = None,
    mechanism: str | None = None,
) -> int:
    """Cost of one evaluation of the exact likelihood of ``n`` records, in log-space terms.

    A Binomial count of N = n · trials sums N + 1 terms, or, given the noise ``scale`` b, only
    the counts within the noise's reach of y: at most 2⌊40 b⌋ + 2
    (:func:`pymc_dp.likelihoods.exact.binomial_exact_logp`; 2⌊σ√80⌋ + 2 for the discrete
    Gaussian of σ = b, see ``mechanism``). A window sum of counts needs the release's
    ``bounds``: its sum runs over 0, …, n·b.
    Categorical counts of one release are convolved linearly (each product costs
    :data:`CONVOLUTION_PRODUCT_COST`), or, given the noise ``scale`` and the ``released`` y,
    summed over the count vectors within the noise's reach of y
    (:func:`~pymc_dp.kernels.count_window.kept_counts`) where that is cheaper and they fit the
    node's table (:data:`TABLE_TERM_COST` each); ``batched=True`` gives the cost per release of
    a batch, whose recursion runs in log space over every s. Continuous records need ``bounds``
    and the noise ``scale`` too: n × lattice points, or n records for (Σz, Σz²)
    (:func:`pymc_dp.likelihoods.window_trust.continuous_exact_cost`, whose budgets differ).
    The noise's reach is the Laplace law's of scale b unless ``mechanism`` is
    ``"discrete-gaussian"`` (σ = b), whose reach is narrower.
    """
    if continuous_window(family):
        if bounds is None or scale is None:
            raise ValueError(
                "the cost of the exact likelihood of continuous records depends on the window "
                "and the noise: pass bounds and scale"
            )
        return continuous_exact_cost(family, n, bounds, scale)[0]
    if isinstance(family, Categorical):
        products = (family.categories - 2) * (n + 1) ** 2
        cost = int(products * (1.0 if batched else CONVOLUTION_PRODUCT_COST)) + n + 1
        if scale is None or released is None or batched:
            return cost
        # The node sums over the s within the noise's reach of y where they fit its table
        # (multinomial_window), whatever n.
        y = np.asarray(released, dtype=np.float64)
        kept = kept_counts(y, n, _reach_law(mechanism, scale), WINDOW_MAX_TERMS)
        if kept is None:
            return cost
        return min(cost, math.ceil(len(kept) * TABLE_TERM_COST))
    if windowed_counts(family):
        if bounds is None:
            raise ValueError("the cost of a windowed release depends on its bounds: pass bounds")
        return n * int(family.latent_window(bounds)[1]) + 1
    total = n * family.trials + 1
    if scale is None or batched:
        return total
    return min(total, 2 * math.floor(_reach_law(mechanism, scale).half_width) + 2)


def _reach_law(mechanism: str | None, scale: float) -> NoiseLaw:
    """The noise law whose reach :func:`exact_cost` counts (the discrete Laplace's is Laplace's)."""
    kind = "discrete-gaussian" if mechanism == "discrete-gaussian" else "laplace"
    return NoiseLaw(kind, float(scale))


def noise_law(
    mechanism: str | None,
    scale: float,
    quantum: float | None = None,
    family: ExponentialFamily | None = None,
) -> NoiseLaw:
    """The law of y - s of a release, from its mechanism's name.

    Integer mechanisms (``"discrete-laplace"``, ``"discrete-gaussian"``) add integer noise to
    counts (quantum 1); the float mechanism (``"laplace-float"``, or ``"laplace"`` for values
    released elsewhere) adds Laplace noise with a density. Continuous records (``family`` a
    continuous windowed family) are modelled with the Laplace density of the same scale: a
    discrete Laplace release on the statistic quantum q (at most β/1024) differs from it by at
    most q/(2β) + O((q/β)²) ≤ 5·10⁻⁴ in log-likelihood; Gaussian noise is not modelled there.
    """
    if family is not None and continuous_window(family):
        if mechanism == "discrete-gaussian":
            raise ValueError(
                "the exact likelihood of continuous records models Laplace noise only; this "
                "release used the Gaussian mechanism: release with mechanism='discrete-laplace'"
            )
        return NoiseLaw("laplace", float(scale))
    if mechanism in ("discrete-laplace", "discrete-gaussian"):
        if quantum not in (None, 1, 1.0):
            raise ValueError(
                f"an exact likelihood of counts needs noise on the integers (quantum 1); this "
                f"release has quantum {quantum}: use likelihood='clt'"
            )
        return NoiseLaw(mechanism, float(scale))
    return NoiseLaw("laplace", float(scale))


def _smallest_count(
    family: ExponentialFamily, n: int, released: npt.ArrayLike
) -> tuple[float, float]:
    """(m, sd): a public estimate of the smallest expected count, from y, and sd(s) there."""
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    if isinstance(family, Categorical):
        total = float(n)
        share = np.clip(y, 0.5, None) / np.sum(np.clip(y, 0.5, None))
        theta = float(np.min(share))
    else:
        total = float(n * family.trials)
        theta = float(np.clip(y[0], 0.5, max(total - 0.5, 0.5)) / total)
    theta = min(theta, 1.0 - theta)
    return total * theta, math.sqrt(total * theta * (1.0 - theta))


def clt_trust(
    family: ExponentialFamily,
    n: int,
    released: npt.ArrayLike,
    scale: float,
    *,
    conjugate_gibbs: bool = False,
    bounds: tuple[float, float] | None = None,
) -> tuple[bool, str]:
    """Whether the CLT for s is accurate for this release (KS ≤ 0.01 by the measured rule).

    Parameters
    ----------
    family
        A family of counts, or a windowed family (with ``bounds``: the rule of
        :func:`pymc_dp.likelihoods.window_trust.window_clt_trust`); any other family is trusted.
    n
        Number of records.
    released
        The released value y (public): it gives the smallest expected count.
    scale
        Noise scale b.
    conjugate_gibbs
        Whether the CLT feeds the paper's Gibbs sampler (conjugate θ | s), which also needs
        m ≥ :data:`CLT_MIN_COUNT`.
    bounds
        The window of a windowed release.

    Returns
    -------
    (bool, str)
        Whether the CLT is trusted, and the numbers behind the answer.

    Examples
    --------
    >>> from pymc_dp.families import Binomial
    >>> clt_trust(Binomial(trials=1), 10, 3.0, 1.0)[0]
    False
    >>> clt_trust(Binomial(trials=1), 10_000, 3000.0, 20.0)[0]
    True
    """
    if isinstance(family, TruncatedFamily):
        if bounds is None:
            raise ValueError(
                "the CLT rule of a windowed release depends on its window: pass bounds"
            )
        return window_clt_trust(family, n, released, scale, bounds)
    if not exact_supported(family):
        return True, "no measured rule for this family"
    m, sd = _smallest_count(family, n, released)
    r = scale / max(sd, 1e-12)
    smooth = m * (1.0 + r) ** 2 >= CLT_TRUST_LEVEL and r >= CLT_MIN_SMOOTHING
    floor = CLT_MIN_COUNT if conjugate_gibbs else 0.0
    trusted = m >= floor and (smooth or m >= 1000)
    reason = (
        f"smallest expected count m ≈ {m:.3g} and noise-to-spread r = b/sd(s) ≈ {r:.3g} "
        f"(the CLT is accurate where m·(1 + r)² ≥ {CLT_TRUST_LEVEL:g} with r ≥ "
        f"{CLT_MIN_SMOOTHING:g}, or m ≥ 1000"
        + (f"; with Algorithm 1 also m ≥ {CLT_MIN_COUNT:g})" if conjugate_gibbs else ")")
    )
    return trusted, reason


def choose_likelihood(
    family: ExponentialFamily,
    n: int,
    released: npt.ArrayLike,
    scale: float,
    likelihood: str = "auto",
    *,
    bounds: tuple[float, float] | None = None,
    warn: bool = True,
    mechanism: str | None = None,
) -> LikelihoodChoice:
    """Resolve ``likelihood`` (``"auto"``, ``"clt"``, ``"exact"``) for one release.

    Parameters
    ----------
    family, n, released, scale, bounds
        The release: family, records, value y, noise scale b and window (windowed families).
    likelihood
        What the user asked for.
    warn
        Warn (:class:`CltWarning`) when ``"auto"`` falls back to a CLT outside its safe region.
    mechanism
        The release's mechanism (``"discrete-gaussian"`` narrows the noise's reach that the
        exact sum runs over); None for Laplace noise.

    Returns
    -------
    LikelihoodChoice

    Raises
    ------
    ValueError
        If ``likelihood`` is unknown, or ``"exact"`` is asked of a family without one.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS} (got {likelihood!r})")
    if likelihood == "clt":
        return LikelihoodChoice("clt", "asked for")
    if likelihood == "exact":
        if not exact_supported(family):
            raise ValueError(
                f"likelihood='exact' is available for {EXACT_FAMILIES} releases, not "
                f"{family!r}; use likelihood='clt'"
            )
        return LikelihoodChoice("exact", "asked for")
    if continuous_window(family):
        return _choose_continuous(family, n, released, scale, bounds, warn)
    trusted, reason = clt_trust(family, n, released, scale, bounds=bounds)
    cost = (
        exact_cost(family, n, bounds, scale=scale, released=released, mechanism=mechanism)
        if exact_supported(family)
        else None
    )
    if (
        trusted
        and _vector_statistic(family)
        and cost is not None
        and _cheaper_than_clt(family, n, cost)
    ):
        # K counts: the CLT keeps s as a latent vector (no closed form to collapse it), so
        # there the exact sum, drawn by IndependenceStep, is the cheaper as well as exact.
        return LikelihoodChoice("exact", f"affordable ({cost} terms per evaluation)")
    if trusted:
        return LikelihoodChoice("clt", f"CLT trusted: {reason}")
    if cost is not None and cost <= EXACT_MAX_TERMS:
        return LikelihoodChoice(
            "exact", f"CLT untrusted ({reason}); exact affordable ({cost} terms per evaluation)"
        )
    if warn:
        dear = (
            f"the exact likelihood would sum {cost} terms per evaluation (more than "
            f"{EXACT_MAX_TERMS}); pass likelihood='exact' to use it anyway"
            if cost is not None
            else f"{family!r} has no exact likelihood"
        )
        warnings.warn(
            f"the CLT for s may be inaccurate for this release: {reason}; {dear}",
            CltWarning,
            stacklevel=3,
        )
    return LikelihoodChoice("clt", f"CLT outside its safe region: {reason}")


def _cheaper_than_clt(family: ExponentialFamily, n: int, cost: int) -> bool:
    """Whether the exact sum of K trusted counts is cheaper (:data:`TRUSTED_TABLE_MAX_TERMS`)."""
    if cost < exact_cost(family, n):  # the sum over the count vectors within the noise's reach
        return cost <= TRUSTED_TABLE_MAX_TERMS
    return cost <= EXACT_MAX_TERMS


def _vector_statistic(family: ExponentialFamily) -> bool:
    """Whether s is a vector of counts (no collapsed CLT node: s stays latent under the CLT)."""
    return (
        family.stat_shape != ()
        and getattr(family, "stat_size", 0) != 1
        and not (continuous_window(family))
    )


def _choose_continuous(
    family: TruncatedFamily,
    n: int,
    released: npt.ArrayLike,
    scale: float,
    bounds: tuple[float, float] | None,
    warn: bool,
) -> LikelihoodChoice:
    """``"auto"`` for continuous records: exact where the CLT is untrusted and it is affordable.

    The CLT path (collapsed, or partially collapsed for (Σz, Σz²)) is much faster where it is
    accurate, so it stays the default there.
    """
    if bounds is None:
        raise ValueError("a windowed release needs its bounds")
    trusted, reason = window_clt_trust(family, n, released, scale, bounds)
    if trusted:
        return LikelihoodChoice("clt", f"CLT trusted: {reason}")
    cost, budget = continuous_exact_cost(family, n, bounds, scale)
    if cost <= budget:
        return LikelihoodChoice("exact", f"CLT untrusted ({reason}); exact affordable")
    if warn:
        records = family.stat_size == 2
        unit = "records" if records else "lattice terms per evaluation"
        # The record-level sampler of (Σz, Σz²) draws (μ, σ²) from their conjugate prior.
        prior = " with (μ, σ²) under the Normal–Inverse-Gamma prior" if records else ""
        warnings.warn(
            f"the CLT for the window sum may be inaccurate for this release: {reason}; the "
            f"exact likelihood would need {cost} {unit} (more than {budget}); pass "
            f"likelihood='exact'{prior} to use it anyway",
            CltWarning,
            stacklevel=4,
        )
    return LikelihoodChoice("clt", f"CLT outside its safe region: {reason}")
