"""Our Ops are differentiated by ``pullback`` (PyTensor 3) and by ``L_op`` (PyTensor 2).

PyTensor 3 deprecates ``L_op`` and ``grad`` ("will stop being called in a future version"): an
Op of ours that defined them would lose its gradient, and NUTS its model, on a later PyMC 6.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.op import Op

import pymc_dp
from pymc_dp import _compat
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.likelihoods.marginals import CLTLogp, FeatureMean


def _our_ops() -> list[type]:
    """Every Op class defined in pymc_dp (each module imported)."""
    found = {}
    for info in pkgutil.walk_packages(pymc_dp.__path__, "pymc_dp."):
        if info.name.endswith(("__main__", "._legacy")):  # a CLI entry runs on import
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Op) and cls.__module__.startswith("pymc_dp."):
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def test_no_op_of_ours_defines_the_deprecated_l_op_or_grad():
    ops = _our_ops()
    assert len(ops) > 20  # the walk reaches the likelihoods, families and regression nodes
    for cls in ops:
        for klass in cls.__mro__:
            if klass is Op or not klass.__module__.startswith("pymc_dp."):
                continue
            assert "grad" not in vars(klass), f"{klass.__qualname__}.grad: define pullback"
            if "L_op" in vars(klass):
                assert vars(klass)["L_op"] is _compat._l_op, f"{klass.__qualname__}.L_op"
        defines = [k for k in cls.__mro__ if k.__module__.startswith("pymc_dp.")]
        if any("pullback" in vars(k) for k in defines) and not _compat.PULLBACK:
            # PyTensor 2 calls L_op: it must reach the pullback.
            assert cls.L_op is _compat._l_op, f"{cls.__qualname__} lacks @pullback_op"


def test_gradients_of_non_scalar_ops_build_without_the_deprecation():
    """FeatureMean's and CLTLogp's gradients (PyTensor 3 warned for both: each defined grad)
    build with FutureWarning an error, and are right: Cov_θ[a] w, and CLTLogp's own second
    output."""
    dom = LogLinearDomain((3, 2, 3), ((0, 1), (1, 2)))
    rng = np.random.default_rng(3)
    theta0, w = 0.5 * rng.normal(size=dom.n_params), rng.normal(size=dom.n_params)
    theta = pt.dvector("theta")
    mean = pt.dot(FeatureMean(dom, "enumerate")(theta), w)
    op = CLTLogp(dom, rng.normal(size=dom.n_params) * 10 + 50, 100, 4.0)
    clt, clt_grad = op(theta)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        grads = pytensor.grad(mean, theta), pytensor.grad(clt, theta)
    got_mean, got_clt, want_clt = pytensor.function([theta], [*grads, clt_grad])(theta0)
    np.testing.assert_allclose(got_mean, dom.moments(theta0)[1] @ w, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_clt, want_clt, rtol=1e-12)


@pytest.mark.parametrize("use_pullback", [True, False])
def test_op_pullback_calls_what_the_pytensor_has(monkeypatch, use_pullback):
    calls = []

    class Fake:
        def pullback(self, *args):
            calls.append("pullback")

        def L_op(self, *args):
            calls.append("L_op")

    monkeypatch.setattr(_compat, "PULLBACK", use_pullback)
    _compat.op_pullback(Fake(), [], [], [])
    assert calls == ["pullback" if use_pullback else "L_op"]
