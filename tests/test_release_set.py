"""Grouped releases: parallel composition, public keys and sizes, JSON round trips."""

import json

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.curator.budget import BudgetExceededError
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.grouped import release_grouped
from pymc_dp.curator.release_file import read_release, write_release
from pymc_dp.curator.release_set import ReleaseSet

GROUPS = ["north", "south", "east"]


@pytest.fixture
def data():
    rng = np.random.default_rng(20261125)
    keys = rng.choice(GROUPS, size=400)
    x = rng.binomial(5, np.where(keys == "north", 0.2, 0.6))
    return x, keys


def _grouped(x, keys, **kwargs):
    settings = dict(trials=5, epsilon=0.7, by=keys, groups=GROUPS, sizes="public", rng=3)
    settings.update(kwargs)
    return release_grouped(x, pm.Binomial, **settings)


def test_each_group_is_the_ungrouped_release_of_its_records(data):
    x, keys = data
    rs = _grouped(x, keys)
    # One generator through the groups in order: replay it with pmdp.release per group.
    gen = np.random.default_rng(3)
    for g in GROUPS:
        alone = pmdp.release(x[keys == g], pm.Binomial, trials=5, epsilon=0.7, rng=gen)
        assert rs[g] == alone
        assert rs[g].sensitivity == 5.0 and rs[g].scale == pytest.approx(5.0 / 0.7)
    assert rs.groups == tuple(GROUPS)
    assert rs.n.tolist() == [int(np.sum(keys == g)) for g in GROUPS]
    assert rs.value.shape == (3,)


def test_noise_per_group_is_calibrated_to_sensitivity_over_epsilon():
    # Same records in every group: the spread of y_g - s_g over many seeded sets is Laplace(Δ/ε).
    x = np.tile([0, 1, 1, 0], 50)
    keys = np.repeat(["a", "b"], 100)
    s = np.array([x[:100].sum(), x[100:].sum()])
    gen = np.random.default_rng(11)
    noise = np.array(
        [
            release_grouped(
                x, pm.Bernoulli, epsilon=0.5, by=keys, groups=["a", "b"], sizes="public", rng=gen
            ).value
            - s
            for _ in range(2000)
        ]
    )
    from scipy import stats

    for g in range(2):
        assert stats.kstest(noise[:, g], stats.laplace(scale=2.0).cdf).pvalue > 0.001
    assert abs(np.corrcoef(noise.T)[0, 1]) < 0.1  # independent noise per group


def test_seeded_release_is_deterministic(data):
    x, keys = data
    assert _grouped(x, keys, rng=5) == _grouped(x, keys, rng=5)
    assert _grouped(x, keys, rng=5) != _grouped(x, keys, rng=6)


def test_budget_is_charged_once_for_the_whole_set(data):
    x, keys = data
    budget = pmdp.PrivacyBudget(epsilon=1.0)
    rs = _grouped(x, keys, budget=budget, rng=None)
    assert budget.ledger == (("binomial by group", 0.7),)
    assert rs.budget["spent"] == pytest.approx(0.7)
    assert all(rel.budget is None for rel in rs.releases.values())
    with pytest.raises(BudgetExceededError):
        _grouped(x, keys, budget=budget, rng=None)
    assert budget.ledger == (("binomial by group", 0.7),)  # a refused set spends nothing


def test_unknown_key_is_refused_without_quoting_records(data):
    x, keys = data
    keys = keys.copy()
    keys[17] = "secret-site-42"
    with pytest.raises(ValueError, match="not among groups") as err:
        _grouped(x, keys)
    assert "secret" not in str(err.value) and "\n" not in str(err.value)
    assert "the first at index 17" in str(err.value)


@pytest.mark.parametrize("marker", [None, np.nan, "", "NA"])
def test_missing_key_is_refused(data, marker):
    x, keys = data
    keys = keys.astype(object)
    keys[3] = marker
    with pytest.raises(ValueError, match="missing key"):
        _grouped(x, keys)


def test_group_keys_are_never_read_from_the_data(data):
    x, keys = data
    with pytest.raises(TypeError, match="groups must be a list"):
        _grouped(x, keys, groups=None)
    with pytest.raises(TypeError, match="groups must be a list"):
        _grouped(x, keys, groups="north")


def test_sizes_must_be_declared_public(data):
    x, keys = data
    with pytest.raises(TypeError, match="needs sizes="):
        _grouped(x, keys, sizes=None)
    with pytest.raises(ValueError, match="'public'"):
        _grouped(x, keys, sizes="private")
    true = {g: int(np.sum(keys == g)) for g in GROUPS}
    assert _grouped(x, keys, sizes=true) == _grouped(x, keys)
    assert _grouped(x, keys, sizes=[true[g] for g in GROUPS]) == _grouped(x, keys)
    wrong = dict(true, south=true["south"] + 1)
    with pytest.raises(ValueError, match="declared public size of group 'south'"):
        _grouped(x, keys, sizes=wrong)


def test_integer_keys_match_text_keys():
    x = np.array([1, 0, 1, 1])
    rs = release_grouped(
        x, pm.Bernoulli, epsilon=1.0, by=["1", "2", "2", "1"], groups=[1, 2], sizes="public", rng=0
    )
    assert rs.groups == (1, 2) and rs.n.tolist() == [2, 2]


def test_empty_group_and_bad_records_stop_before_noise(data):
    x, keys = data
    with pytest.raises(ValueError, match="have no records"):
        _grouped(x, keys, groups=[*GROUPS, "west"])
    bad = x.copy()
    bad[250] = 9
    budget = pmdp.PrivacyBudget(epsilon=1.0)
    with pytest.raises(ValueError, match="must lie in") as err:
        _grouped(bad, keys, budget=budget, rng=None)
    assert "index 250" in str(err.value)  # the record's own index, not its place in the group
    assert budget.ledger == ()
    with pytest.raises(ValueError, match="public bounds"):
        release_grouped(
            x, pm.Poisson, epsilon=1.0, by=keys, groups=GROUPS, sizes="public",
            bounds="private", bounds_range=(0, 10),
        )  # fmt: skip


def test_json_round_trip_and_file(tmp_path, data):
    x, keys = data
    rs = _grouped(x, keys, by_name="region")
    assert ReleaseSet.from_json(rs.to_json()) == rs
    path = write_release(rs, tmp_path / "grouped.json")
    assert read_release(path, allow_grouped=True) == rs
    with pytest.raises(InputFileError, match="grouped release"):
        read_release(path)
    data = json.loads(path.read_text())
    assert data["composition"] == "parallel" and data["total_epsilon"] == 0.7
    assert data["by"] == "region" and data["groups"] == GROUPS


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.update(groups=d["groups"][:2]), "same length"),
        (lambda d: d.update(groups=["a", "a", "b"]), "distinct"),
        (lambda d: d.update(groups=[1.5, 2, 3]), "groups must be strings or integers"),
        (lambda d: d["releases"][1].update(epsilon=0.9), "group 'south'"),
        (lambda d: d["releases"][2].update(n="10"), "group 'east'"),
        (lambda d: d.update(total_epsilon=2.1), "total_epsilon"),
        (lambda d: d.update(kind="single"), "kind"),
        (lambda d: d.update(extra=1), "needs the fields"),
    ],
)
def test_strict_parsing_names_the_bad_field(data, edit, match):
    x, keys = data
    d = json.loads(_grouped(x, keys).to_json())
    edit(d)
    with pytest.raises((TypeError, ValueError), match=match):
        ReleaseSet.from_dict(d)


def test_groups_must_share_epsilon_and_family(data):
    x, _ = data
    a = pmdp.release(x[:5], pm.Binomial, trials=5, epsilon=1.0, rng=0)
    b = pmdp.release(x[5:9], pm.Binomial, trials=5, epsilon=2.0, rng=0)
    with pytest.raises(ValueError, match="share epsilon"):
        ReleaseSet({"a": a, "b": b})


def test_gaussian_set_charges_rho_once(data):
    x, keys = data
    budget = pmdp.PrivacyBudget(rho=1.0)
    rs = release_grouped(
        x, pm.Binomial, trials=5, mechanism="discrete-gaussian", rho=0.3, by=keys,
        groups=GROUPS, sizes="public", budget=budget,
    )  # fmt: skip
    ((label, cost),) = budget.ledger  # one charge: ρ through √(2ρ) and back
    assert label == "binomial by group" and cost == pytest.approx(0.3, rel=1e-12)
    assert all(
        rs[g].rho == pytest.approx(0.3) and rs[g].mechanism == "discrete-gaussian" for g in GROUPS
    )


def test_keys_must_match_the_records_one_to_one(data):
    x, keys = data
    with pytest.raises(ValueError, match="one key per record"):
        _grouped(x, keys[:-1])
    with pytest.raises(ValueError, match="one-dimensional"):
        _grouped(x, keys.reshape(-1, 2))
