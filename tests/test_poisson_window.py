"""The Poisson window's mass and edge probabilities as one compiled operation (poisson_window.py).

Checked: the C loop, the graph form (JAX/Numba) and SciPy against a direct sum over the window
(log q to 10⁻¹¹ absolute, ρ to 10⁻⁹ relative wherever the window holds more than 10⁻¹⁰, λ over
twelve decades, windows narrow, wide, far and without an upper edge); the Op's closed-form
gradient (and its second derivative) against finite differences; and a grouped model's logp and
gradient, with the operation and with the graph built before it, at random points.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from scipy import special, stats

import pymc_dp as pmdp
from pymc_dp.families import Poisson
from pymc_dp.families.poisson_window import (
    PoissonWindowScalar,
    poisson_window,
    poisson_window_graph,
)
from pymc_dp.families.truncated import LOG_TINY

WINDOWS = [(0, 40), (2, 9), (5, 60), (0, 0), (1, 1), (10, 10), (200, 400), (0, 3000), (7, np.inf)]


def reference(lam: float, lo: float, hi: float) -> list[float]:
    """[log q, ρ_l, ρ_h] by summing the window's pmf in log space."""
    law = stats.poisson(lam)
    if np.isfinite(hi):
        log_q = special.logsumexp(law.logpmf(np.arange(lo, hi + 1)))
    else:
        log_q = np.log(law.sf(lo - 1))
    if np.exp(log_q) <= 1e-10:
        return [LOG_TINY, 0.0, 0.0]
    rho_l = np.exp(law.logpmf(lo - 1) - log_q) if lo > 0 else 0.0
    rho_h = np.exp(law.logpmf(hi) - log_q) if np.isfinite(hi) else 0.0
    return [log_q, rho_l, rho_h]


def _compiled(lo: float, hi: float, graph: bool) -> pytensor.compile.Function:
    eta = pt.dvector("eta")
    outputs = poisson_window_graph(eta, lo, hi) if graph else poisson_window(eta, lo, hi)
    return pytensor.function([eta], outputs)


@pytest.mark.parametrize("window", WINDOWS)
def test_c_loop_and_graph_match_a_direct_sum_over_the_window(window):
    lo, hi = window
    lam = np.concatenate([np.geomspace(1e-8, 5e3, 120), [max(lo, 1e-3), lo + 0.5, min(hi, 1e4)]])
    with np.errstate(divide="ignore"):  # λ = 0 for the window {0}
        eta = np.log(lam)
    compiled = _compiled(lo, hi, graph=False)
    fgraph = compiled.maker.fgraph
    assert any(
        isinstance(getattr(n.op, "scalar_op", None), PoissonWindowScalar)
        for n in fgraph.apply_nodes
    )
    got = compiled(eta)
    graph = _compiled(lo, hi, graph=True)(eta)
    for i, lam_i in enumerate(lam):
        want = reference(lam_i, lo, hi)
        assert got[0][i] == pytest.approx(want[0], abs=1e-11, rel=1e-12), (lam_i, "log q")
        for j in (1, 2):
            assert got[j][i] == pytest.approx(want[j], rel=1e-9, abs=1e-300), (lam_i, j)
        # The graph's 1 - outside keeps about 1e-16/q of q.
        tol = max(1e-11, 1e-14 * np.exp(-want[0]))
        assert graph[0][i] == pytest.approx(want[0], abs=tol), (lam_i, "graph log q")


@pytest.mark.parametrize("window", [(0, 40), (3, 12), (7, np.inf)])
def test_the_closed_form_gradient_matches_finite_differences(window):
    lo, hi = window
    eta = pt.dvector("eta")
    outputs = poisson_window(eta, lo, hi)
    # First and second derivatives of a random combination of the three outputs.
    weights = np.array([0.7, -1.3, 2.1])
    total = sum(w * o for w, o in zip(weights, outputs)).sum()
    first = pytensor.grad(total, eta)
    second = pytensor.grad(first.sum(), eta)
    value = pytensor.function([eta], total, mode=Mode(linker="py", optimizer=None))
    grads = pytensor.function([eta], [first, second])
    h = 1e-5
    for lam in (0.05, 1.0, 4.0, 6.5, 11.0, 30.0, 80.0):
        if reference(lam, lo, hi)[0] <= -20.0:
            continue
        x = np.array([np.log(lam)])
        g1, g2 = grads(x)
        fd1 = (value(x + h) - value(x - h)) / (2 * h)
        fd2 = (value(x + h) - 2 * value(x) + value(x - h)) / h**2
        assert g1[0] == pytest.approx(fd1, rel=1e-6, abs=1e-8), lam
        assert g2[0] == pytest.approx(fd2, rel=1e-3, abs=1e-4), lam


def _grouped_model(graph_form: bool) -> pm.Model:
    rng = np.random.default_rng(31)
    sizes = rng.integers(20, 200, size=12)
    keys = [f"g{i}" for i in range(12)]
    lam = np.exp(np.log(5.0) + 0.4 * rng.normal(size=12))
    x = np.concatenate([rng.poisson(m, n) for m, n in zip(lam, sizes)])
    by = np.repeat(keys, sizes)
    rs = pmdp.release_grouped(
        x,
        pm.Poisson,
        by=by,
        groups=keys,
        sizes="public",
        bounds=(2, 15),
        epsilon=0.3,
        rng=np.random.default_rng(1),
    )
    with pm.Model(coords=rs.coords()) as model:
        mu = pm.Normal("mu", 1.5, 1.0)
        tau = pm.HalfNormal("tau", 0.5)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        dist = pm.Poisson.dist(mu=pm.math.exp(mu + tau * z))
        if graph_form:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr("pymc_dp.families.counts.poisson_window", poisson_window_graph)
                pmdp.NoisySuffStat("y", dist, release=rs, dims="group", likelihood="clt")
        else:
            pmdp.NoisySuffStat("y", dist, release=rs, dims="group", likelihood="clt")
    return model


def test_a_grouped_model_has_the_same_logp_and_gradient_as_with_the_graph():
    new, old = _grouped_model(False), _grouped_model(True)
    f_new = new.logp_dlogp_function(ravel_inputs=True)
    f_old = old.logp_dlogp_function(ravel_inputs=True)
    f_new.set_extra_values({})
    f_old.set_extra_values({})
    x0 = np.concatenate([np.ravel(v) for v in new.initial_point().values()])
    rng = np.random.default_rng(0)
    for scale in (0.0, 0.3, 1.0, 2.0):
        x = x0 + scale * rng.normal(size=x0.shape)
        lp_new, g_new = f_new(x)
        lp_old, g_old = f_old(x)
        assert lp_new == pytest.approx(lp_old, rel=1e-10)
        np.testing.assert_allclose(g_new, g_old, rtol=1e-9, atol=1e-9)


def test_the_family_moments_use_the_operation_for_the_centre_window():
    theta = pt.dscalar("theta")
    ((log_q, mu, sigma),) = Poisson().truncated_moments(theta, (0, 40), windows=("centre",))
    f = pytensor.function([theta], [log_q, mu[0], sigma[0, 0]])
    law = stats.poisson(5.0)
    ks = np.arange(0, 41)
    p = law.pmf(ks) / law.pmf(ks).sum()
    mean = (ks * p).sum()
    got = f(5.0)
    assert got[1] == pytest.approx(mean, rel=1e-12)
    assert got[2] == pytest.approx(((ks - mean) ** 2 * p).sum(), rel=1e-10)


def test_the_python_mirror_is_the_c_code():
    from pymc_dp.families.poisson_window import _log_factorials, _poisson_window_core

    for lo, hi in WINDOWS:
        lam = np.geomspace(1e-6, 5e3, 60)
        got = _compiled(lo, hi, graph=False)(np.log(lam))
        lg_l, lg_h = _log_factorials(float(max(lo, 0)), float(hi))
        for i, x in enumerate(np.log(lam)):
            mirror = _poisson_window_core(float(x), float(max(lo, 0)), float(hi), lg_l, lg_h)
            np.testing.assert_allclose(mirror, [o[i] for o in got], rtol=1e-12, atol=1e-300)


def test_numba_compiles_the_same_operation():
    pytest.importorskip("numba")
    eta = pt.dvector("eta")
    lam = np.geomspace(1e-3, 200.0, 40)
    for lo, hi in [(0, 40), (3, 12), (7, np.inf)]:
        outputs = poisson_window(eta, lo, hi)
        numba = pytensor.function([eta], outputs, mode="NUMBA")
        ops = [getattr(n.op, "scalar_op", n.op) for n in numba.maker.fgraph.apply_nodes]
        assert any(isinstance(op, PoissonWindowScalar) for op in ops), ops
        reference = _compiled(lo, hi, graph=False)(np.log(lam))
        for got, want in zip(numba(np.log(lam)), reference):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
