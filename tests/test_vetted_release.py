"""Vetted releases: OpenDP discrete noise on exact integer (fixed-point) statistics."""

import json
import math

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp import Release
from pymc_dp.families import get_family
from pymc_dp.families.normal import square_statistic_sensitivity_l2
from pymc_dp.mechanisms import discrete_gaussian_mechanism, discrete_laplace_mechanism

RNG = np.random.default_rng(20261123)
X_NORMAL = RNG.normal(1.0, 2.0, size=300)


def test_default_release_is_vetted_and_records_the_sampler():
    rel = pmdp.release(RNG.integers(0, 2, size=50), pm.Bernoulli, epsilon=1.0)
    assert rel.mechanism == "discrete-laplace"
    assert rel.quantum == 1.0
    assert rel.library.startswith("opendp ")
    assert rel.sensitivity == 1.0 and rel.scale == 1.0
    assert float(rel.value) == round(float(rel.value))  # an integer count plus integer noise
    back = Release.from_json(rel.to_json())
    assert back == rel and back.library == rel.library


def test_float_statistic_is_quantised_and_the_rounding_is_in_the_sensitivity():
    rel = pmdp.release(X_NORMAL, pm.Normal, epsilon=0.5, bounds=(-4.0, 6.0))
    q = rel.quantum
    assert math.frexp(q)[0] == 0.5  # a power of two
    delta = get_family(pm.Normal).release_sensitivity((-4.0, 6.0))
    reference = min(delta / 0.5, 10.0)  # the noise scale, or the narrowest range of t (Σz)
    assert q <= reference / 1024 < 2 * q  # chosen from public values only
    assert rel.sensitivity == pytest.approx(delta + 2 * q, rel=1e-15)
    np.testing.assert_array_equal(np.rint(rel.value / q) * q, rel.value)
    assert rel.to_dict()["quantum"] == q


def test_windowed_counts_use_quantum_one_without_rounding_term():
    x = RNG.poisson(4.0, size=200)
    rel = pmdp.release(x, pm.Poisson, epsilon=1.0, bounds=(0, 20))
    assert rel.quantum == 1.0 and rel.sensitivity == 20.0


def test_vetted_release_is_centred_on_the_exact_statistic():
    x = RNG.integers(0, 2, size=100)
    draws = [float(pmdp.release(x, pm.Bernoulli, epsilon=2.0).value) for _ in range(400)]
    # Discrete Laplace with scale 0.5 has sd < 1: the mean of 400 is within 0.3 of s.
    assert abs(np.mean(draws) - x.sum()) < 0.3


@pytest.mark.parametrize("mechanism", ["discrete-laplace", "discrete-gaussian"])
def test_a_seed_with_a_vetted_mechanism_is_refused(mechanism):
    kwargs = {"rho": 0.5} if mechanism == "discrete-gaussian" else {"epsilon": 1.0}
    with pytest.raises(ValueError, match="cannot be seeded"):
        pmdp.release([0, 1], pm.Bernoulli, mechanism=mechanism, rng=0, **kwargs)


def test_a_seed_means_a_study_with_the_named_float_sampler():
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=5)
    assert rel.mechanism == "laplace-float" and rel.quantum is None
    again = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=5)
    assert again == rel


def test_format_1_files_load_as_the_float_sampler():
    doc = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=5).to_dict()
    for key in ("quantum", "library", "rho", "delta", "noise_scale", "budget"):
        del doc[key]
    doc["format_version"], doc["mechanism"] = 1, "laplace"
    assert Release.from_dict(doc).mechanism == "laplace-float"


def test_gaussian_release_records_rho_sigma_and_the_conversion():
    rel = pmdp.release(
        X_NORMAL, pm.Normal, mechanism="discrete-gaussian", rho=0.125, bounds=(-4.0, 6.0)
    )
    q = rel.quantum
    l2 = square_statistic_sensitivity_l2(-4.0, 6.0)
    assert rel.sensitivity == pytest.approx(l2 + math.sqrt(2) * q, rel=1e-15)
    assert rel.scale == pytest.approx(rel.sensitivity / math.sqrt(0.25))
    assert rel.rho == 0.125 and rel.delta == 1e-9
    assert rel.epsilon == pytest.approx(pmdp.mechanisms.vetted.zcdp_to_approx_dp(0.125, 1e-9))
    doc = json.loads(rel.to_json())
    assert doc["mechanism"] == "discrete-gaussian" and doc["noise_scale"] == rel.scale
    assert Release.from_json(rel.to_json()) == rel


def test_gaussian_release_of_counts_uses_the_l2_sensitivity():
    rel = pmdp.release(
        RNG.integers(0, 3, 50), pm.Categorical, categories=3, mechanism="discrete-gaussian", rho=1
    )
    assert rel.sensitivity == pytest.approx(math.sqrt(2)) and rel.quantum == 1.0


def test_gaussian_release_with_private_bounds_splits_rho():
    x = RNG.exponential(2.0, size=500)
    rel = pmdp.release(
        x,
        pm.Exponential,
        mechanism="discrete-gaussian",
        rho=0.5,
        bounds="private",
        bounds_range=(0.0, 100.0),
        bounds_share=0.2,
    )
    assert rel.rho + rel.bounds_epsilon**2 / 2 == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"mechanism": "discrete-gaussian", "epsilon": 1.0, "rho": 1.0}, TypeError, "not epsilon"),
        ({"mechanism": "discrete-gaussian"}, TypeError, "rho"),
        ({"epsilon": 1.0, "rho": 1.0}, TypeError, "rho"),
        ({"mechanism": "gaussian", "epsilon": 1.0}, ValueError, "mechanism"),
        ({"mechanism": "discrete-gaussian", "rho": 1.0, "delta": 1.5}, ValueError, "delta"),
        ({}, TypeError, "epsilon"),
    ],
)
def test_mechanism_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        pmdp.release([0, 1], pm.Bernoulli, **kwargs)


@pytest.mark.parametrize(
    ("field", "bad", "error"),
    [
        ("quantum", 0.3, ValueError),
        ("quantum", None, ValueError),
        ("quantum", "1", TypeError),
        ("library", 3, TypeError),
        ("rho", 0.5, ValueError),
        ("delta", 0.1, ValueError),
        ("noise_scale", 123.0, ValueError),
        ("mechanism", "discrete-gaussian", ValueError),
        ("budget", [1], TypeError),
    ],
)
def test_new_fields_are_parsed_strictly(field, bad, error):
    doc = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0).to_dict()
    doc[field] = bad
    with pytest.raises(error):
        Release.from_dict(doc)


def test_float_sampler_release_refuses_a_quantum():
    doc = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=1).to_dict()
    doc["quantum"] = 1.0
    with pytest.raises(ValueError, match="quantum"):
        Release.from_dict(doc)


def test_discrete_laplace_noise_follows_its_pmf():
    """χ² of 20 000 unseedable OpenDP draws against P(k) ∝ exp(-|k|/b), b = 2 (alpha = 1e-6:
    OpenDP cannot be seeded, so the threshold is strict enough never to flake in practice)."""
    draws = discrete_laplace_mechanism([0] * 20_000, sensitivity=1.0, epsilon=0.5)
    ks = np.arange(-12, 13)
    pmf = np.exp(-np.abs(ks) / 2.0)
    pmf /= np.exp(-np.abs(np.arange(-400, 401)) / 2.0).sum()
    observed = np.array([np.sum(draws == k) for k in ks] + [np.sum(np.abs(draws) > 12)])
    expected = np.append(pmf, 1 - pmf.sum()) * draws.size
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_discrete_gaussian_noise_has_its_variance():
    draws = discrete_gaussian_mechanism([0] * 20_000, sensitivity=3.0, rho=0.5)  # σ = 3
    assert abs(draws.var() / 9.0 - 1) < 0.06  # sd of the ratio ≈ 0.01
    assert abs(draws.mean()) < 0.15


def test_vetted_mechanisms_refuse_scales_that_could_overflow():
    with pytest.raises(ValueError, match="2\\*\\*52"):
        discrete_laplace_mechanism([0], sensitivity=1.0, epsilon=1e-17)
    with pytest.raises(ValueError, match="2\\*\\*62"):
        discrete_laplace_mechanism([2**62], sensitivity=1.0, epsilon=1.0)


def test_regression_release_is_vetted_by_default():
    from pymc_dp.curator.regression.release import RegressionRelease, release_regression
    from pymc_dp.curator.regression.sensitivity import regression_sensitivity
    from pymc_dp.curator.regression.statistics import regression_statistic

    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(300, 2))
    y = np.clip(x @ [0.5, -0.2] + 0.1 * rng.standard_normal(300), -2, 2)
    box = {"x_bounds": [(-1, 1), (-1, 1)], "y_bounds": (-2, 2)}
    rel = release_regression(x, y, epsilon=1.0, moments_share=0.2, **box)
    assert rel.mechanism == "discrete-laplace" and rel.library.startswith("opendp")
    q = rel.quantum
    assert math.frexp(q)[0] == 0.5
    delta = regression_sensitivity(*box.values())
    assert rel.sensitivity == pytest.approx(delta + rel.value.size * q)
    np.testing.assert_array_equal(np.rint(rel.value / q) * q, rel.value)
    assert np.all(np.abs(rel.value - regression_statistic(x, y)) < 40 * rel.scale)
    assert rel.fourth_moments.quantum is not None and rel.second_moments is None
    back = RegressionRelease.from_json(rel.to_json())
    assert back.quantum == q and back.fourth_moments.quantum == rel.fourth_moments.quantum
    study = release_regression(x, y, epsilon=1.0, rng=1, **box)
    assert study.mechanism == "laplace-float" and study.quantum is None
    with pytest.raises(ValueError, match="cannot be seeded"):
        release_regression(x, y, epsilon=1.0, rng=1, mechanism="discrete-laplace", **box)
    # The Gaussian mechanism takes rho, as pmdp.release does (tests/test_regression_gaussian.py).
    with pytest.raises(TypeError, match="takes rho, not epsilon"):
        release_regression(x, y, epsilon=1.0, mechanism="discrete-gaussian", **box)


def _cli_release(tmp_path, *extra):
    from pymc_dp.cli import main

    data = tmp_path / "x.csv"
    data.write_text("x\n" + "\n".join(f"{v:.3f}" for v in X_NORMAL[:100]) + "\n")
    out = tmp_path / "rel.json"
    code = main(["release", str(data), "--column", "x", "--family", "normal", "--bounds", "-4",
                 "6", "--output", str(out), *extra])  # fmt: skip
    return code, out


def test_cli_release_records_the_vetted_mechanism(tmp_path, capsys):
    code, out = _cli_release(tmp_path, "--epsilon", "1")
    assert code == 0, capsys.readouterr().err
    rel = Release.from_json(out.read_text())
    assert rel.mechanism == "discrete-laplace" and rel.quantum is not None
    assert "discrete-laplace scale" in capsys.readouterr().out


def test_cli_gaussian_release_and_bad_combinations(tmp_path, capsys):
    code, out = _cli_release(tmp_path, "--mechanism", "discrete-gaussian", "--rho", "0.5")
    assert code == 0, capsys.readouterr().err
    assert Release.from_json(out.read_text()).rho == 0.5
    out.unlink()
    code, _ = _cli_release(tmp_path, "--mechanism", "discrete-gaussian", "--epsilon", "1")
    assert code == 2 and "--rho" in capsys.readouterr().err
    code, _ = _cli_release(tmp_path, "--mechanism", "discrete-laplace", "--epsilon", "1",
                           "--seed", "3")  # fmt: skip
    assert code == 2 and "cannot be seeded" in capsys.readouterr().err
    code, out = _cli_release(tmp_path, "--epsilon", "1", "--seed", "3")
    assert code == 0 and Release.from_json(out.read_text()).mechanism == "laplace-float"


def test_noisy_suffstat_fits_a_gaussian_release_with_the_normal_node_under_the_clt():
    """Under the CLT a Gaussian release gets its own node (normal noise, no mixing variance:
    tests/test_collapsed_gaussian.py), never the Laplace one; the default keeps the exact
    likelihood of counts, with the Gaussian law."""
    rel = pmdp.release(
        np.array([0, 1, 1, 0, 1]), pm.Bernoulli, mechanism="discrete-gaussian", rho=0.5
    )
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, likelihood="clt")
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    counts = pmdp.release(
        np.array([3, 0, 7, 2, 5]),
        pm.Poisson,
        bounds=(0, 10),
        mechanism="discrete-gaussian",
        rho=0.5,
    )
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 0.5)
        y = pmdp.NoisySuffStat("y", pm.Poisson.dist(mu=lam), release=counts, likelihood="clt")
    assert type(y.owner.op).__name__ == "CollapsedGaussianRV"
    assert y.tag.noisy_suffstat.noise.scale == pytest.approx(counts.scale)
    with pm.Model():  # a window sum of counts has an exact likelihood too
        lam = pm.Gamma("lam", 2.0, 0.5)
        y = pmdp.NoisySuffStat("y", pm.Poisson.dist(mu=lam), release=counts)
    assert y.tag.noisy_suffstat.noise.kind == "discrete-gaussian"
    with pm.Model():  # the default takes the exact likelihood, with the Gaussian law
        p = pm.Beta("p", 1.0, 1.0)
        y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    assert y.tag.noisy_suffstat.noise.kind == "discrete-gaussian"
