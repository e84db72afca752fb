"""The hand-written model of ``benchmarks/grouped_speed.py`` with released window counts."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grouped_speed.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("grouped_speed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_count_share_option_parses_none_auto_and_shares(bench) -> None:
    assert bench.parse_args([]).count_share is None  # release_grouped's own default
    assert bench.parse_args(["--count-share", "auto"]).count_share == "auto"
    assert bench.parse_args(["--count-share", "0.2"]).count_share == 0.2
    with pytest.raises(argparse.ArgumentTypeError, match="0, 1"):
        bench._count_share("1.5")


def test_hand_written_count_latent_has_the_window_mass_of_scipy(bench) -> None:
    """Mean n·q and variance n·q(1 − q) of the latent count, q from scipy's Poisson CDF."""
    setting = bench.Setting("poisson", 4, 1.0, count_share="auto")
    rs = bench.make_release(setting)
    assert rs.window_count is not None and rs.window_count.shape == (4,)
    model = bench.hand_written_model(setting, rs)
    assert "y_count" in model.named_vars and model.rvs_to_values[model["y_count"]] is not None
    lo, hi = bench.POISSON_WINDOW
    lam = np.array([0.5, 5.0, 30.0, 45.0])
    q = stats.poisson.cdf(hi, lam) - stats.poisson.cdf(lo - 1, lam)
    n = np.asarray(rs.n, dtype=np.float64)
    point = {**model.initial_point(), "mu": 0.0, "tau_log__": 0.0, "z": np.log(lam)}
    point["c_e"] = np.ones(4)
    # FAST_COMPILE: Python linker, no C compilation (seconds under load)
    values = {"inputs": model.value_vars, "on_unused_input": "ignore", "mode": "FAST_COMPILE"}
    (count_graph,) = model.replace_rvs_by_values([model["c"]])  # c in the value variables
    count = model.compile_fn(count_graph, **values)
    expected = n * q + np.sqrt(n * q * (1 - q))
    np.testing.assert_allclose(count(point), expected, rtol=1e-12)
    assert np.isfinite(model.compile_fn(model.logp(), **values)(point))


@pytest.mark.parametrize("family", ["normal", "poisson"])
def test_hand_written_twin_of_fit_has_fits_population_priors(bench, family) -> None:
    """``--hierarchy fit``: the hand-written side's population priors are ``pymc-dp fit``'s."""
    from pymc_dp.model.hierarchical import build_grouped_model, population_variables

    setting = bench.Setting(family, 4, 1.0, sigma="group")
    rs = bench.make_release(setting)
    names = population_variables(rs)
    assert set(bench.monitored(setting, "fit")) >= set(names)
    from pymc.model.transform.conditioning import remove_value_transforms

    # The densities of the variables themselves: fit's model samples its population in the
    # release's units (model.starts.Standardised), the hand-written one on PyMC's defaults.
    models = {
        "fit": remove_value_transforms(build_grouped_model(rs)),
        "hand": remove_value_transforms(bench.hand_written_model(setting, rs, priors="fit")),
        "readme": remove_value_transforms(bench.hand_written_model(setting, rs, priors="readme")),
    }
    rng = np.random.default_rng(0)
    for _ in range(3):  # positive values: τ and τ_σ are HalfNormal
        shared = dict(zip(names, np.abs(rng.normal(size=len(names))), strict=True))
        logp = {}
        for key, model in models.items():
            rvs = [model[name] for name in names]
            point = model.initial_point()
            point.update({model.rvs_to_values[rv].name: shared[rv.name] for rv in rvs})
            fn = model.compile_fn(
                model.logp(vars=rvs),
                inputs=model.value_vars,
                mode="FAST_COMPILE",
                on_unused_input="ignore",
            )
            logp[key] = float(fn(point))
        assert np.isclose(logp["fit"], logp["hand"], rtol=1e-10)
        assert not np.isclose(logp["readme"], logp["hand"])


def test_split_is_for_nutpie_and_adds_its_columns(bench) -> None:
    assert bench.parse_args(["--nuts-sampler", "nutpie", "--split"]).split
    with pytest.raises(SystemExit):
        bench.parse_args(["--split"])  # PyMC's sampler has no separate compile call
    assert {"compile_seconds", "sampling_seconds", "steps_per_draw"} <= set(bench.SAMPLE_COLUMNS)
    row = bench.SampleRow("poisson", 50, 0.1, "default", "nutpie", seconds=2.0, ess_bulk=10.0)
    assert "| - | - | - |" in bench.markdown([row], bench.SAMPLE_COLUMNS)  # not split: no parts


@pytest.mark.parametrize("side", ["default", "hand"])
def test_centred_hierarchy_keeps_the_readme_prior_of_the_group_effects(bench, side) -> None:
    """``--hierarchy centred``: z_g centred by public weights, log λ_g still N(μ, τ²)."""
    import pymc as pm

    setting = bench.Setting("poisson", 12, 1.0)  # ≥ 10 groups: centring weights not all 0
    rs = bench.make_release(setting)
    weights = bench.readme_weights(setting, rs, "centred")
    assert weights.shape == (12,) and weights.max() > 0.5  # ε = 1, 50–500 records a group
    assert bench.readme_weights(setting, rs, "readme") is None
    model = bench.build(setting, rs, side, "noncentred", "centred")
    with model:
        prior = pm.sample_prior_predictive(4000, var_names=["mu", "tau", "z", "lam"], random_seed=1)
    draws = {name: prior.prior[name].values.reshape(4000, -1).squeeze() for name in prior.prior}
    standard = (np.log(draws["lam"]) - draws["mu"][:, None]) / draws["tau"][:, None]
    for g in range(12):  # each group's (η_g − μ)/τ is N(0, 1) whatever its weight
        assert stats.kstest(standard[:, g], "norm").pvalue > 0.001
    assert stats.kstest(draws["mu"], stats.norm(1.5, 1.0).cdf).pvalue > 0.001  # README's μ
    heaviest = int(np.argmax(weights))  # its z moves with μ (z_g ~ N(w_g μ, τ^(2 w_g)))
    assert np.corrcoef(draws["z"][:, heaviest], draws["mu"])[0, 1] > 0.3
