"""A family declared in one file outside pymc_dp is picked up everywhere (issue 32).

``tests/negbinomial_family.py`` declares Negative Binomial counts with r known (a windowed count
family, like Poisson) in one file, and no pymc_dp module names it: importing the file registers it.
The curator (:func:`pymc_dp.release`), the models (``NoisySuffStat``, ``pmdp.models.build_model``
and ``pm.sample``), the CLT trust rule of window sums, the dry run, the command line's ``release``
and ``fit`` and the entry-point group ``pymc_dp.families`` read its declaration. The fit is checked
against the exact posterior of the released window sum: the n-fold convolution of one record's
windowed law (scipy's ``nbinom``) by FFT, with the release's Laplace noise, on a grid of p.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from scipy import fft, stats

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.families import (
    FamilyDeclaration,
    PriorSpec,
    declared_families,
    family_class,
    family_declaration,
    family_from_dist,
    get_family,
    register_family,
    unregister_family,
)
from pymc_dp.likelihoods.window_trust import window_clt_trust
from pymc_dp.model.hierarchical import hierarchical_families
from pymc_dp.model.nodes.info import release_attrs
from pymc_dp.model.priors import PRIORS, default_prior_hyperparameters, prior_summary

ROOT = Path(__file__).resolve().parents[1]
R, TRUE_P, N, BOUNDS, EPSILON, SEED = 3, 0.4, 200, (0, 40), 0.5, 7
# ε = 0.5 over the window (0, 40) of 200 records: the noise (sd 113) is wider than the window
# sum's spread (47), where the CLT is trusted (KS 0.008; window_trust), so "auto" takes it.


@pytest.fixture(scope="module")
def negbinomial():
    """The family's class, registered by importing its file, and forgotten after these tests."""
    cls = importlib.import_module("negbinomial_family").NegativeBinomial
    register_family(cls.declaration, cls)  # again, if an earlier module unregistered it
    yield cls
    unregister_family("negbinomial")


@pytest.fixture(scope="module")
def records():
    return np.random.default_rng(2024).negative_binomial(R, TRUE_P, size=N)


@pytest.fixture(scope="module")
def release(negbinomial, records):
    return pmdp.release(
        records, "negbinomial", successes=R, bounds=BOUNDS, epsilon=EPSILON, rng=SEED
    )


def _exact_posterior(rel, alpha, beta, grid):
    """Posterior weights of p on ``grid``: Beta prior × Σ_s P(ŝ = s | p) Laplace(y - s)."""
    b = int(rel.bounds[1])
    size = N * b + 1
    length = fft.next_fast_len(size, real=True)
    noise = stats.laplace.pdf(rel.value - np.arange(size), scale=rel.scale)
    likelihood = []
    for p in grid:
        q = stats.nbinom.pmf(np.arange(b + 1), R, p)
        q[0] += stats.nbinom.sf(b, R, p)  # a record outside the window adds 0
        law = np.maximum(fft.irfft(fft.rfft(q, length) ** N, length)[:size], 0.0)
        likelihood.append(law @ noise)
    weights = np.asarray(likelihood) * stats.beta(alpha, beta).pdf(grid)
    return weights / weights.sum()


# ---- the declaration is found by name, by PyMC class and by dist --------------------------


def test_one_file_registers_the_family_everywhere(negbinomial):
    assert [d.name for d in declared_families()][-1] == "negbinomial"
    assert family_class("negbinomial") is negbinomial
    assert get_family("negbinomial", successes=R) == negbinomial(successes=R)
    assert get_family(pm.NegativeBinomial, successes=R) == negbinomial(successes=R)
    assert family_from_dist(pm.NegativeBinomial.dist(n=R, p=0.3)) == negbinomial(successes=R)
    assert PRIORS["negbinomial"].describe_rule() == "p ~ Beta(alpha=2, beta=m/r)"
    assert "negbinomial" in hierarchical_families()
    assert negbinomial.name == "negbinomial" and family_declaration("negbinomial").windowed


# ---- curator ----------------------------------------------------------------------------------


def test_the_curator_releases_its_window_sum(release, records):
    assert release.family == "negbinomial" and dict(release.family_params) == {"successes": R}
    assert release.bounds == BOUNDS and release.sensitivity == 40.0  # one record: 0 to 40
    exact = records[records <= BOUNDS[1]].sum()
    assert abs(float(release.value) - exact) < 15 * release.scale  # Laplace: P ≈ e^-15
    assert release.get_family() == get_family("negbinomial", successes=R)


def test_the_default_prior_is_put_on_the_window(release):
    # Beta(2, m/r): E[r (1 - p)/p] = r·β/(α - 1) = m, the window's centre 20.
    hyper = default_prior_hyperparameters(release.get_family(), release)
    assert hyper == {"alpha": 2.0, "beta": pytest.approx(20.0 / R)}
    assert prior_summary(release)["text"] == "p ~ Beta(alpha=2, beta=6.667) from window (0, 40)"


# ---- the CLT trust rule of window sums uses the family's θ grid -------------------------------


def test_window_trust_measures_the_clt_over_the_family_theta(negbinomial, release):
    family = release.get_family()
    grid = family.window_theta_grid(BOUNDS, 61)
    assert grid.shape == (61,) and np.all((grid > 0) & (grid < 1))
    trusted, reason = window_clt_trust(family, N, release.value, release.scale, BOUNDS)
    assert trusted, reason
    # Ten times fewer records, little noise: the window sum is far from normal.
    assert not window_clt_trust(family, 20, 90.0, 8.0, BOUNDS)[0]


# ---- the analyst's model ----------------------------------------------------------------------


def test_build_model_posterior_is_the_exact_posterior(release):
    """600 draws (independent: exact grid draws of p) against the exact posterior on a grid.

    The window sum alone also fits a small p, where most records fall beyond the window and
    the rest still sum to y: the exact posterior has about 8% of its mass below p = 0.15.
    Bounds: 4 Monte Carlo standard errors of the mean and of that mass. The plain conjugate
    prior: without the window premise (``window_records=0``), which would down-weight that mode.
    """
    model = pmdp.models.build_model(release, window_records=0)
    assert [v.name for v in model.free_RVs] == ["p"]
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "clt"  # trusted by window_trust
    with model:
        idata = pm.sample(
            draws=600, tune=100, chains=1, random_seed=11, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    draws = idata.posterior["p"].values.ravel()
    grid = np.linspace(0.001, 0.95, 1900)
    weights = _exact_posterior(release, 2.0, 20.0 / R, grid)
    mean = float(weights @ grid)
    sd = float(np.sqrt(weights @ (grid - mean) ** 2))
    low = float(weights[grid < 0.15].sum())
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(draws.size)
    assert abs(np.mean(draws < 0.15) - low) < 4 * np.sqrt(low * (1 - low) / draws.size)


def test_noisy_suffstat_by_hand_is_the_ready_made_model(release):
    with pm.Model() as by_hand:
        p = pm.Beta("p", 2.0, 20.0 / R)  # the declared default: Beta(2, m/r)
        pmdp.NoisySuffStat("y", pm.NegativeBinomial.dist(n=R, p=p), release=release)
    ready_made = pmdp.models.build_model(release, window_records=0)  # no window premise
    # FAST_COMPILE: three evaluations need no C compilation.
    ours = ready_made.compile_logp(mode="FAST_COMPILE")
    theirs = by_hand.compile_logp(mode="FAST_COMPILE")
    for value in (0.05, 0.3, 0.45):
        point = {"p_logodds__": np.log(value / (1 - value))}
        assert ours(point) == pytest.approx(theirs(point), rel=1e-12)


# ---- the command line ---------------------------------------------------------------------------


def test_help_lists_the_family_its_option_and_prior(negbinomial, capsys):
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    text = capsys.readouterr().out
    assert "  negbinomial   failures before --successes R" in text
    assert "negbinomial: the successes R each record waits for" in " ".join(text.split())
    assert "lognormal, negbinomial)" in text  # the window options apply to it
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert (
        "  negbinomial                     p ~ Beta(alpha=2, beta=m/r)" in capsys.readouterr().out
    )


def test_dry_run_plans_its_noise(negbinomial, capsys):
    argv = [
        "release", "--dry-run", "--n", "1000", "--family", "negbinomial", "--successes", "3",
        "--bounds", "0", "40", "--epsilon", "0.5", "--mechanism", "laplace-float",
        "--count-share", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dry run: negbinomial release of n = 1000 records, window [0, 40], epsilon = 0.5" in out
    assert "sensitivity 40, laplace-float noise scale 80, noise sd 113.1" in out
    assert "sum of failures: plausible range 40000 (n × 40)" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--family", "negbinomial", "--bounds", "0", "40"],
            "the negbinomial family needs --successes",
        ),
        (
            ["--family", "poisson", "--successes", "3", "--bounds", "0", "40"],
            "--successes applies to negbinomial, not poisson",
        ),
        (
            ["--family", "negbinomial", "--successes", "3"],
            "the negbinomial family is released over",
        ),
    ],
)
def test_its_options_are_checked_before_anything_is_imported(negbinomial, capsys, argv, expected):
    base = ["release", "--dry-run", "--n", "100", "--epsilon", "1"]
    assert main([*base, *argv]) == 2
    assert expected in capsys.readouterr().err


def test_cli_release_then_fit(negbinomial, records, release, tmp_path, capsys):
    data = tmp_path / "waits.csv"
    data.write_text("failures\n" + "\n".join(map(str, records)) + "\n")
    out = tmp_path / "release.json"
    assert main([
        "release", str(data), "--column", "failures", "--family", "negbinomial",
        "--successes", "3", "--bounds", "0", "40", "--epsilon", "0.5", "--seed", str(SEED),
        "--count-share", "0", "-o", str(out),
    ]) == 0  # fmt: skip
    assert "wrote" in capsys.readouterr().out
    written = json.loads(out.read_text())
    assert written["family"] == "negbinomial" and written["family_params"] == {"successes": 3}
    # The same records and seed as pmdp.release: the same noisy value.
    assert written["value"] == pytest.approx(float(release.value))
    fit_dir = tmp_path / "fit"
    assert main([
        "fit", str(out), "--draws", "300", "--tune", "100", "--chains", "1", "--seed", "3",
        "--no-progress", "--output-dir", str(fit_dir),
    ]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "from the negbinomial release (n = 200, epsilon = 0.5, clt likelihood)" in printed
    assert "prior p ~ Beta(alpha=2, beta=6.667) from window (0, 40)" in printed
    assert {p.name for p in fit_dir.iterdir()} >= {"posterior.nc", "summary.csv", "trace.png"}
    assert (fit_dir / "summary.csv").read_text().splitlines()[1].startswith("p,")


# ---- an installed package adds its family through the entry-point group -----------------------


_LIGHT_PLUGIN = """
from pymc_dp.families.declaration import CommandLine, FamilyDeclaration, FamilyOption, PriorSpec

BETA = PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1, "beta": 1}, ("p",), "alpha=2, beta=m/r")
SUCCESSES = FamilyOption("successes", "successes", "the successes R each record waits for", "count")
NEGBINOMIAL = FamilyDeclaration(
    name="negbinomial",
    implementation="negbinomial_family:NegativeBinomial",
    windowed=True,
    prior=BETA,
    window_prior=lambda m, w, settings: {"alpha": 2.0, "beta": m / settings["successes"]},
    command_line=CommandLine(records="failures before --successes R", release="window"),
    options=(SUCCESSES,),
)
"""


def test_an_entry_point_adds_a_family_and_help_stays_light(tmp_path):
    # An installed package names a light declaration (its class by import path), as the
    # built-in families do: pymc-dp --help lists the family and imports nothing heavy.
    site = tmp_path / "site"
    info = site / "nb_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nb-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pymc_dp.families]\nnegbinomial = nb_plugin:NEGBINOMIAL\n"
    )
    (site / "nb_plugin.py").write_text(_LIGHT_PLUGIN)
    code = (
        "import contextlib, io, sys\n"
        "from pymc_dp.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
        "    main(['release', '--help'])\n"
        "assert '  negbinomial   failures before --successes R' in out.getvalue()\n"
        "assert '--successes' in out.getvalue()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pymc', 'pytensor'}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


# ---- the registry refuses what would be ambiguous -----------------------------------------------


def test_a_name_is_registered_once(negbinomial):
    taken = FamilyDeclaration(
        name="poisson",
        prior=PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",)),
        implementation="negbinomial_family:NegativeBinomial",
    )
    with pytest.raises(ValueError, match="a family named 'poisson' is already registered"):
        register_family(taken)
    with pytest.raises(ValueError, match="built in; it cannot be unregistered"):
        unregister_family("poisson")


def test_a_declaration_must_match_its_class(negbinomial):
    wrong = FamilyDeclaration(
        name="negbinomial_without_options",
        prior=negbinomial.declaration.prior,
        windowed=True,
        window_prior=negbinomial.declaration.window_prior,
        implementation="negbinomial_family:NegativeBinomial",
    )
    register_family(wrong)
    try:
        with pytest.raises(TypeError, match="declare one option per setting"):
            get_family("negbinomial_without_options", successes=R)
    finally:
        unregister_family("negbinomial_without_options")
    with pytest.raises(ValueError, match="declare the window_prior rule"):
        FamilyDeclaration(name="windowed", prior=wrong.prior, windowed=True)
