"""What a :class:`~pymc_dp.NoisySuffStat` node records about itself and its release.

Its info sits on the tags of its variables (for the step methods); its release goes into the
model as ``pm.Data`` (ArviZ ``constant_data``) and as JSON for the sampling result's ``attrs``.
Every node builder takes its release as one :class:`NodeRelease` and records it with
:func:`register_node`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm

from pymc_dp.curator.record import FORMAT_VERSION, Release
from pymc_dp.families import ExponentialFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.mechanisms import MECHANISM_NAME

__all__ = [
    "GRID_TAG",
    "INDEPENDENCE_TAG",
    "LIKELIHOOD_ATTR_PREFIX",
    "RELEASE_ATTR_PREFIX",
    "TAG",
    "THETA_TAG",
    "NodeRelease",
    "NoisySuffStatInfo",
    "node_infos",
    "register_node",
    "release_attrs",
    "releases_from_attrs",
    "tag_node",
]

RELEASE_ATTR_PREFIX = "pymc_dp_release_"
"""Prefix of the ``attrs`` key holding the release JSON of each node (``pymc_dp_release_y``)."""

LIKELIHOOD_ATTR_PREFIX = "pymc_dp_likelihood_"
"""Prefix of the ``attrs`` key holding the likelihood each node used (``"exact"``, ``"clt"``)."""


@dataclasses.dataclass(frozen=True)
class NoisySuffStatInfo:
    """What the step methods need to know about one :class:`~pymc_dp.NoisySuffStat` node.

    Stored on the tags of the node's variables; holds names, not graph objects, so it pickles.
    """

    name: str
    """Name of the observed node y."""
    suffstat: str
    """Name of the latent sufficient statistic s."""
    noise_variance: str
    """Name of the mixing variance σ²."""
    theta: tuple[str, ...]
    """Names of the variables carrying θ's conjugate prior (drawn jointly by ConjugateStep),
    or ``()`` if θ has another prior."""
    family: ExponentialFamily
    n: int
    epsilon: float
    sensitivity: float
    bounds: tuple[float, float] | None = None
    """Truncation window of a truncated family (then s is the stacked (ŝ, s)), else ``None``."""
    collapsed: bool = False
    """Whether s and σ² are integrated out of the model (``method="collapsed"``): then y is a
    :class:`~pymc_dp.likelihoods.CollapsedLaplace` node and s, σ² are not model variables
    (:func:`~pymc_dp.sample_latent` draws them from the posterior afterwards)."""
    release_json: str = ""
    """The release as JSON (:meth:`~pymc_dp.Release.to_json` layout), for :func:`release_attrs`.
    A string rather than the Release, so that the info stays picklable."""
    likelihood: str = "clt"
    """``"exact"`` (s summed out exactly) or ``"clt"`` (s | θ normal), as resolved from
    ``NoisySuffStat(likelihood=...)``."""
    noise: NoiseLaw | None = None
    """The noise law an exact node models (mechanism and scale), else ``None``."""
    groups: tuple = ()
    """The group keys of a node on a grouped release (:class:`~pymc_dp.ReleaseSet`), whose y
    has one entry per group and whose ``n`` is then the tuple of group sizes; ``()`` otherwise."""
    counted: bool = False
    """Whether y is the pair (window sum, window count) of a release with a window count
    (:mod:`pymc_dp.model.nodes.counted`)."""

    @classmethod
    def of_node(
        cls, name: str, family: ExponentialFamily, record: Mapping[str, Any], **fields: Any
    ) -> NoisySuffStatInfo:
        """The info of node ``name``, its release ``record`` stored as JSON.

        The latents are named after the node (``{name}_s``, ``{name}_sigma2``) and θ has no
        conjugate block unless ``fields`` (the other attributes) say otherwise.
        """
        named = {"suffstat": f"{name}_s", "noise_variance": f"{name}_sigma2", "theta": ()}
        return cls(name=name, family=family, release_json=json.dumps(record), **{**named, **fields})


@dataclasses.dataclass(frozen=True)
class NodeRelease:
    """One release as the node builders take it: from a :class:`~pymc_dp.Release`, or given.

    ``release`` is ``None`` for a value released elsewhere (``n``, ``epsilon``,
    ``sensitivity`` and ``observed`` passed to :class:`~pymc_dp.NoisySuffStat`).
    """

    family: ExponentialFamily
    release: Release | None
    n: int
    epsilon: float
    sensitivity: float
    value: npt.NDArray[np.float64]
    bounds: tuple[float, float] | None
    """The window of a windowed family, else ``None``."""

    def record(self) -> dict[str, Any]:
        """The release in :meth:`Release.to_dict` layout (:func:`record_of_release`)."""
        return record_of_release(
            self.release,
            self.family,
            n=self.n,
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            value=self.value,
            bounds=self.bounds,
        )


TAG = "noisy_suffstat"
"""Attribute on ``rv.tag`` holding the :class:`NoisySuffStatInfo` of y, s and σ², or a tuple of
them on a conjugate θ (one per node that θ feeds)."""

GRID_TAG = "noisy_suffstat_grid"
"""Attribute on ``rv.tag`` marking a scalar θ of a collapsed node whose prior has fixed
parameters; :class:`~pymc_dp.GridStep` draws it exactly."""

INDEPENDENCE_TAG = "noisy_suffstat_independence"
"""Attribute on ``rv.tag`` marking a small vector θ of an exact node whose prior has fixed
parameters; :class:`~pymc_dp.IndependenceStep` samples it."""

THETA_TAG = "noisy_suffstat_theta"
"""Attribute on a collapsed node's ``y.tag`` holding θ (the graph), for :func:`sample_latent`."""


def record_of_release(
    release: Release | None,
    family: ExponentialFamily,
    *,
    n: int,
    epsilon: float,
    sensitivity: float,
    value: npt.NDArray[np.float64],
    bounds: tuple[float, float] | None,
) -> dict[str, Any]:
    """The release in :meth:`Release.to_dict` layout, also for a value given explicitly."""
    if release is not None:
        return release.to_dict()
    # Not built as a Release: an explicit value may carry less noise than ε-DP needs, which
    # Release refuses and the node only warns about.
    window = bounds if bounds is not None else family.domain
    return {
        "format_version": FORMAT_VERSION,
        "value": np.asarray(value, dtype=np.float64).tolist(),
        "n": int(n),
        "epsilon": float(epsilon),
        "sensitivity": float(sensitivity),
        "bounds": [float(window[0]), float(window[1])],
        "family": family.name,
        "family_params": family.params(),
        "mechanism": MECHANISM_NAME,
        "bounds_epsilon": 0.0,
    }


def add_release_data(model: pm.Model, name: str, record: Mapping[str, Any]) -> None:
    """Add the release's n, ε, Δ and bounds as ``pm.Data`` (ArviZ ``constant_data``).

    Nothing in the graph uses them (the node holds its own constants), so sampling is unchanged.
    """
    bound_dim = f"{name}_bound"
    if bound_dim not in model.coords:
        model.add_coord(bound_dim, ["lower", "upper"])
    pm.Data(f"{name}_n", np.asarray(record["n"], dtype=np.int64))
    pm.Data(f"{name}_epsilon", np.asarray(record["epsilon"], dtype=np.float64))
    pm.Data(f"{name}_sensitivity", np.asarray(record["sensitivity"], dtype=np.float64))
    pm.Data(f"{name}_bounds", np.asarray(record["bounds"], dtype=np.float64), dims=bound_dim)


def tag_node(
    y: Any, info: NoisySuffStatInfo, *, theta: Any = None, others: Sequence[Any] = ()
) -> None:
    """Leave ``info`` on y (and on the node's latents ``others``), and θ's graph on y.

    θ is what :func:`~pymc_dp.sample_latent` evaluates at each draw; ``None`` for a node whose
    latents are model variables.
    """
    for rv in (y, *others):
        setattr(rv.tag, TAG, info)
    if theta is not None:
        setattr(y.tag, THETA_TAG, theta)


def register_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    y: Any,
    *,
    theta_graph: Any = None,
    others: Sequence[Any] = (),
    **fields: Any,
) -> NoisySuffStatInfo:
    """Record a node's release in the model and tag its variables; return its info.

    The release goes in as ``pm.Data`` (:func:`add_release_data`) and, as JSON, into the
    :class:`NoisySuffStatInfo` left on y and ``others`` (:func:`tag_node`).

    Parameters
    ----------
    model, name
        The model and the node's name.
    spec
        The node's release.
    y
        The observed node.
    theta_graph
        θ itself, left on y for :func:`~pymc_dp.sample_latent` (collapsed nodes).
    others
        The node's latent variables, tagged like y.
    **fields
        The info's attributes beyond the release's (``collapsed``, ``likelihood``,
        ``noise``, and ``theta``: the names of θ's conjugate block).

    Returns
    -------
    NoisySuffStatInfo
        What the node recorded.
    """
    record = spec.record()
    with model:
        add_release_data(model, name, record)
    info = NoisySuffStatInfo.of_node(
        name,
        spec.family,
        record,
        n=spec.n,
        epsilon=spec.epsilon,
        sensitivity=spec.sensitivity,
        bounds=spec.bounds,
        **fields,
    )
    tag_node(y, info, theta=theta_graph, others=others)
    return info


def release_attrs(model: pm.Model | None = None) -> dict[str, str]:
    """The release of every :class:`~pymc_dp.NoisySuffStat` node of a model, as ``attrs`` entries.

    ``pm.sample`` cannot attach strings to its result; this gives them, to add with
    ``idata.attrs.update(release_attrs(model))`` before saving (``pymc-dp fit`` does so).

    Parameters
    ----------
    model
        The model; defaults to the model on the context stack.

    Returns
    -------
    dict
        ``{"pymc_dp_release_{name}": release JSON}`` per node, in the layout of
        :meth:`~pymc_dp.Release.to_json` (``family`` and ``family_params`` included), and
        ``{"pymc_dp_likelihood_{name}": "exact" or "clt"}``: the likelihood the node used.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release(np.r_[np.ones(30), np.zeros(70)], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", 1, 1)
    ...     y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    >>> attrs = release_attrs(model)
    >>> list(attrs)
    ['pymc_dp_release_y', 'pymc_dp_likelihood_y']
    >>> releases_from_attrs(attrs)["y"] == rel
    True
    """
    model = pm.modelcontext(model)
    attrs = {}
    for info in node_infos(model):
        attrs[f"{RELEASE_ATTR_PREFIX}{info.name}"] = info.release_json
        attrs[f"{LIKELIHOOD_ATTR_PREFIX}{info.name}"] = info.likelihood
    return attrs


def node_infos(model: pm.Model | None = None) -> list[NoisySuffStatInfo]:
    """The :class:`NoisySuffStatInfo` of every :class:`~pymc_dp.NoisySuffStat` node of a model."""
    model = pm.modelcontext(model)
    infos = []
    for rv in model.observed_RVs:
        info = getattr(rv.tag, TAG, None)
        if isinstance(info, NoisySuffStatInfo) and info.name == rv.name:
            infos.append(info)
    return infos


def releases_from_attrs(attrs: Mapping[str, Any]) -> dict[str, Release]:
    """Rebuild the releases that :func:`release_attrs` stored, keyed by node name.

    Parameters
    ----------
    attrs
        The ``attrs`` of a sampling result (``idata.attrs``), or of a file read back.

    Returns
    -------
    dict
        ``{node name: Release}`` (a :class:`~pymc_dp.ReleaseSet` for a grouped node).

    Raises
    ------
    ValueError
        If a stored release is not valid JSON or not a valid release.
    """
    releases = {}
    for key, text in attrs.items():
        if not key.startswith(RELEASE_ATTR_PREFIX):
            continue
        try:
            data = json.loads(str(text))
            if isinstance(data, Mapping) and data.get("kind") == "grouped":
                from pymc_dp.curator.release_set import ReleaseSet

                releases[key.removeprefix(RELEASE_ATTR_PREFIX)] = ReleaseSet.from_dict(data)
            else:
                releases[key.removeprefix(RELEASE_ATTR_PREFIX)] = Release.from_dict(data)
        except json.JSONDecodeError as err:
            raise ValueError(f"attrs[{key!r}] is not valid JSON: {err}") from None
    return releases
