"""Calibration of the regression samplers when the covariates are not normal (issue 34).

Grid: x normal / uniform on a sub-box / clipped exponential / binary × n × ε × with and
without released degree 3–4 moments (``moments_share=0.2``). Per trial: θ, σ² from the NIG
prior of the synthetic study (θ | σ² ~ N(0, 2σ² I), σ² ~ InvGamma(20, 1.9)), x from the design,
y = θ₀ + xᵀθ_x + N(0, σ²), the whole data set redrawn when a record falls off the public box:
y ∈ [−3, 3], x ∈ [−2, 2]^d ([0, 1]^d for binary). That conditions on an event of the data alone,
so the posterior, and its calibration, are unchanged. ``--d`` covariates (default 1), each drawn
independently from the design; d > 1 with the normal model's methods only (``default_normal``,
``default_no_symmetry``, ``default_symmetry``). Design ``mixed`` (d ≥ 2): x₁ ~ Bernoulli(0.3)
on its box [0, 1] (a treated/untreated indicator) beside normal covariates as the ``normal``
design's. Design ``factor`` (d ≥ 3): the first two covariates the dummy columns of a factor of 3
levels (probabilities 0.5, 0.3, 0.2, boxes [0, 1]) beside normal covariates N(0.3, 0.5²) shifted
by 0.4 per level (−0.4 at the reference, 0 and +0.4 at the others). Design ``pair`` (d ≥ 3):
the first two covariates binary, x₁ ~ Bernoulli(0.4) and x₂ | x₁ ~ Bernoulli(0.3 + 0.3 x₁) (all
four corners, boxes [0, 1]), beside normal covariates N(0.3 + 0.5 x₁ − 0.4 x₂, 0.5²).
Design ``normal-drawn``: x ~ N(μ_x, Σ_x) with (μ_x, Σ_x) drawn from the
default's own prior of x (:func:`~pymc_dp.regression.default_x_prior` of the box), so that the
truth is a draw of the whole model's prior and the coverage of μ_x and diag Σ_x is reported too
(the designs above fix x's law, which the default does not know). Every method samples the same
releases, batched:

* ``default``: the package's collapsed sampler (``sample_regression``) with the NIW prior of
  x from the box; with released moments (d = 1) it takes them (``moments=``): x follows the
  shape family (skewness, kurtosis) and the noisy degree 3–4 sums are observed with their
  Laplace noise (:mod:`pymc_dp.regression.kernels.shape_law`; ``x_model="shape"`` of the
  node, opt-in), without them the normal model;
* ``default_normal``: the same sampler ignoring released moments (what the package's default,
  ``x_model="auto"``, does; identical to ``default`` without moments);
* ``default_no_symmetry``: ``default_normal`` without the moves along the model's symmetries
  (``scale_steps=()``; they are on by default from d = 2);
* ``default_symmetry``: ``default_normal`` with those moves at every d (steps ``--scale-steps``);
* ``shape``: Gibbs-SS with the shape model of x (:mod:`pymc_dp.regression.kernels.x_models`,
  (γ, κ) with a prior covering uniform to exponential; the released moments when present);
* ``binary``: Gibbs-SS with the binary model of x (binary design only);
* ``mixed``: the mixed model of x, the first covariate binary and the others normal with a
  mean per group (``sample_mixed_regression``, :mod:`pymc_dp.regression.kernels.mixed_model`;
  designs ``binary`` and ``mixed`` only);
* ``levels``: the level model of x, the first two covariates the dummy columns of a factor of
  3 levels and the others normal with a mean per level (``sample_level_regression``,
  :mod:`pymc_dp.regression.kernels.level_model`; design ``factor`` only);
* ``pair``: the pair model of x, the first two covariates binary and the others normal with a
  mean additive in them (``sample_level_regression(pair=[0, 1])``,
  :func:`pymc_dp.regression.kernels.level_model.pair_layout`; design ``pair`` only);
* ``cells``: the cell model of x, every covariate binary (``sample_cell_regression``,
  :mod:`pymc_dp.regression.kernels.cell_model`; the pair of binary covariates on design
  ``binary`` at d = 2, the cube of three at d = 3, the levels of a factor on ``categorical``
  and on ``binary`` at d = 1);
* ``gibbs_noisy``: Gibbs-SS with the release's noisy moments plugged in (with moments only);
* ``gibbs_update``: Gibbs-SS-Update (normal model of x, NIW prior from the box).

Printed: the 90 % central-interval coverage of θ₀ … θ_d and σ² (and μ_x, diag Σ_x for
``normal-drawn``) with the two-sided 99 % binomial band around 0.90 for the number of trials,
flagged ``*`` when outside; the share of releases whose largest R-hat of (θ, σ²) exceeds 1.01
and 1.05 (rank-normalised split R-hat, ArviZ); the CPU time of the sampler call (process time,
every thread), the sum over releases of the smallest bulk ESS of (θ, σ²) per CPU second, and the
wall time.

Usage::

    python benchmarks/regression_x_models.py --quick
    python benchmarks/regression_x_models.py --trials 200 --designs uniform --n 100 --eps 1
    python benchmarks/regression_x_models.py --d 3 --designs normal-drawn --n 1000 --eps 1 \
        --moments no --methods default_normal default_no_symmetry
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import arviz as az
import numpy as np
from scipy import stats

from pymc_dp.regression import default_x_prior, release_regression, x_moments_from_release
from pymc_dp.regression.engine.cells import sample_cell_regression
from pymc_dp.regression.engine.collapsed import sample_regression
from pymc_dp.regression.engine.gibbs_ss import sample_gibbs_ss
from pymc_dp.regression.engine.levels import sample_level_regression
from pymc_dp.regression.engine.mixed import sample_mixed_regression
from pymc_dp.regression.engine.x_model_gibbs import sample_x_model
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig
from pymc_dp.regression.kernels.data_model import draw_niw
from pymc_dp.regression.kernels.scale_move import SCALE_STEPS
from pymc_dp.regression.kernels.x_models import ShapePrior
from pymc_dp.regression.model.default_prior import default_mixed_x_prior

DESIGNS = ("normal", "uniform", "exponential", "binary")
METHODS = ("default", "default_normal", "default_no_symmetry", "default_symmetry", "shape",
           "binary", "mixed", "cells", "levels", "pair", "gibbs_noisy",
           "gibbs_update")  # fmt: skip
NORMAL_METHODS = ("default_normal", "default_no_symmetry", "default_symmetry")
"""The methods that take d > 1 (the normal model of x, no released moments); and ``mixed``,
``cells``, ``levels``."""
EXTRA_DESIGNS = ("normal-narrow", "uniform-wide", "normal-drawn", "mixed", "categorical", "factor",
                 "pair")  # fmt: skip
CATEGORY_PROBS = (0.5, 0.3, 0.2)
"""Level probabilities of design ``categorical`` (dummy-coded, reference level first), d = 2."""
Y_BOUND = 3.0


def nig_prior(d: int = 1) -> NIG:
    """The synthetic study's NIG prior for d covariates: θ | σ² ~ N(0, 2σ² I), σ² ~ IG(20, 1.9)."""
    return NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0), np.array(1.9))


PRIOR = nig_prior(1)


def x_box(design: str, d: int = 1) -> list[tuple[float, float]]:
    """The public box of x: [0, 1] for a binary covariate, else [−2, 2], per covariate."""
    if design == "mixed":
        return [(0.0, 1.0)] + [(-2.0, 2.0)] * (d - 1)
    if design in ("factor", "pair"):
        return [(0.0, 1.0)] * 2 + [(-2.0, 2.0)] * (d - 2)
    return [(0.0, 1.0) if design in ("binary", "categorical") else (-2.0, 2.0)] * d


def draw_x(rng: np.random.Generator, design: str, n: int, d: int = 1, law=None) -> np.ndarray:
    """Covariates of one trial, ``(n, d)``, each column drawn independently from the design
    (``law`` = (μ_x, Σ_x) for ``normal-drawn``; ``mixed``: the first binary, the rest normal)."""
    if design == "normal":
        return rng.normal(0.3, 0.5, (n, d))
    if design == "normal-drawn":
        return rng.multivariate_normal(law[0], law[1], size=n)
    if design == "uniform":
        return rng.uniform(-0.5, 0.5, (n, d))
    if design == "exponential":
        return np.minimum(-1.5 + rng.exponential(0.6, (n, d)), 2.0)
    if design == "normal-narrow":  # the spread of the uniform design
        return rng.normal(0.0, np.sqrt(1 / 12), (n, d))
    if design == "uniform-wide":  # the spread the default prior expects (sd 1)
        return rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), (n, d))
    if design == "binary":
        return (rng.uniform(size=(n, d)) < 0.3).astype(float)
    if design == "categorical":  # the dummy columns of one factor of d + 1 levels
        probs = CATEGORY_PROBS if d == 2 else np.full(d + 1, 1.0 / (d + 1))
        return np.eye(d + 1)[rng.choice(d + 1, size=n, p=probs), 1:]
    if design == "mixed":  # a treated/untreated indicator beside normal covariates
        x = draw_x(rng, "normal", n, d)
        x[:, 0] = rng.uniform(size=n) < 0.3
        return x
    if design == "factor":  # a factor of 3 levels beside normal covariates whose mean moves
        level = rng.choice(3, size=n, p=CATEGORY_PROBS)
        normal = rng.normal(0.3, 0.5, (n, d - 2)) + 0.4 * (level[:, None] - 1.0)
        return np.column_stack([np.eye(3)[level, 1:], normal])
    if design == "pair":  # two binaries, 1 together in some records, beside normal covariates
        b1 = rng.uniform(size=n) < 0.4
        b2 = rng.uniform(size=n) < 0.3 + 0.3 * b1
        normal = rng.normal(0.3, 0.5, (n, d - 2)) + (0.5 * b1 - 0.4 * b2)[:, None]
        return np.column_stack([b1, b2, normal]).astype(float)
    raise ValueError(f"design must be one of {DESIGNS + EXTRA_DESIGNS} (got {design!r})")


def simulate(rng, design, n, eps, trials, moments, d=1):
    """(truth, releases) of one cell; truth ``(trials, d + 2)`` (θ, σ²), with μ_x and diag Σ_x
    after them (``(trials, 3d + 2)``) for ``normal-drawn``."""
    x_bounds = x_box(design, d)
    prior = nig_prior(d)
    x_prior = default_x_prior(x_bounds)
    truth, rels = [], []
    while len(truth) < trials:
        theta, sigma2 = draw_nig(rng, prior)
        law = draw_niw(rng, x_prior) if design == "normal-drawn" else None
        x = draw_x(rng, design, n, d, law)
        y = theta[0] + x @ theta[1:] + np.sqrt(sigma2) * rng.standard_normal(n)
        low, high = np.array(x_bounds).T
        if np.any(np.abs(y) > Y_BOUND) or np.any((x < low) | (x > high)):
            continue  # data conditioned on the public box, as the synthetic study
        rel = release_regression(
            x, y, x_bounds=x_bounds, y_bounds=(-Y_BOUND, Y_BOUND), epsilon=eps,
            moments_share=0.2 if moments else None, rng=rng,
        )  # fmt: skip
        row = [*theta, sigma2]
        if law is not None:
            row += [*law[0], *np.diag(law[1])]
        truth.append(row)
        rels.append(rel)
    return np.array(truth), rels


def covered(theta, sigma2, truth, level=0.9, x_loc=None, x_cov=None):
    """Per trial and parameter: inside the central interval, and the rank u (fraction of
    draws below the truth); draws (chain, draw, trial, ...). With ``x_loc`` and ``x_cov``,
    μ_x and diag Σ_x follow θ and σ² (truth as :func:`simulate`'s for ``normal-drawn``)."""
    draws = np.concatenate([theta, sigma2[..., None]], axis=-1)
    if x_loc is not None:
        draws = np.concatenate([draws, x_loc, np.diagonal(x_cov, 0, -2, -1)], axis=-1)
    draws = draws.reshape(-1, *draws.shape[2:])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (truth >= lo) & (truth <= hi), np.mean(draws < truth, axis=0)


def interval_width(theta, sigma2, level=0.9):
    """Mean over releases of each parameter's central-interval width (θ, then σ²)."""
    draws = np.concatenate([theta, sigma2[..., None]], axis=-1)
    draws = draws.reshape(-1, *draws.shape[2:])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return np.mean(hi - lo, axis=0)


def coverage(theta, sigma2, truth, level=0.9):
    """Coverage per parameter of central intervals; draws (chain, draw, trial, ...)."""
    return np.mean(covered(theta, sigma2, truth, level)[0], axis=0)


def band(trials, level=0.9, alpha=0.01):
    """Two-sided binomial band of the coverage over ``trials`` at family-wise level alpha."""
    lo, hi = stats.binom.ppf([alpha / 2, 1 - alpha / 2], trials, level)
    return lo / trials, hi / trials


def rhat_max(theta, sigma2):
    """Per release, the largest rank-normalised split R-hat of θ and σ² (chain, draw, trial)."""
    post = az.convert_to_dataset({"theta": theta, "sigma2": sigma2})
    rhat = az.rhat(post)
    return np.maximum(rhat["theta"].values.max(axis=-1), rhat["sigma2"].values)


def ess_min(theta, sigma2):
    """Per release, the smallest bulk ESS of θ and σ² (chain, draw, trial)."""
    ess = az.ess(az.convert_to_dataset({"theta": theta, "sigma2": sigma2}), method="bulk")
    return np.minimum(ess["theta"].values.min(axis=-1), ess["sigma2"].values)


def parameter_names(d, drawn):
    """Labels of the coverage columns, in :func:`covered`'s order."""
    names = [f"theta{j}" for j in range(d + 1)] + ["sigma2"]
    if drawn:
        names += [f"mu{j + 1}" for j in range(d)] + [f"Sxx{j + 1}" for j in range(d)]
    return names


def run_cell(design, n, eps, moments, trials, args, seed):
    rng = np.random.default_rng(seed)
    truth, rels = simulate(rng, design, n, eps, trials, moments, args.d)
    prior = nig_prior(args.d)
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
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            tr = fn()
        except np.linalg.LinAlgError as err:  # a baseline's failure must not lose the cell
            print(f"{design} n={n} eps={eps:g} {name}: failed ({err})", flush=True)
            out[name] = {"coverage": np.full(truth.shape[1], np.nan),
                         "seconds": time.perf_counter() - t0}  # fmt: skip
            return
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        x_draws = {"x_loc": tr.x_loc, "x_cov": tr.x_cov} if design == "normal-drawn" else {}
        inside, rank = covered(tr.theta, tr.sigma2, truth, **x_draws)
        rhat = rhat_max(tr.theta, tr.sigma2)
        out[name] = {"coverage": np.mean(inside, axis=0), "seconds": wall, "cpu": cpu,
                     "width": interval_width(tr.theta, tr.sigma2),
                     "rhat_over_1.01": float(np.mean(rhat > 1.01)),
                     "rhat_over_1.05": float(np.mean(rhat > 1.05)),
                     "rhat_median": float(np.median(rhat)),
                     "ess_per_cpu": float(np.sum(ess_min(tr.theta, tr.sigma2)) / cpu),
                     "rhat_max": float(np.max(rhat))}  # fmt: skip
        if args.per_release:  # for paired comparisons of methods on the same releases
            row = {"design": design, "n": n, "epsilon": eps, "moments": moments,
                   "method": name, "seed": seed, "covered": inside.astype(int).tolist(),
                   "rank": np.round(rank, 4).tolist(), "rhat": np.round(rhat, 4).tolist(),
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
    no_symmetry = {"scale_steps": ()}
    symmetry = {"scale_steps": tuple(args.scale_steps)}
    for name, given in (("default", extra), ("default_normal", {}),
                        ("default_no_symmetry", no_symmetry),
                        ("default_symmetry", symmetry)):  # fmt: skip
        timed(
            name,
            lambda given=given: sample_regression(
                seed, released=z, n=n, prior=prior, x_prior=x_prior, scale=scale,
                tries=args.tries, **given, **kw,
            ),
        )  # fmt: skip
    if design in ("binary", "mixed"):
        timed(
            "mixed",
            lambda: sample_mixed_regression(
                seed, released=z, n=n, prior=prior, scale=scale,
                x_prior=default_mixed_x_prior(rels[0].x_bounds, 0), **kw,
            ),
        )  # fmt: skip
    if design == "factor":
        timed(
            "levels",
            lambda: sample_level_regression(
                seed, released=z, n=n, prior=prior, scale=scale, factor=[0, 1],
                x_prior=default_mixed_x_prior(rels[0].x_bounds, [0, 1]), **kw,
            ),
        )  # fmt: skip
    if design == "pair":
        timed(
            "pair",
            lambda: sample_level_regression(
                seed, released=z, n=n, prior=prior, scale=scale, pair=[0, 1],
                x_prior=default_mixed_x_prior(rels[0].x_bounds, [0, 1]), **kw,
            ),
        )  # fmt: skip
    if design in ("binary", "categorical"):
        binary = {2: "pair", 3: "cube"}.get(args.d, "categories")
        kind = binary if design == "binary" else "categories"
        timed(
            "cells",
            lambda: sample_cell_regression(
                seed, released=z, n=n, prior=prior, scale=scale, kind=kind, **kw
            ),
        )
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
    parser.add_argument("--d", type=int, default=1, help="covariates per record")
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
    parser.add_argument(
        "--scale-steps",
        nargs="+",
        type=float,
        default=list(SCALE_STEPS),
        help="steps of default_symmetry's moves along the symmetries (the package's by default)",
    )
    parser.add_argument("--per-release", default=None, help="append per-release JSON rows here")
    parser.add_argument("--output", default=None, help="append JSON rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.draws, args.tune = 40, 300, 150
    if args.d < 1:
        parser.error(f"--d must be >= 1 (got {args.d})")
    if args.d > 1 and (
        set(args.methods) - {*NORMAL_METHODS, "mixed", "cells", "levels", "pair"}
        or "yes" in args.moments
    ):
        parser.error(
            f"--d > 1 takes --methods from {NORMAL_METHODS}, mixed, cells, levels or pair, and "
            "--moments no"
        )
    if args.d > 3 and "binary" in args.designs and "cells" in args.methods:
        parser.error("design binary's cell model (--methods cells) takes d <= 3 binaries")
    if args.d < 3 and "factor" in args.designs:
        parser.error("design factor (a factor of 3 levels beside normal ones) needs --d >= 3")
    if args.d < 3 and "pair" in args.designs:
        parser.error("design pair (two binaries beside normal ones) needs --d >= 3")
    if args.d < 2 and "mixed" in args.designs:
        parser.error("design mixed (a binary covariate beside normal ones) needs --d >= 2")
    lo, hi = band(args.trials)
    print(f"trials {args.trials}; 99% band of 90% coverage [{lo:.3f}, {hi:.3f}]", flush=True)
    for k, (design, n, eps, mom) in enumerate(
        itertools.product(args.designs, args.n, args.eps, args.moments)
    ):
        res = run_cell(design, n, eps, mom == "yes", args.trials, args, args.seed + k)
        names = "/".join(parameter_names(args.d, design == "normal-drawn"))
        for method, r in res.items():
            cov = r["coverage"]
            flags = ["*" if not lo <= c <= hi else " " for c in cov]
            cells = " ".join(f"{c:.3f}{f}" for c, f in zip(cov, flags, strict=True))
            diag = (f"  R-hat>1.01 {r['rhat_over_1.01']:.3f} >1.05 {r['rhat_over_1.05']:.3f} "
                    f"median {r['rhat_median']:.3f} max {r['rhat_max']:.3f}  "
                    f"CPU {r['cpu']:7.1f}s ESS/CPU s {r['ess_per_cpu']:6.1f}"
                    if "cpu" in r else "")  # fmt: skip
            print(f"{design:11s} d={args.d} n={n:<5d} eps={eps:<4g} moments={mom:3s} "
                  f"{method:13s} {names} {cells}{diag}  {r['seconds']:6.1f}s",
                  flush=True)  # fmt: skip
            if args.output:
                row = {"design": design, "d": args.d, "n": n, "epsilon": eps, "moments": mom,
                       "method": method, "trials": args.trials, "seed": args.seed + k,
                       "tune": args.tune, "draws": args.draws, "chains": args.chains,
                       "parameters": names.split("/")} | {
                    key: (v.tolist() if isinstance(v, np.ndarray) else v) for key, v in r.items()
                }  # fmt: skip
                with open(args.output, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
