"""Calibration of the regression samplers when the covariates are not normal (issue 34).

Grid: x normal / uniform on a sub-box / clipped exponential / binary × n × ε × with and
without released degree 3–4 moments (``moments_share=0.2``). Per trial: θ, σ² from the NIG
prior of the synthetic study (θ | σ² ~ N(0, 2σ² I), σ² ~ InvGamma(20, 1.9)), x from the design,
y = θ₀ + θ₁x + N(0, σ²), redrawn when a record falls off the public box: y ∈ [−3, 3], x ∈
[−2, 2] ([0, 1] for binary). Every method samples the same releases, batched:

* ``default``: the package's collapsed sampler (``sample_regression``) with the NIW prior of
  x from the box; with released moments (d = 1) it takes them (``moments=``): x follows the
  shape family (skewness, kurtosis) and the noisy degree 3–4 sums are observed with their
  Laplace noise (:mod:`pymc_dp.regression.kernels.shape_law`; ``x_model="shape"`` of the
  node, opt-in), without them the normal model;
* ``default_normal``: the same sampler ignoring released moments (what the package's default,
  ``x_model="auto"``, does; identical to ``default`` without moments);
* ``shape``: Gibbs-SS with the shape model of x (:mod:`pymc_dp.regression.kernels.x_models`,
  (γ, κ) with a prior covering uniform to exponential; the released moments when present);
* ``binary``: Gibbs-SS with the binary model of x (binary design only);
* ``gibbs_noisy``: Gibbs-SS with the release's noisy moments plugged in (with moments only);
* ``gibbs_update``: Gibbs-SS-Update (normal model of x, NIW prior from the box).

Printed: the 90 % central-interval coverage of θ₀, θ₁ and σ² with the two-sided 99 % binomial
band around 0.90 for the number of trials, flagged ``*`` when outside, and the wall time.

Usage::

    python benchmarks/regression_x_models.py --quick
    python benchmarks/regression_x_models.py --trials 200 --designs uniform --n 100 --eps 1
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np
from scipy import stats

from pymc_dp.regression import default_x_prior, release_regression, x_moments_from_release
from pymc_dp.regression.engine.collapsed import sample_regression
from pymc_dp.regression.engine.gibbs_ss import sample_gibbs_ss
from pymc_dp.regression.engine.x_model_gibbs import sample_x_model
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig
from pymc_dp.regression.kernels.x_models import ShapePrior

PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))
DESIGNS = ("normal", "uniform", "exponential", "binary")
METHODS = ("default", "default_normal", "shape", "binary", "gibbs_noisy", "gibbs_update")
EXTRA_DESIGNS = ("normal-narrow", "uniform-wide")
Y_BOUND = 3.0


def draw_x(rng: np.random.Generator, design: str, n: int) -> np.ndarray:
    """Covariates of one trial, inside the public box."""
    if design == "normal":
        return rng.normal(0.3, 0.5, (n, 1))
    if design == "uniform":
        return rng.uniform(-0.5, 0.5, (n, 1))
    if design == "exponential":
        return np.minimum(-1.5 + rng.exponential(0.6, (n, 1)), 2.0)
    if design == "normal-narrow":  # the spread of the uniform design
        return rng.normal(0.0, np.sqrt(1 / 12), (n, 1))
    if design == "uniform-wide":  # the spread the default prior expects (sd 1)
        return rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), (n, 1))
    if design == "binary":
        return (rng.uniform(size=(n, 1)) < 0.3).astype(float)
    raise ValueError(f"design must be one of {DESIGNS} (got {design!r})")


def simulate(rng, design, n, eps, trials, moments):
    """(truth (trials, 3), releases) of one cell."""
    x_bounds = [(0.0, 1.0)] if design == "binary" else [(-2.0, 2.0)]
    truth, rels = [], []
    while len(truth) < trials:
        theta, sigma2 = draw_nig(rng, PRIOR)
        x = draw_x(rng, design, n)
        y = theta[0] + theta[1] * x[:, 0] + np.sqrt(sigma2) * rng.standard_normal(n)
        low, high = x_bounds[0]
        if np.any(np.abs(y) > Y_BOUND) or np.any((x < low) | (x > high)):
            continue  # data conditioned on the public box, as the synthetic study
        rel = release_regression(
            x, y, x_bounds=x_bounds, y_bounds=(-Y_BOUND, Y_BOUND), epsilon=eps,
            moments_share=0.2 if moments else None, rng=rng,
        )  # fmt: skip
        truth.append([theta[0], theta[1], sigma2])
        rels.append(rel)
    return np.array(truth), rels


def covered(theta, sigma2, truth, level=0.9):
    """Per trial and parameter: inside the central interval, and the rank u (fraction of
    draws below the truth); draws (chain, draw, trial, ...)."""
    draws = np.concatenate([theta, sigma2[..., None]], axis=-1)
    draws = draws.reshape(-1, *draws.shape[2:])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (truth >= lo) & (truth <= hi), np.mean(draws < truth, axis=0)


def coverage(theta, sigma2, truth, level=0.9):
    """Coverage per parameter of central intervals; draws (chain, draw, trial, ...)."""
    return np.mean(covered(theta, sigma2, truth, level)[0], axis=0)


def band(trials, level=0.9, alpha=0.01):
    """Two-sided binomial band of the coverage over ``trials`` at family-wise level alpha."""
    lo, hi = stats.binom.ppf([alpha / 2, 1 - alpha / 2], trials, level)
    return lo / trials, hi / trials


def run_cell(design, n, eps, moments, trials, args, seed):
    rng = np.random.default_rng(seed)
    truth, rels = simulate(rng, design, n, eps, trials, moments)
    z = np.stack([r.value for r in rels])
    scale = np.array([r.scale for r in rels])
    x_prior = default_x_prior(rels[0].x_bounds)
    if args.x_prior_dof is not None:  # a wider prior of the spread of x, for comparison
        d = x_prior.loc.shape[0]
        x_prior = x_prior._replace(dof=np.array(d - 1 + args.x_prior_dof),
                                   scale=args.x_prior_scale * x_prior.scale)  # fmt: skip
    if args.x_prior_loc is not None:  # the prior of μ_x centred elsewhere than the box's centre
        x_prior = x_prior._replace(loc=np.full_like(x_prior.loc, args.x_prior_loc))
    kw = {"draws": args.draws, "tune": args.tune, "chains": args.chains}
    out = {}

    def timed(name, fn):
        if name not in args.methods:
            return
        t0 = time.perf_counter()
        try:
            tr = fn()
        except np.linalg.LinAlgError as err:  # a baseline's failure must not lose the cell
            print(f"{design} n={n} eps={eps:g} {name}: failed ({err})", flush=True)
            out[name] = (np.full(3, np.nan), time.perf_counter() - t0)
            return
        inside, rank = covered(tr.theta, tr.sigma2, truth)
        out[name] = (np.mean(inside, axis=0), time.perf_counter() - t0)
        if args.per_release:  # for paired comparisons of methods on the same releases
            row = {"design": design, "n": n, "epsilon": eps, "moments": moments,
                   "method": name, "seed": seed, "covered": inside.astype(int).tolist(),
                   "rank": np.round(rank, 4).tolist(),
                   "truth": np.round(truth, 4).tolist()}  # fmt: skip
            with open(args.per_release, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    extra = {}
    if moments:
        fm = rels[0].fourth_moments
        extra = {"moments": np.stack([r.fourth_moments.value for r in rels]),
                 "moment_powers": fm.powers,
                 "moment_scale": np.array([r.fourth_moments.sensitivity / r.fourth_moments.epsilon
                                           for r in rels])}  # fmt: skip
    if moments:
        extra["shape_prior"] = ShapePrior(skew=args.skew, skew_scale=args.skew_scale)
    for name, given in (("default", extra), ("default_normal", {})):
        timed(
            name,
            lambda given=given: sample_regression(
                seed, released=z, n=n, prior=PRIOR, x_prior=x_prior, scale=scale,
                tries=args.tries, **given, **kw,
            ),
        )  # fmt: skip
    if design == "binary":
        timed(
            "binary",
            lambda: sample_x_model(
                seed, released=z, n=n, prior=PRIOR, x_model="binary", scale=scale, **kw
            ),
        )
    timed(
        "shape",
        lambda: sample_x_model(
            seed,
            released=z,
            n=n,
            prior=PRIOR,
            x_model="shape",
            x_prior=x_prior,
            scale=scale,
            **(
                {k: v for k, v in extra.items() if k != "shape_prior"} if design != "binary" else {}
            ),
            **kw,
        ),
    )
    if moments:
        from pymc_dp.regression.kernels.moments import XMoments

        mom = XMoments.stack([x_moments_from_release(r) for r in rels])
        timed(
            "gibbs_noisy",
            lambda: sample_gibbs_ss(
                seed, released=z, n=n, prior=PRIOR, x_moments=mom, scale=scale, **kw
            ),
        )
    timed(
        "gibbs_update",
        lambda: sample_gibbs_ss(
            seed, released=z, n=n, prior=PRIOR, x_prior=x_prior, scale=scale, **kw
        ),
    )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 trials, short chains")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument(
        "--designs", nargs="+", default=list(DESIGNS), choices=DESIGNS + EXTRA_DESIGNS
    )
    parser.add_argument("--n", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--eps", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--moments", nargs="+", default=["no", "yes"])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--tries", type=int, default=8, help="candidates of the default's move")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument(
        "--x-prior-dof",
        type=float,
        default=None,
        help="NIW dof minus (d - 1) of the x prior of every method (default: the box's)",
    )
    parser.add_argument(
        "--x-prior-scale",
        type=float,
        default=1.0,
        help="factor on the box prior's NIW scale (with --x-prior-dof)",
    )
    parser.add_argument(
        "--x-prior-loc",
        type=float,
        default=None,
        help="centre of the x prior's mean (default: the box's centre; e.g. the design's mean)",
    )
    parser.add_argument(
        "--skew", type=float, default=ShapePrior().skew, help="the default's bound on |skewness|"
    )
    parser.add_argument(
        "--skew-scale",
        type=lambda v: None if v == "none" else float(v),
        default=ShapePrior().skew_scale,
        help="Cauchy scale of the default's skewness prior ('none': uniform)",
    )
    parser.add_argument("--per-release", default=None, help="append per-release JSON rows here")
    parser.add_argument("--output", default=None, help="append JSON rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.draws, args.tune = 40, 300, 150
    lo, hi = band(args.trials)
    print(f"trials {args.trials}; 99% band of 90% coverage [{lo:.3f}, {hi:.3f}]", flush=True)
    for k, (design, n, eps, mom) in enumerate(
        itertools.product(args.designs, args.n, args.eps, args.moments)
    ):
        res = run_cell(design, n, eps, mom == "yes", args.trials, args, args.seed + k)
        for method, (cov, secs) in res.items():
            flags = ["*" if not lo <= c <= hi else " " for c in cov]
            cells = " ".join(f"{c:.3f}{f}" for c, f in zip(cov, flags, strict=True))
            print(f"{design:11s} n={n:<5d} eps={eps:<4g} moments={mom:3s} {method:13s} "
                  f"theta0/theta1/sigma2 {cells}  {secs:6.1f}s", flush=True)  # fmt: skip
            if args.output:
                row = {"design": design, "n": n, "epsilon": eps, "moments": mom,
                       "method": method, "trials": args.trials, "coverage": cov.tolist(),
                       "seconds": secs}  # fmt: skip
                with open(args.output, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
