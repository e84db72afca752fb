"""The public premise behind a release window: it was chosen to hold most of the records.

A window sum ŝ = Σ t̂(z_i) of a Poisson or Exponential release has two explanations of the same
value: a law whose records mostly fall inside the window (the intended one), and a law whose
records mostly fall *outside* it, with the few inside adding up to the same sum (a Poisson with
λ ≈ 38 over the window [0, 30] gives about the window sum of λ ≈ 2.7). The window sum alone
cannot tell them apart, so under the conjugate prior alone the posterior has a second, far mode
that can carry 10–25% of the mass (issue 36: ``randhie.mdvis``, ``fair.yrs_married``).

The curator chose the window, without looking at the data, to hold most records: that is
public information, and the default model states it as ``k`` pseudo-records seen inside the
window, a factor q(θ)^k on the prior, where q(θ) = P_θ(a ≤ z ≤ b) is the window's mass
(:meth:`~pymc_dp.families.TruncatedFamily.window_log_masses`). With ``k`` =
:data:`WINDOW_RECORDS` = 5 a law that puts only half of its records in the window is
down-weighted 32-fold and one with 39% (the far Exponential mode above) 110-fold, while laws
whose window holds 90% or more lose at most a factor 1.7, which the release's n records
overrule. ``k = 0`` removes the premise (the plain conjugate prior).
"""

from __future__ import annotations

import pymc as pm
import pytensor.tensor as pt

from pymc_dp.families import ExponentialFamily, TruncatedFamily

__all__ = ["WINDOW_RECORDS", "add_window_premise", "window_premise_applies"]

WINDOW_RECORDS = 5.0
"""Pseudo-records inside the window that the default model's prior adds (module docstring)."""


def window_premise_applies(family: ExponentialFamily) -> bool:
    """Whether the default model adds the window premise: a windowed family with a scalar θ."""
    return isinstance(family, TruncatedFamily) and family.needs_bounds and family.stat_size == 1


def add_window_premise(
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    bounds: tuple[float, float],
    *,
    records: float = WINDOW_RECORDS,
    name: str = "window_premise",
) -> pt.TensorVariable | None:
    """Add ``records · log q(θ)`` as a :func:`pymc.Potential` to the model in context.

    Parameters
    ----------
    family
        The release's family (a windowed family with a scalar θ, else nothing is added).
    theta
        θ's random variable.
    bounds
        The release window ``(a, b)`` on the data scale.
    records
        Pseudo-records inside the window (``k`` of the module docstring); 0 adds nothing.
    name
        Name of the potential.

    Returns
    -------
    pytensor.tensor.TensorVariable or None
        The potential, or None where the premise does not apply or ``records`` is 0.

    Raises
    ------
    ValueError
        If ``records`` is negative.
    """
    if records < 0:
        raise ValueError(f"records must be >= 0 (got {records!r}); 0 leaves the premise out")
    if records == 0 or not window_premise_applies(family):
        return None
    eta = family.natural_parameters(theta)
    _, log_centre, _ = family.window_log_masses(eta, bounds)
    return pm.Potential(name, records * log_centre)
