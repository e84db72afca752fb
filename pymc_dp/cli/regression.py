"""``pymc-dp release --family regression`` and ``pymc-dp fit`` on a regression release.

The curator's side calls :func:`pymc_dp.release_regression` on the ``--x`` and ``--y`` columns
of a CSV file or of Parquet data and writes a :class:`~pymc_dp.curator.release_file.ReleaseFile`
whose one entry names the response and the covariates. The analyst's side builds the default
regression model (:func:`default_regression_model`), samples it with the default sampler of
:class:`~pymc_dp.regression.NoisyRegressionStat`, and writes the coefficients' summary, the
posterior file, a predictive plot and a trace plot.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.cli.messages import InputError, fail, fit_message, one_line

__all__ = ["default_nig_prior", "default_regression_model", "fit_regression", "release_command"]

FIT_FILES = ("summary.csv", "predictive.png", "trace.png")
"""The files of a regression fit beside the posterior file."""


def _regression_message(text: str, settings: dict[str, Any]) -> str:
    """A message of :func:`~pymc_dp.release_regression` in the terms of ``pymc-dp release``.

    Examples
    --------
    >>> _regression_message(
    ...     "x has 2 record(s) outside x_bounds=[[0.0, 1.0]], the first at index 4; the release "
    ...     "was stopped. The bounds must come from public knowledge; or pass clamp=True",
    ...     {"covariates": ["age"], "response": "spend"})  # doctest: +NORMALIZE_WHITESPACE
    '--x age has 2 record(s) outside --x-bounds [[0.0, 1.0]], the first at data row 5; the
     release was stopped. The box must come from public knowledge; or pass --clamp'
    """
    text = re.sub(r"^x (has|must)\b", f"--x {','.join(settings['covariates'])} \\1", text)
    text = re.sub(r"^y (has|must)\b", f"--y {settings['response']} \\1", text)
    text = re.sub(r"\b([xy])_bounds\b=?", r"--\1-bounds ", text).replace("  ", " ")
    text = re.sub(
        r"the first at index (\d+)", lambda m: f"the first at data row {int(m[1]) + 1}", text
    )
    factor = [settings["covariates"][j] for j in settings.get("factor", [])]
    text = re.sub(r"\(factor indices \[[\d, ]*\]\)", f"(--factor {','.join(factor)})", text)
    text = text.replace("do not declare factor=", "do not pass --factor")
    text = re.sub(
        r"^factor: covariate (\d+)'s box",
        lambda m: f"--factor {settings['covariates'][int(m[1])]}: its --x-bounds",
        text,
    )
    binary = [settings["covariates"][j] for j in settings.get("binary", [])]
    text = re.sub(r"\(indices \[[\d, ]*\]\)", f"(--binary {','.join(binary)})", text)
    text = re.sub(
        r"^binary: covariate (\d+)'s box",
        lambda m: f"--binary {settings['covariates'][int(m[1])]}: its --x-bounds",
        text,
    )
    text = text.replace("The bounds must", "The box must").replace("clamp=True", "--clamp")
    return re.sub(r"^epsilon\b", "--epsilon", text)


def release_command(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """Run ``pymc-dp release --family regression``; return the exit status."""
    with contextlib.ExitStack() as ledger:  # a --budget ledger stays locked until the end
        return _release_command(args, settings, ledger)


def _release_command(
    args: argparse.Namespace, settings: dict[str, Any], ledger: contextlib.ExitStack[Any]
) -> int:
    output = Path(args.output)
    covariates, response = settings["covariates"], settings["response"]
    try:
        from pymc_dp._validation import check_positive
        from pymc_dp.cli.inputs import check_output, is_parquet, open_budget

        check_output(output, args.overwrite)
        from pymc_dp.curator.data_files import read_column
        from pymc_dp.curator.release_file import ColumnRelease, ReleaseFile, write_release
        from pymc_dp.regression import release_regression

        gaussian = args.mechanism == "discrete-gaussian"
        if gaussian:
            check_positive(args.rho, "--rho")
        else:
            check_positive(args.epsilon, "--epsilon")
        budget = open_budget(args, "rho" if gaussian else "epsilon", ledger)
        options = dict(
            x_bounds=settings["x_bounds"],
            y_bounds=settings["y_bounds"],
            binary=settings["binary"],
            factor=settings["factor"],
            epsilon=args.epsilon,
            rho=args.rho,
            clamp=args.clamp,
            rng=args.seed,
            mechanism=args.mechanism,
            budget=budget,
            label=f"{Path(args.data).name}:{response}~{'+'.join(covariates)}",
        )
        if is_parquet(args):
            from pymc_dp.curator.frames import parquet_source

            source = parquet_source(args.data)
            for column in [*covariates, response]:
                if column not in source.columns:
                    raise InputError(
                        f"{args.data}: no column {column!r}; the columns are "
                        f"{', '.join(map(repr, source.columns))}"
                    )
            rel = release_regression(source, columns=[*covariates, response], **options)
        else:
            x = np.column_stack(
                [read_column(args.data, c, file_format=args.format) for c in covariates]
            )
            y = read_column(args.data, response, file_format=args.format)
            rel = release_regression(x, y, **options)
        rf = ReleaseFile(
            (ColumnRelease(response, rel, covariates=tuple(covariates)),),
            epsilon=rel.total_epsilon,
            budget=rel.budget,
        )
        # The charge is in the ledger already (saved when made): a failed write still counts.
        write_release(rf, output, overwrite=args.overwrite)
    except (InputError, OSError, OverflowError, TypeError, ValueError) as err:
        return fail("release", _regression_message(one_line(err), settings))
    print(
        f"wrote {output}: regression release of {response!r} on {', '.join(covariates)}, "
        f"n = {rel.n}, epsilon = {rel.epsilon:g}"
        + (f" (rho = {rel.rho:g}, delta = {rel.delta:g})" if rel.rho is not None else "")
        + f", sensitivity = {rel.sensitivity:.6g} "
        f"({rel.sensitivity_bound}), {rel.mechanism} scale = {rel.scale:.6g}"
        + (f", quantum = {rel.quantum:g}" if rel.quantum is not None else "")
        + (", records clamped to the box" if rel.clamped else "")
        + (f", binary: {', '.join(covariates[j] for j in rel.binary)}" if rel.binary else "")
        + (f", factor: {', '.join(covariates[j] for j in rel.factor)}" if rel.factor else "")
        + (
            f"; budget: {rel.budget['spent']:g} of {rel.budget['total']:g} spent"
            if rel.budget is not None
            else ""
        )
    )
    return 0


CLI_TRIES = 256
"""Candidates of the default sampler's multiple-try move under ``pymc-dp fit`` (64 in the library).

Real releases can leave a direction of the parameters nearly unidentified, where the move's
normal proposal is poor: on ``fair`` (issue 36; ``docs/regression.md``) 64 left a chain stuck
(σ² R-hat 1.07, bulk ESS 51 of 4 × 1000 draws, seed 1) and 256 mixed (R-hat 1.00, ESS 2067).
They cost up to about 1.5× the time per step where 64 suffice.
"""


def default_nig_prior(
    x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float, float]:
    """The default Normal–Inverse-Gamma prior of (θ, σ²), from the public box alone.

    With the response's range of centre ``c_y`` and width ``w_y`` and each covariate's range of
    centre ``c_j`` and width ``w_j``, the prior is ``σ² ~ InverseGamma(1, (w_y / 6)²)``: one
    pseudo-observation, a residual sd of about a sixth of the response's range (the sd of data
    that fill two thirds of it), with a tail that decays only like 1/σ² and reaches the widest
    residual the range allows, (w_y / 2)², with 11% of the mass. A release rarely pins σ² on
    its own (σ² trades off against the fitted line through the noisy y² and x·y sums), so this
    prior sets where the posterior of σ² sits; with shape 2 and scale (w_y / 8)² it put 3% of
    its mass above 0.9 on a response in [1, 5] and the posterior of a marriage-rating regression
    missed its OLS residual variance 0.905 (issue 36, ``benchmarks/real_data_defaults.py``).

    The left tail is light on purpose. Under this Normal–Inverse-Gamma form (the one the exact
    samplers need) θ's prior sd scales with σ, so where the release says little about σ² the
    posterior gains a factor of about σ^−p exp(−Q / 2σ²) from θ's prior, Q the fitted line's
    distance from the prior line in V⁻¹: it leans towards the smallest σ² that keeps Q / σ²
    of order p, and only a prior with little mass there stops it. On the ``fair`` release
    (seed 1) priors that spread their mass evenly over log σ² put the posterior there and
    missed OLS's 0.905 by a factor 4 to 20: 94 % intervals [0.002, 0.22] under
    InverseGamma(1/4, w_y²/5000), [0.006, 0.17] under InverseGamma(1/2, w_y²/1000) (both with
    θ's scale s0 = w_y/32), [0.001, 0.094] and [0.014, 0.044] with s0 = w_y/8. This prior's
    mass below w_y²/1000 is e⁻²⁸: residual sds under a thirtieth of the range are ruled out a
    priori, a cost stated in ``docs/regression.md``; at that scale a DP release rarely informs
    σ² (the noise of the y² sum per record, Δ/(nε), must be well below w_y²/1000).
    Given σ², with the reference scale ``s0 = w_y / 8``, the line at the box's centre
    ``a = θ₀ + Σ θ_j c_j ~ N(c_y, σ² (w_y / s0)²)`` and each slope
    ``θ_j ~ N(0, σ² (2 w_y / (w_j s0))²)``, independent: at σ = s0 the centre's value has sd
    w_y and a slope sd 2 w_y / w_j, a slope that crosses the response's range twice over the
    covariate's. Written on θ (intercept at x = 0) it is ``θ | σ² ~ N(μ, σ² V)`` with the fixed
    matrix V of this change of variables.

    Parameters
    ----------
    x_bounds
        ``d`` pairs ``(lower, upper)`` (``release.x_bounds``).
    y_bounds
        ``(lower, upper)`` of the response.

    Returns
    -------
    tuple
        ``(mu, V, alpha, beta)``: θ's prior mean and covariance over σ², and σ²'s
        InverseGamma parameters.

    Examples
    --------
    >>> mu, V, alpha, beta = default_nig_prior([(0.0, 10.0)], (0.0, 8.0))
    >>> mu.tolist(), alpha, round(beta, 4)
    ([4.0, 0.0], 1.0, 1.7778)
    >>> np.sqrt(np.diag(V) * 1.0).round(3).tolist()  # sd at σ = s0 = 1; θ₀ at x = 0, 5 from c
    [11.314, 1.6]
    """
    box = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    lo_y, hi_y = (float(v) for v in y_bounds)
    centre_y, width_y = 0.5 * (lo_y + hi_y), hi_y - lo_y
    centres, widths = box.mean(axis=1), box[:, 1] - box[:, 0]
    s0 = width_y / 8.0
    # Covariance over σ² of (a, slopes), then of θ = T (a, slopes): θ₀ = a − Σ c_j θ_j.
    cov_centred = np.diag([(width_y / s0) ** 2, *((2.0 * width_y / (widths * s0)) ** 2)])
    t = np.eye(len(centres) + 1)
    t[0, 1:] = -centres
    mu = np.concatenate([[centre_y], np.zeros(len(centres))])
    return mu, t @ cov_centred @ t.T, 1.0, (width_y / 6.0) ** 2


def default_regression_model(entry: Any, *, name: str = "z") -> Any:
    """The default model of a regression release: NIG prior from the box, NoisyRegressionStat.

    Parameters
    ----------
    entry
        A :class:`~pymc_dp.curator.release_file.ColumnRelease` holding a regression release.
    name
        Name of the observed node.

    Returns
    -------
    pymc.Model
        ``sigma2``, ``theta`` (dims ``{name}_coef``: intercept and the covariates' names) and the
        node's variables; ``pm.sample()`` assigns the default regression sampler.
    """
    import pymc as pm

    from pymc_dp.regression import NoisyRegressionStat

    rel = entry.release
    mu, cov, alpha, beta = default_nig_prior(rel.x_bounds, rel.y_bounds)
    covariates = entry.covariates or [f"x{j + 1}" for j in range(rel.d)]
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=alpha, beta=beta)
        theta = pm.MvNormal("theta", mu=mu, cov=sigma2 * cov)
        NoisyRegressionStat(
            name, theta=theta, sigma2=sigma2, release=rel, covariates=list(covariates)
        )
    return model


def fit_regression(args: argparse.Namespace, entry: Any, out: Path, names: list[str]) -> int:
    """Fit the default model of a regression entry; write the outputs to ``out``."""
    from pymc_dp.cli.outputs import claim_output_dir

    try:
        if args.prior:
            raise InputError(
                "--prior does not apply to a regression release: its prior is set from the "
                "public box (see pymc-dp fit --help)"
            )
        if args.likelihood != "auto":
            raise InputError(
                "--likelihood does not apply to a regression release (its default sampler "
                "uses the exact law of the statistic)"
            )
        model = default_regression_model(entry)
        claim_output_dir(out, names, args.overwrite)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
    import matplotlib

    matplotlib.use("Agg")

    from pymc_dp import __version__
    from pymc_dp._compat import hdi_summary
    from pymc_dp.cli.outputs import save_posterior
    from pymc_dp.cli.sampling import format_summary, mixing_note, run_sampler
    from pymc_dp.curator.atomic import StagedOutputs
    from pymc_dp.regression import (
        RegressionCellStep,
        RegressionCollapsedStep,
        RegressionLevelStep,
        RegressionMixedStep,
    )
    from pymc_dp.regression.model.noisy_regression import regression_attrs

    rel = entry.release
    x_model = regression_attrs(model)["pymc_dp_x_model_z"]
    if x_model == "mixed":  # a declared binary covariate
        idata = run_sampler(args, model, lambda: [RegressionMixedStep()])
    elif x_model in ("binary", "factor"):  # a declared factor, or two or three binaries
        idata = run_sampler(args, model, lambda: [RegressionCellStep()])
    elif x_model in ("levels", "pair"):  # a declared factor, or two binaries, beside others
        idata = run_sampler(args, model, lambda: [RegressionLevelStep()])
    else:
        idata = run_sampler(args, model, lambda: [RegressionCollapsedStep(tries=CLI_TRIES)])
    mu, cov, alpha, beta = default_nig_prior(rel.x_bounds, rel.y_bounds)
    idata.attrs["pymc_dp_release_z"] = json.dumps(entry.to_dict())
    idata.attrs.update(regression_attrs(model))
    idata.attrs["pymc_dp_prior"] = json.dumps(
        {"distribution": "NormalInverseGamma", "mean": mu.tolist(), "cov_over_sigma2":
         cov.tolist(), "alpha": alpha, "beta": beta}
    )  # fmt: skip
    idata.attrs["pymc_dp_version"] = __version__
    summary = hdi_summary(idata, ["theta", "sigma2"])
    columns = [c for c in summary.columns if c.startswith(("mean", "sd", "hdi", "ess", "r_hat"))]
    with StagedOutputs(out, names) as staged:
        save_posterior(idata, staged.path(names[0]))
        summary.to_csv(staged.path("summary.csv"))
        save_regression_figures(idata, entry, staged.directory, seed=args.seed)
        staged.commit()
    covariates = ", ".join(entry.covariates or [f"x{j + 1}" for j in range(rel.d)])
    print(
        f"Noise-aware posterior of the regression of {entry.column!r} on {covariates} (n = "
        f"{rel.n}, epsilon = {rel.epsilon:g}); prior from the public box: sigma2 ~ "
        f"InverseGamma({alpha:g}, {beta:.4g}), theta | sigma2 normal around the line "
        f"{entry.column} = {mu[0]:.4g} (see pymc-dp fit --help):"
    )
    print(format_summary(summary[columns]))
    note = mixing_note(idata, ["theta", "sigma2"], args.chains)
    if note:
        print(note)
    print(f"wrote {', '.join(names)} to {out}")
    return 0


def save_regression_figures(
    idata: Any, entry: Any, out_dir: Path, *, covariate: int | None = None, seed: int | None = None
) -> tuple[Path, Path]:
    """Write ``predictive.png`` and ``trace.png`` of a regression fit.

    ``predictive.png`` shows, against one covariate over its public range (by default the
    first one the release declares neither binary nor a factor's dummy column; the others at
    their posterior mean under the model of x, or the centre of their box), the posterior mean
    of the regression line with its 90 % credible band and the 90 % posterior predictive band
    of a new response. When the release declares every covariate binary or a factor's column
    (and ``covariate`` is not given) it shows the same at each level of the factor, or each
    combination of the binary covariates. ``trace.png`` is the trace plot of θ and σ².
    """
    import matplotlib.pyplot as plt

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.plots import plot_trace

    rel = entry.release
    names = list(entry.covariates or [f"x{j + 1}" for j in range(rel.d)])
    post = posterior_dataset(idata)
    declared = {*rel.binary, *rel.factor}  # 0/1 columns: a line over [0, 1] says little
    fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
    if covariate is None and declared == set(range(rel.d)):
        _plot_cells(ax, idata, post, entry, names, seed)
    else:
        if covariate is None:
            covariate = next((j for j in range(rel.d) if j not in declared), 0)
        _plot_line(ax, idata, post, entry, names, covariate, seed)
    for bound in rel.y_bounds:
        ax.axhline(bound, color="#555555", ls=":", lw=1)
    ax.set_ylabel(entry.column)
    predictive_png = out_dir / "predictive.png"
    fig.savefig(predictive_png, dpi=110)
    plt.close(fig)
    # One row per coefficient: on one axis the intercept's scale would flatten the slopes.
    rows = post[["sigma2"]]
    coef = post["theta"].dims[-1]
    for key in post["theta"][coef].values:
        rows[f"theta[{key}]"] = post["theta"].sel({coef: key}, drop=True)
    fig = plot_trace(
        rows,
        [*(v for v in rows.data_vars if v != "sigma2"), "sigma2"],
        title=f"Noise-aware posterior trace, regression of {entry.column} (n = {rel.n})",
    )
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=100)
    plt.close(fig)
    return predictive_png, trace_png


def _plot_line(
    ax: Any, idata: Any, post: Any, entry: Any, names: list[str], covariate: int, seed: int | None
) -> None:
    """The regression line against one covariate, the others at their mean."""
    from pymc_dp.regression import posterior_predictive

    rel = entry.release
    box = np.asarray(rel.x_bounds, dtype=np.float64)
    centre = box.mean(axis=1)
    if "z_x_prob" in post:  # the mixed model: E x_b = π, the others' mean mixes the groups'
        prob = post["z_x_prob"].values.reshape(-1)
        loc = post["z_x_loc"].values.reshape(prob.size, 2, -1)
        others = ((1.0 - prob)[:, None] * loc[:, 0] + prob[:, None] * loc[:, 1]).mean(axis=0)
        centre = np.insert(others, rel.binary[0], prob.mean())
    elif "z_x_probs" in post and "z_cell" in post["z_x_probs"].dims:  # the pair model
        from pymc_dp.regression.kernels.level_model import pair_layout

        layout = pair_layout(rel.d)
        probs = post["z_x_probs"].values.reshape(-1, 4)
        loc = post["z_x_loc"].values.reshape(probs.shape[0], 3, -1)
        corner_loc = np.einsum("cr,drk->dck", layout.design, loc)  # the mean at every corner
        others = np.sum(probs[:, :, None] * corner_loc, axis=1).mean(axis=0)
        pair = sorted(rel.binary)
        centre = np.empty(rel.d)
        centre[pair] = (probs @ layout.corners).mean(axis=0)
        centre[[j for j in range(rel.d) if j not in pair]] = others
    elif "z_x_probs" in post and "z_x_loc" in post:  # the level model: π, and the levels' means
        probs = post["z_x_probs"].values.reshape(-1, len(rel.factor) + 1)
        loc = post["z_x_loc"].values.reshape(probs.shape[0], probs.shape[1], -1)
        others = np.sum(probs[:, :, None] * loc, axis=1).mean(axis=0)
        factor = sorted(rel.factor)
        centre = np.empty(rel.d)
        centre[factor] = probs[:, 1:].mean(axis=0)
        centre[[j for j in range(rel.d) if j not in factor]] = others
    elif "z_x_loc" in post:  # the covariates' mean under the model's normal model of x
        centre = post["z_x_loc"].mean(("chain", "draw")).values.reshape(-1)
    grid = np.linspace(box[covariate, 0], box[covariate, 1], 60)
    x_new = np.tile(centre, (grid.size, 1))
    x_new[:, covariate] = grid
    theta = post["theta"].values.reshape(-1, rel.d + 1)
    design = np.column_stack([np.ones(grid.size), x_new])
    lines = theta @ design.T  # (draws, grid): the regression line E[y | x]
    y_new = posterior_predictive(idata, x_new, rng=seed).values.reshape(-1, grid.size)
    lo, hi = np.quantile(y_new, [0.05, 0.95], axis=0)
    ax.fill_between(grid, lo, hi, color="#0072B2", alpha=0.15, lw=0, label="90% predictive")
    lo, hi = np.quantile(lines, [0.05, 0.95], axis=0)
    ax.fill_between(grid, lo, hi, color="#0072B2", alpha=0.35, lw=0, label="90% band of mean")
    ax.plot(grid, lines.mean(axis=0), color="#0072B2", lw=2, label="posterior mean")
    ax.set_xlabel(names[covariate])
    ax.set_xlim(grid[0], grid[-1])
    ax.legend(loc="best", framealpha=0.85, fontsize=9)
    others = [f"{n} = {c:.3g}" for j, (n, c) in enumerate(zip(names, centre, strict=True))]
    others = [o for j, o in enumerate(others) if j != covariate]
    ax.set_title(
        f"Private regression: n = {rel.n}, ε = {rel.epsilon:g}"
        + (f"\nat {', '.join(others)}" if others else "")
        + ("; dotted: the public range of " + entry.column),
        fontsize=10,
    )


def _plot_cells(
    ax: Any, idata: Any, post: Any, entry: Any, names: list[str], seed: int | None
) -> None:
    """E[y | x] and a new response's 90 % interval per level of a declared factor.

    The reference level first; without a factor, every combination of the binary covariates.
    """
    from pymc_dp.regression import posterior_predictive

    rel = entry.release
    if rel.factor:
        corners = np.vstack([np.zeros(rel.d), np.eye(rel.d)])
        labels = ["reference", *names]
    else:
        corners = np.array(list(itertools.product((0.0, 1.0), repeat=rel.d)))
        labels = [",".join(f"{n}={int(v)}" for n, v in zip(names, c, strict=True))
                  for c in corners]  # fmt: skip
    theta = post["theta"].values.reshape(-1, rel.d + 1)
    means = theta @ np.column_stack([np.ones(len(corners)), corners]).T
    y_new = posterior_predictive(idata, corners, rng=seed).values.reshape(-1, len(corners))
    at = np.arange(len(corners))
    for values, width, alpha, label in (
        (y_new, 10, 0.2, "90% predictive"),
        (means, 4, 0.6, "90% interval of mean"),
    ):
        lo, hi = np.quantile(values, [0.05, 0.95], axis=0)
        ax.vlines(at, lo, hi, color="#0072B2", lw=width, alpha=alpha, label=label)
    ax.plot(at, means.mean(axis=0), "o", color="#0072B2", label="posterior mean")
    ax.set_xticks(at, labels, fontsize=9)
    ax.set_xlim(-0.6, len(corners) - 0.4)
    # Below the axes: inside, "best" still covers an interval when the levels fill the width.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=3, frameon=False, fontsize=9)
    ax.set_title(
        f"Private regression: n = {rel.n}, ε = {rel.epsilon:g}\nthe mean of {entry.column} per "
        f"{'level' if rel.factor else 'combination'}; dotted: its public range",
        fontsize=10,
    )
