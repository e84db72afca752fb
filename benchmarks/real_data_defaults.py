"""The command line's defaults on real data: statsmodels' ``randhie`` and ``fair`` (issue 36).

A new user's trial, repeated: ``pymc-dp release`` then ``pymc-dp fit`` with every default, on
data sets bundled with statsmodels (no download), windows chosen from what the column measures.
For each fit it checks that

- the posterior is within its honest width of the non-private answer: the posterior mean is
  within 2 posterior sds of the reference (for a windowed family, the same model given the exact
  window sum and window count, i.e. the same release at ε = 1000; for the grouped release, each
  group's share; for the regression, OLS);
- a windowed release carries the window count (the command line's default): without the window
  premise (the plain Gamma prior, ``build_model(..., window_records=0)``) no more than 1% of the
  mass may lie 3× away from the reference. ``--sum-alone`` also fits the window sum alone
  (``--count-share 0``), with and without the premise, for contrast (printed, not checked);
- no separated mode away from the reference holds more than 1% of the mass unless the fit's
  output warns of it (``separated_modes``);
- the regression's σ² 94% interval covers OLS's residual variance;
- a grouped windowed Poisson (``randhie.mdvis`` by coinsurance plan, each group's window count
  released with its sum, the default): every λ_g within 2 sds of the same model given the exact
  sums and counts, no more than 1% of its mass 3× away, R-hat ≤ 1.05.

Run (needs statsmodels, in the ``test`` extra; a few minutes on 2 cores):

    python benchmarks/real_data_defaults.py [--seed 1] [--out real_data_out] [--only windowed]
        [--sum-alone]   (--only: windowed, grouped, grouped_windowed, regression)

The plots of each fit are left in ``--out`` to be looked at.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

from pymc_dp.curator.release_file import read_release
from pymc_dp.evaluation.modes import separated_modes
from pymc_dp.model.ready_made import build_model

WINDOWED = [
    # (name, data set, column, family, window)
    ("mdvis_30", "randhie", "mdvis", "poisson", (0, 30)),
    ("mdvis_60", "randhie", "mdvis", "poisson", (0, 60)),
    ("yrs_married", "fair", "yrs_married", "exponential", (0, 50)),
]
EPSILON = {"poisson": 0.1, "exponential": 0.1}


def _cli(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pymc_dp.cli", *argv], capture_output=True, text=True, check=True
    )
    return done.stdout


def _write_data(out: Path) -> dict[str, Path]:
    import statsmodels.api as sm

    randhie = sm.datasets.randhie.load_pandas().data
    fair = sm.datasets.fair.load_pandas().data
    fair["affair"] = (fair["affairs"] > 0).astype(int)
    fair["occupation"] = fair["occupation"].astype(int)
    # The RAND experiment's coinsurance plan (a public design variable): 0, 25, 50, 95, 100 %.
    randhie["coins"] = (np.exp(randhie["lncoins"]).round() - 1).astype(int)
    paths = {"randhie": out / "randhie.csv", "fair": out / "fair.csv"}
    randhie.to_csv(paths["randhie"], index=False)
    fair.to_csv(paths["fair"], index=False)
    return paths


def _reference_lam(release_path: Path) -> tuple[float, float]:
    """Mean and sd of λ given the exact window sum: the release at ε = 1000 (noise ≈ 0)."""
    rel = read_release(release_path)
    exact = rel  # ε = 1000: noise scale Δ/1000, far below the posterior sd
    with build_model(exact):
        idata = pm.sample(draws=2000, tune=200, chains=1, random_seed=0, progressbar=False)
    lam = idata.posterior["lam"].values.ravel()
    return float(lam.mean()), float(lam.std())


def _far_mass(lam: np.ndarray, reference: float) -> float:
    """Mass of the separated modes away from the reference, the heaviest mode left out.

    The heaviest mode is the fit's answer, judged by its distance to the reference (in
    posterior sds); the others are far modes unless they hold the reference.
    """
    modes = sorted(separated_modes(lam), key=lambda m: m.mass)[:-1]
    return float(sum(m.mass for m in modes if not m.low <= reference <= m.high))


def _plain_prior_lam(release_path: Path, seed: int) -> np.ndarray:
    """Draws of λ from the release without the window premise: the plain Gamma prior."""
    with build_model(read_release(release_path), window_records=0):
        idata = pm.sample(draws=5000, tune=500, chains=2, random_seed=seed, progressbar=False)
    return idata.posterior["lam"].values.ravel()


def windowed(paths: dict[str, Path], out: Path, seed: int, sum_alone: bool = False) -> list[bool]:
    ok = []
    for name, data, column, family, (a, b) in WINDOWED:
        release = out / f"{name}.json"
        # The exact statistic is recovered only for the reference: laplace-float with a seed,
        # and the same statistic at ε = 1000 (the curator's statistic, never printed).
        _cli("release", str(paths[data]), "--column", column, "--family", family,
             "--bounds", str(a), str(b), "--epsilon", str(EPSILON[family]), "--seed", str(seed),
             "--mechanism", "laplace-float", "--output", str(release), "--overwrite")  # fmt: skip
        exact_release = out / f"{name}_exact.json"
        _cli("release", str(paths[data]), "--column", column, "--family", family,
             "--bounds", str(a), str(b), "--epsilon", "1000", "--seed", str(seed),
             "--mechanism", "laplace-float", "--output", str(exact_release),
             "--overwrite")  # fmt: skip
        text = _cli("fit", str(release), "--output-dir", str(out / name), "--overwrite",
                    "--seed", str(seed), "--no-progress")  # fmt: skip
        lam = az.from_netcdf(out / name / "posterior.nc").posterior["lam"].values.ravel()
        ref_mean, ref_sd = _reference_lam(exact_release)
        if sum_alone:
            # The release of earlier versions, for contrast: the window sum alone (not a check).
            alone = out / f"{name}_sum_alone.json"
            _cli("release", str(paths[data]), "--column", column, "--family", family,
                 "--bounds", str(a), str(b), "--epsilon", str(EPSILON[family]), "--seed",
                 str(seed), "--mechanism", "laplace-float", "--count-share", "0", "--output",
                 str(alone), "--overwrite")  # fmt: skip
            _cli("fit", str(alone), "--output-dir", str(out / f"{name}_sum_alone"),
                 "--overwrite", "--seed", str(seed), "--no-progress")  # fmt: skip
            post = az.from_netcdf(out / f"{name}_sum_alone" / "posterior.nc").posterior
            old = post["lam"].values.ravel()
            old_away = _far_mass(old, ref_mean)
            print(f"{name:12s} window sum alone (--count-share 0): lam = {old.mean():.4g} ± "
                  f"{old.std():.2g}; far-mode mass {old_away:.2%}")  # fmt: skip
            plain = _plain_prior_lam(alone, seed)
            plain_away = float(np.mean(np.abs(np.log(plain / ref_mean)) > np.log(3)))
            print(f"{name:12s} window sum alone, plain prior: lam = {plain.mean():.4g} ± "
                  f"{plain.std():.2g}; mass off by > 3x {plain_away:.2%}")  # fmt: skip
        mean, sd = float(lam.mean()), float(lam.std())
        away = _far_mass(lam, ref_mean)
        if read_release(release).window_count is not None:
            # The count alone, without the premise: no far mode may hold 1% of the mass.
            plain = _plain_prior_lam(release, seed)
            plain_away = float(np.mean(np.abs(np.log(plain / ref_mean)) > np.log(3)))
            ok.append(plain_away <= 0.01)
            print(f"{name:12s} with the count, plain prior (no window premise): lam = "
                  f"{plain.mean():.4g} ± {plain.std():.2g}; mass off by > 3x {plain_away:.2%}  "
                  f"{'OK' if plain_away <= 0.01 else 'FAIL'}")  # fmt: skip
        warned = "separated modes" in text
        good = abs(mean - ref_mean) <= 2 * sd and (away <= 0.01 or warned)
        ok.append(good)
        print(
            f"{name:12s} {family:11s} [{a}, {b}] eps={EPSILON[family]}: lam = {mean:.4g} ± "
            f"{sd:.2g}; non-private (exact statistics) {ref_mean:.4g} ± {ref_sd:.2g}; "
            f"far-mode mass {away:.2%}{' (warned)' if warned else ''}; "
            f"mass off by > 3x from it {np.mean(np.abs(np.log(lam / ref_mean)) > np.log(3)):.2%}  "
            f"{'OK' if good else 'FAIL'}"
        )
    return ok


def grouped(paths: dict[str, Path], out: Path, seed: int) -> list[bool]:
    import pandas as pd

    release = out / "affair_by_occupation.json"
    _cli("release", str(paths["fair"]), "--column", "affair", "--family", "bernoulli",
         "--by", "occupation", "--groups", "1,2,3,4,5,6", "--public-sizes",
         "--epsilon", "1", "--seed", str(seed),
         "--mechanism", "laplace-float", "--output", str(release), "--overwrite")  # fmt: skip
    text = _cli("fit", str(release), "--output-dir", str(out / "affair"), "--overwrite",
                "--seed", str(seed), "--no-progress")  # fmt: skip
    diagnostics = [line for line in text.splitlines() if line.startswith(("diagnostics", "warn"))]
    print("grouped fit, affair by occupation (eps = 1):", *diagnostics, sep="\n  ")
    post = az.from_netcdf(out / "affair" / "posterior.nc").posterior
    fair = pd.read_csv(paths["fair"])
    shares = fair.groupby("occupation")["affair"].mean()
    var = next(v for v in post.data_vars if post[v].ndim == 3 and v.startswith("p"))
    p = post[var].values.reshape(-1, post[var].shape[-1])
    ok = []
    for j, share in enumerate(shares.values):
        mean, sd = p[:, j].mean(), p[:, j].std()
        good = abs(mean - share) <= 2 * sd
        ok.append(good)
        print(f"  group {j + 1}: p = {mean:.3f} ± {sd:.3f}; non-private {share:.3f}  "
              f"{'OK' if good else 'FAIL'}")  # fmt: skip
    ok.append(bool(diagnostics) and diagnostics[0].startswith("diagnostics"))
    return ok


COINS = "0,25,50,95,100"


def grouped_windowed(paths: dict[str, Path], out: Path, seed: int) -> list[bool]:
    """randhie.mdvis by coinsurance plan: a grouped windowed Poisson with each group's count.

    The reference is the same partially pooled model given each group's exact window sum and
    count (the release at ε = 1000). Checks: each λ_g within 2 posterior sds of it, at most 1%
    of any λ_g's mass 3× away from it, and R-hat ≤ 1.05 (no chain in a far mode).
    """
    from pymc_dp.model.hierarchical import build_grouped_model

    release, exact = out / "mdvis_by_coins.json", out / "mdvis_by_coins_exact.json"
    for path, eps in ((release, "0.1"), (exact, "1000")):
        _cli("release", str(paths["randhie"]), "--column", "mdvis", "--family", "poisson",
             "--bounds", "0", "30", "--by", "coins", "--groups", COINS, "--public-sizes",
             "--epsilon", eps, "--seed", str(seed), "--mechanism", "laplace-float",
             "--output", str(path), "--overwrite")  # fmt: skip
    text = _cli("fit", str(release), "--output-dir", str(out / "mdvis_by_coins"), "--overwrite",
                "--seed", str(seed), "--no-progress")  # fmt: skip
    diagnostics = [line for line in text.splitlines() if line.startswith(("diagnostics", "warn"))]
    print("grouped windowed fit, mdvis by coinsurance (eps = 0.1):", *diagnostics, sep="\n  ")
    post = az.from_netcdf(out / "mdvis_by_coins" / "posterior.nc").posterior
    lam = post["lam"].values.reshape(-1, post["lam"].shape[-1])
    with build_grouped_model(read_release(exact, allow_grouped=True)):
        ref = pm.sample(draws=1000, tune=500, chains=2, random_seed=0, progressbar=False)
    ref_lam = ref.posterior["lam"].values.reshape(-1, lam.shape[1])
    rhat = float(az.rhat(post)["lam"].max())
    ok = [rhat <= 1.05]
    for j, key in enumerate(COINS.split(",")):
        mean, sd, ref_mean = lam[:, j].mean(), lam[:, j].std(), ref_lam[:, j].mean()
        off = float(np.mean(np.abs(np.log(lam[:, j] / ref_mean)) > np.log(3)))
        good = abs(mean - ref_mean) <= 2 * sd and off <= 0.01
        ok.append(good)
        print(f"  coins {key:>3s}%: lam = {mean:.3f} ± {sd:.3f}; non-private (exact sums and "
              f"counts) {ref_mean:.3f} ± {ref_lam[:, j].std():.3f}; mass off by > 3x {off:.2%}  "
              f"{'OK' if good else 'FAIL'}")  # fmt: skip
    print(f"  R-hat of lam <= {rhat:.3f}  {'OK' if rhat <= 1.05 else 'FAIL'}")
    return ok


def regression(paths: dict[str, Path], out: Path, seed: int) -> list[bool]:
    import pandas as pd
    import statsmodels.formula.api as smf

    release = out / "fair_regression.json"
    _cli("release", str(paths["fair"]), "--family", "regression", "--x", "yrs_married,educ",
         "--y", "rate_marriage", "--x-bounds", "0", "40", "9", "20", "--y-bounds", "1", "5",
         "--epsilon", "1", "--seed", str(seed), "--mechanism", "laplace-float",
         "--output", str(release), "--overwrite")  # fmt: skip
    _cli("fit", str(release), "--output-dir", str(out / "regression"), "--overwrite",
         "--seed", str(seed), "--no-progress", "--draws", "1000", "--tune", "500")  # fmt: skip
    post = az.from_netcdf(out / "regression" / "posterior.nc").posterior
    ols = smf.ols("rate_marriage ~ yrs_married + educ", pd.read_csv(paths["fair"])).fit()
    s2 = post["sigma2"].values.ravel()
    lo, hi = np.quantile(s2, [0.03, 0.97])
    covered = bool(lo <= ols.scale <= hi)
    print(f"regression sigma2 = {s2.mean():.3f}, 94% [{lo:.3f}, {hi:.3f}]; OLS {ols.scale:.3f}  "
          f"{'OK' if covered else 'FAIL'}")  # fmt: skip
    theta = post["theta"].values.reshape(-1, post["theta"].shape[-1])
    ok = [covered]
    for j, (label, value) in enumerate(ols.params.items()):
        mean, sd = theta[:, j].mean(), theta[:, j].std()
        good = abs(mean - value) <= 2 * sd
        ok.append(good)
        print(f"  {label:12s} {mean:8.4f} ± {sd:.4f}; OLS {value:8.4f}  {'OK' if good else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("real_data_out"))
    parser.add_argument("--only", choices=["windowed", "grouped", "grouped_windowed", "regression"])
    parser.add_argument(
        "--sum-alone",
        action="store_true",
        help="also fit each windowed release without its window count, for contrast",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    paths = _write_data(args.out)
    ok = []
    for part in (windowed, grouped, grouped_windowed, regression):
        if args.only in (None, part.__name__):
            extra = {"sum_alone": args.sum_alone} if part is windowed else {}
            ok += part(paths, args.out, args.seed, **extra)
    print(f"{sum(ok)} of {len(ok)} checks passed")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
