"""The per-batch kernel of every release: exact totals, the fast block path equal to an oracle.

:meth:`FamilyPlan.batch_totals` checks and sums clean batches of windowed families block by
block (``_fast_totals``); anything unclean goes through the full checks. Both must give the
totals of an independent oracle (each record in the window rounded to the grid with
:func:`pymc_dp.curator.fixed_point.quantise`, summed as Python integers), bit for bit, and a bad
batch the same error as the full checks.
"""

import numpy as np
import pymc as pm
import pytest

from pymc_dp.curator.exact_sums import _BLOCK, FamilyPlan, combine_totals
from pymc_dp.curator.fixed_point import quantise
from pymc_dp.families import get_family

RNG = np.random.default_rng(20261126)
N = 3 * _BLOCK + 123  # several blocks and a short one

CASES = [
    ("exponential", pm.Exponential, {}, (0.1, 1.5), lambda n: RNG.exponential(0.6, n)),
    ("exponential-upper", pm.Exponential, {}, (0.0, 2.0), lambda n: RNG.exponential(0.6, n)),
    ("gamma", pm.Gamma, {"alpha": 2.0}, (0.0, 3.0), lambda n: RNG.gamma(2.0, 0.5, n)),
    ("poisson-int", pm.Poisson, {}, (1, 9), lambda n: RNG.poisson(4.0, n)),
    ("poisson-float", pm.Poisson, {}, (1, 9), lambda n: RNG.poisson(4.0, n).astype(float)),
    ("geometric", pm.Geometric, {}, (1, 12), lambda n: RNG.geometric(0.3, n)),
    ("normal", pm.Normal, {}, (-2.5, 3.1), lambda n: RNG.normal(0.3, 1.2, n)),
    ("normal-sigma", pm.Normal, {"sigma": 1.2}, (-2.5, 3.1), lambda n: RNG.normal(0.3, 1.2, n)),
    ("lognormal", pm.LogNormal, {}, (0.2, 6.0), lambda n: RNG.lognormal(0.0, 0.8, n)),
    ("normal-inside", pm.Normal, {}, (-50.0, 50.0), lambda n: RNG.normal(0.0, 1.0, n)),
]
IDS = [case[0] for case in CASES]


def oracle(fam, window, x, quantum):
    inside = np.asarray(x, dtype=np.float64)
    inside = inside[(inside >= window[0]) & (inside <= window[1])]
    lower, upper = fam.latent_window(window)
    lo, hi = int(np.ceil(lower / quantum)), int(np.floor(upper / quantum))
    m = np.clip(quantise(fam.to_latent(inside), quantum), lo, hi)
    powers = [sum(int(v) ** (j + 1) for v in m) for j in range(fam.stat_size)]
    return tuple(powers)


@pytest.mark.parametrize(("name", "dist", "params", "window", "draw"), CASES, ids=IDS)
def test_block_kernel_equals_the_oracle_bit_for_bit(name, dist, params, window, draw):
    fam = get_family(dist, **params)
    plan = FamilyPlan.for_release(fam, window)
    x = draw(N)
    # Records exactly on the window's ends and on grid midpoints are rounded the same way.
    x[:4] = [window[0], window[1], window[0], window[1]]
    fast = plan.batch_totals(x)
    assert fast.problem is None and fast.n == N
    assert fast.totals == oracle(fam, window, x, plan.quantum)
    # The full path (records checked first) gives the same totals.
    assert plan.batch_totals(fam.validate_data(x), checked=True).totals == fast.totals
    # Splitting the records into batches changes nothing.
    parts = [plan.batch_totals(p) for p in np.array_split(x, 5)]
    assert combine_totals(parts) == (N, fast.totals)


@pytest.mark.parametrize(
    ("dist", "window"),
    [
        (pm.Exponential, (0.3, 0.30001)),  # neither end on the grid
        (pm.Normal, (-1e-3, 2.5)),
        (pm.LogNormal, (0.9, 1.1)),
        (pm.Poisson, (2, 2**50)),  # a coarse grid: q = 2**9
    ],
)
def test_records_at_far_and_next_to_the_window_ends_equal_the_oracle(dist, window):
    """The block kernel rounds by adding 1.5 · 2**52 and zeroes records outside the window
    in place: records one ulp outside, on the ends, and far beyond (whose scaled value
    overflows) must give the oracle's totals."""
    fam = get_family(dist)
    plan = FamilyPlan.for_release(fam, window)
    a, b = map(float, window)
    x = np.clip(RNG.exponential(1.0, N) * (b - a) + a, a, b)
    edges = [a, b, np.nextafter(a, -np.inf), np.nextafter(b, np.inf), 1e300, b * 1e200]
    if getattr(fam, "discrete", False):
        x, edges = np.rint(x), [a, b, a - 1, b + 1, 2.0**53, b + 2**20]
    x[_BLOCK - 3 : _BLOCK + 3] = edges  # across a block boundary
    assert plan._fast_totals(x) is not None  # the block kernel, not the full checks
    fast = plan.batch_totals(x)
    assert fast.problem is None
    assert fast.totals == oracle(fam, window, x, plan.quantum)
    assert plan.batch_totals(fam.validate_data(x), checked=True).totals == fast.totals


@pytest.mark.parametrize(
    ("dist", "window", "bad", "match"),
    [
        (pm.Exponential, (0.0, 2.0), np.nan, "missing"),
        (pm.Exponential, (0.0, 2.0), np.inf, "NaN or infinite"),
        (pm.Exponential, (0.0, 2.0), -1.0, "exponential domain"),
        (pm.Poisson, (0, 9), 2.5, "whole numbers"),
        (pm.LogNormal, (0.5, 6.0), 0.0, "lognormal domain"),
    ],
)
def test_a_bad_record_in_any_block_is_named_as_the_full_checks_name_it(dist, window, bad, match):
    fam = get_family(dist)
    plan = FamilyPlan.for_release(fam, window)
    x = np.full(N, 1.0)
    where = 2 * _BLOCK + 7  # in a late block: earlier blocks were already summed
    x[where] = bad
    result = plan.batch_totals(x)
    assert result.problem is not None and result.problem == plan.check_batch(x)[1]
    assert result.problem.first in (where, None)  # None: a rule about the whole column
    with pytest.raises((TypeError, ValueError), match=match):
        combine_totals([result])


def test_clamping_and_bounded_families_take_the_full_path():
    fam = get_family(pm.Poisson)
    clamped = FamilyPlan.for_release(fam, (0, 9), clamp=True)
    x = np.array([3, 12, -2, 5])  # -2 is clamped to the domain's 0; 12 is outside the window
    assert clamped.batch_totals(x).totals == (3 + 0 + 5,)
    assert FamilyPlan.for_release(get_family(pm.Bernoulli), None).batch_totals(
        np.array([1, 0, 1])
    ).totals == (2,)


@pytest.mark.parametrize(
    ("dist", "params", "draw"),
    [
        (pm.Bernoulli, {}, lambda n: RNG.integers(0, 2, n)),
        (pm.Bernoulli, {}, lambda n: RNG.integers(0, 2, n).astype(bool)),
        (pm.Bernoulli, {}, lambda n: RNG.integers(0, 2, n).astype(np.float32)),
        (pm.Binomial, {"trials": 7}, lambda n: RNG.integers(0, 8, n).astype(np.uint16)),
        (pm.Categorical, {"categories": 5}, lambda n: RNG.integers(0, 5, n)),
        (pm.Categorical, {"categories": 5}, lambda n: RNG.integers(0, 5, n).astype(float)),
    ],
    ids=["bernoulli", "bernoulli-bool", "bernoulli-float32", "binomial-uint16", "categorical",
         "categorical-float"],
)  # fmt: skip
def test_count_kernel_equals_the_oracle_and_refuses_like_the_full_checks(dist, params, draw):
    fam = get_family(dist, **params)
    plan = FamilyPlan.for_release(fam, None)
    x = draw(N)
    values = np.asarray(x, dtype=np.int64)
    categories = params.get("categories")
    expected = (
        tuple(int((values == c).sum()) for c in range(categories))
        if categories
        else (int(sum(int(v) for v in values)),)
    )
    assert plan.batch_totals(x).totals == expected
    if x.dtype != bool:
        bad = x.astype(np.float64)
        bad[2 * _BLOCK] = 2.5  # fractional: the full checks name it
        result = plan.batch_totals(bad)
        assert result.problem == plan.check_batch(bad)[1] and result.problem.first == 2 * _BLOCK
        bad[2 * _BLOCK] = fam.domain[1] + 1  # beyond the domain
        result = plan.batch_totals(bad)
        assert result.problem == plan.check_batch(bad)[1] and result.problem.first == 2 * _BLOCK
