"""Compiling and sampling every family's model prints nothing at ERROR level (issue 18, item 6).

The issue reported ~1 100 lines of ``ERROR (pytensor.graph.rewriting.basic): Rewrite failure``
while a model with a known-σ Normal or LogNormal record compiled. Each test builds the family's
model (:func:`pymc_dp.model.ready_made.build_model`), lets ``pm.sample`` compile its step methods
and take a few draws, and checks both the log records (any logger, ERROR and above) and what reached
the terminal. The known-σ Normal and LogNormal models and the cheap bounded ones run in the default
suite; every family under both methods runs in the slow one (about 5 minutes measured).
"""

import logging

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.model.ready_made import build_model

_RNG = np.random.default_rng(3)
_Z = _RNG.normal(1.0, 0.8, size=300)
FAMILIES = {
    "bernoulli": (pm.Bernoulli, _RNG.binomial(1, 0.3, 300), {}),
    "binomial": (pm.Binomial, _RNG.binomial(5, 0.3, 300), {"trials": 5}),
    "categorical": (pm.Categorical, _RNG.choice(3, size=300), {"categories": 3}),
    "exponential": (pm.Exponential, _RNG.exponential(1.0, 300), {"bounds": (0.2, 3.0)}),
    "gamma": (pm.Gamma, _RNG.gamma(2.5, 1.0, 300), {"bounds": (0.5, 6.0), "alpha": 2.5}),
    "poisson": (pm.Poisson, _RNG.poisson(3.0, 300), {"bounds": (0, 8)}),
    "geometric": (pm.Geometric, _RNG.geometric(0.3, 300), {"bounds": (1, 8)}),
    "normal-known-sigma": (pm.Normal, _Z, {"bounds": (-1.0, 3.0), "sigma": 0.8}),
    "lognormal-known-sigma": (pm.LogNormal, np.exp(_Z), {"bounds": (0.5, 8.0), "sigma": 0.8}),
    "normal": (pm.Normal, _Z, {"bounds": (-1.0, 3.0)}),
    "lognormal": (pm.LogNormal, np.exp(_Z), {"bounds": (0.5, 8.0)}),
}
FAST = {
    ("normal-known-sigma", "auto"),
    ("lognormal-known-sigma", "auto"),
    ("binomial", "auto"),
    ("binomial", "augmented"),
    ("categorical", "augmented"),
}
CASES = [
    pytest.param(name, method, marks=() if (name, method) in FAST else pytest.mark.slow)
    for name in FAMILIES
    for method in ("auto", "augmented")
]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.mark.parametrize(("name", "method"), CASES)
def test_compiling_and_sampling_prints_no_error(name, method, capfd):
    cls, x, settings = FAMILIES[name]
    rel = pmdp.release(x, cls, epsilon=1.0, rng=4, **settings)
    handler = _Collect()
    loggers = [logging.getLogger(), logging.getLogger("pytensor"), logging.getLogger("pymc")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        model = build_model(rel, method=method)
        with model:
            idata = pm.sample(
                tune=5,
                draws=5,
                chains=1,
                random_seed=1,
                progressbar=False,
                compute_convergence_checks=False,
            )
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    printed = capfd.readouterr()
    errors = [f"{r.name}: {r.getMessage()[:200]}" for r in handler.records]
    assert not errors, f"{len(errors)} ERROR records, first: {errors[0]}"
    lines = (printed.out + printed.err).splitlines()
    assert not [line for line in lines if "ERROR" in line or "Rewrite failure" in line]
    for var in idata.posterior.data_vars:
        assert np.all(np.isfinite(idata.posterior[var].values)), var
