"""Benchmark: effective samples per second of the whole ``pm.sample`` call, private regression.

Three samplers on releases of the same data, in one process:

* **default**: ``NoisyRegressionStat(release=...)`` as a user writes it (all ε on the
  statistic): the exact law of s under a normal model of x with the prior of x from the box,
  sampled by ``RegressionCollapsedStep``;
* **gibbs_ss_noisy**: the previous default, Gibbs-SS with the release's noisy moments of x
  (``moments_share=0.2``, ``method="gibbs-ss"``), the paper's Algorithm 1;
* **gibbs_ss_update**: Gibbs-SS-Update (``method="gibbs-ss"`` with the same prior of x as the
  default), all ε on the statistic;
* **default_box_v1** (only with ``--samplers``): the default sampler under the box prior of x
  that was the default before issue 34 (ν = d + 3, E Σ_x = diag(h²/4)), given as ``x_prior``,
  for the ratio of today's default to it;
* **default_moments** (only with ``--samplers``, d = 1): the default on a release with
  ``moments_share=0.2``, which it observes through the shape family of x (``x_model="shape"``,
  given explicitly); **default_moments_normal**: the same release with ``x_model="normal"``
  (moments unused), for the cost of the shape model;
* **default_nu_d1** (only with ``--samplers``): the default with the box prior's ν = d + 1
  instead of d (same Ψ), the untested candidate for the Σ_x off-diagonal's slow mixing;
* **default_no_symmetry** (only with ``--samplers``): the default without the moves along the
  model's symmetries (``SYMMETRY_MIN_D`` raised above d), the default sampler before they were
  added (issue 34), for the ratio of today's default to it at d ≥ 2;
* **default_binary** (only with ``--samplers``, ``--x-design mixed``): the node told that the
  first covariate is 0 or 1 (``binary=0``: the mixed model of x,
  ``RegressionMixedStep``), against the default, which models it as normal;
* **default_cells** (only with ``--samplers``, ``--x-design categorical`` or ``pair``): the
  node told that every covariate is binary (``x_model="factor"`` for the dummy columns of one
  factor, ``"binary"`` for two or three indicators: the cell model of x, ``RegressionCellStep``),
  against the default, which models them as normal;
* **default_levels** (only with ``--samplers``, ``--x-design factor``): the node told that the
  first two covariates are the dummy columns of one factor beside the others
  (``x_model="levels"``: the level model of x, ``RegressionLevelStep``), against the default,
  which models them as normal;
* **default_pair** (only with ``--samplers``, ``--x-design binaries``): the node told that the
  first two covariates are binary beside the others (``binary=[0, 1]``: the pair model of x,
  ``RegressionLevelStep``), against the default, which models them as normal;
* **default_binary_last_window**, **default_cells_last_window**, **default_levels_last_window**,
  **default_pair_last_window** (only with ``--samplers``): those samplers with the random walk's
  last tuning window used alone when it is cut short
  (:data:`~pymc_dp.regression.kernels.adaptation.POOL_SHORT_LAST_WINDOW` off), as before
  2026-12-07, for the ratio of today's pooled window to it;
* **mcmc_ind** (only with ``--samplers``): the hand-written model a PyMC user would write, the
  paper's MCMC-Ind (every record's x and y latent, the release observed through its Laplace
  noise; :func:`pymc_dp.regression.sample_mcmc_ind`), with the same priors as the README's
  model and NUTS (its default ``target_accept=0.9``), for the ratio of the default to NUTS.

Time is the wall time of building the model and the whole ``pm.sample`` call (compilation,
tuning, draws; 2 chains, ``cores=1``). ESS is ArviZ's bulk ESS, the smallest over θ's
components and σ². The ratios default / baseline come from one process, so machine load
affects both sides alike. Before the first timed call the process compiles one trivial
PyTensor function: the first compilation of a process loads PyTensor's module cache (5–10 s
here), a cost of the session, not of a sampler, which would otherwise fall on whichever
sampler runs first.

Usage::

    python benchmarks/regression_ess.py                        # n = 500, ε = 1, d = 2
    python benchmarks/regression_ess.py --n 200 --epsilon 0.5 --d 1 --draws 1000
    python benchmarks/regression_ess.py --baseline-draws 20000   # longer Gibbs-SS chains
    python benchmarks/regression_ess.py --baseline-draws 20000 --repeats 3
    python benchmarks/regression_ess.py --samplers default default_box_v1 --repeats 3
    python benchmarks/regression_ess.py --d 1 --samplers default_moments default_moments_normal
    python benchmarks/regression_ess.py --n 1000 --d 10 --x-design normal --moments \
        --samplers default default_box_v1 --releases 3 --draws 500 --tune 500

``default_box_v1`` is the sampler before issue 34 exactly: under today's code, with the earlier
box prior given as ``x_prior`` and the moments ignored, its seeded chains are bit-identical to
those of commit e851465 (the last before issue 34) at d = 1 (with released moments), 2 and 10.
``--releases`` runs that many releases (data and noise from seeds seed, seed + 1, ...);
``--x-design normal`` draws x from N(0, 0.4²) clipped to the box instead of uniform on it;
``--x-design mixed`` makes the first covariate Bernoulli(0.3) on the box [0, 1] and the others
normal as that design; ``--x-design categorical`` makes the d covariates the dummy columns of
one factor of d + 1 levels (probabilities ∝ d + 1, d, ..., 1, the reference level first), and
``--x-design pair`` two (d = 2) or three (d = 3, the cube) Bernoulli(0.3) indicators, all on
the box [0, 1];
``--x-design factor`` (d ≥ 3) makes the first two covariates the dummy columns of a factor of 3
levels (probabilities 0.5, 0.3, 0.2; box [0, 1]) and the others N(0.3 (level − 1), 0.4²) clipped
to the box; ``--x-design binaries`` (d ≥ 3) makes the first two covariates binary, x₁ ~
Bernoulli(0.4) and x₂ | x₁ ~ Bernoulli(0.3 + 0.3 x₁), and the others N(0.3 x₁ − 0.2 x₂, 0.4²)
clipped to the box;
``--moments`` gives every sampler's release ``moments_share=0.2`` (the statistic gets 0.8 ε;
the default, ``x_model="auto"``, ignores the moments).

``--repeats`` runs every sampler that many times on the same release with different chain
seeds and reports the pooled ESS/s (summed ESS over summed time): one pair of chains' ESS
varies by a factor of 2 from seed to seed, for the default and the baselines alike.

A Gibbs-SS chain at n = 500, ε = 1 needs hundreds of iterations per effective draw, so with
2000 draws its ESS is a handful, estimated from chains that have not converged (R-hat > 1.1).
``--baseline-draws`` runs the two baselines longer (tuning as given), for an ESS estimate
that rests on more than a few autocorrelation times.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from pymc_dp._compat import posterior_dataset
from pymc_dp.regression import (
    NIG,
    NoisyRegressionStat,
    default_x_prior,
    release_regression,
    sample_mcmc_ind,
)
from pymc_dp.regression.engine import collapsed as collapsed_engine
from pymc_dp.regression.kernels import adaptation
from pymc_dp.regression.kernels.data_model import NIW

symmetry_min_d = collapsed_engine.SYMMETRY_MIN_D
SAMPLERS = (
    "default",
    "gibbs_ss_noisy",
    "gibbs_ss_update",
    "default_box_v1",
    "default_moments",
    "default_moments_normal",
    "default_nu_d1",
    "default_no_symmetry",
    "default_binary",
    "default_cells",
    "default_levels",
    "default_pair",
    *(f"default_{m}_last_window" for m in ("binary", "cells", "levels", "pair")),
    "mcmc_ind",
)


def make_data(
    rng: np.random.Generator, n: int, d: int, design: str = "uniform"
) -> tuple[np.ndarray, np.ndarray]:
    """x uniform on [−1, 1]^d or N(0, 0.4²) clipped to it (``mixed``: the first x Bernoulli(0.3));
    y = 0.2 + x·θ + N(0, 0.2²) in [−2, 2]."""
    theta = np.array([0.5, -0.3, 0.2, 0.4, -0.1, 0.3, -0.2, 0.1, 0.25, -0.15])[:d]
    if design == "factor":  # a factor of 3 levels, then normal covariates moving with it
        level = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        normal = 0.4 * rng.standard_normal((n, d - 2)) + 0.3 * (level[:, None] - 1.0)
        x = np.column_stack([np.eye(3)[level, 1:], np.clip(normal, -1.0, 1.0)])
    elif design == "binaries":  # two binaries, 1 together in some records, then normal ones
        b1 = rng.uniform(size=n) < 0.4
        b2 = rng.uniform(size=n) < 0.3 + 0.3 * b1
        normal = 0.4 * rng.standard_normal((n, d - 2)) + (0.3 * b1 - 0.2 * b2)[:, None]
        x = np.column_stack([b1, b2, np.clip(normal, -1.0, 1.0)]).astype(float)
    elif design == "categorical":
        weights = np.arange(d + 1, 0, -1.0)
        level = rng.choice(d + 1, size=n, p=weights / weights.sum())
        x = (level[:, None] == np.arange(1, d + 1)).astype(float)
    elif design == "pair":
        x = (rng.uniform(size=(n, d)) < 0.3).astype(float)
    elif design in ("normal", "mixed"):
        x = np.clip(0.4 * rng.standard_normal((n, d)), -1.0, 1.0)
        if design == "mixed":  # a treated/untreated indicator first
            x[:, 0] = rng.uniform(size=n) < 0.3
    else:
        x = rng.uniform(-1.0, 1.0, size=(n, d))
    y = np.clip(0.2 + x @ theta + 0.2 * rng.standard_normal(n), -2.0, 2.0)
    return x, y


def sample_readme_model(rel, d: int, draws: int, tune: int, chain_seed: int, kwargs: dict):
    """The README's regression model on ``rel``, sampled by ``pm.sample`` (2 chains, one core).

    Returns the trace and the model (whose ``regression_attrs`` say what the node chose).
    """
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 3.0, 0.1)
        theta = pm.MvNormal("theta", np.zeros(d + 1), cov=10.0 * sigma2 * np.eye(d + 1))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)
        idata = pm.sample(
            draws=draws, tune=tune, chains=2, cores=1, random_seed=chain_seed, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    return idata, model


def run(
    kind: str,
    x,
    y,
    epsilon: float,
    *,
    draws: int,
    tune: int,
    seed: int,
    chain_seed: int,
    moments: bool = False,
) -> dict:
    d = x.shape[1]
    kind, alone = kind.removesuffix("_last_window"), kind.endswith("_last_window")
    bounds = {"x_bounds": [(-1.0, 1.0)] * d, "y_bounds": (-2.0, 2.0)}
    for j in range(d):  # binary columns (designs mixed, categorical, pair) get the box [0, 1]
        if np.all((x[:, j] == 0.0) | (x[:, j] == 1.0)):
            bounds["x_bounds"][j] = (0.0, 1.0)
    with_moments = ("gibbs_ss_noisy", "default_moments", "default_moments_normal")
    share = 0.2 if moments or kind in with_moments else None
    rel = release_regression(x, y, epsilon=epsilon, moments_share=share, rng=seed, **bounds)
    kwargs = {}
    if kind.startswith("gibbs"):
        kwargs["method"] = "gibbs-ss"
    if kind == "gibbs_ss_update":
        kwargs["x_prior"] = default_x_prior(bounds["x_bounds"])
    if kind == "default_moments_normal":
        kwargs["x_model"] = "normal"
    if kind == "default_moments":  # explicit, whatever "auto" picks
        kwargs["x_model"] = "shape"
    if kind == "default_nu_d1":
        box = default_x_prior(bounds["x_bounds"])
        kwargs["x_prior"] = box._replace(dof=np.asarray(box.dof) + 1.0)
    if kind == "default_box_v1":  # the box prior before issue 34: ν = d + 3, Ψ = 2 diag(h²/4)
        kwargs["x_prior"] = NIW(np.zeros(d), np.array(1.0), np.array(d + 3.0), 0.5 * np.eye(d))
    if kind == "default_no_symmetry":
        collapsed_engine.SYMMETRY_MIN_D = d + 1
    if kind == "default_binary":
        kwargs["binary"] = 0
    if kind == "default_levels":  # the first two covariates a factor's dummy columns
        kwargs["x_model"], kwargs["factor"] = "levels", [0, 1]
    if kind == "default_pair":  # the first two covariates binary
        kwargs["binary"] = [0, 1]
    if kind == "default_cells":  # two or three indicators, or the dummy columns of one factor
        indicators = d in (2, 3) and np.any(np.sum(x, axis=1) > 1.0)
        kwargs["x_model"] = "binary" if indicators else "factor"
    adaptation.POOL_SHORT_LAST_WINDOW = not alone
    start = time.perf_counter()
    try:
        if kind == "mcmc_ind":  # the README model's priors: θ | σ² ~ N(0, 10σ²I), σ² ~ IG(3, 0.1)
            prior = NIG(np.zeros(d + 1), 0.1 * np.eye(d + 1), np.array(3.0), np.array(0.1))
            idata = sample_mcmc_ind(
                rel, prior=prior, x_prior=default_x_prior(bounds["x_bounds"]), draws=draws,
                tune=tune, chains=2, cores=1, random_seed=chain_seed, progressbar=False,
                compute_convergence_checks=False,
            )  # fmt: skip
        else:
            idata = sample_readme_model(rel, d, draws, tune, chain_seed, kwargs)[0]
    finally:
        collapsed_engine.SYMMETRY_MIN_D = symmetry_min_d
        adaptation.POOL_SHORT_LAST_WINDOW = True
    seconds = time.perf_counter() - start
    post = posterior_dataset(idata)
    ess = az.ess(post[["theta", "sigma2"]])
    rhat = az.rhat(post[["theta", "sigma2"]])
    smallest = min(float(ess["theta"].min()), float(ess["sigma2"]))
    return {
        "sampler": kind + ("_last_window" if alone else ""),
        "seconds": seconds,
        "ess_min": smallest,
        "ess_theta": [float(v) for v in np.ravel(ess["theta"].values)],
        "ess_sigma2": float(ess["sigma2"]),
        "rhat_max": max(float(rhat["theta"].max()), float(rhat["sigma2"])),
        "ess_per_second": smallest / seconds,
        "theta_mean": [float(v) for v in post["theta"].mean(("chain", "draw")).values],
        "theta_sd": [float(v) for v in post["theta"].std(("chain", "draw")).values],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--baseline-draws", type=int, default=None,
                        help="draws of the Gibbs-SS baselines (default: --draws)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per sampler, chain seeds seed, seed + 1, ...")  # fmt: skip
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS[:3]),
                        help="samplers to run; the first is the ratios' numerator")  # fmt: skip
    parser.add_argument("--releases", type=int, default=1,
                        help="releases (data and noise), seeds seed, seed + 1, ...")  # fmt: skip
    parser.add_argument("--x-design", default="uniform",
                        choices=("uniform", "normal", "mixed", "categorical", "pair", "factor",
                                 "binaries"),
                        help="x uniform on the box or N(0, 0.4^2) clipped to it (mixed: the "
                             "first covariate Bernoulli(0.3); categorical: a factor's dummy "
                             "columns; pair: two or three Bernoulli(0.3); binaries: two binaries "
                             "beside normal ones)")  # fmt: skip
    parser.add_argument("--moments", action="store_true",
                        help="every sampler's release carries moments_share=0.2")  # fmt: skip
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    pytensor.function([], pt.exp(pt.constant(1.0)))()  # load the module cache (docstring)
    rows = []
    pooled = {}
    # Releases outer, repeats next, samplers inner: a change of machine load falls on every
    # sampler alike. Release k draws its data and noise from seed + k (k = 0 is the release of
    # a run without --releases, so earlier runs reproduce).
    for k in range(args.releases):
        x, y = make_data(np.random.default_rng(args.seed + k), args.n, args.d, args.x_design)
        for r in range(args.repeats):
            for kind in args.samplers:
                baseline = args.baseline_draws or args.draws
                draws = args.draws if kind.startswith("default") else baseline
                row = run(kind, x, y, args.epsilon, draws=draws, tune=args.tune,
                          seed=args.seed + k, chain_seed=args.seed + r,
                          moments=args.moments)  # fmt: skip
                row["draws"], row["chain_seed"], row["release"] = draws, args.seed + r, k
                rows.append(row)
                print(
                    f"release {k} {kind:16s} {row['seconds']:7.1f} s  ESS min "
                    f"{row['ess_min']:7.0f}  ESS/s {row['ess_per_second']:7.2f}  "
                    f"R-hat max {row['rhat_max']:.3f}",
                    flush=True,
                )
                if args.output:  # every row as it comes, so a stopped run keeps its rows
                    _write(args, rows, pooled)
    for kind in args.samplers:
        mine = [row for row in rows if row["sampler"] == kind]
        pooled[kind] = sum(r["ess_min"] for r in mine) / sum(r["seconds"] for r in mine)
    base = pooled[args.samplers[0]]
    for kind in args.samplers[1:]:
        print(f"{args.samplers[0]} / {kind}: {base / pooled[kind]:.2f}x (pooled ESS/s "
              f"{base:.2f} and {pooled[kind]:.2f})")  # fmt: skip
    if args.output:
        _write(args, rows, pooled)
    return 0


def _write(args: argparse.Namespace, rows: list[dict], pooled: dict) -> None:
    meta = {
        "n": args.n, "epsilon": args.epsilon, "d": args.d, "draws": args.draws,
        "tune": args.tune, "baseline_draws": args.baseline_draws, "seed": args.seed,
        "repeats": args.repeats, "releases": args.releases, "x_design": args.x_design,
        "moments": args.moments, "pooled_ess_per_second": pooled,
        "python": platform.python_version(), "pymc": pm.__version__,
    }  # fmt: skip
    with open(args.output, "w") as fh:
        json.dump({"settings": meta, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
