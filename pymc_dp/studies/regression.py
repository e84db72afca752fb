"""Figure 3 of Bernstein & Sheldon (2019): private linear regression on data from the model.

:func:`run_regression_point` simulates all trials of one (n, ε) point at once (θ, σ² from the
NIG prior, (μ_x, σ_x²) from the NIW data prior, records from the model, two releases per data
set) and scores each method by simulation-based calibration of (θ₀, θ₁, σ²), 95 % credible
interval coverage and MMD² to the non-private posterior:

- **nonprivate**: conjugate NIG posterior of the exact statistic (reference; iid draws);
- **naive**: conjugate NIG posterior of the projected noisy statistic, treated as exact;
- **gibbs_noisy**: Gibbs-SS with moments of x from the release's own noisy moments
  (``moments_share`` of ε on them, the rest on the statistic);
- **gibbs_update**: Gibbs-SS-Update, NIW data model of x updated in the sampler (all of ε on
  the statistic), with the design's own prior of x;
- **default**: the package's default sampler (:func:`~pymc_dp.regression.sample_regression`,
  exact law of s under a normal model of x) with the default prior of x from the public box
  (:func:`~pymc_dp.regression.default_x_prior`), not the design's: what a user gets
  (``RegressionSettings.default_x_prior="design"`` gives it the design's, as Gibbs-SS-Update);
- **mcmc_ind**: NUTS over the records (PyMC), only at small n and for few trials (it is slow).

The Gibbs methods run every trial of a point in one batched :func:`sample_gibbs_ss` call, the
default in one :func:`~pymc_dp.regression.sample_regression` call.
Every method spends the same total ε.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pymc_dp.evaluation.measures import (
    calibration_quantiles,
    interval_coverage,
    ks_statistic,
    mmd2_unbiased,
)
from pymc_dp.regression import (
    NIG,
    NIW,
    XMoments,
    default_x_prior,
    draw_nig,
    draw_niw,
    naive_regression_posterior,
    nig_update,
    regression_statistic,
    release_regression,
    sample_gibbs_ss,
    sample_regression,
    x_moments_from_release,
)

__all__ = [
    "PARAMETERS",
    "REGRESSION_METHODS",
    "RegressionPoint",
    "RegressionSettings",
    "SyntheticDesign",
    "run_regression_point",
    "simulate_trials",
]

REGRESSION_METHODS = ("nonprivate", "naive", "gibbs_noisy", "gibbs_update", "default", "mcmc_ind")
"""Method keys, in legend order."""
PARAMETERS = ("theta0", "theta1", "sigma2")
"""The calibrated scalars: intercept, slope and noise variance."""


_PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))
_X_PRIOR = NIW(np.zeros(1), np.array(4.0), np.array(20.0), np.array([[1.8]]))


@dataclasses.dataclass(frozen=True)
class SyntheticDesign:
    """Priors, data model and public bounds of the synthetic study (d = 1).

    The defaults are those of the package's Gibbs-SS-Update calibration test: θ | σ² ~ N(0, 2σ²
    I), σ² ~ InvGamma(20, 1.9) (mean 0.1); σ_x² ~ InvGamma(10, 0.9), μ_x | σ_x² ~ N(0, σ_x²/4);
    box x ∈ [−2, 2], y ∈ [−3, 3] (exact Δ = 24.33). Trials with a record outside the box are redrawn
    (conditioning the data on the box; the fraction is reported).
    """

    prior: NIG = _PRIOR
    x_prior: NIW = _X_PRIOR
    x_bound: float = 2.0
    y_bound: float = 3.0
    moments_share: float = 0.2


@dataclasses.dataclass(frozen=True)
class RegressionSettings:
    """Trials, sampler and scoring settings of every grid point."""

    trials: int = 300
    tune: int = 500
    draws: int = 1500
    chains: int = 2
    reference_draws: int = 2000
    """iid draws from the closed-form (non-private, naive) posteriors per trial."""
    mmd_draws: int = 300
    mcmc_trials: int = 0
    """Trials scored by MCMC-Ind (the first ones of the point), 0 to skip it."""
    mcmc_max_n: int = 10
    mcmc_tune: int = 300
    mcmc_draws: int = 300
    default_tries: int = 8
    """Candidates of the default sampler's multiple-try move (its own default is 16; fewer
    keep the batched study fast: the cost of a try grows with the batch, not per call)."""
    default_x_prior: Literal["box", "design"] = "box"
    """Prior of x the default sampler is given: ``"box"``, from the public box as a user's
    (:func:`~pymc_dp.regression.default_x_prior`), or ``"design"``, the design's own, which
    generated the data and which Gibbs-SS-Update is given (a comparison at equal information)."""


@dataclasses.dataclass(frozen=True)
class RegressionPoint:
    """Scores of every method at one (n, ε)."""

    n: int
    epsilon: float
    ks: dict[str, list[float]]
    """Method → KS statistic per parameter (order of :data:`PARAMETERS`)."""
    ks_pvalue: dict[str, list[float]]
    coverage95: dict[str, list[float]]
    mmd2: dict[str, tuple[float, float]]
    """Method → (mean, standard error) over trials of MMD² to the non-private posterior."""
    mmd_difference: tuple[float, float]
    """Mean and standard error of the paired MMD² difference gibbs_noisy − naive."""
    default_mmd_difference: tuple[float, float]
    """Mean and standard error of the paired MMD² difference default − gibbs_update."""
    seconds: dict[str, float]
    """Method → wall time for all its trials at this point."""
    trials: dict[str, int]
    redrawn: int
    quantiles: dict[str, npt.NDArray[np.float64]] = dataclasses.field(repr=False)
    """Method → calibration quantiles, shape ``(trials, 3)``."""

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat CSV row per method and parameter."""
        rows = []
        for method, ks in self.ks.items():
            for j, name in enumerate(PARAMETERS):
                mmd = self.mmd2.get(method, (None, None))
                rows.append(
                    {
                        "n": self.n,
                        "epsilon": self.epsilon,
                        "method": method,
                        "parameter": name,
                        "trials": self.trials[method],
                        "ks": ks[j],
                        "ks_pvalue": self.ks_pvalue[method][j],
                        "coverage_0.95": self.coverage95[method][j],
                        "mmd2": mmd[0],
                        "mmd2_se": mmd[1],
                        "seconds": self.seconds[method],
                    }
                )
        return rows


def simulate_trials(
    rng: np.random.Generator, design: SyntheticDesign, *, trials: int, n: int
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray, int]:
    """Draw ``trials`` data sets from the model, redrawing those with a record off the box.

    Returns
    -------
    truth : numpy.ndarray
        ``(trials, 3)``: θ₀, θ₁, σ².
    x, y : numpy.ndarray
        ``(trials, n, 1)`` and ``(trials, n)``.
    redrawn : int
        Number of rejected data sets.
    """
    truth, xs, ys, redrawn = [], [], [], 0
    while len(truth) < trials:
        theta, sigma2 = draw_nig(rng, design.prior)
        loc, cov = draw_niw(rng, design.x_prior)
        x = loc + np.sqrt(cov[0, 0]) * rng.standard_normal((n, 1))
        y = theta[0] + theta[1] * x[:, 0] + np.sqrt(sigma2) * rng.standard_normal(n)
        if np.any(np.abs(x) > design.x_bound) or np.any(np.abs(y) > design.y_bound):
            redrawn += 1
            continue
        truth.append([theta[0], theta[1], sigma2])
        xs.append(x)
        ys.append(y)
    return np.array(truth), np.array(xs), np.array(ys), redrawn


def _iid(rng: np.random.Generator, post: NIG, size: int) -> npt.NDArray[np.float64]:
    """``(1, size, trials, 3)`` iid draws of (θ₀, θ₁, σ²), in ArviZ layout."""
    theta, sigma2 = draw_nig(rng, post, size=(size,))
    return np.concatenate([theta, sigma2[..., None]], axis=-1)[None]


def _stack(theta: npt.NDArray, sigma2: npt.NDArray) -> npt.NDArray[np.float64]:
    return np.concatenate([theta, sigma2[..., None]], axis=-1)


def _mcmc_ind_draws(releases, design, settings, seed) -> npt.NDArray[np.float64]:
    """MCMC-Ind draws ``(1, draws, trials, 3)`` for each release (one ``pm.sample`` each)."""
    import logging

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.regression.model.mcmc_ind import sample_mcmc_ind

    logging.getLogger("pymc").setLevel(logging.ERROR)
    out = []
    for k, rel in enumerate(releases):
        idata = sample_mcmc_ind(
            rel,
            prior=design.prior,
            x_prior=design.x_prior,
            draws=settings.mcmc_draws,
            tune=settings.mcmc_tune,
            chains=1,
            random_seed=seed + k,
            progressbar=False,
            compute_convergence_checks=False,
        )
        post = posterior_dataset(idata)
        theta = np.asarray(post["theta"])[0]
        out.append(np.concatenate([theta, np.asarray(post["sigma2"])[0][:, None]], axis=-1))
    return np.stack(out, axis=1)[None]


def run_regression_point(
    n: int,
    epsilon: float,
    settings: RegressionSettings,
    rng: np.random.Generator,
    design: SyntheticDesign | None = None,
) -> RegressionPoint:
    """Simulate ``settings.trials`` trials at (n, ε) and score every method.

    Parameters
    ----------
    n, epsilon
        Records per data set and total privacy budget of each release.
    settings
        Trials, sampler and scoring settings.
    rng
        Source of all randomness of this point.
    design
        Priors and bounds (default :class:`SyntheticDesign`).

    Returns
    -------
    RegressionPoint

    Raises
    ------
    ValueError
        If ``settings.default_x_prior`` is neither ``"box"`` nor ``"design"``.
    """
    design = design or SyntheticDesign()
    if settings.default_x_prior not in ("box", "design"):
        raise ValueError(
            f"settings.default_x_prior must be 'box' or 'design', got {settings.default_x_prior!r}"
        )
    trials = settings.trials
    truth, x, y, redrawn = simulate_trials(rng, design, trials=trials, n=n)
    bounds = {
        "x_bounds": [(-design.x_bound, design.x_bound)],
        "y_bounds": (-design.y_bound, design.y_bound),
    }
    full = [
        release_regression(x[t], y[t], epsilon=epsilon, rng=rng, **bounds) for t in range(trials)
    ]
    split = [
        release_regression(
            x[t], y[t], epsilon=epsilon, moments_share=design.moments_share, rng=rng, **bounds
        )
        for t in range(trials)
    ]
    draws: dict[str, npt.NDArray[np.float64]] = {}
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    exact = nig_update(
        design.prior,
        statistic=np.stack([regression_statistic(x[t], y[t]) for t in range(trials)]),
        n=n,
    )
    draws["nonprivate"] = _iid(rng, exact, settings.reference_draws)
    seconds["nonprivate"] = time.perf_counter() - start

    start = time.perf_counter()
    naive = naive_regression_posterior(np.stack([r.value for r in full]), n=n, prior=design.prior)
    draws["naive"] = _iid(rng, naive, settings.reference_draws)
    seconds["naive"] = time.perf_counter() - start

    gibbs = {"draws": settings.draws, "tune": settings.tune, "chains": settings.chains}
    start = time.perf_counter()
    moments = XMoments.stack([x_moments_from_release(r) for r in split])
    tr = sample_gibbs_ss(
        rng, released=np.stack([r.value for r in split]), n=n, scale=split[0].scale,
        prior=design.prior, x_moments=moments, **gibbs,
    )  # fmt: skip
    draws["gibbs_noisy"] = _stack(tr.theta, tr.sigma2)
    seconds["gibbs_noisy"] = time.perf_counter() - start

    start = time.perf_counter()
    tr = sample_gibbs_ss(
        rng, released=np.stack([r.value for r in full]), n=n, scale=full[0].scale,
        prior=design.prior, x_prior=design.x_prior, **gibbs,
    )  # fmt: skip
    draws["gibbs_update"] = _stack(tr.theta, tr.sigma2)
    seconds["gibbs_update"] = time.perf_counter() - start

    start = time.perf_counter()
    if settings.default_x_prior == "design":
        x_prior = design.x_prior
    else:
        x_prior = default_x_prior(bounds["x_bounds"])
    tr = sample_regression(
        rng, released=np.stack([r.value for r in full]), n=n, scale=full[0].scale,
        prior=design.prior, x_prior=x_prior,
        tries=settings.default_tries, **gibbs,
    )  # fmt: skip
    draws["default"] = _stack(tr.theta, tr.sigma2)
    seconds["default"] = time.perf_counter() - start

    if settings.mcmc_trials and n <= settings.mcmc_max_n:
        k = min(settings.mcmc_trials, trials)
        start = time.perf_counter()
        seed = int(rng.integers(2**31))
        draws["mcmc_ind"] = _mcmc_ind_draws(full[:k], design, settings, seed)
        seconds["mcmc_ind"] = time.perf_counter() - start

    ks, pvals, cover, quantiles, counts = {}, {}, {}, {}, {}
    for method, d in draws.items():
        iid = method in ("nonprivate", "naive")
        u = calibration_quantiles(d, truth[: d.shape[2]], rng=rng, thin=not iid)
        tests = [ks_statistic(u[:, j]) for j in range(3)]
        ks[method] = [t.statistic for t in tests]
        pvals[method] = [t.pvalue for t in tests]
        cover[method] = [interval_coverage(u[:, j], (0.95,))[0.95] for j in range(3)]
        quantiles[method] = u
        counts[method] = int(d.shape[2])

    # MMD² on the three parameters standardised by each trial's non-private posterior sd, so
    # that it is unitless and comparable across n (bandwidth 1).
    m = settings.mmd_draws
    ref = draws["nonprivate"][0]  # (draws, trials, 3)
    sd = ref.std(axis=0)
    reference = np.moveaxis(ref[:m], 0, 1) / sd[:, None]
    mmd, per_trial = {}, {}
    for method in ("naive", "gibbs_noisy", "gibbs_update", "default"):
        d = draws[method][0]
        d = d[:: max(1, d.shape[0] // m)][:m]  # thinned evenly (Gibbs draws are correlated)
        per_trial[method] = mmd2_unbiased(
            np.moveaxis(d, 0, 1) / sd[:, None], reference, event_ndim=1
        )
        v = per_trial[method]
        mmd[method] = (float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)))
    diff = per_trial["gibbs_noisy"] - per_trial["naive"]
    gain = per_trial["default"] - per_trial["gibbs_update"]
    return RegressionPoint(
        n=n,
        epsilon=epsilon,
        ks=ks,
        ks_pvalue=pvals,
        coverage95=cover,
        mmd2=mmd,
        mmd_difference=(float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size))),
        default_mmd_difference=(
            float(gain.mean()),
            float(gain.std(ddof=1) / np.sqrt(gain.size)),
        ),
        seconds=seconds,
        trials=counts,
        redrawn=redrawn,
        quantiles=quantiles,
    )
