"""The grouped Categorical counts' exact likelihood over the noise's window.

:mod:`pymc_dp.likelihoods.multinomial_window` and its kernel.

Checked against the exact recursion (:func:`multinomial_log_likelihood`, which sums every s)
in value and in gradient (against a finite difference of that recursion), for every noise law,
with groups of different sizes (a padded table) and a category of probability 0; on each
backend's compiled form (the kernel from ``perform`` on C, compiled into the graph on Numba, the
graph form on JAX); and the kernel's left-out tail against the whole sum.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.kernels.exact_counts import NOISE_KINDS, NoiseLaw, multinomial_log_likelihood
from pymc_dp.kernels.multinomial_table import TAIL, compiled_table_log_likelihood
from pymc_dp.likelihoods.multinomial_window import (
    TableLogLikelihood,
    table_graph,
    window_logp,
    window_table,
)

MODES = [
    "FAST_RUN",
    "NUMBA",
    pytest.param(
        "JAX",
        marks=pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="no jax"),
    ),
]


def _release(kind: str, seed: int):
    rng = np.random.default_rng(seed)
    sizes = np.array([7, 30, 55])
    theta = rng.dirichlet(np.ones(3), size=3)
    s = np.stack([rng.multinomial(n, p) for n, p in zip(sizes, theta, strict=True)])
    law = NoiseLaw(kind, 1.5)
    if kind == "laplace":
        y = s + rng.laplace(0.0, law.scale, size=s.shape)
    else:
        y = s + np.round(rng.laplace(0.0, law.scale, size=s.shape))
    return y, sizes, law, rng


def _exact(y, theta, sizes, law):
    return np.array(
        [multinomial_log_likelihood(v[None], t[None], int(n), law)[0]
         for v, t, n in zip(y, theta, sizes, strict=True)]
    )  # fmt: skip


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_window_logp_and_gradient_equal_the_exact_sum(kind):
    y, sizes, law, rng = _release(kind, 11)
    table = window_table(y, sizes, law)
    assert table is not None
    theta = pt.dmatrix("theta")
    logp = window_logp(y, theta, table, law)
    f = pytensor.function([theta], [logp, pt.grad(logp.sum(), theta)])
    for _ in range(4):
        p = rng.dirichlet(np.full(3, 2.0), size=3)
        value, grad = f(p)
        np.testing.assert_allclose(value, _exact(y, p, sizes, law), rtol=1e-10)
        h = 1e-6
        for j in range(3):
            step = np.zeros_like(p)
            step[:, j] = h
            fd = (_exact(y, p + step, sizes, law) - _exact(y, p - step, sizes, law)) / (2 * h)
            np.testing.assert_allclose(grad[:, j], fd, rtol=1e-5, atol=1e-6)


def test_window_logp_with_a_category_of_probability_zero():
    """0 · log 0 = 0: a category of probability 0 whose released count lets s = 0 through."""
    law = NoiseLaw("discrete-laplace", 1.0)
    y = np.array([[2.0, 4.0, 0.0], [1.0, 0.0, 5.0]])
    sizes = np.array([6, 6])
    p = np.array([[0.4, 0.6, 0.0], [0.3, 0.0, 0.7]])
    table = window_table(y, sizes, law)
    assert table is not None
    value = window_logp(y, pt.as_tensor_variable(p), table, law).eval()
    np.testing.assert_allclose(value, _exact(y, p, sizes, law), rtol=1e-10)
    assert np.all(np.isfinite(value))


@pytest.mark.parametrize("mode", MODES)
def test_every_backend_computes_the_table_sum_alike(mode):
    """C and Numba run the compiled kernel (the Op stays in the graph), JAX its graph form;
    logp and gradient agree with the C build to 1e-10."""
    y, sizes, law, rng = _release("laplace", 5)
    table = window_table(y, sizes, law)
    theta = pt.dmatrix("theta")
    logp = window_logp(y, theta, table, law).sum()
    outputs = [logp, pt.grad(logp, theta)]
    reference = pytensor.function([theta], outputs, mode="FAST_RUN")
    f = pytensor.function([theta], outputs, mode=mode)
    ops = [type(node.op) for node in f.maker.fgraph.apply_nodes]
    assert (TableLogLikelihood in ops) == (mode != "JAX")
    if mode != "JAX":  # logp and gradient from one evaluation of the kernel
        assert ops.count(TableLogLikelihood) == 1
    p = rng.dirichlet(np.full(3, 2.0), size=3)
    for got, want in zip(f(p), reference(p), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10)


def test_the_kernel_left_out_tail_is_below_its_bound():
    """With the terms TAIL nats below the largest left out, logp and gradient move by less than
    the bound T e^-TAIL (relative), against the whole sum (tail = inf) and the graph form."""
    y, sizes, law, rng = _release("discrete-laplace", 3)
    s, coefficient = window_table(y, sizes, law)
    d = y[:, None, :] - s
    fixed = coefficient - np.sum(np.abs(d), axis=-1) / law.scale + 3 * law.log_constant
    kernel = compiled_table_log_likelihood()
    theta = pt.dmatrix("theta")
    graph = pytensor.function([theta], table_graph(theta, pt.constant(s), pt.constant(fixed)))
    for _ in range(5):
        p = rng.dirichlet(np.ones(3), size=3)
        cut = kernel(p, s, fixed, TAIL)
        whole = kernel(p, s, fixed, np.inf)
        bound = s.shape[1] * np.exp(-TAIL) * 10
        np.testing.assert_allclose(cut[0], whole[0], rtol=0, atol=bound)
        np.testing.assert_allclose(cut[1], whole[1], rtol=bound * sizes.max(), atol=0)
        for got, want in zip(whole, graph(p), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-11)
    nan = kernel(np.full((3, 3), np.nan), s, fixed, TAIL)
    assert np.all(np.isnan(nan[0])) and np.all(np.isnan(nan[1]))
