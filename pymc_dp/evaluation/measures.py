"""Calibration and utility measures for the studies of Bernstein & Sheldon (2018, §4).

Calibration (Cook, Gelman & Rubin 2006 [1]_): in each trial draw θ from the prior, data from the
model, release and infer; the quantile ``u`` of the true θ in its posterior is Uniform(0, 1) over
trials exactly when the posterior is right. :func:`calibration_quantiles` computes ``u`` from
posterior draws, as the randomised rank of simulation-based calibration (Talts et al.
2018 [2]_), after thinning autocorrelated MCMC draws to about their effective sample size;
:func:`ks_statistic`, :func:`ks_band`, :func:`ecdf` and :func:`interval_coverage` summarise ``u``
over trials.

Utility: :func:`mmd2_unbiased` is the unbiased estimate of the squared maximum mean discrepancy
(Gretton et al. 2012 [3]_) between draws of two posteriors, e.g. private against non-private.

Everything here is NumPy, SciPy and ArviZ only, and works on leading batch dimensions so that one
call handles all trials of a study, as in the paper's §4 [4]_.

References
----------
.. [1] Cook, S. R., Gelman, A. and Rubin, D. B. (2006). Validation of software for Bayesian models
   using posterior quantiles. *Journal of Computational and Graphical Statistics* 15(3), 675-692.
.. [2] Talts, S., Betancourt, M., Simpson, D., Vehtari, A. and Gelman, A. (2018). Validating
   Bayesian inference algorithms with simulation-based calibration. arXiv:1804.06788.
.. [3] Gretton, A., Borgwardt, K. M., Rasch, M. J., Schölkopf, B. and Smola, A. (2012). A kernel
   two-sample test. *Journal of Machine Learning Research* 13, 723-773.
.. [4] Bernstein, G. and Sheldon, D. (2018). Differentially private Bayesian inference for
   exponential families. *NeurIPS 31*.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import arviz as az
import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp._validation import check_finite_array, check_int, check_positive, check_rng

__all__ = [
    "KSBand",
    "KSResult",
    "calibration_quantiles",
    "ecdf",
    "interval_coverage",
    "ks_band",
    "ks_statistic",
    "mmd2_unbiased",
]

# Largest number of float64 elements held by one temporary array (32 MB), so that batched
# computations over thousands of trials run in chunks of bounded memory.
_CHUNK_ELEMENTS = 1 << 22
# The MMD kernel matrices are summed in _BLOCK × _BLOCK tiles over chunks of batch elements whose
# temporaries (about _CACHE_ELEMENTS float64, 512 kB) stay in cache.
_BLOCK = 64
_CACHE_ELEMENTS = 1 << 16
# ArviZ needs at least this many draws per chain to estimate ESS (it returns NaN below).
_MIN_DRAWS_FOR_ESS = 4


class KSResult(NamedTuple):
    """Kolmogorov-Smirnov test of calibration quantiles against Uniform(0, 1)."""

    statistic: float
    pvalue: float


class KSBand(NamedTuple):
    """Central interval of the KS statistic of a perfectly calibrated method."""

    lower: float
    upper: float


def calibration_quantiles(
    draws: npt.ArrayLike,
    truth: npt.ArrayLike,
    *,
    rng: int | np.random.Generator,
    thin: bool = True,
) -> npt.NDArray[np.float64]:
    """Quantile of the true θ among posterior draws, one per trial (Cook et al. 2006).

    The quantile is the randomised rank of simulation-based calibration (Talts et al. 2018)::

        u = (#{kept < truth} + U · (#{kept == truth} + 1)) / (#kept + 1),   U ~ Uniform(0, 1).

    If the kept draws are iid from the posterior of θ given the data, and θ was drawn from the
    prior, then u is exactly Uniform(0, 1). Ties (discrete parameters, stuck chains) are broken
    uniformly at random, and without ties this is ``(#{kept < truth} + U) / (#kept + 1)``.

    Parameters
    ----------
    draws
        Posterior draws in ArviZ layout ``(chain, draw, *batch)``: one posterior per batch
        element (trial, component).
    truth
        The true θ, broadcastable to ``batch``.
    rng
        Seed or generator for the uniform tie-break.
    thin
        If true, each batch element's draws are thinned, in every chain, with step
        ``max(1, floor(chain · draw / ess))``, where ess is the bulk effective sample size
        (:func:`arviz.ess`). Autocorrelated MCMC draws are then about independent, as the rank's
        uniformity needs: a sticky chain otherwise pushes u towards 0 or 1 even when the
        sampler is correct. Where ESS is undefined (fewer than 4 draws per chain, or NaN) it is
        taken as 1, i.e. one draw per chain is kept. Use ``thin=False`` for iid draws.

    Returns
    -------
    numpy.ndarray
        Quantiles in [0, 1), shape ``batch`` (a 0-d array for ``(chain, draw)`` input).

    Raises
    ------
    TypeError
        If ``draws`` or ``truth`` is not numeric, or ``rng`` is not a seed or generator.
    ValueError
        If ``draws`` has fewer than 2 dimensions or non-finite values, or ``truth`` does not
        broadcast to the batch shape.

    References
    ----------
    Cook, Gelman & Rubin (2006); Talts et al. (2018), whose ranks this is and who thin
    autocorrelated draws to about their effective sample size.

    Examples
    --------
    Four iid draws, one chain: truth 0.5 has two draws below it, so u lies in [2/5, 3/5).

    >>> draws = [[0.1, 0.3, 0.7, 0.9]]
    >>> u = calibration_quantiles(draws, 0.5, rng=0, thin=False)
    >>> u.shape, bool(0.4 <= u < 0.6)
    ((), True)

    A batch of three trials, 2 chains × 1000 draws each:

    >>> rng = np.random.default_rng(1)
    >>> draws = rng.normal(size=(2, 1000, 3))
    >>> calibration_quantiles(draws, [-5.0, 0.0, 5.0], rng=rng).shape
    (3,)
    """
    arr = check_finite_array(draws, "draws")
    if arr.ndim < 2:
        raise ValueError(
            f"draws must have dimensions (chain, draw, *batch), at least 2 (got shape {arr.shape})"
        )
    batch_shape = arr.shape[2:]
    true = check_finite_array(truth, "truth")
    try:
        true = np.broadcast_to(true, batch_shape)
    except ValueError:
        raise ValueError(
            f"truth must broadcast to the batch shape {batch_shape} of draws (got shape "
            f"{true.shape})"
        ) from None
    if not isinstance(thin, bool | np.bool_):
        raise TypeError(f"thin must be a bool (got {type(thin).__name__})")
    generator = check_rng(rng)

    n_chain, n_draw = arr.shape[:2]
    flat = arr.reshape(n_chain, n_draw, -1).astype(np.float64, copy=False)
    true = true.reshape(-1).astype(np.float64, copy=False)
    steps = _thinning_steps(flat) if thin else np.ones(flat.shape[2], dtype=np.int64)

    less = np.empty(flat.shape[2], dtype=np.int64)
    equal = np.empty(flat.shape[2], dtype=np.int64)
    kept = np.empty(flat.shape[2], dtype=np.int64)
    for step in np.unique(steps):
        members = np.flatnonzero(steps == step)
        n_kept = n_chain * len(range(0, n_draw, int(step)))
        per_chunk = max(1, _CHUNK_ELEMENTS // n_kept)
        for start in range(0, members.size, per_chunk):
            idx = members[start : start + per_chunk]
            sub = flat[:, :: int(step), idx]
            less[idx] = np.count_nonzero(sub < true[idx], axis=(0, 1))
            equal[idx] = np.count_nonzero(sub == true[idx], axis=(0, 1))
        kept[members] = n_kept

    u = (less + generator.uniform(size=less.size) * (equal + 1)) / (kept + 1)
    return u.reshape(batch_shape)


def _thinning_steps(flat: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Per batch element, ``max(1, floor(total / ess))`` from one vectorised ESS call."""
    n_chain, n_draw, n_batch = flat.shape
    total = n_chain * n_draw
    if n_draw < _MIN_DRAWS_FOR_ESS:
        return np.full(n_batch, total, dtype=np.int64)
    # One call for all batch elements: the extra dimension becomes a coordinate of the dataset,
    # which ArviZ 0.x and 1.x both reduce over (chain, draw) only.
    ess = np.asarray(az.ess(az.convert_to_dataset(flat), method="bulk")["x"], dtype=np.float64)
    ess = np.where(np.isfinite(ess) & (ess >= 1.0), ess, 1.0).reshape(n_batch)
    return np.maximum(1, np.floor(total / ess)).astype(np.int64)


def ks_statistic(u: npt.ArrayLike) -> KSResult:
    """Kolmogorov-Smirnov test of calibration quantiles against Uniform(0, 1).

    Parameters
    ----------
    u
        1-D quantiles in [0, 1], one per trial, e.g. from :func:`calibration_quantiles`.

    Returns
    -------
    KSResult
        ``(statistic, pvalue)`` of :func:`scipy.stats.kstest` (two-sided, exact or asymptotic
        as SciPy chooses).

    Raises
    ------
    ValueError
        If ``u`` is not 1-D, is empty, or has values outside [0, 1].

    Examples
    --------
    >>> res = ks_statistic([0.1, 0.4, 0.6, 0.9])
    >>> round(res.statistic, 3)
    0.15
    """
    values = _check_quantiles(u, "u")
    result = stats.kstest(values, "uniform")
    return KSResult(float(result.statistic), float(result.pvalue))


def ks_band(trials: int, *, level: float = 0.95) -> KSBand:
    """Central ``level`` interval of the KS statistic of ``trials`` iid Uniform(0, 1) values.

    This is the spread a perfectly calibrated method's KS statistic shows over repeated studies
    of ``trials`` trials (the null distribution :data:`scipy.stats.kstwo`), to draw as a band
    behind KS-against-n plots.

    Parameters
    ----------
    trials
        Number of trials per study, >= 1.
    level
        Probability of the band, in (0, 1).

    Returns
    -------
    KSBand
        ``(lower, upper)``, the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles.

    Raises
    ------
    ValueError
        If ``trials < 1`` or ``level`` is not in (0, 1).

    Examples
    --------
    >>> band = ks_band(1000)
    >>> round(band.lower, 4), round(band.upper, 4)
    (0.015, 0.0466)
    """
    n = check_int(trials, "trials", minimum=1)
    prob = _check_level(level, "level")
    null = stats.kstwo(n)
    return KSBand(float(null.ppf((1 - prob) / 2)), float(null.ppf((1 + prob) / 2)))


def ecdf(u: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Points of the empirical CDF of ``u`` on [0, 1], for a step plot.

    Parameters
    ----------
    u
        1-D quantiles in [0, 1].

    Returns
    -------
    x, F : numpy.ndarray
        ``x = (0, distinct sorted u, 1)`` and ``F(x)`` the fraction of ``u`` <= x, so that
        ``plt.step(x, F, where="post")`` draws the ECDF from (0, 0) to (1, 1); compare with the
        diagonal.

    Raises
    ------
    ValueError
        If ``u`` is not 1-D, is empty, or has values outside [0, 1].

    Examples
    --------
    >>> x, F = ecdf([0.5, 0.25, 0.5, 0.75])
    >>> x.tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> F.tolist()
    [0.0, 0.25, 0.75, 1.0, 1.0]
    """
    values = _check_quantiles(u, "u")
    distinct, counts = np.unique(values, return_counts=True)
    x = np.concatenate([[0.0], distinct, [1.0]])
    cdf = np.concatenate([[0.0], np.cumsum(counts) / values.size, [1.0]])
    return x, cdf


def interval_coverage(
    u: npt.ArrayLike, levels: Sequence[float] = (0.5, 0.9, 0.95)
) -> dict[float, float]:
    """Fraction of trials whose true θ lies in the central credible interval of each level.

    The central ``level`` interval is ``[q((1 - level) / 2), q((1 + level) / 2)]``, with q the
    posterior quantile function, and θ lies in it iff its posterior CDF value u does:
    ``|u - 1/2| <= level / 2``. So coverage follows from the calibration quantiles alone;
    a calibrated posterior covers at rate ``level``.

    Parameters
    ----------
    u
        1-D quantiles in [0, 1], e.g. from :func:`calibration_quantiles`.
    levels
        Credible levels, each in (0, 1).

    Returns
    -------
    dict
        ``{level: coverage}``.

    Raises
    ------
    ValueError
        If ``u`` is not 1-D quantiles, or a level is outside (0, 1).

    Examples
    --------
    >>> interval_coverage([0.02, 0.3, 0.5, 0.93], levels=(0.5, 0.9))
    {0.5: 0.5, 0.9: 0.75}
    """
    values = _check_quantiles(u, "u")
    if isinstance(levels, str) or not isinstance(levels, Sequence | np.ndarray):
        raise TypeError(f"levels must be a sequence of numbers (got {type(levels).__name__})")
    if len(levels) == 0:
        raise ValueError("levels must not be empty")
    checked = [_check_level(level, "levels") for level in levels]
    distance = np.abs(values - 0.5)
    return {level: float(np.mean(distance <= level / 2)) for level in checked}


def mmd2_unbiased(
    p: npt.ArrayLike,
    q: npt.ArrayLike,
    *,
    bandwidth: float = 1.0,
    event_ndim: int = 0,
    chunk_size: int | None = None,
) -> npt.NDArray[np.float64] | float:
    r"""Unbiased estimate of the squared MMD between samples of two distributions.

    With the Gaussian kernel :math:`k(x, y) = \exp(-\lVert x - y \rVert^2 / (2 b^2))` and samples
    :math:`p_1..p_m \sim P`, :math:`q_1..q_n \sim Q`,

    .. math::

        \widehat{\mathrm{MMD}}^2_u = \frac{1}{m(m-1)} \sum_{i \ne j} k(p_i, p_j)
            + \frac{1}{n(n-1)} \sum_{i \ne j} k(q_i, q_j)
            - \frac{2}{mn} \sum_{i, j} k(p_i, q_j),

    Gretton et al. (2012, eq. 3), the utility measure of Bernstein & Sheldon (2018, §4), who use
    m = n and the standard normal kernel (b = 1). Its expectation is the population MMD², which
    is 0 iff P = Q, so estimates scatter around 0 (and can be negative) when P = Q.

    Parameters
    ----------
    p, q
        Samples with layout ``(*batch, samples, *event)``, where ``event`` has ``event_ndim``
        dimensions: ``(*batch, m)`` for scalar θ, ``(*batch, m, d)`` with ``event_ndim=1`` for
        vector θ. Batch shapes must broadcast, event shapes must match; ``m`` and ``n`` may
        differ and must be >= 2.
    bandwidth
        Kernel bandwidth b > 0.
    event_ndim
        Number of trailing dimensions that make up one θ: 0 (scalar) or more.
    chunk_size
        Number of batch elements processed at once; by default as many as keep each temporary
        array under 32 MB. Only memory and speed depend on it.

    Returns
    -------
    float or numpy.ndarray
        A float for unbatched input, else an array of shape ``batch``.

    Raises
    ------
    TypeError
        If an input is not numeric or an option has the wrong type.
    ValueError
        If samples are non-finite, fewer than 2, or the shapes do not fit ``event_ndim``.

    References
    ----------
    Gretton et al. (2012), Lemma 6 and eq. (3); Bernstein & Sheldon (2018), §4.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> same = mmd2_unbiased(rng.normal(size=500), rng.normal(size=500))
    >>> shifted = mmd2_unbiased(rng.normal(size=500), rng.normal(2.0, size=500))
    >>> abs(same) < 0.01, 0.45 < shifted < 0.65  # population values 0 and 0.56
    (True, True)

    Vector θ, a batch of 10 trials, 200 draws of a 3-vector each:

    >>> a, b = rng.dirichlet([2, 3, 4], size=(2, 10, 200))
    >>> mmd2_unbiased(a, b, event_ndim=1).shape
    (10,)
    """
    scale = check_positive(bandwidth, "bandwidth")
    n_event = check_int(event_ndim, "event_ndim", minimum=0)
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    x = _check_samples(p, "p", n_event)
    y = _check_samples(q, "q", n_event)
    event_x, event_y = x.shape[x.ndim - n_event :], y.shape[y.ndim - n_event :]
    if event_x != event_y:
        raise ValueError(
            f"p and q must have the same event shape (got {event_x} and {event_y} with "
            f"event_ndim={n_event})"
        )
    m_axis_x, m_axis_y = x.ndim - n_event - 1, y.ndim - n_event - 1
    try:
        batch_shape = np.broadcast_shapes(x.shape[:m_axis_x], y.shape[:m_axis_y])
    except ValueError:
        raise ValueError(
            f"p and q must have broadcastable batch shapes (got {x.shape[:m_axis_x]} and "
            f"{y.shape[:m_axis_y]})"
        ) from None
    m, n = x.shape[m_axis_x], y.shape[m_axis_y]
    dim = math.prod(event_x)
    # Scaling by 1 / (b √2) turns the kernel into exp(-|x - y|²).
    factor = 1.0 / (scale * math.sqrt(2.0))
    x = np.broadcast_to(x, (*batch_shape, *x.shape[m_axis_x:])).reshape(-1, m, dim) * factor
    y = np.broadcast_to(y, (*batch_shape, *y.shape[m_axis_y:])).reshape(-1, n, dim) * factor

    size = x.shape[0]
    if chunk_size is None:
        chunk_size = max(1, _CACHE_ELEMENTS // _BLOCK**2)
    out = np.empty(size, dtype=np.float64)
    for start in range(0, size, chunk_size):
        xs, ys = x[start : start + chunk_size], y[start : start + chunk_size]
        within_x = _within_sum(xs) / (m * (m - 1))
        within_y = _within_sum(ys) / (n * (n - 1))
        between = _between_sum(xs, ys) / (m * n)
        out[start : start + chunk_size] = within_x + within_y - 2.0 * between
    if batch_shape == ():
        return float(out[0])
    return out.reshape(batch_shape)


def _blocks(size: int) -> list[slice]:
    return [slice(start, start + _BLOCK) for start in range(0, size, _BLOCK)]


def _within_sum(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Σ_{i≠j} exp(-|x_i - x_j|²) per batch row of x (c, m, d)."""
    # The kernel matrix is symmetric: off-diagonal blocks count twice and are computed once,
    # which nearly halves the exponentials, the bulk of the cost.
    blocks = _blocks(x.shape[1])
    total = np.zeros(x.shape[0])
    for a, rows in enumerate(blocks):
        total += _kernel_sum(x[:, rows], x[:, rows])
        for cols in blocks[a + 1 :]:
            total += 2.0 * _kernel_sum(x[:, rows], x[:, cols])
    # k(z, z) = 1 exactly, so removing the diagonal is subtracting m.
    return total - x.shape[1]


def _between_sum(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Σ_{i,j} exp(-|x_i - y_j|²) per batch row of x (c, m, d) and y (c, n, d)."""
    total = np.zeros(x.shape[0])
    for rows in _blocks(x.shape[1]):
        for cols in _blocks(y.shape[1]):
            total += _kernel_sum(x[:, rows], y[:, cols])
    return total


def _kernel_sum(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Σ_ij exp(-|x_i - y_j|²) per batch row, for x (c, m, d) and y (c, n, d)."""
    # Differences (rather than |x|² + |y|² - 2x·y) keep full precision for nearby points, and a
    # loop over coordinates keeps memory at c·m·n whatever d is.
    sq = np.subtract(x[:, :, None, 0], y[:, None, :, 0])
    np.square(sq, out=sq)
    if x.shape[2] > 1:
        diff = np.empty_like(sq)
        for k in range(1, x.shape[2]):
            np.subtract(x[:, :, None, k], y[:, None, :, k], out=diff)
            np.square(diff, out=diff)
            sq += diff
    np.negative(sq, out=sq)
    np.exp(sq, out=sq)
    return sq.sum(axis=(1, 2))


def _check_samples(value: npt.ArrayLike, name: str, event_ndim: int) -> npt.NDArray[np.float64]:
    arr = check_finite_array(value, name)
    if arr.ndim < event_ndim + 1:
        raise ValueError(
            f"{name} must have dimensions (*batch, samples, *event) with event_ndim={event_ndim}, "
            f"at least {event_ndim + 1} (got shape {arr.shape})"
        )
    samples = arr.shape[arr.ndim - event_ndim - 1]
    if samples < 2:
        raise ValueError(f"{name} must have at least 2 samples per batch element (got {samples})")
    return arr.astype(np.float64, copy=False)


def _check_quantiles(value: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = check_finite_array(value, name, ndim=1).astype(np.float64, copy=False)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(
            f"{name} must lie in [0, 1] (got min {float(arr.min())}, max {float(arr.max())})"
        )
    return arr


def _check_level(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (got {type(value).__name__}: {value!r})")
    if not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1) (got {value!r})")
    return float(value)
