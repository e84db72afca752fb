"""End-to-end demo: release a Binomial statistic privately, then infer p three ways.

A curator holds n records x_i ~ Binomial(5, p), with p drawn from the Beta(3, 5) prior, and
publishes only y = Σ x_i + Laplace(0, Δ/ε). The analyst fits the noise-aware posterior with
``pm.sample()`` (independent exact draws of p | y, the latent statistic integrated out) and
compares it with the naive posterior (which treats y as exact) and the
non-private posterior (which sees the data). Run as ``pymc-dp-demo`` or
``python -m pymc_dp.demo``; ``--help`` lists the options.

Outputs in ``--output-dir``: ``summary.txt`` (what is printed), ``posterior.nc`` (the sampled
posterior), ``comparison.png`` (densities of p) and ``trace.png`` (trace plot of p, the latent
statistic and the noise variance).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main"]

TRIALS = 5
PRIOR = (3.0, 5.0)
CHAINS = 2
QUICK_DRAWS, QUICK_TUNE = 200, 200
INTERVAL = 0.90

_log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo.

    Parameters
    ----------
    argv
        Command-line arguments without the program name; ``None`` reads :data:`sys.argv`.

    Returns
    -------
    int
        Exit status, 0 on success.
    """
    args = _parse_args(argv)
    # The backend must be chosen before pyplot is used; Agg needs no display.
    import matplotlib

    matplotlib.use("Agg")
    import arviz as az
    import matplotlib.pyplot as plt
    import pymc as pm

    import pymc_dp as pmdp
    from pymc_dp._compat import posterior_dataset
    from pymc_dp.plots import plot_posterior_comparison, plot_trace

    draws, tune = (QUICK_DRAWS, QUICK_TUNE) if args.quick else (args.draws, args.tune)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    # Curator: simulate data from the prior and release the statistic.
    rng = np.random.default_rng(args.seed)
    true_p = float(rng.beta(*PRIOR))
    x = rng.binomial(TRIALS, true_p, size=args.n)
    rel = pmdp.release(x, pm.Binomial, epsilon=args.epsilon, trials=TRIALS, rng=rng)

    # Analyst: noise-aware posterior from the release alone.
    with pm.Model() as model:
        p = pm.Beta("p", *PRIOR)
        pmdp.NoisySuffStat("y", pm.Binomial.dist(n=TRIALS, p=p), release=rel)
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=CHAINS,
            cores=1,
            random_seed=args.seed,
            progressbar=sys.stdout.isatty(),
            compute_convergence_checks=False,  # az.summary below reports R-hat and ESS
        )
    # s and σ² were integrated out of the model: draw them exactly given each draw of p.
    idata = pmdp.sample_latent(idata, model, random_seed=args.seed)
    posterior = posterior_dataset(idata)
    p_draws = posterior["p"].values
    ess_p = float(az.ess(posterior, var_names=["p"], method="bulk")["p"])

    naive = pmdp.naive_posterior(rel, prior=PRIOR)
    exact = pmdp.nonprivate_posterior(x, pm.Binomial, prior=PRIOR, trials=TRIALS)

    var_names = ["p", "y_s", "y_sigma2"]
    text = "\n".join(
        [
            f"pymc_dp demo: x_i ~ Binomial({TRIALS}, p), p ~ Beta{PRIOR}, seed {args.seed}",
            f"n = {rel.n}, epsilon = {rel.epsilon:g}, sensitivity = {rel.sensitivity:g}, "
            f"Laplace scale = {rel.scale:g}",
            f"released y = {float(rel.value):.2f}  (true s = {int(x.sum())}, shown because "
            "this is a simulation)",
            f"Noise-aware posterior: {CHAINS} chains x {draws} draws after {tune} tuning steps",
            "",
            "ArviZ summary of the noise-aware posterior (y_s: latent statistic, y_sigma2: "
            "noise variance):",
            az.summary(idata, var_names=var_names).to_string(),
            _mixing_note(ess_p),
            f"Posterior of p ({INTERVAL:.0%} central interval):",
            _comparison_table(p_draws, naive, exact, true_p),
            "",
        ]
    )
    print(text)
    (out / "summary.txt").write_text(text, encoding="utf-8")
    nc_path = _save_netcdf(idata, out / "posterior.nc")

    fig = plot_posterior_comparison(
        {"noise-aware (pymc_dp)": p_draws},
        {"naive (treats y as exact)": naive, "non-private (sees the data)": exact},
        truth=true_p,
        title=f"Posterior of p from a private release: n = {rel.n}, ε = {rel.epsilon:g}",
    )
    fig.savefig(out / "comparison.png", dpi=120)
    plt.close(fig)
    fig = plot_trace(idata, var_names, title=f"Posterior draws: n = {rel.n}, ε = {rel.epsilon:g}")
    fig.savefig(out / "trace.png", dpi=100)
    plt.close(fig)

    written = ["summary.txt", nc_path.name, "comparison.png", "trace.png"]
    print(f"Wrote {', '.join(written)} to {out}")
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pymc-dp-demo",
        description="Noise-aware Bayesian inference from a differentially private Binomial "
        "release, compared with the naive and non-private posteriors.",
    )
    parser.add_argument("--output-dir", default="demo_output", help="where to write the outputs")
    parser.add_argument("--seed", type=int, default=1, help="seed for data, noise and sampler")
    parser.add_argument("--n", type=_positive(int), default=1000, help="number of records")
    parser.add_argument("--epsilon", type=_positive(float), default=0.05, help="privacy ε")
    parser.add_argument("--draws", type=_positive(int), default=2000, help="draws per chain")
    parser.add_argument("--tune", type=_positive(int), default=500, help="burn-in per chain")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_DRAWS} draws and {QUICK_TUNE} tuning steps (for tests)",
    )
    return parser.parse_args(argv)


def _positive(kind: type) -> Any:
    def convert(text: str) -> Any:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its error messages
    return convert


def _mixing_note(ess_p: float) -> str:
    """A warning line when the chains are too short to trust, else an empty line."""
    # PyMC's rule of thumb: at least 100 effective draws per chain.
    if ess_p >= 100 * CHAINS:
        return ""
    return (
        f"Note: bulk ESS of p is {ess_p:.0f}, below 100 per chain ({100 * CHAINS} in all);\n"
        "raise --draws for reliable estimates.\n"
    )


def _comparison_table(p_draws: np.ndarray, naive: Any, exact: Any, true_p: float) -> str:
    """Mean, sd and central interval of p for each method, as aligned text."""
    tail = (1 - INTERVAL) / 2
    rows = [
        (
            "noise-aware",
            p_draws.mean(),
            p_draws.std(ddof=1),
            *np.quantile(p_draws, [tail, 1 - tail]),
        ),
        ("naive", naive.mean(), naive.std(), naive.ppf(tail), naive.ppf(1 - tail)),
        ("non-private", exact.mean(), exact.std(), exact.ppf(tail), exact.ppf(1 - tail)),
    ]
    lo, hi = f"{tail:.0%}", f"{1 - tail:.0%}"
    lines = [f"{'method':<12} {'mean':>8} {'sd':>8} {lo:>8} {hi:>8} {'covers p':>9}"]
    for name, mean, sd, low, high in rows:
        covers = "yes" if low <= true_p <= high else "no"
        lines.append(f"{name:<12} {mean:8.4f} {sd:8.4f} {low:8.4f} {high:8.4f} {covers:>9}")
    lines.append(f"{'true p':<12} {true_p:8.4f}")
    return "\n".join(lines)


def _save_netcdf(idata: Any, path: Path) -> Path:
    """Write the sampling result to NetCDF; return the path written.

    InferenceData (ArviZ 0.x) and DataTree (ArviZ 1.x) both have ``to_netcdf``, but the grouped
    NetCDF4 format needs h5netcdf or netCDF4. Without either, keep the posterior group alone
    as NetCDF3 through SciPy, which is always available.
    """
    try:
        idata.to_netcdf(str(path))
        return path
    except (ImportError, ValueError) as err:
        _log.warning("Full NetCDF4 export unavailable (%s); writing the posterior only.", err)
    from pymc_dp._compat import posterior_dataset

    posterior = posterior_dataset(idata).copy()
    # NetCDF3 attributes must be numbers or strings (ArviZ 1.x stores lists, e.g. sample_dims).
    posterior.attrs = {
        key: value if isinstance(value, int | float | str) else str(value)
        for key, value in posterior.attrs.items()
    }
    posterior.to_netcdf(path, engine="scipy")
    return path


if __name__ == "__main__":
    sys.exit(main())
