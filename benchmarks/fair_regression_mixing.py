"""Mixing of the default regression sampler on statsmodels' ``fair`` data (issue 36).

``rate_marriage ~ yrs_married + educ``, box [0, 40] × [9, 20], y ∈ [1, 5], ε = 1, released as
``pymc-dp release`` does (release seed 1, Laplace); the command line's default model
(:func:`~pymc_dp.cli.regression.default_regression_model`) sampled with
``RegressionCollapsedStep(tries=...)``, 4 chains × 1000 draws after 500. Printed: ArviZ's summary
of θ, σ² and the model of x (R-hat, bulk and tail ESS), the chains' means and each chain's
acceptance of the multiple-try move. ``docs/regression.md`` has the numbers for 64 and 256
candidates at chain seeds 1 and 2.

Usage::

    python benchmarks/fair_regression_mixing.py --seed 1 --tries 64
    python benchmarks/fair_regression_mixing.py --seed 1 --tries 256
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings
from pathlib import Path

import arviz as az
import pymc as pm

from pymc_dp._compat import posterior_dataset
from pymc_dp.cli import main as cli
from pymc_dp.cli.regression import default_regression_model
from pymc_dp.curator.release_file import read_release
from pymc_dp.regression import RegressionCollapsedStep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="chain seed")
    parser.add_argument("--tries", type=int, default=256, help="candidates of the moment move")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=500)
    args = parser.parse_args(argv)
    import statsmodels.api as sm

    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    with tempfile.TemporaryDirectory() as tmp:
        csv, rel = Path(tmp) / "fair.csv", Path(tmp) / "fair.json"
        sm.datasets.fair.load_pandas().data.to_csv(csv, index=False)
        cli(["release", str(csv), "--family", "regression", "--x", "yrs_married,educ",
             "--y", "rate_marriage", "--x-bounds", "0", "40", "9", "20", "--y-bounds", "1", "5",
             "--epsilon", "1", "--seed", "1", "--mechanism", "laplace-float",
             "--output", str(rel)])  # fmt: skip
        entry = next(iter(read_release(rel, allow_columns=True).releases))
    model = default_regression_model(entry)
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            step=[RegressionCollapsedStep(tries=args.tries)], draws=args.draws, tune=args.tune,
            chains=4, cores=1, random_seed=args.seed, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    post = posterior_dataset(idata)
    print(f"tries {args.tries}, chain seed {args.seed}: {seconds:.1f} s")
    names = ["theta", "sigma2", "z_x_loc", "z_x_cov"]
    print(az.summary(post, var_names=names, kind="all").to_string())
    print("chain means of sigma2", post["sigma2"].mean("draw").values.round(3))
    accept = idata.sample_stats["moment_accept"].mean("draw").values
    print("moment move's acceptance per chain", accept.round(3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
