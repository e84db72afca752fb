"""The default prior of the covariates' normal model, from the public box alone.

A regression release carries the box ``[l_j, u_j]`` that every covariate lies in; it is public and
chosen without looking at the data. With centre ``c`` and half-width ``h`` the default is

    Σ_x ~ InverseWishart(ν = d + 3, Ψ = 2 diag(h²/4)),    μ_x | Σ_x ~ N(c, Σ_x),

so that E Σ_x = diag(h²/4): a priori the box spans about ±2 standard deviations of each
covariate around its mean, and the mean sits near the centre, within about one standard deviation
of the covariate. ν = d + 3 is the smallest whole number of degrees of freedom for which E Σ_x
exists with one to spare, so the prior is as vague as a prior with a mean can be: data that fill
the box (sd h/√3) and data packed in a tenth of it are both plausible. The release decides between
them wherever n·ε allows; where it does not, this prior is what the posterior of the covariates
says, and the study in ``docs/regression.md`` measures its effect on the coefficients.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.sensitivity import check_box
from pymc_dp.regression.kernels.data_model import NIW

__all__ = ["default_x_prior"]


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
    ([20.0], 1.0, 4.0, [[200.0]])
    """
    box = check_box(x_bounds, "x_bounds")
    d = box.shape[0]
    centre = box.mean(axis=1)
    half = 0.5 * (box[:, 1] - box[:, 0])
    dof = d + 3.0
    return NIW(centre, np.array(1.0), np.array(dof), np.diag((dof - d - 1) * (half / 2.0) ** 2))
