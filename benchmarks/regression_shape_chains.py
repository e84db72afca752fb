"""Per-chain means of the shape model under ``pm.sample`` on ``regression_ess.py``'s release.

Diagnoses a chain pair that does not mix (issue 34): the release of ``regression_ess.py --d 1``
(n = 500, ε = 1, ``moments_share=0.2``; the sums of x³ and x⁴ inform), ``x_model="shape"``,
2 chains with one chain seed, under γ's default prior (``cauchy``) or U(−2, 2) (``uniform``).
Prints each variable's per-chain mean and its R-hat.

Usage::

    python benchmarks/regression_shape_chains.py cauchy --draws 300 --tune 500 --seed 1
    python benchmarks/regression_shape_chains.py uniform --draws 300 --tune 500 --seed 1
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
from regression_ess import make_data

import pymc_dp.regression.model.noisy_regression as noisy
from pymc_dp.regression import NoisyRegressionStat, release_regression
from pymc_dp.regression.kernels.x_models import ShapePrior


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prior", choices=("cauchy", "uniform"))
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1, help="chain seed")
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.prior == "uniform":  # the node builds ShapePrior(); swap in the uniform one
        noisy.ShapePrior = lambda: ShapePrior(skew_scale=None)
    x, y = make_data(np.random.default_rng(1), 500, 1)
    rel = release_regression(x, y, epsilon=1.0, moments_share=0.2, rng=1,
                             x_bounds=[(-1.0, 1.0)], y_bounds=(-2.0, 2.0))  # fmt: skip
    start = time.perf_counter()
    with pm.Model():
        sigma2 = pm.InverseGamma("sigma2", 3.0, 0.1)
        theta = pm.MvNormal("theta", np.zeros(2), cov=10.0 * sigma2 * np.eye(2))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, x_model="shape")
        idata = pm.sample(draws=args.draws, tune=args.tune, chains=2, cores=1,
                          random_seed=args.seed, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    print(f"{args.prior}: {time.perf_counter() - start:.1f} s")
    post = idata.posterior
    for name in ("theta", "sigma2", "z_x_loc", "z_x_cov", "z_x_skew", "z_x_kurt"):
        means = post[name].mean([d for d in post[name].dims if d != "chain"]).values
        rhat = float(np.max(az.rhat(post[[name]])[name].values))
        print(f"{name:9s} per chain {np.round(means, 4)}  R-hat {rhat:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
