"""Figure 4 of Bernstein & Sheldon (2019): predictive coverage on the cirrhosis data.

Over random train/test splits of the 46 states (36 train, 10 test), each method's posterior of
(θ, σ²) from the training records gives predictive draws y* = (1, x*)ᵀθ + σ z at the test
covariates (:func:`pymc_dp.regression.predictive_draws`), and the test responses are scored
against the central 50 % and 90 % intervals (:func:`pymc_dp.regression.predictive_coverage`).

Settings of the paper (§4.3): covariate (wine consumption per capita, see
:func:`pymc_dp.datasets.load_cirrhosis`) and response scaled to [0, 1]; prior
NIG([1, 0], diag([.25, .25]), 20, .5) in the paper's order (coefficient of x first, intercept
last) with Λ a precision matrix and σ² ~ InvGamma(shape 20, scale .5), as in the authors' code;
in this package's order (intercept first) the mean is (0, 1). The paper does not state ε in the
text we have, so several are run. Gibbs-SS-Noisy spends ``moments_share`` of ε on the moments of
x; Gibbs-SS-Update (all ε on the statistic) needs a data prior of x, :data:`X_PRIOR`. The
default sampler (all ε on the statistic) takes its prior of x from the public box [0, 1]
(:func:`~pymc_dp.regression.default_x_prior`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.datasets import load_cirrhosis
from pymc_dp.regression import (
    NIG,
    NIW,
    XMoments,
    default_x_prior,
    draw_nig,
    naive_regression_posterior,
    nonprivate_regression_posterior,
    predictive_coverage,
    predictive_draws,
    release_regression,
    sample_gibbs_ss,
    sample_regression,
    x_moments_from_release,
)

__all__ = [
    "LEVELS",
    "PREDICTIVE_METHODS",
    "PRIOR",
    "X_PRIOR",
    "PredictiveResult",
    "PredictiveSettings",
    "run_predictive_study",
]

PRIOR = NIG(np.array([0.0, 1.0]), np.diag([0.25, 0.25]), np.array(20.0), np.array(0.5))
"""The paper's NIG([1, 0], diag([.25, .25]), 20, .5), intercept first: θ | σ² ~ N((0, 1),
4σ² I), σ² ~ InvGamma(20, 0.5) (mean 0.026)."""
X_PRIOR = NIW(np.array([0.5]), np.array(1.0), np.array(5.0), np.array([[0.15]]))
"""Gibbs-SS-Update's weak data prior of x on [0, 1]: μ_x | σ_x² ~ N(0.5, σ_x²),
σ_x² ~ InvGamma(2.5, 0.075) (mean 0.05, i.e. sd about 0.22). Our choice; the paper gives none."""
LEVELS = (0.5, 0.9)
PREDICTIVE_METHODS = ("nonprivate", "naive", "gibbs_noisy", "gibbs_update", "default")


@dataclasses.dataclass(frozen=True)
class PredictiveSettings:
    """Splits, privacy levels and sampler settings of the predictive study."""

    splits: int = 100
    n_test: int = 10
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0)
    moments_share: float = 0.2
    tune: int = 500
    draws: int = 2000
    chains: int = 2
    reference_draws: int = 4000
    covariate: str = "wine"


@dataclasses.dataclass(frozen=True)
class PredictiveResult:
    """Coverage of every method at one ε over all test points of all splits."""

    epsilon: float
    coverage: dict[str, dict[float, float]]
    """Method → level → fraction of test responses inside the central interval."""
    width90: dict[str, float]
    """Method → mean width of the central 90 % predictive interval."""
    test_points: int

    def to_rows(self) -> list[dict[str, Any]]:
        """One CSV row per method."""
        return [
            {
                "epsilon": self.epsilon,
                "method": m,
                "test_points": self.test_points,
                **{f"coverage_{lv:g}": c for lv, c in cov.items()},
                "width_0.9": self.width90[m],
            }
            for m, cov in self.coverage.items()
        ]


def _score(rng, theta, sigma2, x_test, y_test) -> tuple[npt.NDArray[np.bool_], float]:
    """Coverage indicators ``(levels, k)`` and mean 90 % width at one split's test points."""
    pred = predictive_draws(rng, theta=theta, sigma2=sigma2, x_new=x_test)
    hit = predictive_coverage(pred, y_test, LEVELS, sample_axes=pred.ndim - 1)
    lo, hi = np.quantile(pred.reshape(-1, pred.shape[-1]), [0.05, 0.95], axis=0)
    return hit, float(np.mean(hi - lo))


def run_predictive_study(
    settings: PredictiveSettings, rng: np.random.Generator
) -> list[PredictiveResult]:
    """Run the Figure 4 study at every ε of ``settings``.

    The same splits are used at every ε (drawn first), so the methods and privacy levels are
    compared on identical test points. Every release of a split is drawn from its own training
    records only; the non-private posterior is computed once per split.

    Parameters
    ----------
    settings
        Splits, ε values, sampler settings.
    rng
        Source of all randomness.

    Returns
    -------
    list of PredictiveResult
        One per ε, in the order of ``settings.epsilons``.
    """
    data = load_cirrhosis(settings.covariate)
    x, y = data.x, data.y
    n_all = x.shape[0]
    n_train = n_all - settings.n_test
    perms = np.stack([rng.permutation(n_all) for _ in range(settings.splits)])
    train, test = perms[:, :n_train], perms[:, n_train:]
    bounds = {"x_bounds": [data.x_bounds], "y_bounds": data.y_bounds}

    def collect(theta, sigma2, store):
        # theta (chain, draw, split, p): one predictive per split.
        for k in range(settings.splits):
            hit, width = _score(rng, theta[..., k, :], sigma2[..., k], x[test[k]], y[test[k]])
            store[0].append(hit)
            store[1].append(width)

    nonprivate = ([], [])
    posts = [nonprivate_regression_posterior(x[t], y[t], prior=PRIOR) for t in train]
    batch = NIG(*(np.stack([getattr(p, f) for p in posts]) for f in NIG._fields))
    theta, sigma2 = draw_nig(rng, batch, size=(1, settings.reference_draws))
    collect(theta, sigma2, nonprivate)

    results = []
    for eps in settings.epsilons:
        scores: dict[str, tuple[list, list]] = {"nonprivate": nonprivate}
        full = [release_regression(x[t], y[t], epsilon=eps, rng=rng, **bounds) for t in train]
        split = [
            release_regression(
                x[t], y[t], epsilon=eps, moments_share=settings.moments_share, rng=rng, **bounds
            )
            for t in train
        ]
        naive = naive_regression_posterior(
            np.stack([r.value for r in full]), n=n_train, prior=PRIOR
        )
        scores["naive"] = ([], [])
        collect(*draw_nig(rng, naive, size=(1, settings.reference_draws)), scores["naive"])
        gibbs = {"draws": settings.draws, "tune": settings.tune, "chains": settings.chains}
        tr = sample_gibbs_ss(
            rng, released=np.stack([r.value for r in split]), n=n_train, scale=split[0].scale,
            prior=PRIOR, x_moments=XMoments.stack([x_moments_from_release(r) for r in split]),
            **gibbs,
        )  # fmt: skip
        scores["gibbs_noisy"] = ([], [])
        collect(tr.theta, tr.sigma2, scores["gibbs_noisy"])
        tr = sample_gibbs_ss(
            rng, released=np.stack([r.value for r in full]), n=n_train, scale=full[0].scale,
            prior=PRIOR, x_prior=X_PRIOR, **gibbs,
        )  # fmt: skip
        scores["gibbs_update"] = ([], [])
        collect(tr.theta, tr.sigma2, scores["gibbs_update"])
        tr = sample_regression(
            rng, released=np.stack([r.value for r in full]), n=n_train, scale=full[0].scale,
            prior=PRIOR, x_prior=default_x_prior(bounds["x_bounds"]), **gibbs,
        )  # fmt: skip
        scores["default"] = ([], [])
        collect(tr.theta, tr.sigma2, scores["default"])
        coverage, width = {}, {}
        for method, (hits, widths) in scores.items():
            hit = np.concatenate(hits, axis=1)  # (levels, splits * n_test)
            coverage[method] = {lv: float(hit[i].mean()) for i, lv in enumerate(LEVELS)}
            width[method] = float(np.mean(widths))
        results.append(PredictiveResult(eps, coverage, width, settings.splits * settings.n_test))
    return results
