"""The private window of a real release is chosen by OpenDP from exact candidate counts.

Issue 14 asks for vetted sampling in every release that is not a study; the private window
was the last floating-point draw of a real release. Issue 16 asks for PrivateQuantile's counts
to run on the engine (the engine tests are in tests/test_frames.py).
"""

import json

import numpy as np
import polars as pl
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.curator.private_window import resolve_candidates
from pymc_dp.mechanisms import vetted
from pymc_dp.mechanisms.private_quantile import (
    linear_candidates,
    log_candidates,
    quantile_from_counts,
    quantile_scores,
)

RNG = np.random.default_rng(20261124)
X = RNG.normal(1.0, 2.0, 20_000)


def test_a_real_release_chooses_its_window_with_opendp_among_public_candidates(monkeypatch):
    calls = []
    real = vetted.noisy_min_index

    def spy(scores, *, sensitivity, epsilon):
        calls.append((len(scores), sensitivity, epsilon))
        return real(scores, sensitivity=sensitivity, epsilon=epsilon)

    monkeypatch.setattr(vetted, "noisy_min_index", spy)
    rel = pmdp.release(
        X, pm.Normal, epsilon=1.0, bounds="private", bounds_range=(-20.0, 20.0), bounds_share=0.5
    )
    # Two quantiles at ε/2 each of the window's share, over 1025 candidates, q = 1/40, 39/40.
    assert calls == [(1025, 40, 0.25), (1025, 40, 0.25)]
    assert rel.bounds_mechanism == "linear-opendp" and rel.mechanism == "discrete-laplace"
    grid = linear_candidates(-20.0, 20.0)
    assert set(rel.bounds) <= set(grid.tolist())
    assert pmdp.Release.from_json(rel.to_json()) == rel


def test_the_vetted_window_finds_the_quantiles():
    """Rank error at most 2 ln(20 · 1025)/ε_q = 79 records (95 %) at ε_q = 0.25; the test allows
    four times that plus one grid step, which fails with probability far below 1e-6."""
    for _ in range(3):
        lo, hi = pmdp.release(
            X, pm.Normal, epsilon=1.0, bounds="private", bounds_range=(-20.0, 20.0),
            bounds_share=0.5,
        ).bounds  # fmt: skip
        ranks = np.searchsorted(np.sort(X), [lo, hi])
        assert abs(ranks[0] - 0.025 * X.size) <= 4 * 79 + 20
        assert abs(ranks[1] - 0.975 * X.size) <= 4 * 79 + 20


def test_log_candidates_for_a_range_that_spans_decades():
    """The log grid keeps the window near the data. OpenDP's noise is not seeded, so ε is set
    where the far candidates cannot win: at ε = 10 (0.5 per quantile) each candidate above the
    data has weight at most about e⁻³¹ against the ones at the 97.5 % quantile.
    At ε = 2 the upper end landed above 2000 in 12 of 300 releases (measured 2026-11-27)."""
    x = RNG.exponential(50.0, 5000)
    rel = pmdp.release(
        x, pm.Exponential, epsilon=10.0, bounds="private", bounds_range=(0.0, 10_000.0)
    )
    assert rel.bounds_mechanism == "log-opendp"
    assert set(rel.bounds) <= set(log_candidates(0.0, 10_000.0).tolist())
    assert rel.bounds[1] < 2000  # the log grid does not pull the window towards 10⁴


def test_studies_keep_their_seeded_float_window():
    options = dict(epsilon=1.0, bounds="private", bounds_range=(-20.0, 20.0), rng=3)
    first = pmdp.release(X, pm.Normal, **options)
    assert first == pmdp.release(X, pm.Normal, **options)
    assert first.bounds_mechanism == "gaps-float"
    linear = pmdp.release(X, pm.Normal, bounds_candidates="linear", **options)
    assert linear.bounds_mechanism == "linear-float"


def test_smiths_gaps_are_refused_in_a_real_release():
    with pytest.raises(ValueError, match=r"bounds_candidates='gaps'.*seeded studies only"):
        pmdp.release(
            X, pm.Normal, epsilon=1.0, bounds="private", bounds_range=(-20.0, 20.0),
            bounds_candidates="gaps",
        )  # fmt: skip
    with pytest.raises(ValueError, match="bounds_candidates must be one of"):
        resolve_candidates("uniform", (0.0, 1.0), study=True)


def test_a_bad_record_in_a_lazy_frame_stops_before_anything_is_spent():
    budget = pmdp.PrivacyBudget(epsilon=2.0)
    for values, match in (
        ([1.0, -3.0, 2.0], "exponential domain.*the first at index 1"),
        ([1.0, 2.0, None], "1 record.*the first at index 2.*missing"),
    ):
        with pytest.raises(ValueError, match=match) as err:
            pmdp.release(
                pl.DataFrame({"x": values}).lazy(), pm.Exponential, column="x", epsilon=1.0,
                bounds="private", bounds_range=(0.0, 100.0), budget=budget,
            )  # fmt: skip
        assert "-3" not in str(err.value)
    assert budget.spent == 0.0


def test_bounds_mechanism_is_parsed_strictly():
    rel = pmdp.release(
        X, pm.Normal, epsilon=1.0, bounds="private", bounds_range=(-20.0, 20.0), rng=0
    )
    doc = rel.to_dict()
    for bad, error in ((True, TypeError), (3, TypeError), ("exponential", ValueError)):
        with pytest.raises(error, match="bounds_mechanism"):
            pmdp.Release.from_dict({**doc, "bounds_mechanism": bad})
    with pytest.raises(ValueError, match="needs bounds_epsilon > 0"):
        public = pmdp.release(X[:500], pm.Normal, epsilon=1.0, bounds=(-5, 7), rng=0)
        pmdp.Release.from_dict({**public.to_dict(), "bounds_mechanism": "linear-opendp"})
    older = {k: v for k, v in doc.items() if k != "bounds_mechanism"}
    assert pmdp.Release.from_json(json.dumps(older)).bounds_mechanism is None


def test_quantile_scores_are_exact_integers_with_the_quantiles_denominator():
    scores, den = quantile_scores([0, 10, 25, 40], 40, 0.025)
    assert den == 40 and scores == [1 * 40 - 0, abs(400 - 40), abs(1000 - 40), abs(1600 - 40)]
    _, den = quantile_scores([0], 10, 0.975)
    assert den == 40
    # The best candidate wins almost surely when ε is large.
    below = np.array([0, 5, 20, 35, 40])
    assert {quantile_from_counts(below, 40, 0.5, epsilon=50.0, rng=None) for _ in range(20)} == {2}
