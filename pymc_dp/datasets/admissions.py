"""The UC Berkeley admissions data (1973), one record per applicant: three categorical columns.

Read from ``ucb_admissions.csv`` (package data: the published 2 × 2 × 6 table of Bickel, Hammel
& O'Connell 1975, R's ``UCBAdmissions``), expanded to 4526 records, for the noisy marginals
tutorial.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import Any

__all__ = ["UCB_DOMAINS", "load_ucb_admissions"]

UCB_DOMAINS: dict[str, list[str]] = {
    "admit": ["rejected", "admitted"],
    "gender": ["male", "female"],
    "dept": ["A", "B", "C", "D", "E", "F"],
}
"""The public labels of each column (the first is the reference level of the log-linear model)."""


def load_ucb_admissions() -> Any:
    """The 4526 applicants as a pandas DataFrame with columns admit, gender and dept.

    Examples
    --------
    >>> frame = load_ucb_admissions()
    >>> frame.shape, int((frame["admit"] == "admitted").sum())
    ((4526, 3), 1755)
    """
    import pandas as pd

    text = resources.files("pymc_dp.datasets").joinpath("ucb_admissions.csv").read_text("utf-8")
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    records = []
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        records += [(row["admit"], row["gender"], row["dept"])] * int(row["count"])
    return pd.DataFrame(records, columns=["admit", "gender", "dept"])
