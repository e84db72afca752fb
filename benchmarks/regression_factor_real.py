"""A factor of many levels on real data: the default (the cell model) against the normal model of x.

Two data sets that ship with statsmodels (the ``test`` extra; nothing is downloaded):

* ``anes96``: 944 respondents of the 1996 American National Election Study; the response is
  how many days a week they watch the TV news (0–7, public box mapped to [−1, 1]), the
  covariates the six dummy columns of education (7 levels, the reference level 3, high school).
* ``grunfeld``: 220 firm-years of 11 US firms (Grunfeld 1958); the response is log investment
  (public box [−1, 8] mapped to [−1, 1]), the covariates the ten dummy columns of the firm (the
  reference General Motors).

Each data set is released with ``release_regression(..., factor=[...])`` (the curator declares
the dummy columns; every box [0, 1]) and fitted by ``pm.sample`` (2 chains × (1000 + 1000),
one process) with the README's model (θ | σ² ~ N(0, 10σ²I), σ² ~ IG(3, 0.1)), once as a user
writes it (``x_model="auto"``, which takes the cell model for a declared factor up to
``CELLS_MIX_D`` = 10 columns) and once with ``x_model="normal"``. Printed per fit: the model of x,
wall seconds, the smallest bulk ESS and largest R-hat over (θ, σ²), how many of the d + 1
non-private least-squares coefficients lie inside their 90 % central intervals, and the mean
width of those intervals.

    python benchmarks/regression_factor_real.py --data anes96 grunfeld --epsilon 1 --releases 2
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import arviz as az
import numpy as np
from regression_ess import sample_readme_model

from pymc_dp._compat import posterior_dataset
from pymc_dp.regression import regression_attrs, release_regression


def anes96() -> tuple[np.ndarray, np.ndarray]:
    """(dummy columns of education, TV news days mapped to [−1, 1])."""
    import statsmodels.api as sm

    data = sm.datasets.anes96.load_pandas().data
    levels = [1.0, 2.0, 4.0, 5.0, 6.0, 7.0]  # 3.0 (high school) is the reference
    x = (data["educ"].to_numpy()[:, None] == np.array(levels)).astype(float)
    return x, (data["TVnews"].to_numpy() - 3.5) / 3.5


def grunfeld() -> tuple[np.ndarray, np.ndarray]:
    """(dummy columns of the firm, log investment from [−1, 8] mapped to [−1, 1])."""
    import statsmodels.api as sm

    data = sm.datasets.grunfeld.load_pandas().data
    firms = sorted(set(data["firm"]) - {"General Motors"})
    x = (data["firm"].to_numpy()[:, None] == np.array(firms)).astype(float)
    return x, (np.log(data["invest"].to_numpy()) - 3.5) / 4.5


DATA = {"anes96": anes96, "grunfeld": grunfeld}


def fit(rel, d: int, x_model: str, seed: int) -> tuple[object, str, float]:
    """The README's model under ``pm.sample`` defaults; the x-model it chose; the seconds."""
    start = time.perf_counter()
    kwargs = {"x_model": x_model}
    idata, model = sample_readme_model(rel, d, 1000, 1000, seed, kwargs)
    return idata, regression_attrs(model)["pymc_dp_x_model_z"], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", choices=tuple(DATA), default=["anes96"])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--releases", type=int, default=1, help="noise seeds 100, 101, ...")
    parser.add_argument("--x-models", nargs="+", default=["auto", "normal"])
    args = parser.parse_args()
    for name in args.data:
        x, y = DATA[name]()
        n, d = x.shape
        design = np.column_stack([np.ones(n), x])
        ols = np.linalg.lstsq(design, y, rcond=None)[0]
        for r in range(args.releases):
            rel = release_regression(x, y, x_bounds=[(0.0, 1.0)] * d, y_bounds=(-1.0, 1.0),
                                     epsilon=args.epsilon, factor=list(range(d)),
                                     rng=100 + r)  # fmt: skip
            for x_model in args.x_models:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    idata, chosen, seconds = fit(rel, d, x_model, seed=r)
                post = posterior_dataset(idata)
                parts = post[["theta", "sigma2"]]
                ess, rhat = az.ess(parts), az.rhat(parts)
                theta = post["theta"].values.reshape(-1, d + 1)
                lo, hi = np.quantile(theta, [0.05, 0.95], axis=0)
                row = {
                    "data": name, "n": n, "d": d, "epsilon": args.epsilon, "release": r,
                    "x_model": x_model, "chosen": chosen, "seconds": round(seconds, 1),
                    "ess_min": round(min(float(ess["theta"].min()), float(ess["sigma2"])), 1),
                    "rhat_max": round(max(float(rhat["theta"].max()), float(rhat["sigma2"])), 4),
                    "ols_inside": int(np.sum((lo < ols) & (ols < hi))),
                    "width_mean": round(float(np.mean(hi - lo)), 4),
                }  # fmt: skip
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
