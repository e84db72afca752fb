"""One grid point of the paper's §4 study: calibration and utility of every method at (n, ε).

:func:`run_point` simulates all trials of one (model, n, ε) point at once, runs the DP Gibbs
sampler on every release in one batched call of :func:`pymc_dp.engine.gibbs.sample_gibbs` (no PyMC
model compile per trial), and scores four methods by the quantile of the true θ in their
posterior:

- **Gibbs**: the DP Gibbs sampler (Algorithms 1 and 2);
- **Non-private**: the conjugate posterior given the exact statistic (reference);
- **Naive**: the conjugate posterior treating the noisy statistic as exact;
- **OPS**: one-posterior sampling, 100 samples at ε/100 each (Binomial only, as in the paper).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.measures import (
    calibration_quantiles,
    interval_coverage,
    ks_statistic,
    mmd2_unbiased,
)
from pymc_dp.mechanisms.one_posterior import one_posterior_sample_from_statistic
from pymc_dp.studies.designs import Design

__all__ = ["METHODS", "MethodScore", "PointResult", "StudySettings", "run_point"]

METHODS = ("gibbs", "nonprivate", "naive", "ops")
"""Method keys, in legend order."""

COVERAGE_LEVELS = (0.5, 0.9, 0.95)


@dataclasses.dataclass(frozen=True)
class StudySettings:
    """Sampler and scoring settings shared by every grid point.

    Parameters
    ----------
    trials
        Calibration trials per grid point (the paper: 1000).
    tune, draws
        Gibbs burn-in and kept iterations (the paper: 2000 and 5000).
    ops_samples
        Samples released by OPS, each at ε / ops_samples (the paper: 100).
    ops_support
        Support of p that OPS truncates to (the paper: [0.1, 0.9]).
    mmd_draws
        Draws per posterior in the MMD² estimate (Gibbs draws thinned evenly to this many).
    mmd_bandwidth
        Gaussian-kernel bandwidth of the MMD (the paper: 1, a "standard normal kernel").
    likelihood
        The DP sampler's likelihood for s (:func:`pymc_dp.engine.gibbs.sample_gibbs`): ``"auto"``
        takes the exact sum where the CLT is outside its safe region, ``"clt"`` is the paper's.
    """

    trials: int = 1000
    tune: int = 2000
    draws: int = 5000
    ops_samples: int = 100
    ops_support: tuple[float, float] = (0.1, 0.9)
    mmd_draws: int = 500
    mmd_bandwidth: float = 1.0
    likelihood: str = "auto"


@dataclasses.dataclass(frozen=True)
class MethodScore:
    """Calibration and utility of one method at one grid point."""

    ks: float
    """KS statistic of the calibration quantiles against Uniform(0, 1)."""
    ks_pvalue: float
    coverage: dict[float, float]
    """Fraction of trials whose true θ lies in the central credible interval, by level."""
    sd_ratio: float
    """Median over trials of the posterior sd of the calibrated scalar / the non-private sd."""
    mmd2: float | None = None
    """Mean over trials of the unbiased MMD² to the non-private posterior."""
    mmd2_se: float | None = None


@dataclasses.dataclass(frozen=True)
class PointResult:
    """Every method's score at one (model, n, ε) point."""

    design: str
    n: int
    epsilon: float
    scores: dict[str, MethodScore]
    quantiles: dict[str, npt.NDArray[np.float64]]
    """Each method's calibration quantiles (one per trial), for ECDF plots."""
    mmd_gibbs_minus_naive: tuple[float, float] | None
    """Mean and standard error over trials of the paired difference of MMD², if computed."""
    gibbs_median_ess: float
    seconds: float

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat table row per method (for CSV)."""
        rows = []
        for method, score in self.scores.items():
            row = {"model": self.design, "n": self.n, "epsilon": self.epsilon, "method": method}
            row.update(ks=score.ks, ks_pvalue=score.ks_pvalue, sd_ratio=score.sd_ratio)
            row.update({f"coverage_{level:g}": c for level, c in score.coverage.items()})
            row.update(mmd2=score.mmd2, mmd2_se=score.mmd2_se)
            rows.append(row)
        return rows


def _score(u, sd, reference_sd, mmd=None) -> MethodScore:
    ks = ks_statistic(u)
    mean = se = None
    if mmd is not None:
        mean, se = float(np.mean(mmd)), float(np.std(mmd, ddof=1) / np.sqrt(mmd.size))
    return MethodScore(
        ks=float(ks.statistic),
        ks_pvalue=float(ks.pvalue),
        coverage=interval_coverage(u, COVERAGE_LEVELS),
        sd_ratio=float(np.median(sd / reference_sd)),
        mmd2=mean,
        mmd2_se=se,
    )


def run_point(
    design: Design,
    n: int,
    epsilon: float,
    settings: StudySettings,
    rng: np.random.Generator,
    *,
    with_mmd: bool = True,
) -> PointResult:
    """Simulate ``settings.trials`` trials at (n, ε) and score every method.

    Parameters
    ----------
    design
        One of :data:`pymc_dp.studies.designs.DESIGNS`.
    n, epsilon
        Records per data set and the privacy parameter of each release.
    settings
        Trial count, sampler and scoring settings.
    rng
        Source of all randomness of this point.
    with_mmd
        Whether to estimate MMD² to the non-private posterior (the paper does for the
        Binomial and Multinomial models).

    Returns
    -------
    PointResult
    """
    start = time.perf_counter()
    sim = design.simulate(rng, trials=settings.trials, n=n, epsilon=epsilon)
    truth = design.scalar(sim.truth)
    fam = design.family

    exact = design.conjugate_posterior(sim.statistic, n)
    naive = design.naive_posterior(sim.naive_input, n)
    trace = sample_gibbs(
        rng,
        family=fam,
        prior=design.prior,
        released=sim.released,
        n=n,
        scale=sim.scale,
        draws=settings.draws,
        tune=settings.tune,
        bounds=design.bounds,
        likelihood=settings.likelihood,
    )
    gibbs = design.scalar(trace.theta)  # (chain, draw, trials)

    exact_marginal, naive_marginal = design.marginal(exact), design.marginal(naive)
    reference_sd = exact_marginal.std()
    u = {
        "gibbs": calibration_quantiles(gibbs, truth, rng=rng),
        "nonprivate": exact_marginal.cdf(truth),
        "naive": naive_marginal.cdf(truth),
    }
    sd = {
        "gibbs": gibbs.std(axis=(0, 1)),
        "nonprivate": reference_sd,
        "naive": naive_marginal.std(),
    }
    if design.name == "binomial":
        ops = one_posterior_sample_from_statistic(
            rng,
            statistic=sim.statistic,
            n=n,
            trials=fam.trials,
            epsilon=epsilon,
            prior=design.prior,
            samples=settings.ops_samples,
            support=settings.ops_support,
        )  # (trials, samples)
        u["ops"] = calibration_quantiles(ops.T[None], truth, rng=rng, thin=False)
        sd["ops"] = ops.std(axis=1)

    mmd, difference = {}, None
    if with_mmd:
        m = settings.mmd_draws
        kernel = {"bandwidth": settings.mmd_bandwidth, "event_ndim": len(fam.stat_shape)}
        reference = design.draw_posterior(rng, exact, m)
        step = max(1, settings.draws // m)
        thinned = np.moveaxis(trace.theta[0, ::step][:m], 0, 1)  # (trials, m, ...)
        mmd["gibbs"] = mmd2_unbiased(thinned, reference, **kernel)
        mmd["naive"] = mmd2_unbiased(design.draw_posterior(rng, naive, m), reference, **kernel)
        d = mmd["gibbs"] - mmd["naive"]
        difference = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)))

    scores = {k: _score(u[k], sd[k], reference_sd, mmd.get(k)) for k in u}
    ess = _median_ess(gibbs)
    return PointResult(
        design=design.name,
        n=n,
        epsilon=epsilon,
        scores=scores,
        quantiles={k: np.asarray(v, dtype=np.float64) for k, v in u.items()},
        mmd_gibbs_minus_naive=difference,
        gibbs_median_ess=ess,
        seconds=time.perf_counter() - start,
    )


def _median_ess(draws: npt.NDArray[np.float64]) -> float:
    import arviz as az

    ess = np.asarray(az.ess(az.convert_to_dataset(draws))["x"])
    return float(np.nanmedian(ess))
