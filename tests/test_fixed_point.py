import math

import numpy as np
import pytest

from pymc_dp.curator.fixed_point import (
    MAX_TOTAL,
    choose_quantum,
    exact_total,
    quantise,
    quantised_sensitivity,
)


def test_quantum_is_power_of_two_below_scale():
    for scale in (1e-6, 0.3, 1.0, 7.5, 1e6):
        q = choose_quantum(t_bounds=[[0, 1]], n=100, noise_scale=scale)
        assert math.frexp(q)[0] == 0.5
        reference = min(scale, 1.0)  # the range of t, when narrower than the noise
        assert q <= reference / 1024 < 2 * q


def test_quantum_keeps_the_rounding_small_against_the_sensitivity_at_small_epsilon():
    # Δ = 2 (range of t), ε = 1e-3: b = 2000, but q follows the range: d·q <= Δ / 1024.
    q = choose_quantum(t_bounds=[[-1, 1]], n=100, noise_scale=2000.0)
    assert q <= 2 / 1024
    # A tiny ε: the noise stays within 2**50 quanta.
    q = choose_quantum(t_bounds=[[-1, 1]], n=100, noise_scale=1e30)
    assert 1e30 / q <= 2**50


def test_quantum_overflow_guard_coarsens():
    q = choose_quantum(t_bounds=[[-1e300, 1e300]], n=10**9, noise_scale=1e-3)
    assert 10**9 * (1e300 / q) < MAX_TOTAL
    assert 10**9 * (1e300 / (q / 2)) >= MAX_TOTAL
    q = choose_quantum(t_bounds=[[0, 1e12]], n=10**7, noise_scale=1.0)
    assert 10**7 * 1e12 / q < MAX_TOTAL <= 10**7 * 1e12 / (q / 2)


def test_quantum_depends_on_public_values_only():
    # Same public inputs, same quantum: the function takes no data.
    a = choose_quantum(t_bounds=np.array([[0.0, 2.0], [0.0, 4.0]]), n=50, noise_scale=2.0)
    b = choose_quantum(t_bounds=[[0.0, 2.0], [0.0, 4.0]], n=50, noise_scale=2.0)
    assert a == b


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"t_bounds": [0, 1], "n": 5, "noise_scale": 1.0}, ValueError),
        ({"t_bounds": [[1, 0]], "n": 5, "noise_scale": 1.0}, ValueError),
        ({"t_bounds": [[0, np.inf]], "n": 5, "noise_scale": 1.0}, ValueError),
        ({"t_bounds": [[0, 1]], "n": 0, "noise_scale": 1.0}, TypeError),
        ({"t_bounds": [[0, 1]], "n": 5.0, "noise_scale": 1.0}, TypeError),
        ({"t_bounds": [[0, 1]], "n": 5, "noise_scale": 0.0}, ValueError),
    ],
)
def test_choose_quantum_rejects(kwargs, error):
    with pytest.raises(error):
        choose_quantum(**kwargs)


def test_quantise_rounds_half_to_even_and_is_int64():
    q = quantise(np.array([[0.5, 1.5, 2.5, -0.5]]), 1.0)
    assert q.dtype == np.int64
    np.testing.assert_array_equal(q, [[0, 2, 2, -0]])


def test_quantise_error_within_half_quantum():
    rng = np.random.default_rng(3)
    t = rng.normal(size=(1000, 2)) * 10
    q = 2.0**-5
    err = quantise(t, q) * q - t
    assert np.max(np.abs(err)) <= q / 2


@pytest.mark.parametrize("quantum", [0.0, 3.0, -1.0, np.nan])
def test_quantise_rejects_bad_quantum(quantum):
    with pytest.raises(ValueError, match="quantum"):
        quantise([[1.0]], quantum)


def test_quantise_refuses_without_quoting_values():
    with pytest.raises(ValueError) as info:
        quantise([[123456.789e60]], 1.0)
    assert "123456" not in str(info.value)


def test_exact_total_beyond_int64():
    rows = np.full((10, 2), 2**61, dtype=np.int64)
    assert exact_total(rows) == (10 * 2**61, 10 * 2**61)
    assert exact_total(np.zeros((0, 3), dtype=np.int64)) == (0, 0, 0)
    with pytest.raises(TypeError):
        exact_total([[0.5]])


def test_exact_total_matches_python_sum():
    rng = np.random.default_rng(4)
    rows = rng.integers(-(2**40), 2**40, size=(5000, 3))
    assert exact_total(rows) == tuple(int(v) for v in rows.astype(object).sum(axis=0))


def test_quantised_sensitivity_covers_worst_rounding():
    # Two records whose exact statistics differ by Δ (L1) can differ by Δ/q + d after rounding.
    q, d = 0.25, 2
    t1 = np.array([0.125 + 1e-9, 0.125 + 1e-9])  # rounds up
    t2 = np.array([0.125 + 1.0 - 1e-9, 0.125 - 1e-9 - 1.0])  # rounds away
    delta = float(np.abs(t1 - t2).sum())
    moved = np.abs(quantise(t1, q) - quantise(t2, q)).sum()
    assert moved <= quantised_sensitivity(delta, q, d, "l1")
    assert quantised_sensitivity(1.0, 1.0, 4, "l2") == 3.0
    with pytest.raises(ValueError, match="norm"):
        quantised_sensitivity(1.0, 1.0, 1, "linf")
    with pytest.raises(TypeError, match="d must"):
        quantised_sensitivity(1.0, 1.0, 0, "l1")
