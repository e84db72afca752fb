import dataclasses
import json

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp import Release

RELEASE_CASES = [
    ([0, 1, 1, 0, 1], pm.Bernoulli, {}),
    ([0, 5, 2, 3], pm.Binomial, {"trials": 5}),
    ([0, 2, 2, 1, 0, 0], pm.Categorical, {"categories": 3}),
]
RELEASE_IDS = ["bernoulli", "binomial", "categorical"]


@pytest.fixture(params=RELEASE_CASES, ids=RELEASE_IDS)
def rel(request):
    x, dist, params = request.param
    return pmdp.release(x, dist, epsilon=0.3, rng=42, **params)


def test_release_is_frozen(rel):
    for field in dataclasses.fields(Release):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(rel, field.name, getattr(rel, field.name))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rel.new_attribute = 1


def test_release_value_and_params_are_read_only(rel):
    with pytest.raises(ValueError, match="read-only"):
        rel.value[...] = 0.0
    with pytest.raises(TypeError):
        rel.family_params["trials"] = 100
    assert rel.value.dtype == np.float64


def test_release_copies_its_input():
    value = np.array([1.0, 2.0, 3.0])
    params = {"categories": 3}
    rel = Release(
        value=value,
        n=6,
        epsilon=1.0,
        sensitivity=2.0,
        bounds=(0, 2),
        family="categorical",
        family_params=params,
    )
    value[0] = 99.0
    params["categories"] = 4
    np.testing.assert_array_equal(rel.value, [1.0, 2.0, 3.0])
    assert rel.family_params == {"categories": 3}
    assert value.flags.writeable  # the caller's array is left alone


def test_release_normalises_types():
    rel = Release(
        value=[1, 2],
        n=np.int64(4),
        epsilon=1,
        sensitivity=2,
        bounds=[0, 1],
        family="categorical",
        family_params={"categories": 2},
    )
    assert type(rel.n) is int and rel.n == 4
    assert type(rel.epsilon) is float and type(rel.sensitivity) is float
    assert rel.bounds == (0.0, 1.0) and isinstance(rel.bounds, tuple)
    assert rel.value.dtype == np.float64
    assert rel.scale == 2.0


def test_json_round_trip(rel):
    text = rel.to_json()
    back = Release.from_json(text)
    assert back == rel
    assert hash(back) == hash(rel)
    # Bit-exact floats, identical shapes and settings.
    np.testing.assert_array_equal(back.value, rel.value)
    assert back.value.shape == rel.value.shape
    assert back.value.tobytes() == rel.value.tobytes()
    assert back.family_params == rel.family_params
    assert Release.from_dict(rel.to_dict()) == rel
    assert json.loads(text) == rel.to_dict()
    assert rel.to_json(indent=2) != text and Release.from_json(rel.to_json(indent=2)) == rel


def test_to_dict_contents():
    rel = pmdp.release([0, 5, 2], pm.Binomial, epsilon=0.5, rng=1, trials=5)
    d = rel.to_dict()
    assert d == {
        "format_version": 2,
        "value": float(rel.value),
        "n": 3,
        "epsilon": 0.5,
        "sensitivity": 5.0,
        "bounds": [0.0, 5.0],
        "family": "binomial",
        "family_params": {"trials": 5},
        "mechanism": "laplace-float",
        "bounds_epsilon": 0.0,
        "bounds_mechanism": None,
        "clamped": False,
        "quantum": None,
        "record_quantum": None,
        "library": f"numpy {np.__version__}",
        "rho": None,
        "delta": 0.0,
        "noise_scale": 10.0,
        "budget": None,
    }


def test_json_round_trip_of_awkward_floats():
    for y in [0.1 + 0.2, -1e-310, 1e300, -0.0, 123456789.123456789]:
        rel = Release(
            value=y, n=3, epsilon=1e-3, sensitivity=1.0, bounds=(0, 1), family="bernoulli"
        )
        back = Release.from_json(rel.to_json())
        assert back == rel
        assert back.value.tobytes() == rel.value.tobytes()


@pytest.fixture
def doc():
    rel = pmdp.release([0, 2, 2, 1], pm.Categorical, epsilon=0.5, rng=0, categories=3)
    return rel.to_dict()


@pytest.mark.parametrize(
    "field",
    [
        "value",
        "n",
        "epsilon",
        "sensitivity",
        "bounds",
        "family",
    ],
)
def test_from_json_rejects_missing_field(doc, field):
    del doc[field]
    with pytest.raises(ValueError, match=field):
        Release.from_json(json.dumps(doc))


def test_from_json_rejects_missing_family_params(doc):
    del doc["family_params"]
    with pytest.raises(TypeError, match="categories"):
        Release.from_json(json.dumps(doc))


@pytest.mark.parametrize("extra", ["values", "seed", "raw_statistic", "x"])
def test_from_json_rejects_unknown_field(doc, extra):
    doc[extra] = 1
    with pytest.raises(ValueError, match=extra):
        Release.from_json(json.dumps(doc))


@pytest.mark.parametrize("value", [[1.0, 2.0], [1.0, 2.0, 3.0, 4.0], 1.0, [[1.0, 2.0, 3.0]], []])
def test_from_json_rejects_wrong_value_shape(doc, value):
    doc["value"] = value
    with pytest.raises(ValueError, match="shape"):
        Release.from_json(json.dumps(doc))


def test_from_json_rejects_binomial_vector_value():
    rel = pmdp.release([0, 5, 2], pm.Binomial, epsilon=0.5, rng=1, trials=5)
    doc = rel.to_dict()
    doc["value"] = [1.0]
    with pytest.raises(ValueError, match="shape"):
        Release.from_dict(doc)


@pytest.mark.parametrize("version", [0, 3, "1", None, 1.5])
def test_from_json_rejects_bad_version(doc, version):
    doc["format_version"] = version
    with pytest.raises(ValueError, match="format_version"):
        Release.from_json(json.dumps(doc))


@pytest.mark.parametrize(
    ("field", "bad", "error"),
    [
        ("value", [1.0, float("nan"), 2.0], ValueError),
        ("value", [1.0, float("inf"), 2.0], ValueError),
        ("value", ["a", "b", "c"], TypeError),  # a wrong type: TypeError since strict parsing
        ("n", 0, ValueError),
        ("n", 2.5, TypeError),
        ("n", "4", TypeError),
        ("epsilon", 0.0, ValueError),
        ("epsilon", -0.5, ValueError),
        ("epsilon", "0.5", TypeError),
        ("sensitivity", 0.0, ValueError),
        ("family", "weibull", ValueError),
        ("family_params", {"categories": 1}, ValueError),
        ("family_params", {"categories": 3, "trials": 2}, TypeError),
        ("mechanism", "gaussian", ValueError),
    ],
)
def test_from_json_rejects_bad_field_values(doc, field, bad, error):
    doc[field] = bad
    with pytest.raises(error):
        Release.from_json(json.dumps(doc))


def test_equality_and_hash():
    a = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=0.5, rng=3)
    b = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=0.5, rng=3)
    c = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=0.5, rng=4)
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2
    assert a != "release" and a != a.to_dict()
    for change in [{"n": 4}, {"epsilon": 0.6}, {"sensitivity": 2.0}, {"clamped": True}]:
        other = dataclasses.replace(a, **change)
        assert other != a
    # Bounds of a bounded family are its domain; a window's bounds are part of the key.
    w = pmdp.release([1.0, 2.0], pm.Exponential, epsilon=0.5, bounds=(0.0, 3.0), rng=3)
    assert dataclasses.replace(w, bounds=(0.0, 4.0), sensitivity=4.0) != w
    zero = Release(value=0.0, n=1, epsilon=1.0, sensitivity=1.0, bounds=(0, 1), family="bernoulli")
    negzero = dataclasses.replace(zero, value=-0.0)
    assert zero == negzero and hash(zero) == hash(negzero)


def test_releases_of_different_families_differ():
    a = Release(value=1.0, n=1, epsilon=1.0, sensitivity=1.0, bounds=(0, 1), family="bernoulli")
    b = Release(
        value=1.0,
        n=1,
        epsilon=1.0,
        sensitivity=1.0,
        bounds=(0, 1),
        family="binomial",
        family_params={"trials": 1},
    )
    assert a != b


def test_release_get_family_round_trip(rel):
    fam = rel.get_family()
    assert fam.name == rel.family
    assert fam.params() == dict(rel.family_params)
    assert rel.scale == rel.sensitivity / rel.epsilon


@pytest.mark.parametrize("bounds", [[0.0], [0.0, 1.0, 2.0], [], [2.0, 0.0], [float("nan"), 2.0]])
def test_from_json_rejects_malformed_bounds(doc, bounds):
    doc["bounds"] = bounds
    with pytest.raises(ValueError, match="bounds"):
        Release.from_dict(doc)


def test_release_record_refuses_less_noise_than_the_family_needs():
    with pytest.raises(ValueError, match=r"sensitivity must be >= 2\.0"):
        pmdp.Release(
            value=[1.0, 2.0, 3.0],
            n=6,
            epsilon=1.0,
            sensitivity=1.0,
            bounds=(0, 2),
            family="categorical",
            family_params={"categories": 3},
        )
