"""The default prior of the covariates' normal model, from the public box alone.

A regression release carries the box ``[l_j, u_j]`` that every covariate lies in; it is public and
chosen without looking at the data. With centre ``c`` and half-width ``h`` the default is

    Σ_x ~ InverseWishart(ν = d, Ψ = diag(h²) / 40),    μ_x | Σ_x ~ N(c, Σ_x).

**Why ν = d.** Each variance then has the marginal Σ_jj ~ Ψ_jj / χ²₁ = InverseGamma(½, h_j²/80),
whatever d is (the marginal of an inverse-Wishart diagonal entry has ν − d + 1 degrees of freedom),
and the smallest whole ν of a proper prior is d. Its left tail is as heavy as an inverse-gamma's
can be made while keeping the same scale: P(Σ_jj ≤ t) = P(χ²₁ ≥ Ψ_jj / t) decays like
exp(−Ψ_jj / 2t), so narrow spreads keep a share of the mass that the data can move. E Σ_x does
not exist; nothing uses it (the samplers' step sizes use the prior median,
:func:`~pymc_dp.regression.engine.collapsed.initial_step_sd`).

**Why Ψ = diag(h²) / 40.** The sd of covariate j, σ_j = h_j / √(40 χ²₁), has prior quantiles

==========================  ===========  ===========  ===========  ==========
share of the prior mass      σ_j ≤ h/20   σ_j ≤ h/10   σ_j ≤ h/√3   σ_j ≤ h
==========================  ===========  ===========  ===========  ==========
                               0.002        0.11          0.78       0.87
==========================  ===========  ===========  ===========  ==========

(median h/4.3): spreads from a twentieth of the box's width (σ = h/10) to data that fill it
(σ = h/√3, uniform over the box) each hold a tenth of the mass or more, and 13% sits above h, the
largest sd the box allows, where the release's moments of x rule it out. The previous default
(ν = d + 3, E Σ_x = diag(h²/4)) put about 10⁻⁴ of its mass at or below the variance of x uniform on
a quarter of the box, and the slope's 90% interval then covered the truth in 0.76–0.83 of 200
releases (issue 34); ``docs/regression.md`` has the study with this prior.

μ_x | Σ_x ~ N(c, Σ_x) (κ = 1) keeps the mean within a few of the covariate's own sds of the box's
centre. It adds κ n / (κ + n) (x̄ − c)(x̄ − c)ᵀ ≤ diag(h²) to the n records' scatter n Σ̂_x, so a
narrow covariate that sits near an edge of its box has its spread overstated where n σ_j² is
not large against h_j²; ``docs/regression.md`` lists this limitation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.sensitivity import check_box
from pymc_dp.regression.kernels.data_model import NIW

__all__ = ["default_mixed_x_prior", "default_x_prior"]

_SCALE_SHARE = 1.0 / 40.0
"""Ψ_jj as a share of the squared half-width h_j²."""


def default_x_prior(x_bounds: npt.ArrayLike) -> NIW:
    """The NIW prior of the module docstring for the covariate box ``x_bounds``.

    Parameters
    ----------
    x_bounds
        ``d`` pairs ``(lower, upper)``, as given to
        :func:`~pymc_dp.regression.release_regression` (``release.x_bounds``).

    Returns
    -------
    NIW

    Examples
    --------
    >>> prior = default_x_prior([(0.0, 40.0)])
    >>> prior.loc.tolist(), float(prior.kappa), float(prior.dof), prior.scale.tolist()
    ([20.0], 1.0, 1.0, [[10.0]])
    """
    box = check_box(x_bounds, "x_bounds")
    d = box.shape[0]
    centre = box.mean(axis=1)
    half = 0.5 * (box[:, 1] - box[:, 0])
    return NIW(centre, np.array(1.0), np.array(float(d)), np.diag(_SCALE_SHARE * half**2))


def default_mixed_x_prior(x_bounds: npt.ArrayLike, binary: int | Sequence[int]) -> NIW:
    """The box prior of the normal covariates (all but ``binary``), as the normal model's.

    :func:`~pymc_dp.regression.model.default_prior.default_x_prior` of their box: each group's
    mean is centred on the box's centre, Σ has ν = d₂ and Ψ = diag(h²)/40. ``binary`` is the
    binary covariate's index (the mixed model) or the indices of a factor's dummy columns (the
    level model); each of their intervals must hold 0 and 1.

    Examples
    --------
    >>> prior = default_mixed_x_prior([(0.0, 1.0), (-2.0, 2.0)], binary=0)
    >>> prior.loc.tolist(), float(prior.dof), prior.scale.tolist()
    ([0.0], 1.0, [[0.1]])
    >>> default_mixed_x_prior([(0.0, 1.0), (-2.0, 2.0), (0.0, 1.0)], binary=[0, 2]).loc.tolist()
    [0.0]
    """
    box = check_box(x_bounds, "x_bounds")
    d = box.shape[0]
    columns = [int(binary)] if np.ndim(binary) == 0 else [int(j) for j in binary]
    if not columns or len(set(columns)) != len(columns) or not all(0 <= j < d for j in columns):
        raise ValueError(
            f"binary must be a covariate index in [0, {d - 1}], or distinct ones (got {binary})"
        )
    for j in columns:
        if not (box[j, 0] <= 0.0 and box[j, 1] >= 1.0):
            raise ValueError(
                f"x_bounds[{j}] must hold 0 and 1 for a binary covariate (got {box[j]})"
            )
    rest = np.delete(box, columns, axis=0)
    if rest.shape[0] == 0:
        return NIW(np.zeros(0), np.array(1.0), np.array(1.0), np.zeros((0, 0)))
    return default_x_prior(rest)
