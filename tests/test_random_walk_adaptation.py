"""The windows of the random walk's adaptation, and the end of tuning."""

import numpy as np
import pytest

from pymc_dp.regression.kernels import adaptation
from pymc_dp.regression.kernels.adaptation import FIRST_WINDOW, RandomWalkAdaptation


def _adapted(states: np.ndarray) -> RandomWalkAdaptation:
    """An adaptation that saw ``states`` ``(iterations, batch, k)``, their first two coordinates
    as moments too."""
    ad = RandomWalkAdaptation(np.zeros(states.shape[1:]), initial_sd=np.ones(states.shape[-1]))
    for s in states:
        ad.update(s, moments=s[..., :2])
    return ad


def _shrunk_cov(states: np.ndarray) -> np.ndarray:
    """The window covariance :class:`RandomWalkAdaptation` sets from ``states``."""
    sample = np.array([np.cov(states[:, b].T) for b in range(states.shape[1])])
    weight = len(states) / (len(states) + 5.0)
    return weight * sample + (1.0 - weight) * 1e-3 * np.eye(states.shape[-1])


@pytest.fixture
def states():
    rng = np.random.default_rng(7)
    return rng.normal(size=(100, 2, 3)) * [1.0, 2.0, 3.0] + [0.0, 1.0, 2.0]


def test_a_short_last_window_is_pooled_with_the_one_before(states):
    """Windows close at 25 and 75 iterations; at 100 the last holds 25 states, fewer than the
    50 before it, so the two windows' 75 states set the centre and covariances exactly (as if
    the window before had run to the end of tuning)."""
    ad = _adapted(states)
    ad.close_window()
    pooled = states[FIRST_WINDOW:]
    np.testing.assert_allclose(ad.center, pooled.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ad.cov, _shrunk_cov(pooled), rtol=1e-12)
    np.testing.assert_allclose(ad.moment_mean, pooled[..., :2].mean(axis=0), rtol=1e-12)
    moment_cov = np.array([np.cov(pooled[:, b, :2].T) for b in range(2)])  # no shrinkage
    np.testing.assert_allclose(ad.moment_cov, moment_cov, rtol=1e-12)


def test_a_last_window_as_long_as_the_one_before_stands_alone(states):
    """At 130 iterations the last window holds 55 states, more than the 50 before it: alone."""
    rng = np.random.default_rng(8)
    more = np.concatenate([states, rng.normal(size=(30, 2, 3))])
    ad = _adapted(more)
    ad.close_window()
    np.testing.assert_allclose(ad.center, more[75:].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ad.cov, _shrunk_cov(more[75:]), rtol=1e-12)


def test_without_pooling_the_last_window_stands_alone(states, monkeypatch):
    """``POOL_SHORT_LAST_WINDOW = False`` (the benchmarks' baseline) keeps the rule before."""
    monkeypatch.setattr(adaptation, "POOL_SHORT_LAST_WINDOW", False)
    ad = _adapted(states)
    ad.close_window()
    np.testing.assert_allclose(ad.center, states[75:].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ad.cov, _shrunk_cov(states[75:]), rtol=1e-12)


def test_a_window_below_the_minimum_is_left_open(states):
    """Ten states after the window closed at 75 are too few to close: the covariance of the
    window before stays, and so does the tuned scale."""
    ad = _adapted(states[:85])
    cov, scale = ad.cov.copy(), ad.log_scale.copy()
    ad.close_window()
    np.testing.assert_array_equal(ad.cov, cov)
    np.testing.assert_array_equal(ad.log_scale, scale)
