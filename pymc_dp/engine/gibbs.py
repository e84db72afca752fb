"""The DP Gibbs sampler for many independent releases at once, without PyMC's per-model cost.

:func:`sample_gibbs` runs Algorithm 1 of Bernstein & Sheldon (2018) with the same kernels as the
step methods, advancing a whole batch of releases (calibration trials, chains) per NumPy call.
``pm.sample`` is the interface for models; this is for studies that need thousands of posteriors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_int, check_positive, check_rng
from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.collapsed import collapsible, sample_collapsed
from pymc_dp.engine.exact import (
    sample_exact_binomial,
    sample_exact_categorical,
    sample_exact_window,
)
from pymc_dp.engine.moments import batched_moments
from pymc_dp.engine.pair import pair_collapsible, sample_collapsed_pair
from pymc_dp.engine.records import sample_records
from pymc_dp.families import Categorical, ExponentialFamily, TruncatedFamily
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.kernels import draw_noise_variance, draw_suffstat, window_constraints
from pymc_dp.kernels.exact_counts import NOISE_KINDS, NoiseLaw, binomial_noise_support
from pymc_dp.likelihoods.choice import (
    ENGINE_EXACT_BUDGET,
    LIKELIHOODS,
    choose_likelihood,
    clt_trust,
    exact_cost,
    exact_supported,
    windowed_counts,
)
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN

__all__ = ["GibbsTrace", "sample_gibbs"]


class GibbsTrace(NamedTuple):
    """Draws after tuning, each with leading axes ``(chain, draw, batch)`` as in ArviZ."""

    theta: npt.NDArray[np.float64]
    suffstat: npt.NDArray[np.float64]
    """s; for a windowed family the stacked (ŝ, s), shape ``(chain, draw, batch, 2k)``."""
    noise_variance: npt.NDArray[np.float64]
    n_fallback: int
    """Total number of s updates that used the bounded fallback."""


def _engine_likelihood(
    family: ExponentialFamily,
    n: int,
    y: npt.NDArray[np.float64],
    scale: float,
    method: str,
    likelihood: str,
    bounds: tuple[float, float] | None = None,
) -> str:
    """Resolve the engine's ``likelihood`` argument (see :func:`sample_gibbs`)."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS} (got {likelihood!r})")
    if likelihood == "exact":
        if method == "augmented":
            raise ValueError(
                "likelihood='exact' has no augmented form: use method='auto' with it, or "
                "likelihood='clt' with method='augmented'"
            )
        return choose_likelihood(family, n, y[0], scale, "exact").likelihood
    if likelihood == "clt" or method == "augmented" or not exact_supported(family):
        return "clt"
    if isinstance(family, TruncatedFamily):
        # Window sums: exact where the measured rule distrusts the CLT for some release and
        # the batch is affordable (records: n per release; counts: the convolution's terms).
        per_release = n if continuous_window(family) else exact_cost(family, n, bounds)
        if per_release * y.shape[0] > ENGINE_EXACT_BUDGET:
            return "clt"
        trusted = all(clt_trust(family, n, row, scale, bounds=bounds)[0] for row in y)
        return "clt" if trusted else "exact"
    per_release = exact_cost(family, n, batched=True)
    if not isinstance(family, Categorical):
        # A Binomial batch sums only the counts its kernel keeps: those within the noise's reach
        # of the batch's y (Laplace's reach, which bounds the Gaussian's).
        noise = NoiseLaw("laplace", float(scale))
        first, last = binomial_noise_support(y, n * family.trials, noise)
        per_release = last - first + 1
    if per_release * y.shape[0] > ENGINE_EXACT_BUDGET:
        return "clt"
    # The engine samples Categorical releases by Algorithm 1 (conjugate θ | s).
    gibbs = not collapsible(family)
    trusted = all(clt_trust(family, n, row, scale, conjugate_gibbs=gibbs)[0] for row in y)
    return "clt" if trusted else "exact"


def _sample_exact(
    rng: np.random.Generator,
    family: ExponentialFamily,
    prior: Sequence[npt.ArrayLike],
    y: npt.NDArray[np.float64],
    n: int,
    noise: NoiseLaw,
    draws: int,
    tune: int,
    chains: int,
    bounds: tuple[float, float] | None,
) -> GibbsTrace:
    """The exact-likelihood engine paths, shaped like the others' ``(chain, draw, batch, ...)``."""
    releases = y.shape[0]
    params = tuple(
        np.broadcast_to(p, (releases, *np.shape(p)[np.ndim(p) - len(shape) :]))
        for p, shape in zip(
            family.check_prior(prior, batched=True), family.prior_shapes, strict=True
        )
    )
    if continuous_window(family):
        if noise.kind != "laplace":
            raise ValueError(
                f"the exact likelihood of continuous records models Laplace noise (got "
                f"noise={noise.kind!r})"
            )
        # The record-level sampler; chains are extra batch rows, chain-major.
        tiled = tuple(np.tile(p, (chains, *(1,) * (np.ndim(p) - 1))) for p in params)
        y_rows = np.tile(y.reshape(releases, -1), (chains, 1))
        batch = ReleaseBatch(family, tiled, y_rows, n, noise, bounds)
        theta, s = sample_records(rng, batch, draws=draws, tune=tune)
        k = family.stat_size
        v = draw_noise_variance(rng, residual=y_rows - s[..., :k], scale=noise.scale)
        v = v.reshape(draws, -1, *y.shape[1:])
        return GibbsTrace(*(_row_major(a, chains) for a in (theta, s, v)), 0)
    if isinstance(family, Categorical):
        # Chains are extra batch rows, chain-major.
        tiled = tuple(np.tile(p, (chains, 1)) for p in params)
        batch = ReleaseBatch(family, tiled, np.tile(y, (chains, 1)), n, noise)
        theta, s, v = sample_exact_categorical(rng, batch, draws=draws, tune=tune)
        return GibbsTrace(*(_row_major(a, chains) for a in (theta, s, v)), 0)
    batch = ReleaseBatch(family, params, y.reshape(releases), n, noise, bounds)
    sample = sample_exact_window if windowed_counts(family) else sample_exact_binomial
    theta, s, v = sample(rng, batch, draws=draws * chains)
    return GibbsTrace(*(_chain_major(a, chains) for a in (theta, s, v[..., 0])), 0)


def _row_major(a: npt.NDArray, chains: int) -> npt.NDArray:
    """(draw, chains · releases, ...) -> (chain, draw, releases, ...): chains as batch rows."""
    draws = a.shape[0]
    return np.moveaxis(a.reshape(draws, chains, a.shape[1] // chains, *a.shape[2:]), 0, 1)


def _chain_major(a: npt.NDArray, chains: int) -> npt.NDArray:
    """(chains · draws, ...) -> (chain, draw, ...): the samplers' draws are chain-major."""
    return a.reshape(chains, a.shape[0] // chains, *a.shape[1:])


def sample_gibbs(
    rng: int | np.random.Generator,
    *,
    family: ExponentialFamily,
    prior: Sequence[npt.ArrayLike],
    released: npt.ArrayLike,
    n: int,
    scale: float,
    draws: int,
    tune: int = 0,
    chains: int = 1,
    bounds: tuple[float, float] | None = None,
    method: str = "auto",
    likelihood: str = "auto",
    noise: str = "laplace",
) -> GibbsTrace:
    """Sample the DP posterior of a batch of releases of the same family and size.

    By default a family whose release is one number with a scalar θ is sampled collapsed:
    independent draws of θ | y from its exact one-dimensional posterior (the normal–Laplace
    likelihood on an adaptive grid, :mod:`pymc_dp.engine.collapsed`), then s and σ² from their exact
    conditionals. Other families, or ``method="augmented"``, run the paper's Gibbs sampler
    (Algorithm 1; Algorithm 2 for a windowed family) over (θ, s, σ²). A windowed (Σz, Σz²)
    (Normal, LogNormal) can be collapsed with ``method="collapsed"``: θ = (μ, σ²) by exact
    independence Metropolis–Hastings chains on its bivariate normal–Laplace posterior, with a
    proposal tabulated per release (:mod:`pymc_dp.engine.pair`); that costs about a second
    per release, so ``"auto"`` keeps Algorithm 1 for them in batched studies.

    Parameters
    ----------
    rng
        Seed or generator.
    family
        A family, e.g. ``Binomial(trials=5)`` or ``Exponential()``.
    prior
        Conjugate prior hyperparameters, each broadcastable to the batch: ``(alpha, beta)`` of
        shape ``(B,)`` or scalars; ``(alpha,)`` of shape ``(B, K)`` or ``(K,)``.
    released
        Released values y, shape ``(B, *family.stat_shape)``.
    n
        Number of records per release.
    scale
        Laplace scale Δ/ε of the releases.
    draws, tune
        Iterations kept and discarded.
    chains
        Independent chains per release, each started from its own prior draw of θ.
    bounds
        Truncation window of a windowed family's releases (Algorithm 2), else ``None``.
    method
        ``"auto"`` (collapsed for a scalar release with a scalar θ, else augmented),
        ``"collapsed"`` (also for a windowed (Σz, Σz²)) or ``"augmented"`` (Algorithm 1).
        Collapsed draws need no tuning: ``tune`` is ignored.
    likelihood
        ``"exact"``: no CLT for s (Bernoulli, Binomial and Categorical releases, and window
        sums of Poisson or Geometric records, :mod:`pymc_dp.engine.exact`; window sums of
        continuous records by the record-level sampler, :mod:`pymc_dp.engine.records`, whose
        ``tune`` iterations are discarded). ``"clt"``: the CLT normal for s. ``"auto"``
        (default): exact where the CLT is outside its measured safe region for some release of
        the batch (:func:`pymc_dp.likelihoods.choice.clt_trust`; for window sums
        :func:`pymc_dp.likelihoods.window_trust.window_clt_trust`) and the batch costs at most
        :data:`~pymc_dp.likelihoods.choice.ENGINE_EXACT_BUDGET` terms per evaluation (records, for
        continuous window sums), else the CLT.
        (A model's :class:`~pymc_dp.NoisySuffStat` takes the exact sum whenever it is
        affordable; the engine runs thousands of releases at once, so it pays for it only
        where it matters.)
    noise
        Noise law of the releases: ``"laplace"`` (density), ``"discrete-laplace"`` or
        ``"discrete-gaussian"`` (integer noise; ``scale`` is then the Gaussian's σ). The exact
        likelihood uses the law itself; under the CLT, Laplace noise (discrete or not) is
        modelled by the Laplace density, and Gaussian noise by the normal of the same σ
        (collapsed: the normal product; Algorithm 1 and 2: σ² fixed at σ², no mixing draws;
        the collapsed pair sampler is Laplace-only).

    Returns
    -------
    GibbsTrace
        θ, s and σ² draws, shaped ``(chains, draws, batch, ...)``.

    Examples
    --------
    >>> from pymc_dp.families import Binomial
    >>> tr = sample_gibbs(0, family=Binomial(trials=5), prior=(3.0, 5.0),
    ...                   released=[1500.0, 400.0], n=1000, scale=50.0, draws=200, tune=100,
    ...                   chains=4)
    >>> tr.theta.shape
    (4, 200, 2)
    """
    rng = check_rng(rng)
    n = check_int(n, "n", minimum=1)
    scale = check_positive(scale, "scale")
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    windowed = isinstance(family, TruncatedFamily)
    if windowed:
        bounds = family.check_bounds(bounds)
    elif bounds is not None:
        raise TypeError(f"bounds apply only to windowed families, not {family!r}")
    if noise not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS} (got {noise!r})")
    if method not in ("auto", "collapsed", "augmented"):
        raise ValueError(f"method must be 'auto', 'collapsed' or 'augmented' (got {method!r})")
    if method == "collapsed" and not (collapsible(family) or pair_collapsible(family)):
        raise ValueError(
            f"method='collapsed' needs a scalar release and a scalar θ, or a windowed "
            f"(Σz, Σz²); {family!r} has neither: use method='augmented'"
        )
    y = np.asarray(released, dtype=np.float64)
    if y.ndim != 1 + len(family.stat_shape) or y.shape[1:] != family.stat_shape:
        raise ValueError(f"released must have shape (batch, *{family.stat_shape}) (got {y.shape})")
    releases = y.shape[0]
    gaussian = noise == DISCRETE_GAUSSIAN
    if gaussian and continuous_window(family):
        # The exact likelihood of continuous records models Laplace noise only.
        if likelihood == "exact":
            raise ValueError(
                "likelihood='exact' for continuous records models Laplace noise only, not "
                "noise='discrete-gaussian': use likelihood='auto' (the CLT)"
            )
        likelihood = "clt"
    law = NoiseLaw(noise, scale)
    if _engine_likelihood(family, n, y, scale, method, likelihood, bounds) == "exact":
        return _sample_exact(rng, family, prior, y, n, law, draws, tune, chains, bounds)
    if method != "augmented" and collapsible(family):
        params = tuple(
            np.broadcast_to(p, (releases,)) for p in family.check_prior(prior, batched=True)
        )
        batch = ReleaseBatch(family, params, y.reshape(releases), n, law, bounds)
        theta, s, v = sample_collapsed(rng, batch, draws=draws * chains)
        return GibbsTrace(*(_chain_major(a, chains) for a in (theta, s, v[..., 0])), 0)
    if method == "collapsed" and pair_collapsible(family):
        if gaussian:
            raise ValueError(
                "the collapsed pair sampler models Laplace noise; for noise='discrete-gaussian' "
                "use method='auto' (Algorithm 2 with the noise variance fixed at σ²)"
            )
        # Only on request: the collapsed pair tabulates each release's posterior (about a
        # second each), where Algorithm 1 advances every release of a study in one batch.
        params = tuple(
            np.broadcast_to(p, (releases,)) for p in family.check_prior(prior, batched=True)
        )
        batch = ReleaseBatch(family, params, y, n, law, bounds)
        theta, s, v, _ = sample_collapsed_pair(rng, batch, draws=draws, chains=chains)
        return GibbsTrace(theta, s, v, 0)
    # Chains are extra batch rows, chain-major, so that the output reshapes to (chain, ...).
    y = np.tile(y, (chains, *(1,) * (y.ndim - 1)))
    batch = y.shape[0]
    y_k = y.reshape(batch, -1)
    k = y_k.shape[1]
    params = tuple(
        np.tile(
            np.broadcast_to(p, (releases, *np.shape(p)[np.ndim(p) - len(shape) :])),
            (chains, *(1,) * len(shape)),
        )
        for p, shape in zip(
            family.check_prior(prior, batched=True), family.prior_shapes, strict=True
        )
    )
    moments = batched_moments(family, n, bounds)
    constraints, total = [], None
    if windowed:
        lower, upper, out_lower, out_upper = family.window_region(n, bounds)
        constraints = window_constraints(
            size=k,
            out_lower=np.broadcast_to(out_lower, (batch, k)),
            out_upper=np.broadcast_to(out_upper, (batch, k)),
            total=np.full(batch, float(n)),
            quadratic=k == 2,
        )
    else:
        lower, upper = family.valid_region(n)
        if family.stat_shape != ():
            total = np.full(batch, float(n))

    def full_statistic(state):
        return (state[:, k:] if windowed else state).reshape(batch, *family.stat_shape)

    theta = family.draw_conjugate(rng, params)
    # The CLT mean lies in the (convex) valid region: a valid start for the bounded fallback.
    s = np.clip(moments(theta)[0], lower, upper)
    if total is not None:
        s = np.clip(s, 1e-3 * n, None)
        s *= total[:, None] / np.sum(s, axis=-1, keepdims=True)
    # Laplace: σ² starts at its prior mean 2b². Gaussian: σ² is the noise variance itself, fixed
    # (y | s is normal), so Algorithm 1 without its inverse-Gaussian step is exact Gibbs.
    sigma2 = np.full(y_k.shape, (1.0 if gaussian else 2.0) * scale**2)

    keep_theta = np.empty((draws, *theta.shape))
    keep_s = np.empty((draws, *s.shape))
    keep_v = np.empty((draws, *y.shape))
    n_fallback = 0
    for it in range(tune + draws):
        theta = family.draw_conjugate(rng, family.conjugate_update(params, full_statistic(s), n))
        clt_mean, clt_cov = moments(theta)
        out = draw_suffstat(
            rng,
            clt_mean=clt_mean,
            clt_cov=clt_cov,
            released=y_k,
            noise_variance=sigma2,
            lower=lower,
            upper=upper,
            current=s,
            total=total,
            constraints=constraints,
        )
        s, n_fallback = out.value, n_fallback + out.n_fallback
        if not gaussian:
            sigma2 = draw_noise_variance(rng, residual=y_k - s[:, :k], scale=scale)
        if it >= tune:
            keep_theta[it - tune] = theta
            keep_s[it - tune] = s
            keep_v[it - tune] = np.reshape(sigma2, y.shape)

    return GibbsTrace(*(_row_major(a, chains) for a in (keep_theta, keep_s, keep_v)), n_fallback)
