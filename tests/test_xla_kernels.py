"""The fused C kernels as XLA custom calls (NumPyro, BlackJAX): the C backend's numbers, the
gradient NumPyro takes (jax.grad of the jaxified log density) equal to the kernel's, vmapped
calls (BlackJAX's chains), and a kernel that cannot be built falling back with a warning."""

import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from conftest import scalar_op_names
from pytensor.compile.mode import Mode

from pymc_dp.likelihoods import xla_kernels
from pymc_dp.likelihoods.counted_window import counted_poisson_logp, counted_window_spec
from pymc_dp.likelihoods.normal_laplace import normal_laplace
from pymc_dp.likelihoods.pair_window import pair_window_logp
from pymc_dp.likelihoods.window_sum import window_sum_logp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

C_MODE = Mode(linker="cvm", optimizer="fast_run")  # the C backend (PyTensor 3 defaults to Numba)
WINDOW = counted_window_spec(1.0, 40.0)
G = 40
GRAD_OPS = {
    "window_sum": "WindowSumGrad",
    "counted_poisson": "CountedPoissonGrad",
    "pair_window": "PairWindowGrad",
    "normal_laplace": "NormalLaplaceGrad",
}


def _inputs(rng):
    """Each kernel's builder, its inputs (the first ``n_wrt`` are the parameters) and how many
    it differentiates in: groups near and far from their releases."""
    lam = np.exp(rng.uniform(-1.0, 4.0, G))
    n = rng.integers(5, 500, G).astype(float)
    y = n * np.minimum(lam, 40.0) + rng.normal(0.0, 3.0, G) * np.sqrt(n * lam)
    b = np.exp(rng.uniform(-1.0, 5.0, G))
    lower, upper = np.zeros(G), 40.0 * n
    u = rng.normal(0.0, 1.0, G)
    return {
        "window_sum": (
            lambda *a: window_sum_logp(*a, WINDOW), (np.log(lam), n, y, b, lower, upper), 1
        ),
        "counted_poisson": (
            lambda *a: counted_poisson_logp(*a, WINDOW),
            (u, np.log(lam), n, y / lam, y, b, 3.0 * b),
            2,
        ),
        "pair_window": (
            lambda *a: pair_window_logp(*a, (-11.0, 13.0, False, False)),
            (u, rng.normal(0.0, 3.0, G), np.exp(rng.uniform(0.0, 2.0, G)), n,
             n * rng.normal(0.0, 2.0, G), n * rng.uniform(5.0, 50.0, G), b, 3.0 * b),
            3,
        ),
        "normal_laplace": (
            lambda *a: normal_laplace(*a),
            (y + rng.laplace(0.0, b), n * np.minimum(lam, 40.0), n * lam, lower, upper, b),
            6,
        ),
    }  # fmt: skip


@pytest.fixture(scope="module")
def cases():
    from pymc_dp.model.backends import register_jax

    register_jax()
    return _inputs(np.random.default_rng(3))


def _graph(build, args, n_wrt):
    xs = [pt.dvector(f"x{k}") for k in range(len(args))]
    out = build(*xs)
    total = sum(o.sum() for o in (out if isinstance(out, list | tuple) else [out]))
    return xs, total, pt.grad(total, xs[:n_wrt])


@pytest.mark.parametrize("name", ["window_sum", "counted_poisson", "pair_window", "normal_laplace"])
def test_jax_runs_the_c_kernel(cases, name):
    """JAX keeps the operations (no graph form), and its log density and its own gradient of it
    (a custom_vjp through the kernel's gradient call) are the C backend's to 1e-12."""
    from pymc.sampling.jax import get_jaxified_graph

    build, args, n_wrt = cases[name]
    xs, total, grads = _graph(build, args, n_wrt)
    want = pytensor.function(xs, [total, *grads], mode=C_MODE)(*args)
    fn = pytensor.function(xs, [total, *grads], mode="JAX")
    # The gradient operation, whose outputs carry the log density too (one call).
    assert GRAD_OPS[name] in scalar_op_names(fn)
    for got, ref in zip(fn(*args), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # NumPyro's path: the log density alone, jaxified, differentiated by JAX.
    logp = get_jaxified_graph(inputs=xs, outputs=[total])
    value, partials = jax.value_and_grad(
        lambda *p: logp(*p, *args[n_wrt:])[0], argnums=tuple(range(n_wrt))
    )(*args[:n_wrt])
    np.testing.assert_allclose(value, want[0], rtol=1e-12)
    for got, ref in zip(partials, want[1:], strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # Vmapped over two rows (BlackJAX's chains): one call, each row its own.
    rows = np.stack([args[0], args[0] + 0.25])
    batched = jax.jit(jax.vmap(jax.value_and_grad(lambda p: logp(p, *args[1:])[0])))(rows)
    for r in range(2):
        one = jax.value_and_grad(lambda p: logp(p, *args[1:])[0])(rows[r])
        np.testing.assert_allclose(batched[0][r], one[0], rtol=1e-13)
        np.testing.assert_allclose(batched[1][r], one[1], rtol=1e-13)


def test_broadcast_inputs_get_summed_cotangents(cases):
    """A scalar input broadcast over the groups gets the sum of the groups' partials."""
    from pymc.sampling.jax import get_jaxified_graph

    _, args, _ = cases["window_sum"]
    eta = pt.dscalar("eta")
    rest = [pt.dvector(f"x{k}") for k in range(1, 6)]
    total = window_sum_logp(eta, *rest, WINDOW).sum()
    logp = get_jaxified_graph(inputs=[eta, *rest], outputs=[total])
    got = jax.grad(lambda e: logp(e, *args[1:])[0])(1.5)
    want = pytensor.function([eta, *rest], pt.grad(total, eta), mode=C_MODE)(1.5, *args[1:])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_kernel_that_does_not_build_warns_and_falls_back(monkeypatch):
    """A compiler error: one warning naming the kernel and the way out, then False (the
    rewrites keep the graph form), and no second attempt."""
    broken = xla_kernels.XlaKernel("broken_test", "this is not C;", "o[0] = {x};", 1, 0, 1, 1)
    monkeypatch.setattr(xla_kernels, "_targets", {})
    with pytest.warns(RuntimeWarning, match=r"(?s)broken_test kernel.*error.*C\+\+ compiler"):
        assert not xla_kernels.ready(broken)
    assert xla_kernels._targets == {"broken_test": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second build, no second warning
        assert not xla_kernels.ready(broken)


def test_no_compiler_falls_back(monkeypatch):
    """PyTensor without a C++ compiler: the warning says that is why."""
    monkeypatch.setattr(xla_kernels, "_targets", {})
    monkeypatch.setattr(pytensor.config, "cxx", "")
    kernel = xla_kernels.kernel_of(xla_kernels.registered()[0])
    with pytest.warns(RuntimeWarning, match="pytensor.config.cxx is empty"):
        assert not xla_kernels.ready(kernel)


def test_graph_forms_where_the_call_cannot_be_built(cases, graph_forms_on_jax):
    """Without the custom call JAX gets the graph form: the same numbers (to 1e-8 here, where
    every window holds its mass)."""
    build, args, n_wrt = cases["window_sum"]
    xs, total, grads = _graph(build, args, n_wrt)
    fn = pytensor.function(xs, [total, *grads], mode="JAX")
    assert not {"WindowSumLogp", "WindowSumGrad"} & scalar_op_names(fn)
    want = pytensor.function(xs, [total, *grads], mode=C_MODE)(*args)
    for got, ref in zip(fn(*args), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-8)
