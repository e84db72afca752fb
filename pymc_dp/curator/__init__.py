"""Everything the curator runs: exact statistics, vetted noise, the budget, release files.

:func:`~pymc_dp.release` and :func:`~pymc_dp.release_grouped` compute a data set's sufficient
statistics exactly (:mod:`~pymc_dp.curator.exact_sums`, :mod:`~pymc_dp.curator.frames` for data
frames on any engine, :mod:`~pymc_dp.curator.fixed_point` for float statistics), add noise from
a vetted mechanism (:mod:`~pymc_dp.curator.noise`), charge a :class:`PrivacyBudget`, and return
a :class:`Release` (or a :class:`ReleaseSet`) that :func:`write_release` saves and
:func:`read_release` reads back. A window chosen privately is in
:mod:`~pymc_dp.curator.private_window`. Nothing here imports inference code, and no inference
code reads raw records.
"""

from pymc_dp.curator.budget import BudgetExceededError, PrivacyBudget
from pymc_dp.curator.data_files import InputFileError, read_column, read_keys, read_labels
from pymc_dp.curator.grouped import release_grouped
from pymc_dp.curator.record import Release
from pymc_dp.curator.release_file import ColumnRelease, ReleaseFile, read_release, write_release
from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.curator.single import release

__all__ = [
    "BudgetExceededError",
    "ColumnRelease",
    "InputFileError",
    "PrivacyBudget",
    "Release",
    "ReleaseFile",
    "ReleaseSet",
    "read_column",
    "read_keys",
    "read_labels",
    "read_release",
    "release",
    "release_grouped",
    "write_release",
]
