"""The count vectors within the noise's reach of y (:mod:`pymc_dp.kernels.count_window`)."""

import itertools

import numpy as np
import pytest

from pymc_dp.kernels.count_window import kept_counts, nearest_counts
from pymc_dp.kernels.exact_counts import NOISE_KINDS, NOISE_TAIL, NoiseLaw


def _simplex(n: int, k: int) -> np.ndarray:
    """Every count vector of k categories summing to n."""
    head = np.array(list(itertools.product(range(n + 1), repeat=k - 1)), dtype=float)
    head = head.reshape(-1, k - 1)
    head = head[head.sum(axis=1) <= n]
    return np.column_stack([head, n - head.sum(axis=1)])


def _brute_force(y: np.ndarray, n: int, noise: NoiseLaw) -> set:
    s = _simplex(n, y.shape[0])
    terms = np.sum(noise.logpdf(y[None, :] - s), axis=1)
    return set(map(tuple, s[terms >= terms.max() - NOISE_TAIL]))


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_the_kept_vectors_are_those_within_the_tail_of_the_largest_noise_term(kind):
    """Against every vector of the simplex: K = 2 to 5, noise narrow to wide against n, y on
    and off the simplex (its sum away from n, components below 0 or above n), n = 0."""
    rng = np.random.default_rng(31)
    cases = 0
    for k, n, b in itertools.product((2, 3, 4, 5), (0, 1, 7, 15), (0.05, 0.3, 1.0)):
        if k == 5 and n > 7 and b > 0.3:
            continue  # the brute force's simplex stays small
        s = rng.multinomial(n, rng.dirichlet(np.ones(k))).astype(float)
        for shift in (0.0, 3.0, -2.5):
            y = s + rng.laplace(0.0, 2.0 * b, k) + shift
            y = np.round(y) if kind != "laplace" else y
            got = kept_counts(y, n, NoiseLaw(kind, b), 10**6)
            assert set(map(tuple, got)) == _brute_force(y, n, NoiseLaw(kind, b)), (k, n, b, y)
            assert len(got) == len(set(map(tuple, got)))
            cases += 1
    assert cases == 3 * (4 * 4 * 3 - 1)


def test_large_n_keeps_a_ball_around_y_not_a_box():
    """n = 10⁵, K = 4, Laplace b = 2: the kept set is the vectors within 40 nats of the best,
    checked against the box of three counts within 40 b of y (4.2·10⁶ vectors) filtered by the
    same rule, and is under a tenth of that box."""
    rng = np.random.default_rng(32)
    noise = NoiseLaw("laplace", 2.0)
    n = 100_000
    y = rng.multinomial(n, [0.001, 0.3, 0.3, 0.399]) + rng.laplace(0.0, 2.0, 4)
    got = kept_counts(y, n, noise, 10**6)
    axes = [np.arange(np.ceil(v - 80.0), np.floor(v + 80.0) + 1) for v in y[:3]]
    head = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    box = np.column_stack([head, n - head.sum(axis=1)])
    box = box[np.all(box >= 0, axis=1)]
    terms = np.sum(noise.logpdf(y[None, :] - box), axis=1)
    want = box[terms >= terms.max() - NOISE_TAIL]
    assert set(map(tuple, got)) == set(map(tuple, want))
    assert 10 * len(got) < len(box)


def test_the_budget_is_kept_exactly():
    rng = np.random.default_rng(33)
    y = rng.multinomial(50, [0.2, 0.3, 0.5]) + rng.laplace(0.0, 0.5, 3)
    noise = NoiseLaw("laplace", 0.5)
    size = len(kept_counts(y, 50, noise, 10**6))
    assert len(kept_counts(y, 50, noise, size)) == size
    assert kept_counts(y, 50, noise, size - 1) is None


@pytest.mark.parametrize(
    ("y", "n"),
    [([3.2, 0.4, 6.1], 10), ([-5.0, 2.0, 40.0], 12), ([0.0, 0.0], 0), ([1e3, -1e3, 7.0], 9)],
)
def test_nearest_counts_is_a_vector_of_the_simplex(y, n):
    s = nearest_counts(y, n)
    assert s.sum() == n and np.all(s >= 0) and np.all(s == np.round(s))
