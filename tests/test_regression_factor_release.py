"""The curator declares covariates the dummy columns of one factor: ``release_regression(factor=)``.

The declaration is checked record by record (0 or 1 in each column, at most one 1), stored in the
release and read back; it changes no privacy accounting (the box decides Δ and the noise).
"""

import dataclasses

import numpy as np
import pytest

from pymc_dp.curator.budget import PrivacyBudget
from pymc_dp.curator.regression.exact_sums import RegressionPlan, factor_outside
from pymc_dp.curator.regression.record import check_factor
from pymc_dp.curator.regression.release import RegressionRelease, release_regression

N = 60
BOX = [(0.0, 1.0), (0.0, 1.0), (-1.0, 2.0)]  # two dummy columns (three levels), one number
Y_BOX = (-2.0, 3.0)


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three levels (0 the reference), a uniform covariate and a response inside the box."""
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 3, size=N)
    other = rng.uniform(-1.0, 2.0, size=N)
    x = np.column_stack([level == 1, level == 2, other]).astype(np.float64)
    y = np.clip(0.3 + 0.5 * x[:, 0] - 0.4 * x[:, 1] + 0.2 * other + rng.normal(0, 0.3, N), -2, 3)
    return x, y


_X, _Y = _data()
_KW = dict(x_bounds=BOX, y_bounds=Y_BOX)


# --- check_factor ---------------------------------------------------------------------------


def test_check_factor_keeps_the_callers_order():
    assert check_factor(None, BOX) == () and check_factor([], BOX) == ()
    assert check_factor([1, 0], BOX) == (1, 0)  # the order names the levels
    assert check_factor(np.array([0, 1]), BOX) == (0, 1)
    assert check_factor((0,), BOX, binary=(1,)) == (0,)


@pytest.mark.parametrize(
    "factor, kwargs, exc, match",
    [
        ("ab", {}, TypeError, "factor must be a sequence of covariate indices"),
        (0, {}, TypeError, "factor must be a sequence of covariate indices"),
        ([0, 1.0], {}, TypeError, r"factor must hold covariate indices \(got 1.0\)"),
        ([True], {}, TypeError, "factor must hold covariate indices"),
        ([0, 3], {}, ValueError, r"factor: 3 is not a covariate index in \[0, 2\]"),
        ([-1], {}, ValueError, r"factor: -1 is not a covariate index"),
        ([0, 0], {}, ValueError, r"factor must name each covariate once \(got \[0, 0\]\)"),
        ([0, 1], {"binary": (1,)}, ValueError,
         r"factor: covariate\(s\) \[1\] are declared in binary= too; declare a factor's dummy "
         "columns in factor= only"),
    ],
)  # fmt: skip
def test_check_factor_refusals_name_the_argument(factor, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        check_factor(factor, BOX, **kwargs)


def test_check_factor_refuses_a_box_without_0_and_1():
    with pytest.raises(
        ValueError, match=r"factor: covariate 1's box \[0.25, 1\] must hold 0 and 1"
    ):
        check_factor([0, 1], [(0.0, 1.0), (0.25, 1.0)])


def test_factor_outside_marks_records_that_are_not_one_level():
    x = np.array(
        [[0, 0, 5], [1, 0, 5], [0, 1, 5], [1, 1, 5], [0.5, 0, 5], [0, 2, 5], [-1, 0, 5]], float
    )
    assert factor_outside(x, (0, 1)).tolist() == [False] * 3 + [True] * 4
    assert not factor_outside(x, ()).any()
    assert factor_outside(np.array([[-0.0, 1.0, 9.0]]), (0, 1)).tolist() == [False]


# --- the release ------------------------------------------------------------------------------


def test_factor_is_recorded_and_read_back():
    rel = release_regression(_X, _Y, **_KW, epsilon=1.0, factor=[1, 0], rng=1)
    assert rel.factor == (1, 0) and rel.binary == ()
    assert rel.to_dict()["factor"] == [1, 0]
    back = RegressionRelease.from_json(rel.to_json())
    assert back.factor == (1, 0) and back.to_json() == rel.to_json()
    old = rel.to_dict()
    del old["factor"]  # a file written before factor existed
    assert RegressionRelease.from_dict(old).factor == ()
    with pytest.raises(TypeError, match="factor must be a list of covariate indices"):
        RegressionRelease.from_dict({**rel.to_dict(), "factor": 1})
    with pytest.raises(TypeError, match="factor must be a list of covariate indices"):
        RegressionRelease.from_dict({**rel.to_dict(), "factor": "0,1"})
    fields = {f.name: getattr(rel, f.name) for f in dataclasses.fields(rel)}
    with pytest.raises(ValueError, match="declare a factor's dummy columns in factor= only"):
        RegressionRelease(**{**fields, "binary": (0,)})
    with pytest.raises(ValueError, match=r"factor: 3 is not a covariate index"):
        RegressionRelease(**{**fields, "factor": (0, 3)})


def test_factor_beside_a_binary_covariate():
    x = _X.copy()
    x[:, 2] = (_X[:, 2] > 0.5).astype(float)  # the third column a 0/1 indicator
    rel = release_regression(x, _Y, **_KW, epsilon=1.0, binary=[2], factor=[0, 1], rng=2)
    assert (rel.binary, rel.factor) == ((2,), (0, 1))
    with pytest.raises(ValueError, match="declare a factor's dummy columns in factor= only"):
        release_regression(x, _Y, **_KW, epsilon=1.0, binary=[1, 2], factor=[0, 1], rng=2)


@pytest.mark.parametrize(
    "options",
    [
        {"epsilon": 1.0, "rng": 3},
        {"epsilon": 0.5, "rng": 3, "moments_share": 0.2},
        {"epsilon": 1.0},  # vetted discrete Laplace
        {"mechanism": "discrete-gaussian", "rho": 0.5},
    ],
    ids=["laplace-float", "moments", "discrete-laplace", "discrete-gaussian"],
)
def test_factor_changes_no_privacy_accounting(options):
    """The same Δ, ε, scale, quantum and (seeded) the same noisy values with and without it."""
    with_factor = release_regression(_X, _Y, **_KW, **options, factor=[0, 1])
    without = release_regression(_X, _Y, **_KW, **options)
    for name in ("sensitivity", "scale", "epsilon", "total_epsilon", "rho", "delta", "quantum",
                 "sensitivity_bound", "mechanism", "record_quantum"):  # fmt: skip
        assert getattr(with_factor, name) == getattr(without, name), name
    if "rng" in options:
        assert np.array_equal(with_factor.value, without.value)
    if "moments_share" in options:
        mom, plain = with_factor.fourth_moments, without.fourth_moments
        assert (mom.sensitivity, mom.epsilon) == (plain.sensitivity, plain.epsilon)
        assert np.array_equal(mom.value, plain.value)


def _violations() -> dict[str, np.ndarray]:
    """Data sets that break the factor, each in one record (index 7) or a few."""
    two_ones = _X.copy()
    two_ones[7, :2] = 1.0
    half = _X.copy()
    half[7, 0] = 0.5
    above = _X.copy()
    above[7, 1] = 1.5  # clamping to the box [0, 1] would make it 1: it must still stop
    many = _X.copy()
    many[[7, 11, 30], :2] = 1.0
    return {"two ones": two_ones, "a half": half, "above the box": above, "three records": many}


@pytest.mark.parametrize("case", list(_violations()))
@pytest.mark.parametrize("clamp", [False, True])
def test_a_broken_factor_stops_the_release_before_any_noise(case, clamp):
    """No release object, no draw from the generator, no budget spent, no value quoted."""
    x = _violations()[case]
    gen = np.random.default_rng(9)
    before = gen.bit_generator.state
    budget = PrivacyBudget(epsilon=2.0)
    rel = None
    with pytest.raises(ValueError) as info:
        rel = release_regression(
            x, _Y, **_KW, epsilon=1.0, factor=[0, 1], clamp=clamp, rng=gen, budget=budget
        )
    assert rel is None
    assert gen.bit_generator.state == before and budget.spent == 0.0
    message = str(info.value)
    count = 3 if case == "three records" else 1
    stopped = (
        f"x has {count} record(s) (the first at index 7) with a value other than 0 and 1, "
        "or more than one 1, in the dummy columns declared factor (factor indices [0, 1])"
    )
    assert stopped in message
    assert "Code the factor as dummy columns of one level each, reference level all 0" in message
    assert "do not declare factor=" in message
    assert "0.5" not in message and "1.5" not in message


def test_a_broken_factor_stops_a_vetted_release_before_the_budget_is_charged():
    x = _violations()["two ones"]
    budget = PrivacyBudget(epsilon=2.0)
    with pytest.raises(ValueError, match="more than one 1"):
        release_regression(x, _Y, **_KW, epsilon=1.0, factor=[0, 1], budget=budget)
    assert budget.spent == 0.0 and budget.ledger == ()


def test_the_plan_reports_a_broken_factor_by_batch():
    bounds = tuple(map(tuple, [*BOX, Y_BOX]))
    plan = RegressionPlan(bounds, factor=(0, 1))
    records = np.column_stack([_violations()["three records"], _Y])
    problem = plan.batch_totals(records).problem
    assert problem is not None and problem.kind == "ValueError"
    assert (problem.count, problem.first) == (3, 7) and "factor indices [0, 1]" in problem.template
    good = plan.batch_totals(np.column_stack([_X, _Y]))
    assert good.problem is None
    assert good.totals == RegressionPlan(bounds).batch_totals(np.column_stack([_X, _Y])).totals


def test_factor_is_checked_in_data_frames():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": _X[:, 0], "b": _X[:, 1], "c": _X[:, 2], "y": _Y})
    columns = ["a", "b", "c", "y"]
    rel = release_regression(frame, columns=columns, **_KW, epsilon=1.0, factor=[0, 1], rng=4)
    assert rel.factor == (0, 1)
    assert np.array_equal(
        rel.value, release_regression(_X, _Y, **_KW, epsilon=1.0, factor=[0, 1], rng=4).value
    )
    frame.loc[5, ["a", "b"]] = 1.0
    gen = np.random.default_rng(4)
    before = gen.bit_generator.state
    with pytest.raises(ValueError, match=r"columns \['a', 'b', 'c'\] has 1 record\(s\)"):
        release_regression(frame, columns=columns, **_KW, epsilon=1.0, factor=[0, 1], rng=gen)
    assert gen.bit_generator.state == before
    with pytest.raises(ValueError, match="declare a factor's dummy columns in factor= only"):
        release_regression(
            frame, columns=columns, **_KW, epsilon=1.0, binary=[0], factor=[0, 1], rng=4
        )
