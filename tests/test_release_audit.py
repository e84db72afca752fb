"""Findings of the release audit (issues 14 and 18), one block per finding.

Messages quote no record; refusals depend only on public values; the (Σx, Σx²) sensitivity is
exact; release files are parsed strictly; extreme inputs end in a ValueError or TypeError that
names the argument (exit status 2 with one line on the command line).
"""

import dataclasses
import importlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp import Release
from pymc_dp.cli import main
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.regression.release import RegressionRelease, release_regression
from pymc_dp.curator.release_file import read_release, write_release
from pymc_dp.families import LogNormal, Normal, NormalKnownSigma, get_family
from pymc_dp.families.normal import square_statistic_sensitivity
from pymc_dp.mechanisms import laplace_mechanism, noise_scale

# ---- 2. no record values in messages; opt-in clamping ---------------------------------------

SECRET = 98765  # a whole number, so that count families reach their range check


@pytest.mark.parametrize(
    ("family", "params", "x", "where"),
    [
        (pm.Binomial, {"trials": 5}, [0, 5, SECRET, 2], "index 2"),
        (pm.Bernoulli, {}, [0, 1, 1, SECRET], "index 3"),
        (pm.Categorical, {"categories": 3}, [0, SECRET, 1], "index 1"),
        (pm.Exponential, {"bounds": (0, 2)}, [0.5, -SECRET - 0.4321], "index 1"),
        (pm.Poisson, {"bounds": (0, 9)}, [1, 2, -SECRET], "index 2"),
        (pm.LogNormal, {"bounds": (0.5, 2)}, [1.0, -SECRET - 0.4321], "index 1"),
    ],
    ids=["binomial", "bernoulli", "categorical", "exponential", "poisson", "lognormal"],
)
def test_out_of_range_messages_quote_no_record(family, params, x, where):
    with pytest.raises(ValueError) as info:
        pmdp.release(x, family, epsilon=1.0, rng=0, **params)
    message = str(info.value)
    assert "98765" not in message and "found" not in message
    assert where in message and "stopped" in message and "clamp=True" in message
    assert "wider" not in message


def test_regression_messages_quote_no_record_and_keep_the_bounds_public():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(size=(20, 2)), rng.uniform(size=20)
    for bad_x, bad_y, name in ((x.copy(), y, "x"), (x, y.copy(), "y")):
        (bad_x if name == "x" else bad_y)[7] = SECRET
        with pytest.raises(ValueError) as info:
            release_regression(bad_x, bad_y, x_bounds=[(0, 1)] * 2, y_bounds=(0, 1), epsilon=1)
        message = str(info.value)
        assert message.startswith(f"{name} has 1 ") and "index 7" in message
        assert "98765" not in message and "wider" not in message
        assert "public knowledge" in message and "clamp=True" in message


def test_clamping_is_opt_in_recorded_and_keeps_the_sensitivity():
    raw = [0, 7, -2, 3, 5]
    clipped = [0, 5, 0, 3, 5]
    rel = pmdp.release(raw, pm.Binomial, epsilon=1.0, trials=5, clamp=True, rng=4)
    same = pmdp.release(clipped, pm.Binomial, epsilon=1.0, trials=5, rng=4)
    assert rel.value == same.value and rel.sensitivity == same.sensitivity == 5.0
    assert rel.clamped and not same.clamped and rel.n == 5
    back = Release.from_json(rel.to_json())
    assert back == rel and back.clamped and json.loads(rel.to_json())["clamped"] is True
    # Clamping is recorded whether or not a record moved: the flag says nothing about the data.
    assert pmdp.release(clipped, pm.Binomial, epsilon=1.0, trials=5, clamp=True, rng=4).clamped
    cat = pmdp.release([0, 4, -1], pm.Categorical, categories=3, epsilon=1.0, clamp=True, rng=5)
    ref = pmdp.release([0, 2, 0], pm.Categorical, categories=3, epsilon=1.0, rng=5)
    np.testing.assert_array_equal(cat.value, ref.value)
    exp = pmdp.release([-1.0, 0.5], pm.Exponential, bounds=(0, 2), epsilon=1, clamp=True, rng=6)
    ref = pmdp.release([0.0, 0.5], pm.Exponential, bounds=(0, 2), epsilon=1, rng=6)
    assert exp.value == ref.value and exp.sensitivity == ref.sensitivity
    log = pmdp.release([-1.0, 1.5], pm.LogNormal, bounds=(0.5, 2), epsilon=1, clamp=True, rng=6)
    ref = pmdp.release([3.0, 1.5], pm.LogNormal, bounds=(0.5, 2), epsilon=1, rng=6)
    np.testing.assert_array_equal(log.value, ref.value)  # x <= 0 clamped outside the window


def test_clamping_never_rounds_and_needs_a_bool():
    with pytest.raises(ValueError, match="whole numbers") as info:
        pmdp.release([0, 1.5], pm.Binomial, trials=5, epsilon=1.0, clamp=True, rng=0)
    assert "index 1" in str(info.value) and "1.5" not in str(info.value)
    with pytest.raises(TypeError, match="clamp must be True or False"):
        pmdp.release([0, 1], pm.Bernoulli, epsilon=1.0, clamp=1, rng=0)


def test_older_files_without_the_clamped_field_still_load():
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    doc = rel.to_dict()
    del doc["clamped"]
    assert Release.from_dict(doc) == rel and not Release.from_dict(doc).clamped
    reg = release_regression(
        np.linspace(0, 1, 10), np.linspace(0, 1, 10), x_bounds=[(0, 1)], y_bounds=(0, 1),
        epsilon=1.0, rng=0,
    )  # fmt: skip
    doc = reg.to_dict()
    del doc["clamped"]
    assert not RegressionRelease.from_dict(doc).clamped


def test_regression_clamping_equals_a_release_of_the_clamped_records():
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-0.5, 1.5, size=(30, 2)), rng.uniform(-1, 2, size=30)
    box = dict(x_bounds=[(0, 1), (0, 1)], y_bounds=(0, 1), epsilon=1.0, moments_share=0.2)
    rel = release_regression(x, y, **box, clamp=True, rng=3)
    ref = release_regression(np.clip(x, 0, 1), np.clip(y, 0, 1), **box, rng=3)
    np.testing.assert_array_equal(rel.value, ref.value)
    np.testing.assert_array_equal(rel.fourth_moments.value, ref.fourth_moments.value)
    assert rel.sensitivity == ref.sensitivity and rel.clamped and not ref.clamped
    assert RegressionRelease.from_json(rel.to_json()).clamped
    with pytest.raises(TypeError, match="clamp"):
        release_regression(x, y, **box, clamp="yes", rng=3)


# ---- 3. the float-resolution refusal depends only on public values ---------------------------


def test_resolution_refusal_ignores_the_exact_statistic():
    """Δ = 1, ε = 0.75: s = 2³³ - 1 and s = 2³³ are treated alike (both refused at a public
    magnitude of 2³³, both released at 2³²)."""
    for s in (2.0**33 - 1, 2.0**33):
        with pytest.raises(ValueError, match="too large"):
            laplace_mechanism(
                s, sensitivity=1, epsilon=0.75, rng=np.random.default_rng(0), magnitude=2.0**33
            )
        y = laplace_mechanism(
            s, sensitivity=1, epsilon=0.75, rng=np.random.default_rng(0), magnitude=2.0**32
        )
        assert np.isfinite(y)
    assert noise_scale(sensitivity=1, epsilon=0.75, magnitude=2.0**32) == pytest.approx(4 / 3)


def test_release_refusal_is_the_same_for_every_data_set_of_size_n():
    """Bernoulli, n = 4, ε = 2e9: refused whether the data are all 0 or all 1 (the old check
    released the zeros and refused the ones)."""
    for x in ([0, 0, 0, 0], [1, 1, 1, 1]):
        with pytest.raises(ValueError, match="epsilon=2e\\+09 is too large"):
            pmdp.release(x, pm.Bernoulli, epsilon=2e9, rng=0)
    for x in ([0, 0, 0, 0], [1, 1, 1, 1]):
        assert np.isfinite(pmdp.release(x, pm.Bernoulli, epsilon=5e8, rng=0).value)


# ---- 4. exact sensitivity of (Σz, Σz²) ------------------------------------------------------


def _search(a: float, b: float, points: int = 801) -> float:
    """max ||t̂(u) - t̂(v)||_1 over a grid of [a, b] with the formula's candidates, and a record
    outside the window (t̂ = 0)."""
    z = np.union1d(np.linspace(a, b, points), np.clip([a, b, -0.5, 0.5], a, b))
    t = np.stack([z, z**2], axis=1)
    t = np.vstack([t, np.zeros((1, 2))])  # a record outside the window
    return float(np.max(np.abs(t[:, None, :] - t[None, :, :]).sum(axis=-1)))


def test_exact_sensitivity_examples():
    assert square_statistic_sensitivity(-1.96, 1.96) == pytest.approx(2.46**2, rel=1e-12)
    assert Normal().release_sensitivity((-1.96, 1.96)) == pytest.approx(6.0516, rel=1e-12)
    assert Normal().release_sensitivity((-4.0, 6.0)) == 42.25
    # Known σ (t = z) is untouched: Appendix C's max(|a|, |b|, b - a).
    assert NormalKnownSigma(sigma=1.0).release_sensitivity((-4.0, 6.0)) == 10.0
    # LogNormal: the same formula on log x.
    assert LogNormal().release_sensitivity((np.exp(-4.0), np.exp(6.0))) == pytest.approx(42.25)


def test_exact_sensitivity_matches_an_adversarial_search_over_random_windows():
    """300 random windows (straddling 0, one-sided, narrow and wide): the formula equals the
    largest L1 move over neighbouring records found by a dense search, and is never below it."""
    rng = np.random.default_rng(14)
    centres = rng.normal(0, 3, size=300)
    widths = np.exp(rng.uniform(np.log(0.05), np.log(20), size=300))
    for centre, width in zip(centres, widths, strict=True):
        a, b = centre - width / 2 * rng.uniform(0, 2), centre + width / 2
        a, b = float(min(a, b - 1e-3)), float(b)
        exact = Normal().release_sensitivity((a, b))
        worst = _search(a, b)
        assert worst <= exact * (1 + 1e-12), (a, b)
        assert exact == pytest.approx(worst, rel=1e-9), (a, b)
        # Never above Appendix C's sum of maxima (which the exact value replaces).
        assert exact <= max(abs(a), abs(b), b - a) + max(a * a, b * b) + 1e-12


def test_search_detects_a_wrong_formula():
    """The search has power: dropping the record-leaving candidates is caught."""
    a, b = 1.0, 1.2  # a narrow window far from 0: leaving the window is the worst move
    inside_only = max((b - v) * (1 + abs(b + v)) for v in (a, b))
    assert inside_only < _search(a, b) * 0.5


# ---- 5. strict release files -----------------------------------------------------------------


@pytest.fixture
def doc():
    return pmdp.release([0, 2, 2, 1], pm.Categorical, epsilon=0.5, rng=0, categories=3).to_dict()


@pytest.mark.parametrize(
    ("field", "bad", "error"),
    [
        ("value", "1", TypeError),
        ("value", True, TypeError),
        ("value", [1.0, True, 2.0], TypeError),
        ("value", [1.0, "2", 2.0], TypeError),
        ("value", [1.0, 10**309, 2.0], ValueError),
        ("format_version", True, ValueError),
        ("format_version", 1.0, ValueError),
        ("family_params", "", TypeError),
        ("family_params", [], TypeError),
        ("family_params", {"categories": True}, TypeError),
        ("family_params", {"categories": "3"}, TypeError),
        ("epsilon", True, TypeError),
        ("epsilon", "0.5", TypeError),
        ("epsilon", 10**309, ValueError),
        ("sensitivity", False, TypeError),
        ("sensitivity", "2", TypeError),
        ("bounds_epsilon", "0", TypeError),
        ("bounds_epsilon", True, TypeError),
        ("bounds", [0, True], TypeError),
        ("bounds", "02", TypeError),
        ("bounds", [0, 10**309], ValueError),
        ("bounds", [0.0, 5.0], ValueError),  # not the categorical domain [0, 2]
        ("n", True, TypeError),
        ("n", 4.0, TypeError),
        ("n", 10**30, ValueError),
        ("family", 3, TypeError),
        ("mechanism", 1, TypeError),
        ("clamped", 1, TypeError),
        ("clamped", "true", TypeError),
    ],
)
def test_release_files_are_parsed_strictly(doc, field, bad, error):
    doc[field] = bad
    name = field.split("[")[0]
    with pytest.raises(error, match=name):
        Release.from_json(json.dumps(doc))


def test_bounds_of_bounded_families_are_their_domain():
    rel = pmdp.release([0, 1, 1], pm.Binomial, trials=2, epsilon=1.0, rng=0)
    assert rel.bounds == (0.0, 2.0)
    for bounds in ((0.0, 1.0), (-1.0, 2.0), (0.0, 3.0)):
        with pytest.raises(ValueError, match="bounds must be the binomial domain"):
            dataclasses.replace(rel, bounds=bounds)


# ---- 6. extreme values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 1e-300}, ValueError, "epsilon=1e-300 is too small"),
        ({"epsilon": 10**400}, ValueError, "epsilon must be a finite number"),
        ({"epsilon": 1e308}, ValueError, "epsilon=1e\\+308 is too large"),
        ({"epsilon": float("inf")}, ValueError, "epsilon must be a finite number"),
    ],
)
def test_extreme_epsilon_is_refused_by_name(kwargs, error, match):
    gen = np.random.default_rng(0)
    before = gen.bit_generator.state
    with pytest.raises(error, match=match):
        pmdp.release([0, 1, 1], pm.Bernoulli, rng=gen, **kwargs)
    assert gen.bit_generator.state == before


def test_non_finite_noise_scale_is_refused():
    with pytest.raises(ValueError, match="too small"):
        laplace_mechanism(1.0, sensitivity=1e300, epsilon=1e-300, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="too small"):
        noise_scale(sensitivity=1e200, epsilon=1e-10)


@pytest.mark.parametrize(
    ("epsilon", "sensitivity"), [(1e-300, 1.0), (1e-320, 1.0), (1e-200, 1e200), (1e-10, 1e141)]
)
def test_every_path_into_a_fit_refuses_a_noise_scale_that_would_overflow(epsilon, sensitivity):
    """Issue 18, item 5: Δ/ε is checked on the explicit-argument path and in release files,
    not only by pmdp.release (the fit returned inf/NaN mixing variances)."""
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0)
        with pytest.raises(ValueError, match="too small for sensitivity"):
            pmdp.NoisySuffStat(
                "y", pm.Bernoulli.dist(p=p), n=3, epsilon=epsilon, sensitivity=sensitivity,
                observed=1.0,
            )  # fmt: skip
    doc = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0).to_dict()
    doc.update(epsilon=epsilon, sensitivity=sensitivity)
    del doc["noise_scale"]
    with pytest.raises(ValueError, match=r"noise scale .* is above 1e\+150"):
        Release.from_dict(doc)


def test_a_vector_theta_for_one_release_is_refused_by_name():
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    with pm.Model():
        p = pm.Beta("p", 1.0, 1.0, shape=3)
        with pytest.raises(ValueError, match=r"dist must be the law of one record.*ReleaseSet"):
            pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)


@pytest.mark.parametrize(
    ("family", "params", "match"),
    [
        (pm.Normal, {"bounds": (-1e155, 1e155)}, "too wide for the normal family"),
        (pm.Normal, {"bounds": (-1e154, 1e154)}, "too wide for n=3 records"),
        (pm.Poisson, {"bounds": (3.2, 3.8)}, "hold no whole number"),
        (pm.Geometric, {"bounds": (1.5, 1.9)}, "hold no whole number"),
        (pm.Exponential, {"bounds": (-5.0, 0.0)}, "single point"),
        (pm.Categorical, {"categories": 10**9}, "categories must be at most 1000000"),
    ],
    ids=["normal-overflow", "normal-sum-overflow", "poisson", "geometric", "point", "categories"],
)
def test_extreme_family_settings_are_refused_by_name(family, params, match):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        pmdp.release([1, 2, 1], family, epsilon=1.0, rng=0, **params)
    assert time.perf_counter() - start < 5  # refused, not allocated


def test_regression_bounds_that_overflow_are_refused_by_name():
    x, y = np.linspace(0, 1, 10), np.linspace(0, 1, 10)
    with pytest.raises(ValueError, match="x_bounds and y_bounds"):
        release_regression(x, y, x_bounds=[(0, 1e160)], y_bounds=(0, 1), epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="fourth powers"):
        release_regression(
            x, y, x_bounds=[(0, 1e80)], y_bounds=(0, 1), epsilon=1.0, moments_share=0.2, rng=0
        )


def test_timedelta_and_masked_data_are_refused():
    with pytest.raises(TypeError, match=r"x must be a real numeric array.*timedelta64"):
        pmdp.release(np.array([1, 2], dtype="m8[s]"), pm.Poisson, bounds=(0, 5), epsilon=1)
    masked = np.ma.masked_array([1, 0, 1], mask=[0, 1, 0])
    with pytest.raises(TypeError, match="x is a masked array"):
        pmdp.release(masked, pm.Bernoulli, epsilon=1.0, rng=0)
    with pytest.raises(TypeError, match="x is a masked array"):
        release_regression(
            np.ma.masked_array(np.linspace(0, 1, 5)), np.linspace(0, 1, 5), x_bounds=[(0, 1)],
            y_bounds=(0, 1), epsilon=1.0, rng=0,
        )  # fmt: skip


def test_huge_n_and_huge_integers_in_a_file_are_refused_by_name():
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    text = rel.to_json().replace('"n": 3', '"n": ' + "1" + "0" * 30)
    with pytest.raises(ValueError, match="n must be an integer <= "):
        Release.from_json(text)
    text = rel.to_json().replace('"epsilon": 1.0', '"epsilon": 1' + "0" * 400)
    with pytest.raises(ValueError, match="epsilon is too large for a float"):
        Release.from_json(text)
    assert get_family("bernoulli").domain == (0.0, 1.0)


# ---- the command line: exit status 2 and one line for each of the above ----------------------


def _cli_error(capsys, tmp_path, body, *extra):
    data = tmp_path / "data.csv"
    data.write_text(body)
    argv = ["release", str(data), "--column", "v", "--seed", "0", "-o", str(tmp_path / "o.json")]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o.json").exists()
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--family", "bernoulli", "--epsilon", "1e-300"], "is too small"),
        (["--family", "bernoulli", "--epsilon", "1e400"], "--epsilon must be a finite number"),
        (["--family", "categorical", "--categories", "1000000000", "--epsilon", "1"], "at most"),
        (["--family", "poisson", "--bounds", "3.2", "3.8", "--epsilon", "1"], "no whole number"),
        (["--family", "normal", "--bounds", "1e155", "2e155", "--epsilon", "1"], "too wide"),
    ],
    ids=["tiny-epsilon", "huge-epsilon", "categories", "poisson-window", "normal-window"],
)
def test_cli_refuses_extreme_values_in_one_line(capsys, tmp_path, extra, match):
    assert match in _cli_error(capsys, tmp_path, "v\n1\n0\n1\n", *extra)


def test_cli_clamp_is_opt_in_and_recorded(capsys, tmp_path):
    body = "v\n1\n7\n2\n"
    line = _cli_error(capsys, tmp_path, body, "--family", "binomial", "--trials", "5",
                      "--epsilon", "1")  # fmt: skip
    assert "1 record(s) (the first at data row 2) lie outside" in line and "--clamp" in line
    data = tmp_path / "data.csv"
    out = tmp_path / "o.json"
    argv = ["release", str(data), "--column", "v", "--family", "binomial", "--trials", "5",
            "--epsilon", "1", "--seed", "0", "-o", str(out), "--clamp"]  # fmt: skip
    assert main(argv) == 0
    assert "records clamped" in capsys.readouterr().out
    rel = read_release(out)
    assert rel.clamped and rel.sensitivity == 5.0 and rel.n == 3


@pytest.fixture
def regression_doc():
    x = np.linspace(0, 1, 12).reshape(6, 2)
    rel = release_regression(
        x, x[:, 0], x_bounds=[(0, 1)] * 2, y_bounds=(0, 1), epsilon=1.0, moments_share=0.2, rng=0
    )
    return rel.to_dict()


@pytest.mark.parametrize(
    ("path", "bad", "error"),
    [
        (("value",), "1", TypeError),
        (("value",), [1.0, True, 0, 0, 0, 0, 0, 0, 0], TypeError),
        (("n",), True, TypeError),
        (("n",), 10**30, ValueError),
        (("epsilon",), "1", TypeError),
        (("sensitivity",), True, TypeError),
        (("x_bounds",), [[0, 1], [0, "1"]], TypeError),
        (("y_bounds",), [0, True], TypeError),
        (("format_version",), True, ValueError),
        (("mechanism",), 1, TypeError),
        (("clamped",), 1, TypeError),
        (("fourth_moments", "epsilon"), True, TypeError),
        (("fourth_moments", "powers"), [[3, 0], [0, True]], TypeError),
        (("sensitivity_bound",), 1, TypeError),
        (("sensitivity_bound",), "tight", ValueError),
    ],
)
def test_regression_release_files_are_parsed_strictly(regression_doc, path, bad, error):
    target = regression_doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad
    with pytest.raises(error, match=path[-1]):
        RegressionRelease.from_json(json.dumps(regression_doc))


def test_a_float32_moments_share_never_spends_more_than_epsilon():
    x = np.linspace(0, 1, 12).reshape(6, 2)
    rel = release_regression(
        x, x[:, 0], x_bounds=[(0, 1)] * 2, y_bounds=(0, 1), epsilon=1.0,
        moments_share=np.float32(0.3), rng=0,
    )  # fmt: skip
    assert rel.total_epsilon <= 1.0 and rel.total_epsilon == pytest.approx(1.0, rel=1e-15)


def test_private_bounds_check_the_public_range_before_any_noise():
    gen = np.random.default_rng(3)
    before = gen.bit_generator.state
    with pytest.raises(ValueError, match="too small"):
        pmdp.release(
            [1.0, 2.0], pm.Exponential, epsilon=1e-160, bounds="private", bounds_range=(0, 10),
            rng=gen,
        )  # fmt: skip
    with pytest.raises(ValueError, match="too wide"):
        pmdp.release(
            [1.0, 2.0], pm.Normal, epsilon=1.0, bounds="private", bounds_range=(-1e154, 1e154),
            rng=gen,
        )  # fmt: skip
    assert gen.bit_generator.state == before


def test_a_private_window_between_two_counts_is_widened_not_refused(monkeypatch):
    release_module = importlib.import_module("pymc_dp.curator.single")
    monkeypatch.setattr(release_module, "choose_window", lambda *a, **k: (3.2, 3.8))
    for rng in (0, None):  # a study and a real release
        rel = pmdp.release(
            [3, 4, 9], pm.Poisson, epsilon=1.0, bounds="private", bounds_range=(0, 20), rng=rng
        )
        assert rel.bounds == (3.0, 4.0) and rel.sensitivity == 4.0


@pytest.mark.parametrize(
    ("family", "kwargs", "match"),
    [
        (pm.Binomial, {"trials": 10**400}, "trials is too large for a float"),
        (pm.Poisson, {"bounds": (0, 10**400)}, "bounds must be finite"),
        (pm.Poisson, {"bounds": "private", "bounds_range": (0, 10**400)}, "bounds must be finite"),
    ],
    ids=["trials", "bounds", "bounds_range"],
)
def test_integers_beyond_the_float_range_are_refused_by_name(family, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pmdp.release([1, 2], family, epsilon=1.0, rng=0, **kwargs)


def test_regression_bounds_beyond_the_float_range_are_refused_by_name():
    x = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="x_bounds and y_bounds must be finite"):
        release_regression(x, x, x_bounds=[(0, 10**400)], y_bounds=(0, 1), epsilon=1.0, rng=0)


def test_huge_counts_outside_the_window_are_dropped_without_a_cast_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rel = pmdp.release(np.array([1e308, 1.0, 2.0]), pm.Poisson, bounds=(0, 2), epsilon=1e6,
                           rng=0)  # fmt: skip
    assert rel.value == pytest.approx(3.0, abs=1e-3) and rel.n == 3


# ---- release files are written atomically (issue 18, item 2) ---------------------------------


def test_a_failed_write_keeps_the_earlier_release_and_leaves_no_temporary(tmp_path, monkeypatch):
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    path = write_release(rel, tmp_path / "release.json")
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        write_release(dataclasses.replace(rel, epsilon=2.0), path)
    assert path.read_bytes() == before and read_release(path) == rel
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release.json"]


def test_without_overwrite_exactly_one_of_racing_writers_wins(tmp_path):
    path = tmp_path / "release.json"
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)

    def attempt(_):
        try:
            write_release(rel, path, overwrite=False)
        except InputFileError as err:
            assert "exists; pass --overwrite" in str(err)
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(attempt, range(16)))
    assert outcomes.count(True) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # shared like any written file


def test_regression_release_records_refuse_overflowing_bounds_by_name():
    base = dict(value=[1.0] * 5, n=10, epsilon=1.0, sensitivity=1e300, y_bounds=(0, 1))
    with pytest.raises(ValueError, match="x_bounds and y_bounds must be finite"):
        RegressionRelease(**base, x_bounds=[(0, 10**400)])
    with pytest.raises(ValueError, match="powers 2 of the records"):
        RegressionRelease(**base, x_bounds=[(0, 1e160)])
    with pytest.raises(ValueError, match="value holds a number too large"):
        RegressionRelease(**{**base, "value": [1, 2, 3, 4, 10**400]}, x_bounds=[(0, 1)])
    # Bounds whose squares fit are accepted without moments (as release_regression makes them).
    x = np.linspace(0, 1, 5)
    rel = release_regression(x, x, x_bounds=[(0, 1e79)], y_bounds=(0, 1), epsilon=5e8, rng=0)
    assert RegressionRelease.from_json(rel.to_json()).x_bounds == ((0.0, 1e79),)  # (1e79)⁴ = inf
