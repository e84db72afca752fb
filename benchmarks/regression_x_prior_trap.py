"""Does a prior of Σ_x tied to the box let the default regression sampler converge at d ≥ 4?

The setting of ``docs/regression.md`` (section "d ≥ 5: where the trap starts"): n records, x
uniform on [−a, a]^d inside the public box [−1, 1]^d, the slopes of ``regression_ess.py``,
y = 0.2 + xᵀθ + N(0, 0.2²) clipped to [−2, 2], one release (data and release seed 1), prior
NIG(0, I/10, 3, 0.1), no released moments; ``sample_regression`` (16 candidates, chain seed 1)
fits the same release with each prior of x, in one process. Priors (h = 1 the half-width):

* ``default``: :func:`pymc_dp.regression.default_x_prior` (ν = d, Ψ = diag(h²)/40);
* ``cK``: ν = d + K, Ψ = (ν − d − 1) h²/3 I, so E Σ_x = h²/3 I, the variance of x uniform on
  the box (``cd``: K = d + 2);
* ``mode``: ν = d, Ψ = (2d + 1) h²/9 I, whose joint mode Ψ / (ν + d + 1) is h²/9 I.

Each (d, prior) is fitted once per entry of ``--moves``, the symmetry moves of
``pymc_dp.regression.kernels.scale_move`` used: ``default`` the sampler's (``MOVES``), ``main``
those before issue 34's residual-scale move (four moves, ``shift_move`` with factor 0.3),
``residual`` those four and ``residual_scale_move``, ``principal`` the default's and
``principal_scale_move`` (rescaling along Σ_x's axes), ``off`` none (as ``--scale-steps`` with
no values). ``--seed`` seeds the chains (1 by default; the release is always the same).

Printed per (d, prior, moves): CPU seconds, the moment move's acceptance after tuning (read from
``collapsed_sweep``, which is wrapped for that), max R-hat and smallest bulk ESS of (θ, σ²), the
bulk ESS of θ₀, of σ² and the smallest of log diag Σ_x, the range of the chains' mean diag Σ_x
against the data's variances, θ₁'s posterior mean and sd and its per-chain means.

Usage::

    python benchmarks/regression_x_prior_trap.py --d 2 4 5
    python benchmarks/regression_x_prior_trap.py --d 4 5 --tune 1000 --draws 3000 \
        --priors default mode c20 c200
    python benchmarks/regression_x_prior_trap.py --d 4 5 --tune 1000 --draws 3000 \
        --priors default --moves main default
"""

from __future__ import annotations

import argparse
import functools
import time

import arviz as az
import numpy as np

import pymc_dp.regression.engine.collapsed as engine
from pymc_dp.regression import default_x_prior, release_regression
from pymc_dp.regression.kernels import scale_move as sm
from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.data_model import NIW

MAIN = ((sm.scale_move, 1.0), (sm.translate_move, 1.0), (sm.shift_move, 0.3),
        (sm.response_scale_move, 1.0))  # fmt: skip
VARIANTS = {
    "default": sm.MOVES,
    "main": MAIN,
    "residual": (*MAIN, (sm.residual_scale_move, 1.0)),
    "off": (),
    "principal": (*sm.MOVES, (sm.principal_scale_move, 1.0)),
}
"""Move sets of ``--moves``: ``moves`` of ``scale_moves`` (module docstring)."""
SLOPES = np.array([0.5, -0.3, 0.2, 0.4, -0.1, 0.3, -0.2, 0.1, 0.25, -0.15])


def x_prior(name: str, d: int, half: float = 1.0) -> NIW:
    """The prior of x called ``name`` (module docstring) for the box [−half, half]^d."""
    if name == "default":
        return default_x_prior([(-half, half)] * d)
    if name == "mode":
        return NIW(np.zeros(d), np.array(1.0), np.array(float(d)),
                   (2 * d + 1) * half**2 / 9 * np.eye(d))  # fmt: skip
    if name.startswith("c"):
        nu = d + (d + 2 if name == "cd" else float(name[1:]))
        return NIW(np.zeros(d), np.array(1.0), np.array(float(nu)),
                   (nu - d - 1) * half**2 / 3 * np.eye(d))  # fmt: skip
    raise ValueError(f"prior must be 'default', 'mode', 'cd' or 'c<K>' (got {name!r})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[2, 4, 5])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--priors", nargs="+", default=["default", "c2", "cd", "mode"])
    parser.add_argument("--spread", type=float, default=1.0, help="x uniform on [-a, a]^d")
    parser.add_argument("--seed", type=int, default=1, help="the chains' seed")
    parser.add_argument("--moves", nargs="+", default=["default"], choices=list(VARIANTS))
    parser.add_argument("--scale-steps", type=float, nargs="*", default=None,
                        help="steps of the covariate-rescaling moves (none: switched off); "
                        "default: the sampler's")  # fmt: skip
    args = parser.parse_args(argv)

    accepted = []
    sweep = engine.collapsed_sweep

    def logged_sweep(*a, **kw):  # records the moment move's acceptance of every iteration
        if args.scale_steps is not None:
            kw["scale_steps"] = tuple(args.scale_steps)
        state, stats = sweep(*a, **kw)
        accepted.append(np.asarray(stats.moment, float).copy())
        return state, stats

    engine.collapsed_sweep = logged_sweep
    print("d prior moves | CPU s | moment acc. | R-hat max | ESS min | ESS θ₀ σ² Σ_jj | "
          "diag Σ_x chains | data var | θ₁ mean sd (true) | θ₁ per chain")  # fmt: skip
    for d in args.d:
        rng = np.random.default_rng(1)
        slopes = SLOPES[:d]
        x = rng.uniform(-args.spread, args.spread, size=(args.n, d))
        y = np.clip(0.2 + x @ slopes + 0.2 * rng.standard_normal(args.n), -2, 2)
        rel = release_regression(x, y, epsilon=args.eps, rng=1, x_bounds=[(-1.0, 1.0)] * d,
                                 y_bounds=(-2.0, 2.0))  # fmt: skip
        prior = NIG(np.zeros(d + 1), 0.1 * np.eye(d + 1), np.array(3.0), np.array(0.1))
        for name, moves in ((a, b) for a in args.priors for b in args.moves):
            engine.scale_moves = functools.partial(sm.scale_moves, moves=VARIANTS[moves])
            accepted.clear()
            t0 = time.process_time()
            tr = engine.sample_regression(
                args.seed, released=np.asarray(rel.value)[None], n=args.n, prior=prior,
                x_prior=x_prior(name, d), scale=float(rel.scale), draws=args.draws,
                tune=args.tune, chains=args.chains, tries=16,
            )  # fmt: skip
            cpu = time.process_time() - t0
            post = {"theta": tr.theta[:, :, 0], "sigma2": tr.sigma2[:, :, 0]}
            ess, rhat = az.ess(post), az.rhat(post)
            log_diag = np.log(np.diagonal(tr.x_cov[:, :, 0], 0, -2, -1))
            ess_diag = az.ess({"d": log_diag})["d"].min()
            diag = np.diagonal(tr.x_cov[:, :, 0], 0, -2, -1).mean(1)  # (chain, d)
            th1 = tr.theta[:, :, 0, 1]
            print(
                f"{d} {name:7s} {moves:8s} | {cpu:6.1f} | {np.mean(accepted[args.tune :]):.2f} | "
                f"{float(max(rhat['theta'].max(), rhat['sigma2'])):.3f} | "
                f"{float(min(ess['theta'].min(), ess['sigma2'])):.0f} | "
                f"{float(ess['theta'][0]):.0f} {float(ess['sigma2']):.0f} {float(ess_diag):.0f} | "
                f"{diag.min():.3f}-{diag.max():.3f} | {x.var(0).min():.3f}-{x.var(0).max():.3f} | "
                f"{th1.mean():.3f} {th1.std():.3f} ({slopes[0]}) | {np.round(th1.mean(1), 3)}",
                flush=True,
            )
    engine.collapsed_sweep = sweep
    engine.scale_moves = sm.scale_moves


if __name__ == "__main__":
    main()
