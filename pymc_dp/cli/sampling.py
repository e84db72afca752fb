"""How the ``fit`` commands sample and report.

``pm.sample`` under an interrupt guard (:func:`run_sampler`), the summary table
(:func:`format_summary`), and notes on mixing, R-hat and ESS (:func:`mixing_note`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["format_summary", "jumping_nuts", "mixing_note", "modes_notes", "run_sampler"]


def run_sampler(
    args: argparse.Namespace, model: Any, steps: Any = None, *, start: Any = None
) -> Any:
    """``pm.sample`` with the command's settings; ``KeyboardInterrupt`` unless it completed.

    ``steps``, if given, is called inside the model's context for ``pm.sample``'s ``step``.
    ``start``, if given, is called there with one seed per chain (drawn from ``--seed``) and
    returns more of ``pm.sample``'s arguments (``step``, ``initvals``). ``pm.sample`` takes
    ``--seed`` itself: from PyMC 5.2x a list of seeds no longer sets each chain's, and warns.
    """
    import pymc as pm

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.curator.atomic import InterruptGuard

    with InterruptGuard() as guard, model:
        try:
            extra = {}
            if start is not None:  # one seed per chain, for the steps' own start
                chain_seeds = np.random.default_rng(args.seed).integers(2**30, size=args.chains)
                extra = start(chain_seeds.tolist())
            if steps is not None:
                extra["step"] = steps()
            idata = pm.sample(
                **extra,
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                cores=args.cores,
                random_seed=args.seed,
                progressbar=not args.no_progress,
                compute_convergence_checks=False,  # the summary below reports R-hat and ESS
            )
        except Exception:
            # Interrupted before the first draw, PyMC fails to build a trace of nothing
            # (ValueError); interrupted inside compiled code, the KeyboardInterrupt surfaces
            # wrapped (Numba's SystemError). Either way the guard saw the Ctrl-C.
            if guard.interrupted:
                raise KeyboardInterrupt from None
            raise
    # pm.sample returns the draws made so far when interrupted: such a trace is not a fit.
    sizes = posterior_dataset(idata).sizes
    if guard.interrupted or (sizes["chain"], sizes["draw"]) != (args.chains, args.draws):
        raise KeyboardInterrupt
    return idata


def jumping_nuts(args: argparse.Namespace, model: Any, seeds: list[int]) -> dict[str, Any]:
    """``pm.sample``'s ``step`` and ``initvals`` for a grouped model whose groups can jump.

    PyMC's own start (``jitter+adapt_diag``, one point per chain) and NUTS, with
    :class:`~pymc_dp.GroupJumpStep` after it (:func:`~pymc_dp.grouped_steps`); nothing for a
    model without group effects to jump, which ``pm.sample`` then starts as usual.
    """
    import pymc as pm

    from pymc_dp.model.step_methods import GroupJumpStep, grouped_steps

    if not any(GroupJumpStep.owns(rv) for rv in model.free_RVs):
        return {}
    points, nuts = pm.init_nuts(
        init="jitter+adapt_diag", chains=len(seeds), random_seed=seeds, tune=args.tune,
        progressbar=False, model=model,
    )  # fmt: skip
    return {"step": grouped_steps(model, nuts=nuts), "initvals": points}


def mixing_note(idata: Any, var_names: Sequence[str], chains: int) -> str:
    """The fit's diagnostics: R-hat, bulk ESS and divergences, then a note per problem.

    The first line is always printed (worst R-hat, lowest bulk ESS, number of divergent
    transitions); notes follow when chains disagree (R-hat > 1.05), θ has < 100 effective draws
    per chain, NUTS diverged, or a scalar θ has separated modes
    (:func:`~pymc_dp.evaluation.modes.separated_modes`, each mode with its mass).

    Parameters
    ----------
    idata
        The fit's posterior (InferenceData or DataTree).
    var_names
        θ's variables.
    chains
        Number of chains.

    Returns
    -------
    str
        The lines, joined.
    """
    import arviz as az

    from pymc_dp._compat import posterior_dataset, sample_stats_dataset

    posterior = posterior_dataset(idata)
    ess = az.ess(posterior, var_names=list(var_names), method="bulk")
    lowest, name = min((float(np.min(ess[v].values)), v) for v in var_names)
    worst = float("nan")
    if chains > 1:
        rhat = az.rhat(posterior, var_names=list(var_names))
        worst = max(float(np.max(rhat[v].values)) for v in var_names)
    stats = sample_stats_dataset(idata)
    divergent = (
        int(np.sum(stats["diverging"].values)) if stats is not None and "diverging" in stats else 0
    )
    draws = posterior.sizes.get("chain", 1) * posterior.sizes.get("draw", 1)
    rhat_text = f"R-hat <= {worst:.2f}" if chains > 1 else "R-hat n/a (1 chain)"
    notes = [
        f"diagnostics: {rhat_text}, bulk ESS >= {lowest:.0f} ({name}), "
        f"{divergent} divergent transitions of {draws}"
    ]
    if chains > 1 and not worst <= 1.05:
        notes.append(
            f"warning: R-hat of {', '.join(var_names)} is up to {worst:.2f} (> 1.05): the "
            "chains disagree. A chain started far from the data (a vague prior) can take "
            "long to move; raise --tune and --draws, or use a prior that excludes implausible "
            "values, and look at trace.png."
        )
    if lowest < 100 * chains:
        over = f"over {chains} chains" if chains > 1 else "from 1 chain"
        notes.append(
            f"note: the bulk ESS of {name} is {lowest:.0f} {over}, below the {100 * chains} "
            f"(100 per chain) that ArviZ recommends; raise --draws for reliable estimates."
        )
    if divergent:
        notes.append(
            f"warning: {divergent} divergent transitions ({divergent / draws:.1%} of the draws): "
            "NUTS could not follow the posterior everywhere, so its draws may be biased there; "
            "raise --tune, or give a prior on the scale of the data, and look at trace.png."
        )
    notes.extend(modes_notes(posterior, var_names))
    return "\n".join(notes)


def modes_notes(posterior: Any, var_names: Sequence[str]) -> list[str]:
    """A warning per scalar θ (or θ component) whose posterior has separated modes.

    Each mode holding at least 1% of the draws is named with its mass, median and 94%
    interval: a mean ± sd describes none of them.
    """
    from pymc_dp.evaluation.modes import describe_modes, separated_modes

    notes = []
    for var in var_names:
        values = np.asarray(posterior[var].values, dtype=np.float64)
        flat = values.reshape(values.shape[0] * values.shape[1], -1)
        for j in range(flat.shape[1]):
            modes = separated_modes(flat[:, j])
            if len(modes) > 1:
                label = var if flat.shape[1] == 1 else f"{var}[{j}]"
                notes.append(
                    f"warning: {describe_modes(label, modes)}; the mean and sd above describe "
                    "none of them (posterior.png shows each)."
                )
    return notes


def _number(value: float) -> str:
    """Four significant digits, positional unless the value is tiny or huge."""
    if not isinstance(value, (int, float, np.number)) or not np.isfinite(value):
        return str(value)
    if value != 0 and not 1e-4 <= abs(value) < 1e9:
        return f"{value:.3e}"
    return np.format_float_positional(value, precision=4, unique=False, fractional=False, trim="-")


def format_summary(summary: Any) -> str:
    """The ArviZ summary as text, each value formatted alone (no column turns scientific).

    pandas prints a whole column in scientific notation when one value is large; here each value
    keeps four significant digits, effective sample sizes are whole numbers and R-hat has two
    decimals.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame(
    ...     {"mean": [0.31, 152.4], "ess_bulk": [3612.4, 2e7], "r_hat": [1.0, 1.0]},
    ...     index=["p", "y_s"],
    ... )
    >>> print(format_summary(table))
         mean ess_bulk r_hat
    p    0.31     3612  1.00
    y_s 152.4 20000000  1.00
    """
    formatters = {}
    for column in summary.columns:
        if column.startswith("ess"):
            formatters[column] = lambda v: f"{v:.0f}"
        elif column == "r_hat":
            formatters[column] = lambda v: f"{v:.2f}"
        else:
            formatters[column] = _number
    import pandas as pd

    # ArviZ 1's summary is a DataFrame subclass that prints pre-formatted strings: format the
    # numbers underneath, the same way under both ArviZ versions.
    return pd.DataFrame(summary).to_string(formatters=formatters)
