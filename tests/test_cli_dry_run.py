"""``pymc-dp release --dry-run``: the noise of a release from public values, reading nothing."""

import math

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.cli.dry_run import discrete_laplace_sd, noise_plan


def _dry(capsys, *extra: str) -> str:
    assert main(["release", "--dry-run", *extra]) == 0
    return capsys.readouterr().out


@pytest.fixture
def no_reading(monkeypatch, tmp_path):
    """Fail on any attempt to read data; run in an empty directory."""
    import pymc_dp.curator.data_files
    import pymc_dp.curator.frames

    def refuse(*args, **kwargs):
        raise AssertionError("--dry-run read data")

    monkeypatch.setattr(pymc_dp.curator.data_files, "read_column", refuse)
    monkeypatch.setattr(pymc_dp.curator.frames, "parquet_source", refuse)
    monkeypatch.setattr(pmdp.PrivacyBudget, "spend", refuse)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_laplace_float_noise_sd_is_sqrt2_sensitivity_over_epsilon(capsys, no_reading):
    out = _dry(
        capsys, "--n", "1000", "--family", "poisson", "--bounds", "0", "40", "--epsilon", "0.5",
        "--mechanism", "laplace-float", "--count-share", "0",
    )  # fmt: skip
    # Δ = 40 for a count window [0, 40]; sd = √2 · 40 / 0.5; range n · 40 (the sum alone).
    assert "sensitivity 40," in out and "noise scale 80," in out
    assert f"noise sd {math.sqrt(2) * 80:.4g}" in out
    assert "plausible range 40000 (n × 40)" in out
    assert f"noise sd / range = {math.sqrt(2) * 80 / 40000:.3g}" in out
    assert "no data read, no budget spent" in out
    assert list(no_reading.iterdir()) == []  # nothing written


def test_binomial_range_is_n_trials_and_categorical_counts_are_n(capsys, no_reading):
    out = _dry(capsys, "--n", "200", "--family", "binomial", "--trials", "5", "--epsilon", "0.1")
    assert "plausible range 1000 (n × 5)" in out and "sensitivity 5," in out
    out = _dry(
        capsys, "--n", "50", "--family", "categorical", "--categories", "3", "--epsilon", "1"
    )
    assert out.count("plausible range 50 (n × 1)") == 3 and "sensitivity 2," in out


def test_normal_window_ranges_of_both_sums(capsys, no_reading):
    out = _dry(capsys, "--n", "1000", "--family", "normal", "--bounds", "-4", "6", "--epsilon", "1")
    assert "sum x: plausible range 10000 (n × 10)" in out
    assert "sum x^2: plausible range 36000 (n × 36)" in out
    assert "sensitivity 42.25," in out  # the exact L1 sensitivity of (Σx, Σx²) (README)


def test_the_plan_matches_what_a_release_adds():
    """Same Δ and noise scale as a real release of data with the same public values."""
    x = np.random.default_rng(0).exponential(2.0, size=500)
    for mechanism, rng in (("discrete-laplace", None), ("laplace-float", 1)):
        rel = pmdp.release(
            x, pm.Exponential, epsilon=0.5, bounds=(0.0, 8.0), mechanism=mechanism, rng=rng
        )
        plan = noise_plan(
            "exponential", {"bounds": (0.0, 8.0)}, n=500, epsilon=0.5, mechanism=mechanism
        )
        assert plan.sensitivity == pytest.approx(rel.sensitivity if rng else 8.0)
        assert plan.scale == pytest.approx(rel.scale)
    rel = pmdp.release(x, pm.Normal, rho=0.1, bounds=(-1.0, 9.0), mechanism="discrete-gaussian")
    plan = noise_plan(
        "normal", {"bounds": (-1.0, 9.0)}, n=500, epsilon=None, rho=0.1,
        mechanism="discrete-gaussian",
    )  # fmt: skip
    assert plan.scale == pytest.approx(rel.scale)


def test_discrete_laplace_sd_matches_its_distribution():
    for scale in (0.7, 3.0, 40.0):
        k = np.arange(-4000, 4001)
        p = np.exp(-np.abs(k) / scale)
        p /= p.sum()
        assert discrete_laplace_sd(scale) == pytest.approx(math.sqrt((p * k**2).sum()), rel=1e-9)


def test_private_window_uses_the_search_range_and_the_rest_of_epsilon(capsys, no_reading):
    out = _dry(
        capsys, "--n", "100", "--family", "exponential", "--private-bounds", "0", "20",
        "--bounds-share", "0.2", "--epsilon", "1", "--mechanism", "laplace-float",
        "--count-share", "0",
    )  # fmt: skip
    assert "window [0, 20] (the private window's search range)" in out
    assert "epsilon = 0.8 (after the private window's share)" in out
    assert "noise scale 25," in out  # Δ = 20 over ε = 0.8


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--family", "poisson", "--bounds", "0", "9", "--epsilon", "1"], "needs --n N"),
        (["--n", "9", "data.csv", "--family", "bernoulli", "--epsilon", "1"], "drop DATA"),
        (
            ["--n", "9", "--family", "bernoulli", "--epsilon", "1", "--budget", "l.json"],
            "drop --budget",
        ),
    ],
    ids=["no-n", "data-file", "budget"],
)
def test_dry_run_refuses_data_and_a_ledger(capsys, no_reading, extra, expected):
    with pytest.raises(SystemExit) as exc:
        main(["release", "--dry-run", *extra])
    assert exc.value.code == 2 and expected in capsys.readouterr().err
    assert list(no_reading.iterdir()) == []


def test_dry_run_checks_public_values_like_a_release(capsys, no_reading):
    assert (
        main(["release", "--dry-run", "--n", "9", "--family", "bernoulli", "--epsilon", "0"]) == 2
    )
    assert "--epsilon must be a finite number > 0" in capsys.readouterr().err
    argv = ["release", "--dry-run", "--n", "9", "--family", "lognormal", "--bounds", "0", "2"]
    assert main([*argv, "--epsilon", "1"]) == 2
    assert "--bounds" in capsys.readouterr().err


def test_n_needs_dry_run(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["release", "d.csv", "--column", "v", "--family", "bernoulli", "--epsilon", "1",
              "-o", str(tmp_path / "o.json"), "--n", "3"])  # fmt: skip
    assert "--n applies only with --dry-run" in capsys.readouterr().err
