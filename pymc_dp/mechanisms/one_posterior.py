"""One-posterior sampling (OPS) for Binomial records with a Beta prior: a baseline to compare with.

OPS (Wang, Fienberg & Smola 2015; Foulds, Geumlek, Welling & Chaudhuri 2016) releases draws from
a *tempered* posterior, the likelihood raised to a power ``T < 1``, on a parameter space truncated
so that the log-likelihood is bounded. It is an instance of the exponential mechanism with the
log-likelihood as utility. Bernstein & Sheldon (2018), §4 "Methods", use it as their second
baseline for the Binomial model: 100 samples, each with ``ε / 100``, support of ``p`` truncated to
``[a0, 1 - a0]`` with ``a0 = 0.1``. The released samples do not come from the posterior: for the
small ``T`` that a useful ε forces they come from something close to the truncated prior, which is
why OPS is over-dispersed (and, in their Figure 1, miscalibrated). It is here for comparison,
not as a recommended way to do inference.

With ``s = Σ x_i`` and ``N = n · trials``, one OPS sample is a draw from

    Beta(α + T s, β + T (N - s)) restricted to [lo, hi],

drawn by inverting its CDF (:mod:`pymc_dp.kernels.truncated_beta`). Inversion is exact to
rounding in every regime, including the one large ε and a statistic outside the support
produce, where the support holds 1e-50 or 1e-500 of the tempered posterior's mass: SciPy's
Beta quantile functions are used from whichever tail keeps precision and each answer is checked
against the forward CDF; where that cannot hold, the CDF is integrated by quadrature in
``logit p`` or, deep in a tail, taken in log space from the incomplete beta continued
fraction. The output is always in the support and never NaN, and every loop has a fixed bound.

As with :func:`~pymc_dp.mechanisms.laplace.laplace_mechanism`, the draws are made with
floating-point samplers; the guarantee stated is that of the ideal real-valued mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_finite_array, check_int, check_positive, check_rng
from pymc_dp.families import Bernoulli, Binomial
from pymc_dp.kernels.truncated_beta import (
    MAX_SHAPE,
    check_support,
    logit_range,
    truncated_beta_quantile,
)

__all__ = [
    "DEFAULT_SUPPORT",
    "one_posterior_sample",
    "one_posterior_sample_from_statistic",
    "ops_temperature",
]

DEFAULT_SUPPORT = (0.1, 0.9)
"""The support ``[a0, 1 - a0]``, ``a0 = 0.1``, of Bernstein & Sheldon (2018), §4."""


def ops_temperature(
    epsilon_per_sample: float,
    *,
    trials: int,
    support: tuple[float, float] = DEFAULT_SUPPORT,
) -> float:
    """Temperature ``T`` at which one OPS sample is ``epsilon_per_sample``-DP.

    ``T = ε_s / (trials · (logit(hi) - logit(lo)))``; see
    :func:`one_posterior_sample_from_statistic` for the proof.

    Parameters
    ----------
    epsilon_per_sample
        Privacy parameter ``ε_s > 0`` of a single sample.
    trials
        Number of trials per Binomial record (1 for Bernoulli records).
    support
        The truncated support ``(lo, hi)`` of ``p``, ``0 < lo < hi < 1``.

    Returns
    -------
    float
        The temperature ``T > 0``.

    Examples
    --------
    >>> round(ops_temperature(1.0, trials=1), 6)  # 1 / (2 log 9)
    0.22756
    """
    epsilon_per_sample = check_positive(epsilon_per_sample, "epsilon_per_sample")
    trials = check_int(trials, "trials", minimum=1)
    lo, hi = check_support(support)
    return epsilon_per_sample / (trials * logit_range(lo, hi))


def one_posterior_sample(
    x: npt.ArrayLike,
    *,
    epsilon: float,
    prior: Sequence[float],
    trials: int = 1,
    samples: int = 100,
    support: tuple[float, float] = DEFAULT_SUPPORT,
    rng: int | np.random.Generator | None,
) -> npt.NDArray[np.float64]:
    """Release ``samples`` OPS draws of ``p`` from Binomial records ``x``; ε-DP in total.

    Parameters
    ----------
    x
        One-dimensional, non-empty raw records, whole numbers in ``[0, trials]`` (0/1 for
        Bernoulli records with ``trials=1``). The number of records ``n`` is public.
    epsilon
        Total privacy parameter ε > 0, split equally over the samples.
    prior
        ``(α, β)`` of the Beta prior on ``p``, two finite numbers > 0 (public).
    trials
        Number of trials per record (public), an integer >= 1.
    samples
        Number of samples released, an integer >= 1.
    support
        The truncated support ``(lo, hi)`` of ``p``, ``0 < lo < hi < 1`` (public).
    rng
        Source of randomness: an int seed, a :class:`numpy.random.Generator` or ``None`` (fresh
        operating-system entropy). It is left untouched when an argument is rejected.

    Returns
    -------
    numpy.ndarray
        Shape ``(samples,)``, every value in ``[lo, hi]``.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If an argument breaks its rule above, or ``epsilon`` is so large that the tempered
        posterior's shape parameters leave floating-point range.

    Notes
    -----
    Equivalent to :func:`one_posterior_sample_from_statistic` with ``statistic = Σ x_i`` and
    ``n = len(x)``; the Notes there give the privacy proof. Each sample is
    ``(ε / samples)``-DP and the samples are independent given the data, so by basic
    composition the release is ε-DP under replace-one neighbours.

    References
    ----------
    Wang, Fienberg & Smola (2015), "Privacy for free: posterior sampling and stochastic gradient
    Monte Carlo", ICML. Foulds, Geumlek, Welling & Chaudhuri (2016), "On the theory and practice
    of privacy-preserving Bayesian data analysis", UAI. Bernstein & Sheldon (2018), §4
    "Methods" (the OPS baseline).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).binomial(1, 0.3, size=1000)
    >>> draws = one_posterior_sample(x, epsilon=1.0, prior=(1.0, 1.0), rng=1)
    >>> draws.shape, bool(np.all((draws >= 0.1) & (draws <= 0.9)))
    ((100,), True)
    """
    trials = check_int(trials, "trials", minimum=1)
    records = (Bernoulli() if trials == 1 else Binomial(trials=trials)).validate_data(x)
    return one_posterior_sample_from_statistic(
        rng,
        statistic=np.sum(records),
        n=records.size,
        trials=trials,
        epsilon=epsilon,
        prior=prior,
        samples=samples,
        support=support,
    )[0]


def one_posterior_sample_from_statistic(
    rng: int | np.random.Generator | None,
    *,
    statistic: npt.ArrayLike,
    n: int,
    trials: int,
    epsilon: float,
    prior: Sequence[float],
    samples: int = 100,
    support: tuple[float, float] = DEFAULT_SUPPORT,
) -> npt.NDArray[np.float64]:
    """OPS draws for a batch of data sets, each given by its exact statistic ``s = Σ x_i``.

    The batched form for calibration studies: one call serves many trials at once.

    Parameters
    ----------
    rng
        Source of randomness: an int seed, a :class:`numpy.random.Generator` or ``None``. It is
        left untouched when an argument is rejected.
    statistic
        Exact sums ``s`` of the data sets, any shape ``batch``, whole numbers in
        ``[0, n · trials]``. A 0-dimensional statistic is treated as a batch of one. The
        guarantee below holds when each ``s`` is the sum of ``n`` records in ``[0, trials]``.
    n
        Number of records per data set (public), an integer >= 1.
    trials
        Number of trials per record (public), an integer >= 1.
    epsilon
        Total privacy parameter ε > 0 per data set, split equally over the samples.
    prior
        ``(α, β)`` of the Beta prior on ``p``, two finite numbers > 0.
    samples
        Number of samples per data set, an integer >= 1.
    support
        The truncated support ``(lo, hi)`` of ``p``, ``0 < lo < hi < 1``.

    Returns
    -------
    numpy.ndarray
        Shape ``batch + (samples,)`` (``(1, samples)`` for a 0-d statistic), values in
        ``[lo, hi]``.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If an argument breaks its rule above, or ``epsilon`` is so large that the tempered
        posterior's shape parameters leave floating-point range.

    Notes
    -----
    **Mechanism.** With ``ε_s = ε / samples``, ``T = ε_s / (trials · R)``,
    ``R = logit(hi) - logit(lo)`` and ``N = n · trials``, every sample is an independent draw
    from ``π_x(p) ∝ Beta(p; α, β) · Π_i Binomial(x_i | trials, p)^T`` on ``[lo, hi]``, which is
    ``Beta(α + T s, β + T (N - s))`` truncated to ``[lo, hi]``.

    **Privacy of one sample** (replace-one neighbours ``x ~ x'``, ``n`` public). The log-likelihood
    of a record is ``x_i logit(p) + trials log(1 - p)`` plus a term free of ``p``, so
    ``π_x(p) = h(p) exp(T s logit p) / Z(x)`` with ``h`` the same for all data sets of size
    ``n`` (the binomial coefficients cancel in the normalised density). With ``d = s - s'``,
    ``|d| <= trials``, and ``u(p) = T d logit(p)``,

        log π_x(p) - log π_x'(p) = u(p) - log E_{π_x'}[exp u(P)].

    The expectation is over ``P`` in ``[lo, hi]``, so its log lies in ``[min u, max u]`` and the
    log ratio lies in ``[-(max u - min u), max u - min u]``, where
    ``max u - min u = T |d| R <= T · trials · R = ε_s``. So one sample is ε_s-DP, and ``samples``
    independent ones are ``samples · ε_s = ε``-DP by basic composition. For ``[a0, 1 - a0]``,
    ``R = 2 logit(1 - a0)``: this is the exponential mechanism with the log-likelihood as utility,
    sensitivity ``Δ = trials · logit(1 - a0)`` and ``ε_s = 2 T Δ`` (Dwork & Roth 2014,
    Theorem 3.10). For a support not symmetric about 1/2 the range form is smaller than
    ``2 T trials max(|logit lo|, |logit hi|)``.

    **Tightness.** No calibration valid for every ``n`` can use a larger ``T``: with ``s' = 0``,
    ``d = trials`` and ``n → ∞``, ``π_x'`` concentrates at ``lo`` and the log ratio at
    ``p = hi`` tends to ``T · trials · R``. For a fixed, small ``T n`` the worst case is smaller
    (about half the bound for a prior symmetric about 1/2, where ``π_x'`` is close to the
    truncated prior), so an ``n``-specific calibration could spend the budget better; it is not
    implemented. The generic OPS bound of Wang et al. (2015), ``4 T B`` with
    ``B = sup |log p(x | θ)|``, is looser: ``4 log 10 ≈ 9.2`` against ``2 log 9 ≈ 4.4`` per unit
    of ``T`` for Bernoulli records with ``a0 = 0.1``.

    References
    ----------
    Wang, Fienberg & Smola (2015), "Privacy for free: posterior sampling and stochastic gradient
    Monte Carlo", ICML. Foulds, Geumlek, Welling & Chaudhuri (2016), "On the theory and practice
    of privacy-preserving Bayesian data analysis", UAI. McSherry & Talwar (2007), "Mechanism
    design via differential privacy". Dwork & Roth (2014), "The algorithmic foundations of
    differential privacy", Section 3.4 (the exponential mechanism) and Theorem 3.16
    (composition).

    Examples
    --------
    >>> import numpy as np
    >>> draws = one_posterior_sample_from_statistic(
    ...     np.random.default_rng(0), statistic=[30, 700], n=1000, trials=1, epsilon=1e4,
    ...     prior=(1.0, 1.0), samples=500,
    ... )
    >>> draws.shape
    (2, 500)
    >>> # T ≈ 4.6, sharper than the posterior; s / N = 0.03 lies below the support.
    >>> np.round(draws.mean(axis=1), 2)
    array([0.1, 0.7])
    """
    stat = check_finite_array(statistic, "statistic").astype(np.float64)
    n = check_int(n, "n", minimum=1)
    trials = check_int(trials, "trials", minimum=1)
    epsilon = check_positive(epsilon, "epsilon")
    alpha, beta = _check_prior(prior)
    samples = check_int(samples, "samples", minimum=1)
    lo, hi = check_support(support)
    total = n * trials
    if np.any(stat != np.round(stat)) or np.any((stat < 0) | (stat > total)):
        raise ValueError(
            f"statistic must hold whole numbers in [0, n * trials] = [0, {total}] "
            f"(got min {np.min(stat)!r}, max {np.max(stat)!r})"
        )
    stat = np.atleast_1d(stat)
    temperature = epsilon / samples / (trials * logit_range(lo, hi))
    a = alpha + temperature * stat
    b = beta + temperature * (total - stat)
    if not (np.all(np.isfinite(a + b)) and np.max(a + b) <= MAX_SHAPE):
        raise ValueError(
            f"epsilon is too large (got {epsilon!r}): the tempered posterior's Beta shape "
            f"parameters would exceed {MAX_SHAPE:.0e}"
        )
    rng = check_rng(rng)
    u = rng.random((*stat.shape, samples))
    return truncated_beta_quantile(u, a=a[..., None], b=b[..., None], support=(lo, hi))


def _check_prior(prior: object) -> tuple[float, float]:
    if isinstance(prior, str | bytes) or not isinstance(prior, Sequence | np.ndarray):
        raise TypeError(f"prior must be a pair (alpha, beta) (got {type(prior).__name__})")
    if len(prior) != 2:
        raise ValueError(f"prior must be a pair (alpha, beta) (got {len(prior)} values)")
    return check_positive(prior[0], "prior[0]"), check_positive(prior[1], "prior[1]")
