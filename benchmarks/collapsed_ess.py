"""Benchmark: effective samples of θ per second of the whole ``pm.sample`` call.

Three samplers on the same release, in one process, for each family × n × ε:

* **default**: ``NoisySuffStat`` as a user writes it and ``pm.sample()`` as it assigns steps
  (collapsed likelihood and an exact grid draw for a scalar statistic; partially collapsed Gibbs
  with NUTS on θ for a vector statistic);
* **nuts**: NUTS on the model a user would write by hand: θ, a latent normal s with the CLT (or
  window) moments, and ``pm.Laplace`` for y;
* **alg1**: ``NoisySuffStat(method="augmented")``, the paper's Gibbs sampler, through
  ``pm.sample`` (Laplace releases only: a Gaussian release has no mixing variances).

With ``--mechanism gaussian`` the releases use OpenDP's discrete Gaussian mechanism with
ρ = ε²/2 for each ε of the grid (unseeded, as every vetted release), and the hand-written model
has ``pm.Normal`` noise of the release's scale.

Time is the wall time of building the model and the whole ``pm.sample`` call (compile, tuning,
draws), 2 chains in one process; ESS is ArviZ's bulk ESS, the smallest over θ's components.
Printed: ESS/s per sampler and the ratios default/nuts and default/alg1.

Usage::

    python benchmarks/collapsed_ess.py                       # the full grid (about 30 min)
    python benchmarks/collapsed_ess.py --families binomial exponential --n 1000 --epsilon 0.1
    python benchmarks/collapsed_ess.py --quick               # a smoke test
    python benchmarks/collapsed_ess.py --mechanism gaussian --families binomial --n 1000
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset

SHARES = {
    "categorical": (0.2, 0.5, 0.3),
    "categorical_rare": (0.002, 0.4, 0.598),
    "categorical4": (0.2, 0.3, 0.2, 0.3),
    "categorical4_rare": (0.002, 0.3, 0.3, 0.398),
}
"""The Categorical families' shares. ``categorical_rare``: three categories, one of them 0.2 % of
the records (10 of 5000), where the CLT is untrusted and the exact sum runs over the counts
within the noise's reach of y; ``categorical4`` and ``categorical4_rare`` four categories."""

FAMILIES = ("binomial", *SHARES, "exponential", "normal", "poisson")


def make_release(
    family: str, n: int, epsilon: float, rng: np.random.Generator, mechanism: str = "laplace"
) -> pmdp.Release:
    if mechanism == "gaussian":
        noise = {"mechanism": "discrete-gaussian", "rho": epsilon**2 / 2}
    else:
        noise = {"epsilon": epsilon, "rng": rng}
    if family == "binomial":
        return pmdp.release(rng.binomial(5, 0.3, n), pm.Binomial, trials=5, **noise)
    if family.startswith("categorical"):
        shares = SHARES[family]
        x = rng.choice(len(shares), p=shares, size=n)
        return pmdp.release(x, pm.Categorical, categories=len(shares), **noise)
    if family == "exponential":
        x = rng.exponential(0.4, n)
        return pmdp.release(x, pm.Exponential, bounds=(0.0, 1.5), **noise)
    if family == "poisson":
        x = rng.poisson(6.0, n)
        return pmdp.release(x, pm.Poisson, bounds=(0, 15), **noise)
    x = rng.normal(30.0, 7.0, n)
    return pmdp.release(x, pm.Normal, bounds=(10.0, 50.0), **noise)


def prior(family: str) -> tuple[list[str], Callable[[], tuple]]:
    """θ's names and a function that adds θ's prior to the context model and returns the dist."""
    if family == "binomial":
        return ["p"], lambda: (pm.Binomial.dist(n=5, p=pm.Beta("p", 3, 5)),)
    if family.startswith("categorical"):
        k = len(SHARES[family])
        return ["p"], lambda: (pm.Categorical.dist(p=pm.Dirichlet("p", np.full(k, 2.0))),)
    if family == "exponential":
        return ["lam"], lambda: (pm.Exponential.dist(lam=pm.Gamma("lam", 2.0, 1.0)),)
    if family == "poisson":
        return ["lam"], lambda: (pm.Poisson.dist(mu=pm.Gamma("lam", 2.0, 0.2)),)

    def normal():
        sigma2 = pm.InverseGamma("sigma2", 3.0, 100.0)
        mu = pm.Normal("mu", 30.0, sigma=pm.math.sqrt(sigma2 / 0.1))
        return (pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2)),)

    return ["mu", "sigma2"], normal


def build(family: str, rel: pmdp.Release, sampler: str) -> pm.Model:
    _, make = prior(family)
    with pm.Model() as model:
        (dist,) = make()
        if sampler == "nuts":
            _hand_written(rel, dist)
        else:
            method = "augmented" if sampler == "alg1" else "auto"
            pmdp.NoisySuffStat("y", dist, release=rel, method=method)
    return model


def _hand_written(rel: pmdp.Release, dist) -> None:
    """What a user writes without the plugin: θ, s ~ CLT normal, y ~ Laplace(s, Δ/ε) (or
    ~ Normal(s, τ) for a Gaussian release)."""
    fam = rel.get_family()
    theta = fam.theta_of(dist)
    b = rel.scale
    noise = pm.Normal if rel.mechanism == "discrete-gaussian" else pm.Laplace
    if fam.needs_bounds:
        mean, cov = fam.joint_clt(theta, rel.n, rel.bounds)
        k = fam.stat_size
        if k == 1:
            s = pm.Normal("s", mean[0], sigma=pm.math.sqrt(cov[0, 0]))
        else:
            s = pm.MvNormal("s", mean[:k], cov=cov[:k, :k] + 1e-9 * np.eye(k))
        noise("y", s, b, observed=rel.value)
    elif fam.stat_shape == ():
        mu, var = fam.moments(theta)
        s = pm.Normal("s", rel.n * mu, sigma=pm.math.sqrt(rel.n * var))
        noise("y", s, b, observed=rel.value)
    else:
        mu, cov = fam.moments(theta)
        free = pm.MvNormal("s", rel.n * mu[:-1], cov=rel.n * cov[:-1, :-1])
        s = pm.math.concatenate([free, (rel.n - free.sum())[None]])
        noise("y", s, b, observed=rel.value)


def run(family: str, rel: pmdp.Release, sampler: str, *, draws: int, tune: int, seed: int):
    names, _ = prior(family)
    start = time.perf_counter()
    model = build(family, rel, sampler)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = {"target_accept": 0.95} if sampler == "nuts" else {}
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **kwargs,
        )
    seconds = time.perf_counter() - start
    post = posterior_dataset(idata)
    ess = min(float(np.min(az.ess(post, var_names=[v], method="bulk")[v].values)) for v in names)
    return seconds, ess


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--n", type=int, nargs="+", default=[100, 1000, 1_000_000])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument(
        "--baseline-draws",
        type=int,
        default=None,
        help="draws and tuning steps of each baseline (default: --draws and --tune). ESS/s is a "
        "rate, so a shorter baseline run measures the same thing; a short run of a slowly "
        "mixing chain overstates its ESS, which only favours the baseline",
    )
    parser.add_argument(
        "--baselines",
        nargs="+",
        default=["nuts", "alg1"],
        choices=["nuts", "alg1"],
        help="baselines to run (default both); the ratio against one left out prints as nan",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mechanism", choices=("laplace", "gaussian"), default="laplace")
    parser.add_argument("--quick", action="store_true", help="one small setting per family")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.epsilon, args.draws, args.tune = [1000], [0.1], 200, 200
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    print(
        f"ESS of θ per second of model build + pm.sample (2 chains, cores=1, tune={args.tune}, "
        f"draws={args.draws}; baselines: {args.baseline_draws or 'the same'}); "
        f"Python {platform.python_version()}, PyMC {pm.__version__}\n"
    )
    header = (
        f"{'family':<17}{'n':>9}{'eps':>6}  {'default ESS/s':>13}{'nuts ESS/s':>11}"
        f"{'alg1 ESS/s':>11}  {'vs nuts':>8}{'vs alg1':>8}  {'default s':>9}{'ESS':>7}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(args.seed)
    settings = {"draws": args.draws, "tune": args.tune, "seed": args.seed}
    short = args.baseline_draws
    baseline = settings if short is None else {**settings, "draws": short, "tune": short}
    # PyTensor loads its compiled-module cache once per process (seconds, growing with the
    # cache): pay it here rather than in whichever sampler is timed first.
    run("binomial", make_release("binomial", 100, 1.0, rng), "nuts", draws=20, tune=20, seed=0)
    for family in args.families:
        for n in args.n:
            for eps in args.epsilon:
                rel = make_release(family, n, eps, rng, args.mechanism)
                out = {"default": run(family, rel, "default", **settings)}
                for s in args.baselines:
                    # Algorithm 1 needs Laplace releases (a Gaussian one has no mixing variances).
                    if s == "nuts" or args.mechanism == "laplace":
                        out[s] = run(family, rel, s, **baseline)
                rate = {s: ess / sec for s, (sec, ess) in out.items()}
                rate.setdefault("nuts", float("nan"))
                rate.setdefault("alg1", float("nan"))
                print(
                    f"{family:<17}{n:>9}{eps:>6g}  {rate['default']:>13.1f}{rate['nuts']:>11.1f}"
                    f"{rate['alg1']:>11.1f}  {rate['default'] / rate['nuts']:>7.1f}x"
                    f"{rate['default'] / rate['alg1']:>7.1f}x  {out['default'][0]:>9.1f}"
                    f"{out['default'][1]:>7.0f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
