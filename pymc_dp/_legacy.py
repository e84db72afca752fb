"""Module paths of pymc_dp 0.1 that moved when the package was laid out by role.

``import pymc_dp.engine``-style paths of the flat layout keep working for one release: a finder at
the end of :data:`sys.meta_path` answers only for the names below, imports the module's new home
and warns (``FutureWarning``) with the path to use instead. Old paths that held names now in
several modules (``pymc_dp.io``, ``pymc_dp.distributions``) are served by a module that looks a
name up in each new home in turn. ``pymc_dp.models``, the documented path of the ready-made
models, is kept without a warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Any

__all__ = ["MOVED", "install"]

MOVED: dict[str, str | tuple[str, ...]] = {
    "atomic": "curator.atomic",
    "baselines": "evaluation.baselines",
    "budget": "curator.budget",
    "cli_columns": "cli.columns",
    "cli_dry_run": "cli.dry_run",
    "cli_fit": "cli.fit",
    "cli_regression": "cli.regression",
    "cli_release": "cli.release",
    "collapsed": "engine.collapsed",
    "collapsed_nodes": "model.nodes.collapsed",
    "distributions": ("model.distributions", "likelihoods"),
    "distributions.collapsed": "likelihoods.collapsed",
    "distributions.collapsed_gaussian": "likelihoods.collapsed_gaussian",
    "distributions.collapsed_pair": "likelihoods.collapsed_pair",
    "distributions.exact": "likelihoods.exact",
    "distributions.exact_windows": "likelihoods.exact_windows",
    "distributions.grouped": "likelihoods.grouped",
    "distributions.lattice_windows": "likelihoods.lattice_windows",
    "distributions.noise_variance": "model.distributions.noise_variance",
    "distributions.partial": "model.distributions.partial",
    "distributions.released_normal": "likelihoods.released_normal",
    "distributions.suffstat": "model.distributions.suffstat",
    "distributions.window": "model.distributions.window",
    "exact": "evaluation.exact",
    "exact_sampling": "engine.exact",
    "exact_sums": "curator.exact_sums",
    "fixed_point": "curator.fixed_point",
    "frames": "curator.frames",
    "gaussian_nodes": "model.nodes.gaussian",
    "grouped_nodes": "model.nodes.grouped",
    "grouped_release": "curator.grouped",
    "grouped_sums": "curator.grouped_sums",
    "grouped_vector": "model.nodes.grouped_vector",
    "hierarchical": "model.hierarchical",
    "io": ("curator.data_files", "curator.release_file", "cli.outputs"),
    "latent": "model.latent",
    "likelihood": "likelihoods.choice",
    "models": "model.ready_made",
    "node_info": "model.nodes.info",
    "noisy_suffstat": "model.noisy_suffstat",
    "pair_sampling": "engine.pair",
    "priors": "model.priors",
    "private_window": "curator.private_window",
    "record_nodes": "model.nodes.records",
    "record_sampling": "engine.records",
    "regression.adaptation": "regression.kernels.adaptation",
    "regression.baselines": "regression.evaluation.baselines",
    "regression.collapsed": "regression.kernels.collapsed",
    "regression.collapsed_sampler": "regression.engine.collapsed",
    "regression.collapsed_step": "regression.model.collapsed_step",
    "regression.conjugate": "regression.kernels.conjugate",
    "regression.data_model": "regression.kernels.data_model",
    "regression.default_prior": "regression.model.default_prior",
    "regression.distributions": "regression.model.distributions",
    "regression.exact": "curator.regression.exact_sums",
    "regression.exact_l1": "curator.regression.exact_l1",
    "regression.exact_l2": "curator.regression.exact_l2",
    "regression.mcmc_ind": "regression.model.mcmc_ind",
    "regression.moment_move": "regression.kernels.moment_move",
    "regression.moments": "regression.kernels.moments",
    "regression.noisy_regression": "regression.model.noisy_regression",
    "regression.normal_model": "regression.kernels.normal_model",
    "regression.predictive": "regression.evaluation.predictive",
    "regression.psd": "regression.kernels.psd",
    "regression.release": "curator.regression.release",
    "regression.release_record": "curator.regression.record",
    "regression.sampler": "regression.engine.gibbs_ss",
    "regression.sensitivity": "curator.regression.sensitivity",
    "regression.statistics": "curator.regression.statistics",
    "regression.steps": "regression.model.steps",
    "release": ("curator.single", "curator.record"),
    "release_file": "curator.release_file",
    "release_noise": "curator.noise",
    "release_record": "curator.record",
    "release_set": "curator.release_set",
    "step_methods": "model.step_methods",
    "step_methods.conjugate": "model.step_methods.conjugate",
    "step_methods.grid": "model.step_methods.grid",
    "step_methods.independence": "model.step_methods.independence",
    "step_methods.noise_variance": "model.step_methods.noise_variance",
    "step_methods.norm_product": "model.step_methods.norm_product",
    "step_methods.records": "model.step_methods.records",
    "window_trust": "likelihoods.window_trust",
}
"""Old path → new path (or new paths, searched in turn), both relative to ``pymc_dp``."""

_SILENT = frozenset({"models"})
"""Old paths that stay documented: no warning."""


class _Proxy(types.ModuleType):
    """An old module whose names now live in several modules: each is looked up in turn."""

    def __init__(self, name: str, homes: tuple[types.ModuleType, ...]) -> None:
        super().__init__(name, f"Moved: see {', '.join(h.__name__ for h in homes)}.")
        self._homes = homes

    def __getattr__(self, attr: str) -> Any:
        for home in self._homes:
            if hasattr(home, attr):
                return getattr(home, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def __dir__(self) -> list[str]:
        return sorted({a for h in self._homes for a in dir(h)})


class _CallableProxy(_Proxy):
    """The old module ``pymc_dp.release``, which must still call ``release(...)``.

    Importing the old module binds the package's ``release`` (a function) to it.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from pymc_dp.curator.single import release

        return release(*args, **kwargs)


class _Loader(importlib.abc.Loader):
    def __init__(self, old: str) -> None:
        self.old = old

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = MOVED[self.old]
        targets = (new,) if isinstance(new, str) else new
        if self.old not in _SILENT:
            warnings.warn(
                f"pymc_dp.{self.old} moved to pymc_dp.{' and pymc_dp.'.join(targets)}; the old "
                "path will be removed in the next release",
                FutureWarning,
                stacklevel=_caller_level(),
            )
        homes = tuple(importlib.import_module(f"pymc_dp.{t}") for t in targets)
        if self.old == "release":
            return _CallableProxy(spec.name, homes)
        if len(homes) > 1:
            return _Proxy(spec.name, homes)
        return homes[0]

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is its new home's, already imported."""


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, old = fullname.partition(".")
        if prefix != "pymc_dp" or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(old))


def _caller_level() -> int:
    """Stack level of the first frame outside the import machinery (the user's import)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib")
        or frame.f_code.co_filename == __file__
    ):
        frame, level = frame.f_back, level + 1
    return level


def install() -> None:
    """Put the finder at the end of :data:`sys.meta_path`, once."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
