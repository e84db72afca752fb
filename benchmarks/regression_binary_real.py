"""A binary covariate on real data: scikit-learn's diabetes set, with and without ``binary=``.

442 patients; the response is a measure of disease progression one year on, the covariates the
body-mass index and sex (two values, coded 0 and 1 here). Public boxes (chosen without looking
at the data beyond plausibility): BMI in [15, 45] and progression in [0, 400], both mapped to
[−1, 1]; sex in [0, 1]. For each of ``--releases`` releases of the same data (noise seeds 100,
101, ...) both the default (the normal model of x) and the mixed model (``binary=1``) sample the
posterior in the batched engine (the README's priors: θ | σ² ~ N(0, 10σ² I), σ² ~ IG(3, 0.1)).
Printed per model: how often the non-private least-squares coefficients lie inside the 90 %
central interval, and the mean interval width. Needs scikit-learn (its copy of the data ships
with it; nothing is downloaded).

Usage::

    python benchmarks/regression_binary_real.py --epsilon 1 --releases 40
"""

from __future__ import annotations

import argparse

import numpy as np

from pymc_dp.regression import (
    NIG,
    default_mixed_x_prior,
    default_x_prior,
    release_regression,
    sample_mixed_regression,
    sample_regression,
)

BOX = [(-1.0, 1.0), (0.0, 1.0)]


def diabetes() -> tuple[np.ndarray, np.ndarray]:
    """(x, y) on the public boxes: x = ((BMI − 30)/15, sex − 1), y = (progression − 200)/200."""
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        raise SystemExit("this benchmark needs scikit-learn: pip install scikit-learn") from None
    data = load_diabetes(scaled=False)
    x = np.column_stack([(data.data[:, 2] - 30.0) / 15.0, data.data[:, 1] - 1.0])
    return x, (data.target - 200.0) / 200.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--releases", type=int, default=40)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=500)
    args = parser.parse_args(argv)
    x, y = diabetes()
    design = np.column_stack([np.ones(len(y)), x])
    ols = np.linalg.lstsq(design, y, rcond=None)[0]
    rels = [
        release_regression(x, y, x_bounds=BOX, y_bounds=(-1, 1), epsilon=args.epsilon, rng=100 + r)
        for r in range(args.releases)
    ]
    z = np.stack([r.value for r in rels])
    prior = NIG(np.zeros(3), 0.1 * np.eye(3), np.array(3.0), np.array(0.1))
    common = {"released": z, "n": rels[0].n, "prior": prior, "scale": rels[0].scale,
              "draws": args.draws, "tune": args.tune}  # fmt: skip
    print(f"n = {len(y)}, eps = {args.epsilon:g}, Laplace scale {rels[0].scale:.3g}; "
          f"least squares (intercept, BMI, sex) {np.round(ols, 3).tolist()}")  # fmt: skip
    traces = {
        "normal model (default)": sample_regression(1, x_prior=default_x_prior(BOX), **common),
        "mixed model (binary=1)": sample_mixed_regression(
            1, x_prior=default_mixed_x_prior(BOX, 1), binary=1, **common
        ),
    }
    for name, trace in traces.items():
        theta = trace.theta.reshape(-1, args.releases, 3)
        lo, hi = np.quantile(theta, [0.05, 0.95], axis=0)
        inside = np.mean((ols >= lo) & (ols <= hi), axis=0)
        width = np.mean(hi - lo, axis=0)
        print(f"{name}: least squares inside the 90% interval {np.round(inside, 3).tolist()}, "
              f"mean width {np.round(width, 3).tolist()}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
