"""Codes 0..K-1, all K counts released: the declaration of ``families.categorical.Categorical``."""

from __future__ import annotations

from pymc_dp.families.declaration import CommandLine, FamilyDeclaration, FamilyOption, PriorSpec

__all__ = ["CATEGORICAL", "CATEGORIES"]

CATEGORIES = FamilyOption(
    "categories",
    "categories",
    "the number K >= 2 of codes 0..K-1, or the public labels, comma-separated (e.g. "
    "red,green,blue), never read from the data; labels are written to the release and become "
    "the posterior's coordinates",
    kind="categories",
    metavar="K|LABELS",
)
"""``--categories K`` or ``--categories red,green,blue``: the public categories."""

CATEGORICAL = FamilyDeclaration(
    name="categorical",
    implementation="pymc_dp.families.categorical:Categorical",
    # The Dirichlet's alpha is one number for every category or one per category.
    prior=PriorSpec(
        "Dirichlet",
        ("alpha",),
        {"alpha": 1.0},
        ("p",),
        note="(one value, or K values: alpha=1,2,1)",
    ),
    command_line=CommandLine(
        records="codes 0..K-1 with --categories K", release="all K counts, sensitivity 2"
    ),
    options=(CATEGORIES,),
    statistic_labels=("count {k}",),
    grouped_link="softmax",
)
