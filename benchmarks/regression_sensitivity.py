"""Δ before/after (sum of ranges vs exact L1) and the posterior width it buys (issue 17).

For d = 1, 2, 3 and two public boxes (x, y in [−1, 1]; the docs' box x in [−2, 2], y in
[−3, 3]) this prints the two sensitivities and runs Gibbs-SS-Update (the package's
:func:`~pymc_dp.regression.sample_gibbs_ss`) on the *same* data sets, the *same* standard
Laplace noise and the *same* sampler seed, once with each Δ: the released statistic is
``s + (Δ/ε)·e`` with ``e`` fixed. It reports the posterior sd of the first slope θ₁, averaged
over the data sets, the quartiles over data sets of the old/new sd ratio, and the non-private
conjugate posterior's sd for reference.

Usage::

    python benchmarks/regression_sensitivity.py --n 1000 --datasets 10 --tune 300 --draws 1000 \
        --output docs/figures/regression/sensitivity_gain.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pymc_dp.curator.regression.sensitivity import regression_sensitivity
from pymc_dp.curator.regression.statistics import regression_statistic
from pymc_dp.regression import sample_gibbs_ss
from pymc_dp.regression.kernels.conjugate import NIG, nig_update
from pymc_dp.regression.kernels.data_model import NIW

BOXES = {"unit": (1.0, 1.0), "docs": (2.0, 3.0)}


def run(
    *, n: int, epsilon: float, datasets: int, tune: int, draws: int, chains: int, seed: int
) -> list[dict]:
    rows = []
    for d in (1, 2, 3):
        for box_name, (xb, yb) in BOXES.items():
            x_bounds, y_bounds = [(-xb, xb)] * d, (-yb, yb)
            old = regression_sensitivity(x_bounds, y_bounds, bound="sum-of-ranges")
            new = regression_sensitivity(x_bounds, y_bounds)
            rng = np.random.default_rng([seed, d, len(box_name)])
            theta = np.concatenate([[0.1], 0.5 * (-0.6) ** np.arange(d)]) * yb / xb
            stats, released_noise = [], []
            for _ in range(datasets):
                x = np.clip(rng.normal(0.0, xb / 2.5, size=(n, d)), -xb, xb)
                y = np.clip(theta[0] + x @ theta[1:] + 0.2 * yb * rng.standard_normal(n), -yb, yb)
                stats.append(regression_statistic(x, y))
                released_noise.append(rng.laplace(size=stats[-1].shape))
            s, e = np.array(stats), np.array(released_noise)
            # σ² ~ InvGamma(20, 19 σ₀²): prior mean σ₀² = (0.2 b_y)², the data's noise variance.
            sigma0_sq = (0.2 * yb) ** 2
            prior = NIG(
                np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0), np.array(19.0 * sigma0_sq)
            )
            x_prior = NIW(np.zeros(d), np.array(4.0), np.array(20.0), 1.8 * np.eye(d) * xb**2)
            row = {"d": d, "box": box_name, "x_bound": xb, "y_bound": yb, "n": n,
                   "epsilon": epsilon, "delta_sum_of_ranges": old, "delta_exact": new,
                   "delta_ratio": old / new}  # fmt: skip
            per_set = {}
            for label, delta in (("old", old), ("new", new)):
                start = time.perf_counter()
                trace = sample_gibbs_ss(
                    seed, released=s + (delta / epsilon) * e, n=n, scale=delta / epsilon,
                    prior=prior, x_prior=x_prior, draws=draws, tune=tune, chains=chains,
                )  # fmt: skip
                slope = trace.theta[..., 1]  # (chain, draw, batch)
                per_set[label] = slope.std(axis=(0, 1))
                row[f"sd_theta1_{label}"] = float(per_set[label].mean())
                row[f"seconds_{label}"] = time.perf_counter() - start
            # Non-private NIG posterior: Var θ₁ = E[σ²] (Λ⁻¹)₁₁ = b / (a − 1) (Λ⁻¹)₁₁.
            post = nig_update(prior, statistic=s, n=n)
            var = post.scale / (post.shape - 1.0) * np.linalg.inv(post.precision)[..., 1, 1]
            row["sd_theta1_nonprivate"] = float(np.sqrt(var).mean())
            row["sd_ratio"] = row["sd_theta1_old"] / row["sd_theta1_new"]
            # Per data set: how far the average ratio is from Monte Carlo and data noise.
            ratios = per_set["old"] / per_set["new"]
            row["sd_ratio_quartiles"] = np.quantile(ratios, [0.25, 0.5, 0.75]).tolist()
            rows.append(row)
            print(json.dumps(row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=700)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    rows = run(n=args.n, epsilon=args.epsilon, datasets=args.datasets, tune=args.tune,
               draws=args.draws, chains=args.chains, seed=args.seed)  # fmt: skip
    if args.output:
        with open(args.output, "w") as fh:
            json.dump({"settings": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
