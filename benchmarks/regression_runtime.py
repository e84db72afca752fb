"""Run time vs n of the regression methods (Figure 3f of Bernstein & Sheldon 2019), as ratios.

For one synthetic release per n (d = 1, ε = 0.1, the design of
:class:`pymc_dp.studies.regression.SyntheticDesign`), times in one process: the closed-form
non-private and naive posteriors (with 1000 draws), Gibbs-SS-Noisy and Gibbs-SS-Update (one
chain, ``--tune`` + ``--draws`` iterations) and MCMC-Ind (NUTS, one chain, the same iteration
counts, at n up to ``--mcmc-max-n``). Closed-form and Gibbs times are the best of 3 calls, after
an untimed warm-up of every method. MCMC-Ind is reported as wall time of ``sample_mcmc_ind``
(model build and compile included), PyMC's own ``sampling_time`` (used for the ratio to
Gibbs-SS-Update at the same n), NUTS gradients per draw, and the best time of one gradient
evaluation of its log density (a load-robust measure of how its cost grows with n). Expected:
MCMC-Ind grows with n (n (d + 1) latent coordinates), Gibbs-SS stays flat.

Usage::

    python benchmarks/regression_runtime.py                 # n = 10, 30, 100, 1000, 10000
    python benchmarks/regression_runtime.py --quick         # seconds; smoke test
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import numpy as np

from pymc_dp.regression import (
    draw_nig,
    naive_regression_posterior,
    nonprivate_regression_posterior,
    release_regression,
    sample_gibbs_ss,
    x_moments_from_release,
)
from pymc_dp.studies.regression import SyntheticDesign, simulate_trials


def _timed(fn, repeats=1):
    """Best wall time of ``repeats`` calls (least disturbed by other load) and the last result."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _gradient_seconds(model, evaluations=200, repeats=3):
    """Best time per evaluation of the model's joint log-density gradient at its initial point."""
    dlogp = model.compile_dlogp()
    point = model.initial_point()
    dlogp(point)  # first call pays for lazy compilation
    return _timed(lambda: [dlogp(point) for _ in range(evaluations)], repeats)[0] / evaluations


def run(n_values, mcmc_max_n, tune, draws, epsilon, seed, repeats=3):
    from pymc_dp.regression.model.mcmc_ind import mcmc_ind_model, sample_mcmc_ind

    logging.getLogger("pymc").setLevel(logging.ERROR)
    design = SyntheticDesign()
    bounds = {"x_bounds": [(-design.x_bound, design.x_bound)],
              "y_bounds": (-design.y_bound, design.y_bound)}  # fmt: skip
    rows = []
    # Warm-up (untimed): first calls pay for imports, LAPACK initialisation and C compilation.
    _, x, y, _ = simulate_trials(np.random.default_rng(seed), design, trials=1, n=20)
    warm = release_regression(x[0], y[0], epsilon=epsilon, moments_share=0.2, rng=0, **bounds)
    for kw in ({"x_moments": x_moments_from_release(warm)}, {"x_prior": design.x_prior}):
        sample_gibbs_ss(0, released=warm.value[None], n=20, scale=warm.scale,
                        prior=design.prior, draws=10, **kw)  # fmt: skip
    sample_mcmc_ind(warm, prior=design.prior, x_prior=design.x_prior, draws=5, tune=5, chains=1,
                    random_seed=0, progressbar=False, compute_convergence_checks=False)  # fmt: skip
    for n in n_values:
        rng = np.random.default_rng([seed, n])
        _, x, y, _ = simulate_trials(rng, design, trials=1, n=n)
        x, y = x[0], y[0]
        full = release_regression(x, y, epsilon=epsilon, rng=rng, **bounds)
        split = release_regression(x, y, epsilon=epsilon, moments_share=0.2, rng=rng, **bounds)
        gibbs = {"draws": draws, "tune": tune, "chains": 1, "n": n, "prior": design.prior}
        row = {"n": n}
        row["nonprivate"], _ = _timed(
            lambda: draw_nig(
                rng, nonprivate_regression_posterior(x, y, prior=design.prior), size=(1000,)
            ),
            repeats,
        )
        row["naive"], _ = _timed(
            lambda: draw_nig(
                rng, naive_regression_posterior(full, prior=design.prior), size=(1000,)
            ),
            repeats,
        )
        row["gibbs_noisy"], _ = _timed(
            lambda: sample_gibbs_ss(
                rng,
                released=split.value[None],
                scale=split.scale,
                x_moments=x_moments_from_release(split),
                **gibbs,
            ),
            repeats,
        )
        row["gibbs_update"], _ = _timed(
            lambda: sample_gibbs_ss(
                rng, released=full.value[None], scale=full.scale, x_prior=design.x_prior, **gibbs
            ),
            repeats,
        )
        if n <= mcmc_max_n:
            model = mcmc_ind_model(full, prior=design.prior, x_prior=design.x_prior)
            row["mcmc_ind_seconds_per_gradient"] = _gradient_seconds(model)
            wall, idata = _timed(
                lambda: sample_mcmc_ind(
                    full,
                    prior=design.prior,
                    x_prior=design.x_prior,
                    draws=draws,
                    tune=tune,
                    chains=1,
                    random_seed=seed,
                    progressbar=False,
                    compute_convergence_checks=False,
                )
            )
            stats = (
                idata["sample_stats"] if not hasattr(idata, "sample_stats") else idata.sample_stats
            )
            row["mcmc_ind_wall"] = wall
            row["mcmc_ind_sampling"] = float(stats.attrs.get("sampling_time", wall))
            row["mcmc_ind_gradients_per_draw"] = float(np.asarray(stats["n_steps"]).mean())
            row["mcmc_ind_ratio_to_gibbs_update"] = row["mcmc_ind_sampling"] / row["gibbs_update"]
        for key in ("nonprivate", "naive", "gibbs_noisy"):
            row[f"{key}_ratio_to_gibbs_update"] = row[key] / row["gibbs_update"]
        rows.append(row)
        print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v)
                          for k, v in row.items()}), flush=True)  # fmt: skip
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 30, 100, 1000, 10000])
    parser.add_argument("--mcmc-max-n", type=int, default=100)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.mcmc_max_n, args.tune, args.draws = [10, 100], 10, 20, 20
    rows = run(args.n, args.mcmc_max_n, args.tune, args.draws, args.epsilon, args.seed)
    mcmc = [r for r in rows if "mcmc_ind_wall" in r]
    flat = rows[-1]["gibbs_update"] / rows[0]["gibbs_update"]
    print(f"Gibbs-SS-Update time at n={rows[-1]['n']} / at n={rows[0]['n']}: {flat:.2f}")
    if len(mcmc) > 1:
        grow = (
            mcmc[-1]["mcmc_ind_ratio_to_gibbs_update"] / mcmc[0]["mcmc_ind_ratio_to_gibbs_update"]
        )
        per_grad = (mcmc[-1]["mcmc_ind_seconds_per_gradient"]
                    / mcmc[0]["mcmc_ind_seconds_per_gradient"])  # fmt: skip
        for r in mcmc:
            print(f"n={r['n']}: MCMC-Ind sampling {r['mcmc_ind_sampling']:.1f} s "
                  f"({r['mcmc_ind_ratio_to_gibbs_update']:.0f}x Gibbs-SS-Update), "
                  f"{r['mcmc_ind_seconds_per_gradient'] * 1e6:.0f} µs per gradient, "
                  f"{r['mcmc_ind_gradients_per_draw']:.0f} gradients per draw")  # fmt: skip
        print(f"MCMC-Ind/Gibbs-SS-Update ratio grows {grow:.1f}x from n={mcmc[0]['n']} to "
              f"n={mcmc[-1]['n']}; time per gradient grows {per_grad:.1f}x")  # fmt: skip
    if args.output:
        with open(args.output, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
