"""A test helper: does ``pm.sample``'s posterior agree with the batched engine's on one release?"""

import arviz as az
import numpy as np


def assert_same_posterior_means(pairs, chains: int = 2, engine_chains: int | None = None) -> None:
    """Assert each column's posterior mean agrees within 5 Monte Carlo standard errors.

    Parameters
    ----------
    pairs : sequence of (ndarray, ndarray)
        ``(ours, engine)``: the draws of one variable from ``pm.sample`` and from the batched
        engine, each ``(chains * draws, k)`` with the chains stacked in order.
    chains : int
        How many chains ``pm.sample`` stacked (for ArviZ's ESS and R-hat).
    engine_chains : int, optional
        How many the engine stacked (default ``chains``). The engine runs its chains as one
        batch, whose sweep costs little more than one chain's: many short chains give its side
        the same draws in a fraction of the time.

    Notes
    -----
    The standard error of the difference combines both sides' ``sd / sqrt(ESS)``; each side of
    ``pm.sample`` must also reach R-hat < 1.02.
    """
    for ours, engine in pairs:
        for j in range(ours.shape[1]):
            a = ours[:, j].reshape(chains, -1)
            b = engine[:, j].reshape(engine_chains or chains, -1)
            mcse = np.hypot(*(x.std() / np.sqrt(float(az.ess(x))) for x in (a, b)))
            assert abs(a.mean() - b.mean()) < 5 * mcse, (j, a.mean(), b.mean(), mcse)
            assert float(az.rhat(a)) < 1.02
