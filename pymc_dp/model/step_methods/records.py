"""Gibbs block for a record-level node: θ = (μ, σ²) and the n latent records together."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm

from pymc_dp.engine.records import RecordState, initial_widths, interweave
from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.nodes.records import RECORDS_TAG
from pymc_dp.model.step_methods.base import DPGibbsStep, require_block

__all__ = ["RecordStep"]


class RecordStep(DPGibbsStep):
    """Interweaving update of (θ, records) of a record-level :class:`~pymc_dp.NoisySuffStat`.

    Assigned by ``pm.sample()`` to θ = (μ, σ²) and ``{name}_records`` of a Normal or
    LogNormal release of (Σz, Σz²) fitted with ``likelihood="exact"``. Each step sweeps the
    records (Metropolis–Hastings, the record's law as proposal), draws θ | records from its
    Normal–Inverse-Gamma posterior, then moves θ with the standardised records fixed by slice
    sampling (:func:`pymc_dp.engine.records.interweave`); the slice widths adapt during tuning
    only. The prior's hyperparameters are read from the current point.

    Parameters
    ----------
    vars
        The node's θ and records (all of them); by default every such variable of the model.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    References
    ----------
    Ju, Awan, Gong & Rao (2022), *Data augmentation MCMC for Bayesian inference from privatized
    data*, NeurIPS; Yu & Meng (2011), *To center or not to center: that is not the question*,
    JCGS 20(3).
    """

    name = "dp_records"
    role: ClassVar[str] = "it is not θ or a record of a record-level NoisySuffStat node"
    stats_dtypes_shapes: ClassVar[dict] = {"accepted": (np.float64, [])}
    link_tag: ClassVar[str] = RECORDS_TAG

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        nodes: dict[str, Any] = {}
        for rv in rvs:
            info = self.links(rv)
            nodes.setdefault(info.name, info)
        self._plan = []
        given = {rv.name for rv in rvs}
        for info in nodes.values():
            names = (*info.theta, info.records)
            require_block(
                names,
                given,
                f"RecordStep samples {list(names)} together; it was given {sorted(given)} "
                f"(missing {sorted(set(names) - given)})",
            )
            block = [model[v] for v in names]
            family = info.family
            prior = family.prior_parameters(tuple(block[:-1]))
            reader = PointReader(model, [*prior, *block], **compile_kwargs)
            writers = [ValueWriter(model, rv, **compile_kwargs) for rv in block]
            log_scale = family.pymc_distribution is pm.LogNormal
            self._plan.append((info, reader, writers, log_scale, len(prior)))
        self._widths: dict[str, np.ndarray] = {}
        self.tune = True

    def reset_tuning(self) -> None:
        """Start each chain from the initial slice widths (``pm.sample`` calls this per chain)."""
        self._widths = {}

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """One interweaving iteration per record-level node."""
        point = dict(point)
        accepted = []
        for info, reader, writers, log_scale, n_prior in self._plan:
            values = reader(point)
            params = tuple(
                np.reshape(np.asarray(v, dtype=np.float64), (1,)) for v in values[:n_prior]
            )
            mu, sigma2, records = values[n_prior:]
            theta = np.array([[float(mu), float(sigma2)]])
            z = np.log(records) if log_scale else np.asarray(records, dtype=np.float64)
            widths = self._widths.get(info.name)
            if widths is None:
                widths = initial_widths(info.family, params, 1)
            state, out = interweave(
                self.rng,
                RecordState(theta, z.reshape(1, -1)),
                family=info.family,
                params=params,
                released=np.asarray(info.released).reshape(1, -1),
                window=info.window,
                noise_scale=info.scale,
                widths=widths,
            )
            if self.tune:
                widths = np.clip(0.9 * widths + 0.1 * 3.0 * out["moves"], 1e-6, 1e6)
            self._widths[info.name] = widths
            new_records = state.records[0]
            new = (
                state.theta[0, 0],
                state.theta[0, 1],
                np.exp(new_records) if log_scale else new_records,
            )
            for writer, value in zip(writers, new, strict=True):
                point[writer.name] = writer(np.asarray(value), point)
            accepted.append(float(out["accepted"][0]))
        return point, [{"accepted": float(np.mean(accepted))}]
