"""Laplace vs Gaussian mechanism for a regression release: sensitivities, noise, slope posterior.

For d = 1, 2, 3 covariates on the docs' box (x ∈ [−2, 2]^d, y ∈ [−3, 3]) this prints the exact
L1 and L2 sensitivities of the statistic, the Laplace scale b = Δ/ε at ε = 1 and the Gaussian
sd τ = Δ₂/√(2ρ) with ρ the largest zCDP budget that gives (ε = 1, δ = 1e-6)-DP
(:func:`~pymc_dp.mechanisms.vetted.rho_for_approx_dp`), both as recorded by real releases (the
fixed-point rounding included). Then, on one seeded data set (n = 500, the design of
``benchmarks/regression_sensitivity.py``), it releases the statistic with each mechanism
(vetted OpenDP noise for both, so the draws are not seeded) and reports the posterior sd of the
first slope θ₁ from the default sampler (:func:`~pymc_dp.regression.sample_regression`, NIW
prior from the box), and the non-private conjugate posterior's sd for reference.

With ``--ratios`` it prints instead, without sampling, the ratio of the two mechanisms' noise
sds per component, τ/(√2 b), for ε in 0.1, 1, 3, 10 at the same δ (rounding not included).

Usage::

    python benchmarks/regression_gaussian.py --n 500 --tune 300 --draws 1000 \
        --output docs/figures/regression/gaussian_gain.json
    python benchmarks/regression_gaussian.py --ratios
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from pymc_dp.curator.regression.sensitivity import regression_sensitivity, regression_sensitivity_l2
from pymc_dp.curator.regression.statistics import regression_statistic
from pymc_dp.mechanisms.vetted import rho_for_approx_dp
from pymc_dp.regression import release_regression, sample_regression
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig, nig_update
from pymc_dp.regression.model.default_prior import default_x_prior

X_BOUND, Y_BOUND = 2.0, 3.0


def run(*, n: int, epsilon: float, delta: float, tune: int, draws: int, seed: int) -> list[dict]:
    """One row per d: sensitivities, noise scales, and posterior sds of θ₁."""
    rho = rho_for_approx_dp(epsilon, delta)
    rows = []
    for d in (1, 2, 3):
        x_bounds, y_bounds = [(-X_BOUND, X_BOUND)] * d, (-Y_BOUND, Y_BOUND)
        rng = np.random.default_rng([seed, d])
        theta = np.concatenate([[0.1], 0.5 * (-0.6) ** np.arange(d)]) * Y_BOUND / X_BOUND
        x = np.clip(rng.normal(0.0, X_BOUND / 2.5, size=(n, d)), -X_BOUND, X_BOUND)
        y = np.clip(theta[0] + x @ theta[1:] + 0.2 * Y_BOUND * rng.standard_normal(n),
                    -Y_BOUND, Y_BOUND)  # fmt: skip
        bounds = dict(x_bounds=x_bounds, y_bounds=y_bounds)
        laplace = release_regression(x, y, epsilon=epsilon, mechanism="discrete-laplace", **bounds)
        gauss = release_regression(x, y, mechanism="discrete-gaussian", rho=rho, delta=delta,
                                   **bounds)  # fmt: skip
        sigma0_sq = (0.2 * Y_BOUND) ** 2
        prior = NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0),
                    np.array(19.0 * sigma0_sq))  # fmt: skip
        x_prior = default_x_prior(x_bounds)
        sds = {}
        for name, rel, noise in (("laplace", laplace, {"scale": laplace.scale}),
                                 ("gaussian", gauss, {"noise_sd": gauss.scale})):  # fmt: skip
            start = time.perf_counter()
            tr = sample_regression(rng, released=rel.value[None], n=n, prior=prior,
                                   x_prior=x_prior, draws=draws, tune=tune, chains=2,
                                   **noise)  # fmt: skip
            sds[name] = float(tr.theta[..., 0, 1].std())
            sds[f"{name}_seconds"] = time.perf_counter() - start
        exact, _ = draw_nig(rng, nig_update(prior, statistic=regression_statistic(x, y), n=n),
                            size=(20000,))  # fmt: skip
        row = {
            "d": d, "n": n, "epsilon": epsilon, "delta": delta, "rho": rho,
            "l1_sensitivity": regression_sensitivity(x_bounds, y_bounds),
            "l2_sensitivity": regression_sensitivity_l2(x_bounds, y_bounds),
            "laplace_scale": laplace.scale, "gaussian_tau": gauss.scale,
            "gaussian_epsilon": gauss.epsilon,
            "sd_theta1_laplace": sds["laplace"], "sd_theta1_gaussian": sds["gaussian"],
            "sd_theta1_nonprivate": float(exact[:, 1].std()),
            "seconds": sds["laplace_seconds"] + sds["gaussian_seconds"],
        }  # fmt: skip
        rows.append(row)
        print(
            f"d={d}  L1 {row['l1_sensitivity']:.2f}  L2 {row['l2_sensitivity']:.2f}  "
            f"b {row['laplace_scale']:.2f}  tau {row['gaussian_tau']:.2f}  sd θ1 laplace "
            f"{row['sd_theta1_laplace']:.4f} gaussian {row['sd_theta1_gaussian']:.4f} "
            f"non-private {row['sd_theta1_nonprivate']:.4f}  ({row['seconds']:.0f} s)",
            flush=True,
        )
    return rows


def ratios(delta: float) -> list[dict]:
    """τ/(√2 b), the Gaussian over the Laplace noise sd per component, by ε and d."""
    rows = []
    for epsilon in (0.1, 1.0, 3.0, 10.0):
        rho = rho_for_approx_dp(epsilon, delta)
        row = {"epsilon": epsilon, "rho": rho}
        for d in (1, 2, 3):
            x_bounds, y_bounds = [(-X_BOUND, X_BOUND)] * d, (-Y_BOUND, Y_BOUND)
            tau = regression_sensitivity_l2(x_bounds, y_bounds) / math.sqrt(2.0 * rho)
            b = regression_sensitivity(x_bounds, y_bounds) / epsilon
            row[f"d{d}"] = tau / (math.sqrt(2.0) * b)
        rows.append(row)
        print(f"eps={epsilon:g} rho={rho:.5f} " + " ".join(
            f"d={d}: {row[f'd{d}']:.2f}" for d in (1, 2, 3)), flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and optionally write the rows as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    parser.add_argument("--ratios", action="store_true", help="noise sd ratios only")
    args = parser.parse_args(argv)
    if args.ratios:
        ratios(args.delta)
        return 0
    rows = run(n=args.n, epsilon=args.epsilon, delta=args.delta, tune=args.tune,
               draws=args.draws, seed=args.seed)  # fmt: skip
    if args.output:
        with open(args.output, "w") as fh:
            json.dump({"settings": vars(args), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
