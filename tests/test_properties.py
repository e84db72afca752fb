"""Property-based tests of every public entry point (issue 18, "what it must show").

Each property feeds generated, often hostile, input to one entry point and accepts exactly two
outcomes: a valid result equal to an independent computation (the statistic recomputed with
plain NumPy, the noise replayed from the same seed), or a ``ValueError``/``TypeError`` whose
message names the offending argument. Any other exception, a non-finite value or a hang fails.
Examples are derandomized (the same on every run) and their number fixed, so the suite is
reproducible and runs in the default test run in well under a minute.
"""

import csv
import io
import json
import math
import re
import string
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.curator.data_files import InputFileError, read_column
from pymc_dp.curator.record import Release
from pymc_dp.curator.release_file import read_release

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Numbers as hostile as a caller can make them.
WILD_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -1.0, 1e-300, 5e-324, 1e300, 10.0**308, 0.5, 1.0, 2.0]),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([None, "1", True, [1.0], np.float32(0.5), np.int64(3)]),
)
EPSILONS = st.one_of(st.floats(min_value=1e-3, max_value=10.0), WILD_FLOATS)


def _oracle_noise(seed: int, scale: float, size: int) -> np.ndarray:
    """The Laplace noise a release with ``rng=seed`` adds: ``rng.laplace`` in floating point."""
    return np.random.default_rng(seed).laplace(0.0, scale, size=size)


def _names_an_argument(err: Exception, names: tuple[str, ...]) -> bool:
    text = str(err)
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)


def _check_refusal(err: Exception, names: tuple[str, ...]) -> None:
    assert isinstance(err, ValueError | TypeError), repr(err)
    assert _names_an_argument(err, names), f"{type(err).__name__} names no argument: {err}"


# ---- pmdp.release ------------------------------------------------------------------------

FAMILY_CASES = {
    # name: (PyMC class, keyword settings, records strategy element, statistic, sensitivity)
    "bernoulli": (pm.Bernoulli, {}, st.integers(-1, 2)),
    "binomial": (pm.Binomial, {"trials": 4}, st.integers(-1, 6)),
    "categorical": (pm.Categorical, {"categories": 3}, st.integers(-1, 4)),
    "poisson": (pm.Poisson, {"bounds": (0, 6)}, st.integers(-1, 12)),
    "exponential": (
        pm.Exponential,
        {"bounds": (0.5, 3.0)},
        st.floats(min_value=-1.0, max_value=1e6, allow_nan=False),
    ),
}
RELEASE_ARGS = ("x", "epsilon", "records", "record", "trials", "categories", "bounds", "rng")


def _expected_statistic(name: str, settings_: dict, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The statistic and its sensitivity, computed from the definitions (method.md §1)."""
    if name == "bernoulli":
        return np.array([x.sum()]), 1.0
    if name == "binomial":
        return np.array([x.sum()]), float(settings_["trials"])
    if name == "categorical":
        return np.bincount(x.astype(int), minlength=3).astype(float), 2.0
    a, b = settings_["bounds"]
    inside = (x >= a) & (x <= b)
    # t(x) = x on [a, b] with a >= 0: a record can move from 0 (outside) to b, or from a to b.
    return np.array([x[inside].sum()]), float(max(b, b - a))


def _valid_records(name: str, x: np.ndarray) -> bool:
    if name in ("bernoulli",):
        return bool(np.all((x == 0) | (x == 1)))
    if name == "binomial":
        return bool(np.all((x >= 0) & (x <= 4)))
    if name == "categorical":
        return bool(np.all((x >= 0) & (x <= 2)))
    return bool(np.all(x >= 0))


@SETTINGS
@given(
    name=st.sampled_from(sorted(FAMILY_CASES)),
    data=st.data(),
    epsilon=EPSILONS,
    seed=st.integers(0, 2**32 - 1),
)
def test_release_equals_statistic_plus_replayed_noise(name, data, epsilon, seed):
    family, settings_, element = FAMILY_CASES[name]
    x = np.asarray(data.draw(st.lists(element, min_size=0, max_size=30)), dtype=np.float64)
    try:
        rel = pmdp.release(x, family, epsilon=epsilon, rng=seed, **settings_)
    except Exception as err:
        _check_refusal(err, RELEASE_ARGS)
        eps_ok = (
            isinstance(epsilon, float | int)
            and not isinstance(epsilon, bool)
            and 1e-3 <= epsilon <= 10  # exact comparison: an int may exceed the float range
        )
        if eps_ok and len(x) > 0 and _valid_records(name, x):
            raise AssertionError(f"a valid release was refused: {err}") from None
        return
    statistic, sensitivity = _expected_statistic(name, settings_, x)
    assert rel.n == len(x) and rel.family == name
    assert rel.sensitivity == sensitivity
    assert rel.epsilon == float(epsilon)
    noise = _oracle_noise(seed, sensitivity / float(epsilon), statistic.size)
    value = np.atleast_1d(np.asarray(rel.value, dtype=np.float64))
    assert np.all(np.isfinite(value))
    np.testing.assert_allclose(value, statistic + noise, rtol=1e-12, atol=1e-9 * sensitivity)
    assert Release.from_json(rel.to_json()) == rel


# ---- pmdp.release_regression -------------------------------------------------------------

REGRESSION_ARGS = ("x", "y", "x_bounds", "y_bounds", "epsilon", "moments_share", "records")


@SETTINGS
@given(
    n=st.integers(0, 12),
    d=st.integers(1, 3),
    scale=st.sampled_from([1.0, 1e3, 1e100, 1e200]),
    epsilon=EPSILONS,
    seed=st.integers(0, 2**32 - 1),
    spill=st.booleans(),
)
def test_release_regression_equals_its_sums_plus_replayed_noise(n, d, scale, epsilon, seed, spill):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-scale, scale, size=(n, d))
    y = rng.uniform(-scale, scale, size=n)
    if spill and n:
        y[0] = 2 * scale  # outside y_bounds
    bounds = [(-scale, scale)] * d
    try:
        rel = pmdp.release_regression(
            x, y, x_bounds=bounds, y_bounds=(-scale, scale), epsilon=epsilon, rng=seed
        )
    except Exception as err:
        _check_refusal(err, REGRESSION_ARGS)
        return
    assert not spill and n >= d + 2
    a = np.column_stack([np.ones(n), x, y])
    gram = a.T @ a
    expected = np.sort(gram[np.triu_indices(d + 2)][1:])  # every unique entry but n
    noise = _oracle_noise(seed, rel.sensitivity / rel.epsilon, expected.size)
    value = np.asarray(rel.value, dtype=np.float64)
    assert value.shape == expected.shape and np.all(np.isfinite(value))
    recovered = np.sort(value - noise)
    tolerance = 1e-9 * n * scale**2 + 1e-6 * rel.sensitivity / rel.epsilon
    np.testing.assert_allclose(recovered, expected, rtol=0, atol=tolerance)


# ---- Release.from_json -------------------------------------------------------------------

RELEASE_FIELDS = (
    "value",
    "n",
    "epsilon",
    "sensitivity",
    "bounds",
    "family",
    "family_params",
    "mechanism",
    "version",
    "bounds_epsilon",
    "clamped",
    "format_version",
)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def reference_doc():
    rel = pmdp.release([0, 1, 2, 1], pm.Binomial, epsilon=1.0, trials=2, rng=0)
    return json.loads(rel.to_json())


@SETTINGS
@given(data=st.data())
def test_release_from_json_accepts_a_valid_record_or_names_the_field(reference_doc, data):
    doc = dict(reference_doc)
    field = data.draw(st.sampled_from([*sorted(doc), "extra"]))
    action = data.draw(st.sampled_from(["replace", "delete", "keep"]))
    if action == "replace":
        doc[field] = data.draw(JSON_VALUES)
    elif action == "delete":
        doc.pop(field, None)
    text = json.dumps(doc)
    try:
        rel = Release.from_json(text)
    except Exception as err:
        names = (*RELEASE_FIELDS, *sorted(reference_doc), "extra", "trials", "JSON", "release")
        _check_refusal(err, names)
        assert action != "keep" or field == "extra"
        return
    again = json.loads(rel.to_json())
    for key in ("n", "epsilon", "sensitivity", "family"):
        assert again[key] == doc[key] or (key not in doc)
    assert np.all(np.isfinite(np.asarray(rel.value, dtype=np.float64)))


# ---- NoisySuffStat with explicit arguments ---------------------------------------------------

NODE_ARGS = ("n", "epsilon", "sensitivity", "observed", "value", "trials", "release", "bounds")


@settings(SETTINGS, max_examples=15)
@given(
    n=st.one_of(st.integers(-2, 10**6), WILD_FLOATS),
    epsilon=EPSILONS,
    sensitivity=st.one_of(st.sampled_from([3.0, 1.0]), WILD_FLOATS),
    observed=st.one_of(st.floats(-10.0, 100.0), WILD_FLOATS, st.just([1.0, 2.0])),
)
def test_noisy_suffstat_explicit_arguments_build_or_name_the_argument(
    n, epsilon, sensitivity, observed
):
    """Building the model only (no compilation, no sampling): it builds or names the argument."""
    with pm.Model() as model, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sensitivity below the family's Δ
        p = pm.Beta("p", 1.0, 1.0)
        try:
            pmdp.NoisySuffStat(
                "y",
                pm.Binomial.dist(n=3, p=p),
                n=n,
                epsilon=epsilon,
                sensitivity=sensitivity,
                observed=observed,
            )
        except Exception as err:
            _check_refusal(err, NODE_ARGS)
            return
    # Built: the arguments were finite and positive where they must be.
    assert float(epsilon) > 0 and float(sensitivity) > 0 and int(n) >= 1
    assert math.isfinite(float(sensitivity) / float(epsilon))
    assert math.isfinite(float(np.asarray(observed, dtype=np.float64)))
    assert "y" in model.named_vars


# ---- the command line: argument parsing ------------------------------------------------------

ARG_TOKENS = st.sampled_from(
    [
        "--column", "x", "y", "--family", "bernoulli", "binomial", "poisson", "categorical",
        "normal", "--epsilon", "1", "0", "-1", "nan", "inf", "1e400", "--trials", "3", "0",
        "--categories", "2", "1000000000000", "--bounds", "0", "5", "--private-bounds",
        "--bounds-share", "0.5", "2", "--clamp", "--seed", "-3", "7", "--sigma", "--shape",
        "--format", "csv", "parquet", "--overwrite", "--bounds-quantiles", "0.1", "0.9",
    ]
)  # fmt: skip


@SETTINGS
@given(tokens=st.lists(ARG_TOKENS, max_size=14))
def test_cli_release_arguments_run_or_exit_2_in_one_line(tmp_path_factory, tokens, capsys):
    folder = tmp_path_factory.mktemp("cli")
    data = folder / "data.csv"
    data.write_text("x,y\n0,1\n1,2\n1,0\n0,3\n")
    out = folder / "out.json"
    argv = ["release", str(data), *tokens, "--output", str(out)]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse: usage errors
        code = exit_.code
    captured = capsys.readouterr()
    assert code in (0, 2), (argv, code, captured.err)
    if code == 0:
        rel = read_release(out)
        assert rel.n == 4 and np.all(np.isfinite(np.atleast_1d(rel.value)))
        assert captured.out.startswith(f"wrote {out}")
    else:
        assert "Traceback" not in captured.err and captured.err.strip()
        assert not out.exists()
        last = captured.err.strip().splitlines()[-1]
        assert last.startswith(("pymc-dp release: error:", "pymc-dp: error:")), last


# ---- CSV reading ---------------------------------------------------------------------------

PLAIN_NUMBERS = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.sampled_from(["1e308", "-1e-320", "0.5", ".5", "5.", "+3", "1E5", "007"]),
)
ODD_FIELDS = st.sampled_from(
    ["", " ", "1,000", "1e400", "NaN", "NA", "inf", "0x10", "1_000", "ünï", '"2"', "3;4", "\t5"]
)


def _independent_parse(text: str, column: str) -> list[float] | None:
    """The column as floats if every line is one plain, finite record; else None."""
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))
    if not rows or column not in rows[0] or rows[0].count(column) != 1:
        return None
    index, width = rows[0].index(column), len(rows[0])
    values = []
    for row in rows[1:]:
        if not any(field.strip() for field in row) or len(row) != width:
            return None
        field = row[index].strip().lower()
        if field in ("true", "false"):
            values.append(1.0 if field == "true" else 0.0)
            continue
        if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", field):
            return None
        number = float(field)
        if not math.isfinite(number):
            return None
        values.append(number)
    return values or None


@SETTINGS
@given(
    fields=st.lists(st.one_of(PLAIN_NUMBERS, ODD_FIELDS), min_size=0, max_size=12),
    other=st.text(alphabet=string.ascii_letters + "é, \"'", max_size=5),
    blank_at=st.one_of(st.none(), st.integers(0, 12)),
    quote=st.booleans(),
)
def test_csv_reader_reads_exactly_or_names_the_file(
    tmp_path_factory, fields, other, blank_at, quote
):
    path = Path(tmp_path_factory.mktemp("csv")) / "data.csv"
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL if quote else csv.QUOTE_MINIMAL)
    writer.writerow(["id", "value", "note"])
    for i, field in enumerate(fields):
        writer.writerow([i, field, other])
    lines = buffer.getvalue().splitlines(keepends=True)
    if blank_at is not None and blank_at + 1 < len(lines):
        lines.insert(blank_at + 1, "\r\n")
    text = "".join(lines)
    path.write_text(text, encoding="utf-8", newline="")
    expected = _independent_parse(text, "value")
    try:
        got = read_column(path, "value")
    except InputFileError as err:
        assert str(path) in str(err) and "\n" not in str(err)
        assert expected is None, f"refused a clean file: {err}"
        return
    assert expected is not None, "accepted a file the reference refuses"
    np.testing.assert_array_equal(got, np.asarray(expected))


WILD_RECORDS = st.one_of(
    st.lists(WILD_FLOATS, max_size=6),
    st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=2), max_size=3),
    st.sampled_from(
        [
            np.array(["a", "b"]),
            np.array([1, 0], dtype="timedelta64[s]"),
            np.ma.masked_array([0, 1, 1], mask=[0, 1, 0]),
            np.array([True, False]),
            np.zeros((2, 2)),
            3,
            "0101",
            None,
            {1, 0},
        ]
    ),
)


@SETTINGS
@given(
    name=st.sampled_from(sorted(FAMILY_CASES)),
    x=WILD_RECORDS,
    setting=WILD_FLOATS,
    seed=st.integers(0, 2**32 - 1),
)
def test_release_refuses_wild_records_and_settings_by_name(name, x, setting, seed):
    family, settings_, _ = FAMILY_CASES[name]
    settings_ = dict(settings_)
    key = next(iter(settings_), None)
    if key is not None and key != "bounds":
        settings_[key] = setting
    try:
        rel = pmdp.release(x, family, epsilon=1.0, rng=seed, **settings_)
    except Exception as err:
        _check_refusal(err, (*RELEASE_ARGS, "alpha"))
        return
    value = np.atleast_1d(np.asarray(rel.value, dtype=np.float64))
    assert np.all(np.isfinite(value)) and rel.n == len(np.asarray(x).reshape(-1))


WILD_BOUNDS = st.one_of(
    st.tuples(WILD_FLOATS, WILD_FLOATS),
    st.sampled_from([None, "0 1", (0,), (1, 0), [(0, 1), (0, 1)], ((0, 1),), (0, 1, 2)]),
)


@SETTINGS
@given(
    x=st.one_of(WILD_RECORDS, st.just(np.linspace(0, 1, 8))),
    y=st.one_of(WILD_RECORDS, st.just(np.linspace(0, 1, 8))),
    x_bounds=st.one_of(WILD_BOUNDS, st.just([(0, 1)])),
    y_bounds=st.one_of(WILD_BOUNDS, st.just((0, 1))),
    moments_share=st.one_of(st.none(), WILD_FLOATS),
)
def test_release_regression_refuses_wild_input_by_name(x, y, x_bounds, y_bounds, moments_share):
    try:
        rel = pmdp.release_regression(
            x,
            y,
            x_bounds=x_bounds,
            y_bounds=y_bounds,
            epsilon=1.0,
            moments_share=moments_share,
            rng=0,
        )
    except Exception as err:
        _check_refusal(err, REGRESSION_ARGS)
        return
    assert np.all(np.isfinite(np.asarray(rel.value, dtype=np.float64)))
