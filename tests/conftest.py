import os
import random
import signal
import threading
import time

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp

# PyMC's numpyro and blackjax samplers map chains over host devices, which pymc.sampling.jax asks
# XLA for when it is imported (XLA_FLAGS). A test that compiles a JAX function first would start
# XLA with one device, and a later JAX sampler in the same process would fail on two chains
# ("cannot select an axis to squeeze out"). Ask as PyMC does, before any test starts XLA.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        ["--xla_force_host_platform_device_count=100", os.environ.get("XLA_FLAGS", "")]
    ).strip()

# CI runs the slow studies in a time box (.ci/run sets this): each worker may spend this many
# seconds on them. A study still running when the box closes is stopped (SIGALRM) and reported
# as skipped, and later ones are skipped, each with the reason; so growth in the studies can never
# push CI past its limit. Unset, as in `pytest -m slow`, every slow test runs to the end.
_SLOW_BUDGET_S = os.environ.get("PYMC_DP_SLOW_BUDGET_S")
_START = time.monotonic()
# A box reaches only the first few studies, so CI shuffles them with a seed that changes on every
# commit (PYMC_DP_SLOW_SEED: the commit count): successive runs cover every study in turn. The
# backend box runs its checks of every model first (JAX, nutpie), then the shuffled matrix of
# models by samplers (tests/test_backends.py), which it does not reach in full.
_SLOW_SEED = os.environ.get("PYMC_DP_SLOW_SEED")

# A family declared outside pymc_dp (tests/test_family_plugin.py imports it): defining its class
# registers it, so --doctest-modules must not import it for every other test to see.
collect_ignore = ["negbinomial_family.py"]
_BOX_REASON = (
    "the CI time box for slow studies ({} s per worker) is spent; `pytest -m slow` runs every one"
)


class _TimeBoxClosed(BaseException):
    """Raised in a slow study when the time box closes (not an Exception: nothing catches it)."""


def _box_left(item) -> float | None:
    """Seconds left in the slow-study time box for ``item``, or None when there is no box."""
    if not _SLOW_BUDGET_S or item.get_closest_marker("slow") is None:
        return None
    return float(_SLOW_BUDGET_S) - (time.monotonic() - _START)


def pytest_collection_modifyitems(config, items):
    if not (_SLOW_BUDGET_S and _SLOW_SEED):
        return

    def shuffled(item):
        if item.get_closest_marker("backends"):
            return item.originalname == "test_every_model_with_every_backend"
        return item.get_closest_marker("slow") is not None

    studies = [item for item in items if shuffled(item)]
    random.Random(int(_SLOW_SEED)).shuffle(studies)
    items[:] = [item for item in items if not shuffled(item)] + studies


def pytest_runtest_setup(item):
    left = _box_left(item)
    if left is not None and left <= 0:
        pytest.skip(_BOX_REASON.format(_SLOW_BUDGET_S))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    left = _box_left(item)
    if left is None or threading.current_thread() is not threading.main_thread():
        return (yield)
    closed = []

    def close(signum, frame):
        closed.append(True)
        raise _TimeBoxClosed

    previous = signal.signal(signal.SIGALRM, close)
    signal.setitimer(signal.ITIMER_REAL, max(left, 0.01))
    try:
        return (yield)
    except BaseException:
        # Raised inside compiled code the signal can surface wrapped (SystemError); the flag
        # says whether the box closed, whatever the exception's type.
        if closed:
            pytest.skip(_BOX_REASON.format(_SLOW_BUDGET_S) + " (this study was stopped)")
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
    """``pm.sample`` in the context model, without progress bars or convergence warnings.

    Chains run in this process unless ``cores`` says otherwise: the test workers already use
    every core, and a chain process must unpickle (on PyMC 6 reload from Numba's cache) every
    compiled function first. PyMC seeds each chain the same way either way.
    """
    kwargs.setdefault("cores", 1)
    return pm.sample(progressbar=False, compute_convergence_checks=False, **kwargs)


def scalar_op_names(fn) -> set[str]:
    """The class names of a compiled function's scalar operations, inside fused Composites too:
    whether a backend kept a compiled kernel or took its graph form."""
    names = set()
    for node in fn.maker.fgraph.apply_nodes:
        scalar = getattr(node.op, "scalar_op", None)
        inner = getattr(scalar, "fgraph", None)  # a fused Composite
        names |= {
            type(op).__name__ for op in ([n.op for n in inner.apply_nodes] if inner else [scalar])
        }
    return names


@pytest.fixture
def graph_forms_on_jax(monkeypatch):
    """JAX as it is where the kernels' XLA custom calls cannot be built: the graph forms."""
    from pymc_dp.likelihoods import xla_kernels

    kernels = {xla_kernels.kernel_of(cls).name for cls in xla_kernels.registered()}
    monkeypatch.setattr(xla_kernels, "_targets", dict.fromkeys(kernels))
