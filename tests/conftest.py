import os
import time

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp

# CI runs the slow studies in a time box (.ci/run sets this): once a worker has spent this many
# seconds, its remaining slow tests are skipped with a reason, so growth in the studies can
# never push CI past its limit. Unset, as in `pytest -m slow`, every slow test runs.
_SLOW_BUDGET_S = os.environ.get("PYMC_DP_SLOW_BUDGET_S")
_START = time.monotonic()


def pytest_runtest_setup(item):
    if _SLOW_BUDGET_S and item.get_closest_marker("slow") is not None:
        if time.monotonic() - _START > float(_SLOW_BUDGET_S):
            pytest.skip(
                f"the CI time box for slow studies ({_SLOW_BUDGET_S} s per worker) is spent; "
                "`pytest -m slow` runs every one"
            )


@pytest.fixture(scope="session")
def binomial_release():
    x = np.random.default_rng(11).binomial(5, 0.3, size=1000)
    return pmdp.release(x, pm.Binomial, epsilon=0.1, trials=5, rng=12)


@pytest.fixture(scope="session")
def categorical_release():
    x = np.random.default_rng(13).choice(3, p=[0.2, 0.5, 0.3], size=1500)
    return pmdp.release(x, pm.Categorical, epsilon=0.2, categories=3, rng=14)


def binomial_model(rel, alpha=3.0, beta=5.0, method="auto"):
    """p ~ Beta(alpha, beta) and a Binomial release; ``method="augmented"`` for Algorithm 1."""
    with pm.Model() as model:
        p = pm.Beta("p", alpha, beta)
        pmdp.NoisySuffStat(
            "y",
            pm.Binomial.dist(n=rel.family_params["trials"], p=p),
            release=rel,
            method=method,
        )
    return model


def categorical_model(rel, alpha=(2.0, 2.0, 2.0), method="auto"):
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.asarray(alpha))
        pmdp.NoisySuffStat("y", pm.Categorical.dist(p=p), release=rel, method=method)
    return model


def sample(**kwargs):
    """``pm.sample`` in the context model, without progress bars or convergence warnings."""
    return pm.sample(progressbar=False, compute_convergence_checks=False, **kwargs)
