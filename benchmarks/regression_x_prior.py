"""The default regression sampler's calibration with the box's prior of x and with the true one.

On the synthetic design of the Figure 3 study (:class:`pymc_dp.studies.regression.SyntheticDesign`),
``trials`` data sets are drawn at one (n, ε) and released; the same releases are fitted by
:func:`pymc_dp.regression.sample_regression` twice: with the prior of x a user gets from the
public box (:func:`pymc_dp.regression.default_x_prior`), and with the design's own prior of x,
which generated the data (``--priors`` picks one or both). Printed per fit: the 95 % coverage
of θ₀, θ₁, σ² and the KS statistic of their calibration quantiles. A gap that appears only with
the box's prior comes from the model of x, not from the sampler.

Usage::

    python benchmarks/regression_x_prior.py --n 10 --epsilon 10 --trials 400 --seed 77
    python benchmarks/regression_x_prior.py --n 300 --epsilon 0.1 --priors design
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from scipy import stats

from pymc_dp.regression import default_x_prior, release_regression, sample_regression
from pymc_dp.studies.regression import SyntheticDesign, simulate_trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=77)
    parser.add_argument(
        "--priors", nargs="+", choices=("box", "design"), default=["box", "design"],
        help="priors of x to fit (the same releases)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    design = SyntheticDesign()
    truth, xs, ys, _ = simulate_trials(rng, design, trials=args.trials, n=args.n)
    bounds = {
        "x_bounds": [(-design.x_bound, design.x_bound)],
        "y_bounds": (-design.y_bound, design.y_bound),
    }
    rels = [
        release_regression(x, y, epsilon=args.epsilon, rng=rng, **bounds) for x, y in zip(xs, ys)
    ]
    z = np.stack([r.value for r in rels])
    priors = {"box": default_x_prior(bounds["x_bounds"]), "design": design.x_prior}
    for label in args.priors:
        x_prior = priors[label]
        tr = sample_regression(
            rng, released=z, n=args.n, scale=rels[0].scale, prior=design.prior, x_prior=x_prior,
            tries=8, draws=1000, tune=300,
        )  # fmt: skip
        draws = np.concatenate([tr.theta, tr.sigma2[..., None]], axis=-1)  # (chain, draw, trial, 3)
        q = np.mean(draws.reshape(-1, args.trials, 3) < truth[None], axis=0)
        cover = np.mean((q > 0.025) & (q < 0.975), axis=0)
        ks = [stats.kstest(q[:, j], "uniform").statistic for j in range(3)]
        print(f"n={args.n} eps={args.epsilon:g} prior of x from the {label}: cov95 (θ₀, θ₁, σ²) "
              + " ".join(f"{c:.3f}" for c in cover) + "  KS " + " ".join(f"{k:.3f}" for k in ks),
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
