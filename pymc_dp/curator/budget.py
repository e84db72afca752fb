"""A privacy accountant: several releases of one data set charged against one total budget.

:class:`PrivacyBudget` is an odometer (Rogers, Roth, Ullman & Vadhan 2016) for sequential
composition over a fixed data set, in one of two units:

- ``"epsilon"`` (pure ε-DP): costs add up (basic composition, as OpenDP's
  ``make_basic_composition`` for ``MaxDivergence``). Gaussian releases are refused.
- ``"rho"`` (ρ-zCDP): costs add up (Bun & Steinke 2016, Lemma 2.3); an ε-DP release (Laplace,
  PrivateQuantile) costs ε²/2 (their Proposition 1.4).

Each charge is made *before* any noise is drawn, and a charge that would take the total spent
above the budget is refused (nothing is spent). A retry after a failure, or a second release
of the same statistic, is charged again: the accountant never forgets a charge.

A ledger kept in a file (``pymc-dp release --budget``) is opened with :func:`open_ledger`: it holds
an exclusive lock from reading the ledger to the end of the release, and writes each charge to
the file (atomically, fsync'd) before the charge returns, so before any noise is drawn. Concurrent
releases against one file therefore run one after another and never overspend it together, and a
release that fails after its charge leaves the charge recorded.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pymc_dp._validation import check_positive
from pymc_dp.curator.atomic import write_text_atomic
from pymc_dp.curator.strict_json import strict_loads
from pymc_dp.mechanisms.vetted import DISCRETE_GAUSSIAN

__all__ = [
    "BudgetExceededError",
    "PrivacyBudget",
    "charge_release",
    "check_receipt",
    "open_ledger",
]

_SLACK = 1e-12
"""Relative slack for float sums of shares that add up to the total (0.1 + 0.2 + 0.7)."""


class BudgetExceededError(ValueError):
    """A charge would take the privacy spent above the total budget."""


class PrivacyBudget:
    """An odometer over the releases of one data set.

    Parameters
    ----------
    epsilon
        Total pure-DP budget ε (unit ``"epsilon"``).
    rho
        Total zCDP budget ρ (unit ``"rho"``). Give exactly one of ``epsilon`` and ``rho``.

    Examples
    --------
    >>> budget = PrivacyBudget(epsilon=1.0)
    >>> budget.spend(epsilon=0.4, label="age")
    0.4
    >>> budget.remaining
    0.6
    >>> budget.spend(epsilon=0.7, label="income")
    Traceback (most recent call last):
    ...
    pymc_dp.curator.budget.BudgetExceededError: charging epsilon 0.7 for 'income' would spend ...
    >>> budget.ledger
    (('age', 0.4),)
    """

    def __init__(self, *, epsilon: float | None = None, rho: float | None = None) -> None:
        if (epsilon is None) == (rho is None):
            raise TypeError("PrivacyBudget needs exactly one of epsilon= (pure DP) or rho= (zCDP)")
        self._unit: Literal["epsilon", "rho"] = "epsilon" if epsilon is not None else "rho"
        total = epsilon if epsilon is not None else rho
        self._total = check_positive(total, self._unit)
        if not math.isfinite(self._total):
            raise ValueError(f"{self._unit} must be finite (got {total})")
        self._ledger: list[tuple[str, float]] = []
        self._file: Path | None = None  # set by open_ledger: each charge is saved there

    @property
    def unit(self) -> str:
        """``"epsilon"`` or ``"rho"``."""
        return self._unit

    @property
    def total(self) -> float:
        """The total budget."""
        return self._total

    @property
    def spent(self) -> float:
        """Sum of the charges so far."""
        return math.fsum(cost for _, cost in self._ledger)

    @property
    def remaining(self) -> float:
        """What is left (never below 0)."""
        return max(self._total - self.spent, 0.0)

    @property
    def ledger(self) -> tuple[tuple[str, float], ...]:
        """Every charge, in order, as ``(label, cost)``."""
        return tuple(self._ledger)

    def cost(self, *, epsilon: float | None = None, rho: float | None = None) -> float:
        """The cost in this budget's unit of an ε-DP or a ρ-zCDP release."""
        if (epsilon is None) == (rho is None):
            raise TypeError("cost needs exactly one of epsilon= or rho=")
        if epsilon is not None:
            epsilon = check_positive(epsilon, "epsilon")
            return epsilon if self._unit == "epsilon" else epsilon**2 / 2.0
        rho = check_positive(rho, "rho")
        if self._unit == "epsilon":
            raise ValueError(
                "a zCDP (Gaussian) release cannot be charged to a pure-DP budget: create the "
                "budget with PrivacyBudget(rho=...)"
            )
        return rho

    def spend(
        self, *, epsilon: float | None = None, rho: float | None = None, label: str = "release"
    ) -> float:
        """Charge one release, or refuse if it would exceed the total.

        Returns
        -------
        float
            The cost charged, in this budget's unit.

        Raises
        ------
        BudgetExceededError
            If the charge would exceed the total; nothing is charged.
        """
        if not isinstance(label, str):
            raise TypeError(f"label must be a string (got {type(label).__name__})")
        cost = self.cost(epsilon=epsilon, rho=rho)
        after = self.spent + cost
        if after > self._total * (1 + _SLACK):
            given = "epsilon" if epsilon is not None else "rho"
            raise BudgetExceededError(
                f"charging {given} {epsilon if epsilon is not None else rho:g} for {label!r} "
                f"would spend {after:g} of the total {self._unit} {self._total:g} "
                f"({self.remaining:g} remain); nothing was released"
            )
        self._ledger.append((label, cost))
        if self._file is not None:
            try:  # on disk before the caller may draw noise; a charge not saved is not made
                self.save(self._file)
            except BaseException:
                self._ledger.pop()
                raise
        return cost

    def receipt(self) -> dict[str, Any]:
        """The state after the last charge, as a release records it."""
        return {
            "unit": self._unit,
            "total": self._total,
            "spent": self.spent,
            "remaining": self.remaining,
            "label": self._ledger[-1][0] if self._ledger else None,
            "releases": len(self._ledger),
        }

    def to_dict(self) -> dict[str, Any]:
        """The ledger as JSON-ready data (:meth:`from_dict` reads it back)."""
        return {
            "unit": self._unit,
            "total": self._total,
            "ledger": [[label, cost] for label, cost in self._ledger],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyBudget:
        """Rebuild a budget from :meth:`to_dict` output (checked field by field)."""
        if not isinstance(data, Mapping) or set(data) != {"unit", "total", "ledger"}:
            raise ValueError("a privacy ledger needs exactly the fields unit, total and ledger")
        unit = data["unit"]
        if unit not in ("epsilon", "rho"):
            raise ValueError(f"unit must be 'epsilon' or 'rho' (got {unit!r})")
        budget = cls(**{unit: data["total"]})
        if not isinstance(data["ledger"], list):
            raise TypeError("ledger must be a list of [label, cost] pairs")
        for entry in data["ledger"]:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                raise TypeError(f"ledger entries must be [label, cost] (got {entry!r})")
            budget.spend(**{unit: entry[1]}, label=entry[0])
        return budget

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ledger as JSON, atomically (a unique temporary file, fsync, then rename).

        A failure (e.g. a full disk) raises an ``OSError`` naming ``path`` and leaves no
        temporary file and the earlier ledger intact.
        """
        write_text_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PrivacyBudget:
        """Read a ledger written by :meth:`save` (strict JSON: no duplicate keys)."""
        path = Path(path)
        try:
            data = strict_loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a text file; expected a privacy ledger") from None
        except ValueError as err:  # JSONDecodeError included
            raise ValueError(f"{path}: not a valid privacy ledger ({err})") from None
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: not a valid privacy ledger ({err})") from None

    def __repr__(self) -> str:
        return (
            f"PrivacyBudget({self._unit}={self._total:g}, spent={self.spent:g}, "
            f"releases={len(self._ledger)})"
        )


def charge_release(
    budget: Any, mechanism: str, epsilon: float, bounds_epsilon: float, label: str
) -> None:
    """Charge the accountant (if any) before noise is drawn; it refuses an overspend."""
    if budget is None:
        return
    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a pymc_dp.PrivacyBudget (got {type(budget).__name__})")
    if mechanism == DISCRETE_GAUSSIAN:
        budget.spend(rho=epsilon**2 / 2.0 + bounds_epsilon**2 / 2.0, label=label)
    else:
        budget.spend(epsilon=epsilon + bounds_epsilon, label=label)


@contextlib.contextmanager
def open_ledger(
    path: str | os.PathLike[str], *, unit: str, total: float | None = None
) -> Iterator[PrivacyBudget]:
    """Open the ledger file ``path`` for one release, locked until the ``with`` block ends.

    An exclusive lock (``flock``) on the sidecar file ``.NAME.lock`` is taken before the
    ledger is read and held until the block ends, so that concurrent releases against one
    ledger check and charge it one after another. Each :meth:`PrivacyBudget.spend` on the
    yielded budget is written to ``path`` before it returns (before any noise is drawn), so a
    failure after a charge leaves the charge in the file.

    Parameters
    ----------
    path
        The ledger's JSON file.
    unit
        ``"epsilon"`` or ``"rho"``: what the release spends (the ledger must account in it).
    total
        Create the ledger with this total if ``path`` does not exist (refused if it does).

    Raises
    ------
    ValueError
        If the ledger is missing without ``total``, exists with ``total``, is not a valid
        ledger, or accounts in another unit.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.json"
    >>> with open_ledger(path, unit="epsilon", total=1.0) as budget:
    ...     budget.spend(epsilon=0.25, label="age")
    0.25
    >>> PrivacyBudget.load(path).spent
    0.25
    """
    path = Path(path)
    if unit not in ("epsilon", "rho"):
        raise ValueError(f"unit must be 'epsilon' or 'rho' (got {unit!r})")
    with _exclusive_lock(path.with_name(f".{path.name}.lock")):
        if path.exists():
            if total is not None:
                raise ValueError(f"{path} exists: its total is fixed; drop --budget-total")
            budget = PrivacyBudget.load(path)
        else:
            if total is None:
                raise ValueError(f"{path} does not exist; create it with --budget-total TOTAL")
            budget = PrivacyBudget(**{unit: total})
        if budget.unit != unit:
            raise ValueError(f"{path} accounts in {budget.unit}, but this release spends {unit}")
        budget._file = path
        try:
            yield budget
        finally:
            budget._file = None


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold ``flock(LOCK_EX)`` on ``lock_path`` (created if need be; never removed)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        raise OSError(
            "a --budget ledger needs POSIX file locks (fcntl), which this platform lacks"
        ) from None
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_RECEIPT_FIELDS = {"unit", "total", "spent", "remaining", "label", "releases"}


def check_receipt(receipt: Any) -> dict[str, Any]:
    """Check a release's ``budget`` field (:meth:`PrivacyBudget.receipt`); return it as a dict.

    Examples
    --------
    >>> check_receipt({"unit": "epsilon", "total": -1, "spent": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: budget total must be a finite number > 0 (got -1)
    """
    if not isinstance(receipt, Mapping):
        raise TypeError(f"budget must be an object (got {type(receipt).__name__})")
    unknown = set(receipt) - _RECEIPT_FIELDS
    if unknown or not {"unit", "total", "spent"} <= set(receipt):
        raise ValueError(
            f"budget must have the fields unit, total, spent (and remaining, label, releases); "
            f"got {sorted(map(str, receipt))}"
        )
    if receipt["unit"] not in ("epsilon", "rho"):
        raise ValueError(f"budget unit must be 'epsilon' or 'rho' (got {receipt['unit']!r})")
    for name, low in (("total", None), ("spent", 0.0), ("remaining", 0.0)):
        if name not in receipt:
            continue
        value = receipt[name]
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (value > 0 if low is None else value >= low)
        if not ok:
            rule = "> 0" if low is None else ">= 0"
            raise ValueError(f"budget {name} must be a finite number {rule} (got {value!r})")
    label = receipt.get("label")
    if label is not None and not isinstance(label, str):
        raise TypeError(f"budget label must be a string (got {label!r})")
    releases = receipt.get("releases", 0)
    if isinstance(releases, bool) or not isinstance(releases, int) or releases < 0:
        raise ValueError(f"budget releases must be a whole number >= 0 (got {releases!r})")
    return dict(receipt)
