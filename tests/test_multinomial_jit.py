"""The compiled exact multinomial sums against the NumPy kernels they mirror."""

import numpy as np
import pytest

from pymc_dp.kernels.exact_counts import (
    NoiseLaw,
    multinomial_expected_counts,
    multinomial_log_likelihood,
)
from pymc_dp.kernels.multinomial_jit import (
    multinomial_expected_counts_jit,
    multinomial_log_likelihood_jit,
)


def _cases(seed, count):
    """Random releases: K = 2–5, n = 1–499, every noise kind, scales 0.3–200, y near s or far."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        k, n = int(rng.integers(2, 6)), int(rng.integers(1, 500))
        p = rng.dirichlet(np.ones(k) * rng.choice([0.3, 1.0, 5.0]))
        kind = str(rng.choice(["laplace", "discrete-laplace", "discrete-gaussian"]))
        b = float(rng.choice([0.3, 1.0, 2.0, 20.0, 200.0]))
        y = rng.multinomial(n, p) + rng.normal(0.0, b, size=k) * rng.choice([1.0, 5.0, 50.0])
        yield (y if kind == "laplace" else np.round(y)), p, n, NoiseLaw(kind, b)


def test_compiled_sums_equal_the_numpy_kernels():
    """80 seeded releases (some with y 50 noise scales away, where the convolutions' tails
    underflow and are recomputed in log space): the log likelihood within 1e-12 relative, the
    expected counts within 1e-12 · n."""
    for y, p, n, law in _cases(0, 80):
        want = multinomial_log_likelihood(y, p, n, law)
        got = multinomial_log_likelihood_jit(y, p, n, law)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(
            multinomial_expected_counts_jit(y, p, n, law),
            multinomial_expected_counts(y, p, n, law),
            rtol=0,
            atol=1e-12 * n,
        )


def test_an_empty_category_has_no_counts():
    law = NoiseLaw("laplace", 2.0)
    y, p = np.array([10.3, -1.2, 30.5]), np.array([0.3, 0.0, 0.7])
    counts = multinomial_expected_counts_jit(y, p, 40, law)
    assert counts[1] == 0.0 and counts.sum() == pytest.approx(40.0, rel=1e-12)
    assert multinomial_log_likelihood_jit(y, p, 40, law) == pytest.approx(
        multinomial_log_likelihood(y, p, 40, law), rel=1e-12
    )
