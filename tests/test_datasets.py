"""The shipped cirrhosis data set: loader, values against the x20 listing, package data."""

import fnmatch
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import pymc_dp
from pymc_dp.datasets import CIRRHOSIS_BOUNDS, load_cirrhosis

# Rows of the source listing (Brownlee 1965 / Spaeth 1991 x20): state, urban population, late
# births, wine, liquor, cirrhosis death rate.
SOURCE_ROWS = {
    1: (44, 33.2, 5, 30, 41.2),
    20: (81, 53.8, 31, 79, 129.9),
    36: (57, 53.0, 28, 149, 122.5),
    46: (58, 43.8, 13, 57, 55.5),
}


def test_raw_values_match_the_source_listing():
    wine = load_cirrhosis("wine", scaled=False)
    liquor = load_cirrhosis("liquor", scaled=False)
    assert wine.x.shape == wine.y.shape == liquor.x.shape == (46,)
    for state, (_, _, w, lq, cirrhosis) in SOURCE_ROWS.items():
        assert wine.x[state - 1] == w
        assert liquor.x[state - 1] == lq
        assert wine.y[state - 1] == cirrhosis
    assert wine.y.sum() == pytest.approx(2920.7)  # column total of the listing


def test_scaled_values_use_the_fixed_public_bounds():
    raw, scaled = load_cirrhosis(scaled=False), load_cirrhosis()
    assert (raw.x_bounds, raw.y_bounds) == (CIRRHOSIS_BOUNDS["wine"], (0.0, 150.0))
    assert (scaled.x_bounds, scaled.y_bounds) == ((0.0, 1.0), (0.0, 1.0))
    np.testing.assert_allclose(scaled.x, raw.x / 40.0)
    np.testing.assert_allclose(scaled.y, raw.y / 150.0)
    # Public bounds, not the data's range: the scaled data do not reach 0 or 1.
    assert 0 < scaled.x.min() and scaled.x.max() < 1 and scaled.y.max() < 1
    assert not scaled.x.flags.writeable
    assert np.corrcoef(scaled.x, scaled.y)[0, 1] == pytest.approx(0.8446, abs=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"covariate": "beer"}, ValueError, "covariate must be 'wine' or 'liquor'"),
        ({"scaled": 1}, TypeError, "scaled must be a bool"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        load_cirrhosis(**kwargs)


def test_csv_is_declared_package_data_and_carries_its_source():
    path = resources.files("pymc_dp.datasets").joinpath("cirrhosis.csv")
    text = path.read_text(encoding="utf-8")
    assert "Brownlee (1965)" in text and "x20" in text
    pyproject = Path(pymc_dp.__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.exists():  # an installed (non-editable) package: the file above was found
        return
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
    assert any(fnmatch.fnmatch("cirrhosis.csv", p) for p in patterns["pymc_dp.datasets"])
