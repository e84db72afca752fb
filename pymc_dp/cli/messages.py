"""One-line error messages of ``pymc-dp``, in the user's terms.

The library's messages name Python arguments (``x``, ``alpha``, ``clamp=True``) and array
indices; on the command line the user gave flags and a file, so :func:`release_message` names the
flag and the data row instead, and :func:`one_line` removes NumPy reprs (``np.float64(-1.0)``
reads ``-1.0``).
"""

from __future__ import annotations

import re
import sys

from pymc_dp.cli.texts import family_options

__all__ = ["InputError", "fail", "fit_message", "one_line", "release_message"]


class InputError(Exception):
    """Bad input found by the command line itself; reported in one line, exit status 2."""


def fail(command: str, message: str) -> int:
    """Print ``pymc-dp COMMAND: error: MESSAGE`` on stderr; return the exit status 2."""
    print(f"pymc-dp {command}: error: {message}", file=sys.stderr)
    return 2


# np.float64(-1.0), np.int64(3), array(-1.), array([1., 2.]) -> their values.
_NUMPY_REPR = re.compile(
    r"\b(?:np\.|numpy\.)?(?:float|int|uint|bool_?)(?:16|32|64|128)?\(([^()]*)\)"
    r"|\barray\((\[?[^()\[\]]*\]?)(?:, dtype=[\w.]+)?\)"
)


def _plain_numbers(text: str) -> str:
    return _NUMPY_REPR.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def one_line(err: BaseException) -> str:
    r"""The error as one line without NumPy reprs, e.g. for ``fail``.

    Examples
    --------
    >>> one_line(ValueError("alpha must be > 0\n(found np.float64(-1.0), array(-2.))"))
    'alpha must be > 0 (found -1.0, -2.)'
    """
    text = str(err) or type(err).__name__
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror[0].lower()}{err.strerror[1:]}"
    return _plain_numbers(" ".join(text.split()))


# Arguments of pymc_dp.release, by the flag that sets them; the families' options are added
# from their declarations (release_message).
_FLAGS = {
    "bounds_range": "--private-bounds",
    "bounds_share": "--bounds-share",
    "bounds_quantiles": "--bounds-quantiles",
    "bounds": "--bounds",
    "epsilon": "--epsilon",
    "rho": "--rho",
}


def _argument_flags() -> dict[str, str]:
    """Each argument of :func:`pymc_dp.release` → its flag, the families' settings included."""
    options = {o.setting: f"--{flag}" for flag, (o, _, _) in family_options().items()}
    return {**options, **_FLAGS}


_RECORDS = re.compile(r"\(the first at index (\d+)\)")


def release_message(text: str, column: str) -> str:
    """A message of :func:`pymc_dp.release` in the terms of ``pymc-dp release``.

    The records are named as ``--column NAME``, an index as the 1-based data row (the header
    not counted), and each argument as its flag.

    Examples
    --------
    >>> release_message(  # doctest: +ELLIPSIS
    ...     "x must lie in [0, 5]: 1 record(s) (the first at index 2) lie outside; pass "
    ...     "clamp=True (pymc-dp release --clamp)", "visits")
    '--column visits must lie in [0, 5]: 1 record(s) (the first at data row 3) lie outside; ...'
    >>> release_message("alpha must be a finite number > 0 (got -1.0)", "v")
    '--shape must be a finite number > 0 (got -1.0)'
    """
    text = re.sub(r"^(?:x|column '[^']*') ", f"--column {column} ", text)
    text = _RECORDS.sub(lambda m: f"(the first at data row {int(m.group(1)) + 1})", text)
    text = text.replace("clamp=True (pymc-dp release --clamp)", "--clamp")
    flags = _argument_flags()
    names = "|".join(map(re.escape, flags))
    argument = re.compile(rf"(?<![\w-])({names})(?:=(?=[-\d.])| (?=must\b|is\b|\(|\[))")
    return argument.sub(lambda m: flags[m.group(1)] + " ", text)


def fit_message(text: str) -> str:
    """A message of :func:`pymc_dp.model.ready_made.build_model` in the terms of ``pymc-dp fit``.

    Examples
    --------
    >>> fit_message("prior parameter alpha must have 1 value(s) for Poisson() (got 2)")
    '--prior alpha must have 1 value(s) for Poisson() (got 2)'
    >>> fit_message("unknown prior parameter 'lam' for the poisson family")
    "unknown --prior parameter 'lam' for the poisson family"
    """
    text = re.sub(r"\bprior parameter (\w+) ", r"--prior \1 ", text)
    text = text.replace("prior hyperparameters must", "--prior values must")
    return text.replace("unknown prior parameter", "unknown --prior parameter")
