"""The privacy accountant: several releases of one data set against one total."""

import json
import subprocess
import sys

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp import BudgetExceededError, PrivacyBudget

X = np.random.default_rng(11).exponential(2.0, size=300)


def test_releases_compose_and_record_what_was_spent():
    budget = PrivacyBudget(epsilon=1.0)
    first = pmdp.release(
        X, pm.Exponential, epsilon=0.5, bounds="private", bounds_range=(0, 100), budget=budget
    )
    assert first.budget["spent"] == pytest.approx(0.5)
    assert first.budget["remaining"] == pytest.approx(0.5)
    second = pmdp.release(X > 2, pm.Bernoulli, epsilon=0.5, budget=budget, label="over two")
    assert second.budget == {
        "unit": "epsilon",
        "total": 1.0,
        "spent": 1.0,
        "remaining": 0.0,
        "label": "over two",
        "releases": 2,
    }
    assert pmdp.Release.from_json(second.to_json()).budget == second.budget


def test_an_overspend_is_refused_before_any_noise(monkeypatch):
    budget = PrivacyBudget(epsilon=1.0)
    pmdp.release(X > 1, pm.Bernoulli, epsilon=0.7, budget=budget)
    import pymc_dp.curator.noise as release_noise

    def fail(*args, **kwargs):
        raise AssertionError("noise drawn after a refused charge")

    monkeypatch.setattr(release_noise, "discrete_laplace_mechanism", fail)
    with pytest.raises(BudgetExceededError, match=r"would spend 1\.1 of the total epsilon 1"):
        pmdp.release(X > 1, pm.Bernoulli, epsilon=0.4, budget=budget)
    assert budget.spent == pytest.approx(0.7) and len(budget.ledger) == 1


def test_a_failed_release_after_the_charge_still_counts():
    """A retry spends budget again: the accountant never refunds."""
    budget = PrivacyBudget(epsilon=1.0)
    pmdp.release(X > 1, pm.Bernoulli, epsilon=0.5, budget=budget)
    pmdp.release(X > 1, pm.Bernoulli, epsilon=0.5, budget=budget)  # the same release again
    with pytest.raises(BudgetExceededError):
        pmdp.release(X > 1, pm.Bernoulli, epsilon=0.01, budget=budget)


def test_zcdp_budget_charges_laplace_as_epsilon_squared_over_two():
    budget = PrivacyBudget(rho=0.5)
    pmdp.release(X > 1, pm.Bernoulli, epsilon=0.6, budget=budget)  # 0.18
    rel = pmdp.release(X, pm.Normal, mechanism="discrete-gaussian", rho=0.3, bounds=(0, 20),
                       budget=budget)  # fmt: skip
    assert rel.budget["spent"] == pytest.approx(0.48)
    with pytest.raises(BudgetExceededError):
        pmdp.release(X, pm.Normal, mechanism="discrete-gaussian", rho=0.05, bounds=(0, 20),
                     budget=budget)  # fmt: skip


def test_pure_budget_refuses_gaussian_releases():
    with pytest.raises(ValueError, match="PrivacyBudget\\(rho"):
        pmdp.release(X > 1, pm.Bernoulli, mechanism="discrete-gaussian", rho=0.1,
                     budget=PrivacyBudget(epsilon=5.0))  # fmt: skip


def test_shares_that_add_up_to_the_total_are_accepted():
    budget = PrivacyBudget(epsilon=1.0)
    for share in (0.1, 0.2, 0.3, 0.4):
        budget.spend(epsilon=share)
    assert budget.remaining == 0.0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({}, TypeError), ({"epsilon": 1, "rho": 1}, TypeError), ({"epsilon": -1}, ValueError),
     ({"rho": float("inf")}, ValueError)],
)  # fmt: skip
def test_budget_arguments_are_checked(kwargs, error):
    with pytest.raises(error):
        PrivacyBudget(**kwargs)


def test_budget_argument_must_be_an_accountant():
    with pytest.raises(TypeError, match="budget"):
        pmdp.release([0, 1], pm.Bernoulli, epsilon=1.0, budget=1.0)


def test_ledger_round_trip_and_tampered_ledgers(tmp_path):
    budget = PrivacyBudget(epsilon=2.0)
    budget.spend(epsilon=0.5, label="a")
    path = tmp_path / "ledger.json"
    budget.save(path)
    back = PrivacyBudget.load(path)
    assert back.ledger == budget.ledger and back.total == 2.0
    doc = json.loads(path.read_text())
    doc["ledger"].append(["b", 5.0])  # an overspent ledger does not load
    with pytest.raises(BudgetExceededError):
        PrivacyBudget.from_dict(doc)
    with pytest.raises(ValueError, match="fields"):
        PrivacyBudget.from_dict({"unit": "epsilon", "total": 1.0})


def test_cli_budget_refuses_the_release_that_would_overspend(tmp_path):
    data = tmp_path / "x.csv"
    data.write_text("x\n" + "\n".join(str(v) for v in [0, 1, 1, 0, 1] * 20) + "\n")
    ledger = tmp_path / "ledger.json"

    def run(*extra):
        return subprocess.run(
            [sys.executable, "-m", "pymc_dp", "release", str(data), "--column", "x",
             "--family", "bernoulli", "--epsilon", "0.6", *extra],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    first = run("--output", str(tmp_path / "a.json"), "--budget", str(ledger),
                "--budget-total", "1")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "budget: 0.6 of 1 spent" in first.stdout
    rel = pmdp.Release.from_json((tmp_path / "a.json").read_text())
    assert rel.mechanism == "discrete-laplace" and rel.budget["remaining"] == pytest.approx(0.4)
    second = run("--output", str(tmp_path / "b.json"), "--budget", str(ledger))
    assert second.returncode != 0 and "would spend 1.2" in second.stderr
    assert not (tmp_path / "b.json").exists()
    assert len(json.loads(ledger.read_text())["ledger"]) == 1


def test_regression_release_is_charged_to_the_same_budget():
    from pymc_dp.curator.regression.release import RegressionRelease, release_regression

    rng = np.random.default_rng(6)
    x = rng.uniform(0, 1, size=(100, 1))
    y = np.clip(0.5 * x[:, 0] + 0.1 * rng.standard_normal(100), 0, 1)
    budget = PrivacyBudget(epsilon=1.5)
    pmdp.release(x[:, 0] > 0.5, pm.Bernoulli, epsilon=0.5, budget=budget)
    rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(0, 1), epsilon=1.0,
                             moments_share=0.2, budget=budget)  # fmt: skip
    assert rel.budget["spent"] == pytest.approx(1.5) and rel.budget["releases"] == 2
    assert RegressionRelease.from_json(rel.to_json()).budget == rel.budget
    with pytest.raises(BudgetExceededError):
        release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(0, 1), epsilon=0.1, budget=budget)
