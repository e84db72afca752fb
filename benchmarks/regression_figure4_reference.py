"""Figure 4 at one ε: the default regression sampler against MCMC-Ind on the same releases.

On the cirrhosis data (settings of :mod:`pymc_dp.studies.regression_predictive`), each split's
training records are released once (all ε on the statistic), and the same release is fitted by

* **default**: :func:`pymc_dp.regression.sample_regression` (the batched engine of
  ``NoisyRegressionStat``'s default sampler), with the prior of x from the public box;
* **mcmc_ind**: :func:`pymc_dp.regression.sample_mcmc_ind`, NUTS over the 36 latent records under
  the same priors: the exact posterior of the same model, with no CLT and no augmentation.

The non-private posterior of the same split is the reference of the study. Printed: each method's
50 % and 90 % predictive coverage over all test points, and per test point the gap between the
default's and MCMC-Ind's predictive means in units of MCMC-Ind's predictive sd, and the ratio
of their predictive sds. If the default and MCMC-Ind agree, a coverage gap to non-private at this
ε is the information the release carries, not the sampler.

Usage::

    python benchmarks/regression_figure4_reference.py --splits 30 --epsilon 1
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

import numpy as np

from pymc_dp._compat import posterior_dataset
from pymc_dp.datasets import load_cirrhosis
from pymc_dp.regression import (
    default_x_prior,
    draw_nig,
    nonprivate_regression_posterior,
    predictive_coverage,
    predictive_draws,
    release_regression,
    sample_mcmc_ind,
    sample_regression,
)
from pymc_dp.studies.regression_predictive import LEVELS, PRIOR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=30)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--n-test", type=int, default=10)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--output", default=None, help="write the summary as JSON here")
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    rng = np.random.default_rng(args.seed)
    data = load_cirrhosis("wine")
    x, y = data.x, data.y
    n_all = x.shape[0]
    n_train = n_all - args.n_test
    bounds = {"x_bounds": [data.x_bounds], "y_bounds": data.y_bounds}
    x_prior = default_x_prior(bounds["x_bounds"])
    perms = np.stack([rng.permutation(n_all) for _ in range(args.splits)])
    train, test = perms[:, :n_train], perms[:, n_train:]
    rels = [release_regression(x[t], y[t], epsilon=args.epsilon, rng=rng, **bounds) for t in train]

    start = time.perf_counter()
    tr = sample_regression(
        rng, released=np.stack([r.value for r in rels]), n=n_train, scale=rels[0].scale,
        prior=PRIOR, x_prior=x_prior, draws=args.draws, tune=args.tune, chains=2,
    )  # fmt: skip
    seconds = {"default": time.perf_counter() - start, "mcmc_ind": 0.0}
    hits: dict[str, list] = {"nonprivate": [], "default": [], "mcmc_ind": []}
    gaps, sd_ratios, divergences = [], [], 0
    for k in range(args.splits):
        xt, yt = x[test[k]], y[test[k]]
        post = nonprivate_regression_posterior(x[train[k]], y[train[k]], prior=PRIOR)
        theta, sigma2 = draw_nig(rng, post, size=(1, 2 * args.draws))
        pred = {"nonprivate": predictive_draws(rng, theta=theta, sigma2=sigma2, x_new=xt)}
        pred["default"] = predictive_draws(
            rng, theta=tr.theta[:, :, k], sigma2=tr.sigma2[:, :, k], x_new=xt
        )
        start = time.perf_counter()
        idata = sample_mcmc_ind(
            rels[k], prior=PRIOR, x_prior=x_prior, draws=args.draws, tune=args.tune, chains=2,
            cores=1, random_seed=int(rng.integers(2**31)), progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
        seconds["mcmc_ind"] += time.perf_counter() - start
        divergences += int(idata.sample_stats["diverging"].sum())
        post = posterior_dataset(idata)
        pred["mcmc_ind"] = predictive_draws(
            rng, theta=post["theta"].values, sigma2=post["sigma2"].values, x_new=xt
        )
        for method, draws in pred.items():
            hits[method].append(predictive_coverage(draws, yt, LEVELS, sample_axes=2))
        flat_d = pred["default"].reshape(-1, xt.shape[0])
        flat_m = pred["mcmc_ind"].reshape(-1, xt.shape[0])
        gaps.append((flat_d.mean(0) - flat_m.mean(0)) / flat_m.std(0))
        sd_ratios.append(flat_d.std(0) / flat_m.std(0))
        print(f"split {k + 1}/{args.splits}: mean gap {np.mean(np.abs(gaps[-1])):.3f} sd, "
              f"sd ratio {np.mean(sd_ratios[-1]):.3f}", flush=True)  # fmt: skip
    summary = {"settings": vars(args), "seconds": seconds, "divergences": divergences}
    print(f"\neps={args.epsilon:g}, {args.splits} splits, {args.splits * args.n_test} test points")
    for method, h in hits.items():
        cov = np.concatenate(h, axis=1).mean(axis=1)
        summary[method] = {f"coverage_{lv:g}": float(c) for lv, c in zip(LEVELS, cov, strict=True)}
        print(f"{method:11s} 50% {cov[0]:.3f}  90% {cov[1]:.3f}")
    gaps_all, ratios_all = np.concatenate(gaps), np.concatenate(sd_ratios)
    summary["gap_abs_mean"] = float(np.mean(np.abs(gaps_all)))
    summary["gap_abs_max"] = float(np.max(np.abs(gaps_all)))
    summary["sd_ratio_mean"] = float(np.mean(ratios_all))
    summary["sd_ratio_range"] = [float(ratios_all.min()), float(ratios_all.max())]
    print(f"default - mcmc_ind predictive mean, in mcmc_ind sds: mean |gap| "
          f"{summary['gap_abs_mean']:.3f}, max {summary['gap_abs_max']:.3f}")  # fmt: skip
    print(f"default / mcmc_ind predictive sd: mean {summary['sd_ratio_mean']:.3f}, range "
          f"{ratios_all.min():.3f}-{ratios_all.max():.3f}")  # fmt: skip
    print(f"seconds: default {seconds['default']:.1f} (all splits, batched), mcmc_ind "
          f"{seconds['mcmc_ind']:.1f}; divergences {divergences}")  # fmt: skip
    if args.output:
        with open(args.output, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
