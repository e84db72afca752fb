"""Strict JSON for files that cross a trust boundary: release files and privacy ledgers.

:func:`strict_loads` is :func:`json.loads` that refuses what a file written by pymc_dp never
holds and a tampered one might: a key given twice in one object (``json`` keeps the last one
silently), integers of more than :data:`MAX_INT_DIGITS` digits, and nesting deeper than
:data:`MAX_DEPTH` (``json`` would raise ``RecursionError`` on a deep enough file). Every refusal
is a one-line ``ValueError``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "strict_loads"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects accepted (a release file nests 5 levels)."""

MAX_INT_DIGITS = 1000
"""Most digits of an integer literal: well beyond any float (309 digits), so that the field
checks still name a field whose integer overflows a float, while a 5000-digit one (slow to
convert, and beyond Python's own 4300-digit limit) is refused here."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {key!r} appears twice in one object")
        data[key] = value
    return data


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _depth(data: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                children = node.values() if isinstance(node, dict) else node
                stack.extend((child, depth + 1) for child in children)
    return deepest


def strict_loads(text: str) -> Any:
    """Parse JSON ``text`` strictly.

    Raises
    ------
    json.JSONDecodeError
        If ``text`` is not JSON.
    ValueError
        On a duplicate key, an integer longer than :data:`MAX_INT_DIGITS` digits or nesting
        deeper than :data:`MAX_DEPTH`.

    Examples
    --------
    >>> strict_loads('{"n": 3, "value": [1.5]}')
    {'n': 3, 'value': [1.5]}
    >>> strict_loads('{"n": 3, "n": 4}')
    Traceback (most recent call last):
    ...
    ValueError: the key 'n' appears twice in one object
    """
    try:
        data = json.loads(text, object_pairs_hook=_object, parse_int=_integer)
    except RecursionError:
        raise ValueError(f"arrays or objects nested deeper than {MAX_DEPTH} levels") from None
    if _depth(data) > MAX_DEPTH:
        raise ValueError(f"arrays or objects nested deeper than {MAX_DEPTH} levels")
    return data
