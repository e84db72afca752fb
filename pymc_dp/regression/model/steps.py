"""Gibbs-SS step methods for :class:`~pymc_dp.NoisyRegressionStat` nodes (PyMC adapters).

Each step reads the current point, calls the NumPy kernel that :func:`~pymc_dp.regression.
sample_gibbs_ss` uses for the same conditional, and writes the draw back (Bernstein & Sheldon
2019, Algorithm 1):

* :class:`RegressionSuffStatStep`: s ~ NormProduct(nμ_t, nΣ_t, z, diag σ²) restricted to PSD
  ``B(s)`` (:func:`~pymc_dp.regression.draw_regression_suffstat`); for a Gaussian-mechanism
  release σ² = τ² is fixed (the node has no mixing variances);
* :class:`RegressionConjugateStep`: (θ, σ²) jointly from the NIG posterior given s
  (:func:`~pymc_dp.regression.nig_update`, :func:`~pymc_dp.regression.draw_nig`);
* :class:`CovariateModelStep`: Gibbs-SS-Update's (μ_x, Σ_x) from the NIW posterior given s
  (:func:`~pymc_dp.regression.niw_update`, :func:`~pymc_dp.regression.draw_niw`);
* :class:`BinaryCovariateStep`: binary covariates' cell probabilities π | s ~ Dirichlet
  (:func:`~pymc_dp.regression.kernels.x_models.binary_cell_counts`);
* :class:`RegressionNoiseVarianceStep`: the Laplace mixing variances
  (:func:`pymc_dp.kernels.draw_noise_variance`, via :class:`~pymc_dp.NoiseVarianceStep`).

All are IDEAL only for the variables of a NoisyRegressionStat node and INCOMPATIBLE for every
other variable. Importing this module registers them with ``pm.sample`` (idempotently).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._compat import register_step_methods
from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.step_methods.base import DPGibbsStep, require_block, require_sole_use
from pymc_dp.model.step_methods.noise_variance import NoiseVarianceStep
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import draw_niw, niw_update
from pymc_dp.regression.kernels.moments import XMoments, suffstat_moments
from pymc_dp.regression.kernels.suffstat import draw_regression_suffstat
from pymc_dp.regression.kernels.x_models import binary_cell_counts
from pymc_dp.regression.model.distributions import RegressionSuffStatRV
from pymc_dp.regression.model.noisy_regression import TAG, nig_prior_parameters

__all__ = [
    "BinaryCovariateStep",
    "CovariateModelStep",
    "RegressionConjugateStep",
    "RegressionNoiseVarianceStep",
    "RegressionSuffStatStep",
    "require_nig_sole_use",
]


def require_nig_sole_use(model: pm.Model, theta: Any, sigma2: Any, links: Any, why: str) -> None:
    """Raise unless θ and σ² feed only the statistics of ``links`` (σ² also θ's prior).

    Deterministics do not count. The message ends with ``why``.
    """
    allowed = {info.suffstat for info in links}
    require_sole_use(model, theta, allowed, why)
    require_sole_use(model, sigma2, allowed | {theta.name}, why)


class RegressionSuffStatStep(DPGibbsStep):
    """Gibbs step drawing s ~ NormProduct(nμ_t, nΣ_t, z, diag σ²) restricted to PSD ``B(s)``.

    μ_t and Σ_t are :func:`~pymc_dp.regression.suffstat_moments` at the current θ, σ² and
    moments of x (fixed, or those of the current N(μ_x, Σ_x)).

    Parameters
    ----------
    vars
        Latent statistics to sample; by default every ``{name}_s`` of a NoisyRegressionStat.
    proposals
        Independent proposals tried before the Gibbs-sweep fallback.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stats: ``n_fallback`` (statistics moved by the fallback in this step).

    References
    ----------
    Bernstein & Sheldon (2019), Algorithm 1 line 4 and §3.4.3.
    """

    name = "dp_regression_suffstat"
    role: ClassVar[str] = "it is not the latent statistic of a NoisyRegressionStat node"
    stats_dtypes_shapes: ClassVar[dict] = {
        "n_fallback": (np.int64, []),
    }
    link_tag: ClassVar[str] = TAG
    op_type: ClassVar[type] = RegressionSuffStatRV

    def __init__(self, vars: Any = None, *, proposals: int = 8, **kwargs: Any):
        self.proposals = int(proposals)
        if self.proposals < 0:
            raise ValueError(f"proposals must be >= 0 (got {proposals})")
        super().__init__(vars, **kwargs)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        outputs, self._plan = [], []
        for rv in rvs:
            info = self.links(rv)
            theta, sigma2, second, phi, _ = rv.owner.op.dist_params(rv.owner)
            z = model[info.name]
            # Gaussian noise: σ² = τ² is known, read as a constant of z's shape.
            noise = (
                model[info.noise_variance]
                if info.noise_sd is None
                else pt.full_like(z, info.noise_sd**2, dtype="float64")
            )
            outputs.extend([theta, sigma2, second, phi, rv, noise, z])
            self._plan.append((info.n, ValueWriter(model, rv, **compile_kwargs)))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every s from its full conditional."""
        values = self._read(point)
        point = dict(point)
        n_fallback = 0
        for i, (n, writer) in enumerate(self._plan):
            theta, sigma2, second, phi, current, noise_var, z = (
                np.asarray(v, dtype=np.float64) for v in values[7 * i : 7 * i + 7]
            )
            mean, cov = suffstat_moments(theta, sigma2, XMoments(second, phi))
            draw = draw_regression_suffstat(
                self.rng,
                clt_mean=n * mean[None],
                clt_cov=n * cov[None],
                released=z[None],
                noise_variance=noise_var[None],
                n=n,
                current=current[None],
                proposals=self.proposals,
            )
            n_fallback += draw.n_fallback
            point[writer.name] = writer(draw.value[0], point)
        return point, [{"n_fallback": n_fallback}]


class RegressionConjugateStep(DPGibbsStep):
    """Gibbs step drawing (θ, σ²) jointly from their Normal–Inverse-Gamma posterior given s.

    The prior is read from the model graph (:func:`~pymc_dp.regression.nig_prior_parameters`);
    its mean may be random and sampled by another step method. If θ feeds several nodes, the
    posterior conditions on all their statistics.

    As in Algorithm 1 of the paper, this is θ | s under the exact record model, for which s is
    sufficient; the CLT density of s in the PyMC model (which also depends on θ) is the
    approximation used for s's own update, not part of this one.

    Parameters
    ----------
    vars
        θ and σ² (both; they are one block); by default those of every NoisyRegressionStat.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Raises
    ------
    ValueError
        If θ or σ² is used elsewhere in the model (the NIG update is then not the conditional).

    References
    ----------
    Bernstein & Sheldon (2019), Eq. (1) and Algorithm 1 line 3.
    """

    name = "dp_regression_conjugate"
    role: ClassVar[str] = "it is not the (θ, σ²) of a NoisyRegressionStat node"
    link_tag: ClassVar[str] = TAG

    @staticmethod
    def accepts(links: Any) -> bool:  # noqa: D102
        # θ's and σ²'s link is the tuple of the nodes they feed.
        return (
            isinstance(links, tuple)
            and len(links) > 0
            and all(info.method == "gibbs-ss" for info in links)
        )

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        blocks: dict[tuple[str, str], list[str]] = {}
        for rv in rvs:
            first = self.links(rv)[0]
            blocks.setdefault((first.theta, first.sigma2), []).append(rv.name)
        outputs, self._plan = [], []
        for (theta_name, sigma2_name), given in blocks.items():
            require_block(
                (theta_name, sigma2_name),
                given,
                f"{theta_name!r} and {sigma2_name!r} are drawn jointly from their NIG "
                f"posterior; give RegressionConjugateStep both (got {given})",
            )
            theta, sigma2 = model[theta_name], model[sigma2_name]
            links = self.links(theta)
            require_nig_sole_use(
                model,
                theta,
                sigma2,
                links,
                f"so ({theta_name}, {sigma2_name}) | s is not the NIG update; use them only in "
                "the NoisyRegressionStat nodes (Deterministics are fine)",
            )
            outputs.extend(nig_prior_parameters(model, theta, sigma2))
            outputs.extend(model[info.suffstat] for info in links)
            writers = tuple(ValueWriter(model, rv, **compile_kwargs) for rv in (theta, sigma2))
            self._plan.append(([info.n for info in links], writers))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every (θ, σ²) from its NIG posterior given the current statistics."""
        values = [np.asarray(v, dtype=np.float64) for v in self._read(point)]
        point = dict(point)
        from_prior = self._starts_chain()  # a chain's start: (θ, σ²) from their prior
        pos = 0
        for ns, (theta_writer, sigma2_writer) in self._plan:
            post = NIG(*values[pos : pos + 4])
            pos += 4
            for n in ns:
                if not from_prior:
                    post = nig_update(post, statistic=values[pos], n=n)
                pos += 1
            theta, sigma2 = draw_nig(self.rng, post)
            point[theta_writer.name] = theta_writer(theta, point)
            point[sigma2_writer.name] = sigma2_writer(sigma2, point)
        return point, [{}]


class _NodeCovariateStep(DPGibbsStep):
    """What the steps that draw a node's model of x given its statistic s share.

    A subclass names the node's variables it draws (:meth:`_variables`); this finds them by
    their node, compiles the read of each node's s and the writers of those variables.
    """

    link_tag: ClassVar[str] = TAG

    @staticmethod
    def _variables(info: Any) -> tuple[str, ...]:
        """Names of the variables of node ``info`` this step draws (empty if none)."""
        raise NotImplementedError

    @classmethod
    def owns(cls, rv: Any) -> bool:
        info = cls.links(rv)
        # θ's and σ²'s link is the tuple of the nodes they feed: not a model of x.
        return info is not None and not isinstance(info, tuple) and rv.name in cls._variables(info)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        nodes: dict[str, list[str]] = {}
        for rv in rvs:
            nodes.setdefault(self.links(rv).name, []).append(rv.name)
        self._plan, outputs = [], []
        for given in nodes.values():
            info = self.links(model[given[0]])
            names = self._variables(info)
            require_block(
                names,
                given,
                f"{list(names)} are drawn jointly from their posterior given s; give "
                f"{type(self).__name__} all of them (got {given})",
            )
            outputs.append(model[info.suffstat])
            writers = tuple(ValueWriter(model, model[v], **compile_kwargs) for v in names)
            self._plan.append((info, writers))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def _nodes(self, point: dict) -> list[tuple[Any, tuple, np.ndarray]]:
        """(link, writers, current s) of every node."""
        values = self._read(point)
        return [
            (info, writers, np.asarray(s, dtype=np.float64))
            for (info, writers), s in zip(self._plan, values, strict=True)
        ]


class CovariateModelStep(_NodeCovariateStep):
    """Gibbs-SS-Update: draw (μ_x, Σ_x) from their NIW posterior given the covariate sums of s.

    Exact under the normal model of x, since (Σx, Σxxᵀ) is sufficient for (μ_x, Σ_x)
    (:mod:`pymc_dp.regression.kernels.data_model`).

    Parameters
    ----------
    vars
        ``{name}_x_loc`` and ``{name}_x_cov`` (both); by default those of every node.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    References
    ----------
    Bernstein & Sheldon (2019), §3.4.4 (Gibbs-SS-Update).
    """

    name = "dp_covariate_model"
    role: ClassVar[str] = "it is not the covariate model of a NoisyRegressionStat node"

    @staticmethod
    def _variables(info: Any) -> tuple[str, ...]:
        if info.x_prior is None or info.method != "gibbs-ss":
            return ()
        return (info.x_loc, info.x_cov)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every (μ_x, Σ_x) from its NIW posterior given the current s."""
        nodes = self._nodes(point)
        point = dict(point)
        from_prior = self._starts_chain()  # a chain's start: (μ_x, Σ_x) from their prior
        for info, (loc_writer, cov_writer), s in nodes:
            post = info.x_prior if from_prior else niw_update(info.x_prior, statistic=s, n=info.n)
            loc, cov = draw_niw(self.rng, post)
            point[loc_writer.name] = loc_writer(loc, point)
            point[cov_writer.name] = cov_writer(0.5 * (cov + cov.T), point)
        return point, [{}]


class BinaryCovariateStep(_NodeCovariateStep):
    """Binary covariates: draw the cell probabilities π | s ~ Dirichlet(α + counts(s)).

    For d ≤ 2 binary covariates the covariate sums of s fix the cell counts
    (:func:`~pymc_dp.regression.kernels.x_models.binary_cell_counts`; clipped at 0, since the
    CLT's s is continuous), which are sufficient for π.

    Parameters
    ----------
    vars
        ``{name}_x_probs``; by default those of every node with ``x_model="binary"``.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.
    """

    name = "dp_binary_covariates"
    role: ClassVar[str] = "it is not the binary covariate model of a NoisyRegressionStat node"

    @staticmethod
    def _variables(info: Any) -> tuple[str, ...]:
        # The cell model's π is RegressionCellStep's, the level model's RegressionLevelStep's.
        own = info.x_probs is None or info.cells is not None or info.x_model in ("levels", "pair")
        return () if own else (info.x_probs,)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every π from its Dirichlet posterior given the current s."""
        nodes = self._nodes(point)
        point = dict(point)
        from_prior = self._starts_chain()
        for info, (writer,), s in nodes:
            alpha = np.asarray(info.x_probs_prior, dtype=np.float64)
            if not from_prior:
                alpha = alpha + binary_cell_counts(s, info.n, info.d)
            draw = self.rng.standard_gamma(alpha)
            draw = np.maximum(draw / draw.sum(), 1e-300)
            point[writer.name] = writer(draw / draw.sum(), point)
        return point, [{}]


class RegressionNoiseVarianceStep(NoiseVarianceStep):
    """Gibbs step for the Laplace mixing variances of a NoisyRegressionStat node.

    Each ``1/σ²_j ~ InverseGaussian(1/(b|z_j − s_j|), 1/b²)`` with b = Δ/ε, as
    :class:`~pymc_dp.NoiseVarianceStep` (whose update this reuses).

    References
    ----------
    Bernstein & Sheldon (2019), Algorithm 1 line 5; Park & Casella (2008).
    """

    name = "dp_regression_noise_variance"
    role: ClassVar[str] = "it is not the noise variance of a NoisyRegressionStat node"
    link_tag: ClassVar[str] = TAG


register_step_methods(
    [
        RegressionSuffStatStep,
        RegressionConjugateStep,
        CovariateModelStep,
        BinaryCovariateStep,
        RegressionNoiseVarianceStep,
    ]
)
