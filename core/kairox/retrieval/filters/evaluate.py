"""The reference evaluator: what a filter means, on one passage's metadata, in Python.

Every engine's compilation must select exactly the passages this selects (the
conformance suite checks it). The rules, for a field ``f``:

* ``$eq v`` holds when ``f`` is a scalar of the same kind as ``v`` and equal to it
  (numbers compare as numbers, ``1 == 1.0``; booleans are not numbers). ``$ne`` is its
  negation, so it holds when ``f`` is missing. ``$in`` is any ``$eq``, ``$nin`` none.
* ``$gt`` ``$gte`` ``$lt`` ``$lte`` hold when ``f`` is a number (for a number bound) or
  an ISO date string (for a date bound, compared as instants; a date alone is midnight
  UTC); a missing or other-typed ``f`` never satisfies a range.
* ``$exists true`` holds when ``f`` is present and not null; ``$contains v`` when ``f``
  is a list holding the string ``v``.
* ``$and``/``$or``/``$not`` are classical logic, so ``$not`` of a range also holds
  when ``f`` is missing.

Scalar operators on a list-valued field are not portable across engines (some read
``$eq`` on a list as "contains"); use ``$contains`` for lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kairox.retrieval.filters.mapping import as_date
from kairox.retrieval.filters.model import RANGE_COMPARE, And, Condition, FilterExpr, Not, Or

__all__ = ["matches"]

_MISSING = object()


def matches(expr: FilterExpr | None, metadata: Mapping[str, Any]) -> bool:
    """Whether a passage with ``metadata`` satisfies ``expr`` (``None``: every passage)."""
    if expr is None:
        return True
    if isinstance(expr, And):
        return all(matches(item, metadata) for item in expr.items)
    if isinstance(expr, Or):
        return any(matches(item, metadata) for item in expr.items)
    if isinstance(expr, Not):
        return not matches(expr.item, metadata)
    return _condition(expr, metadata.get(expr.field, _MISSING))


def _condition(cond: Condition, stored: Any) -> bool:
    op, value = cond.op, cond.value
    if op == "$exists":
        return (stored is not _MISSING and stored is not None) == value
    if op == "$contains":
        return isinstance(stored, list) and value in stored
    if op == "$eq":
        return _equal(stored, value)
    if op == "$ne":
        return not _equal(stored, value)
    if op == "$in":
        return any(_equal(stored, v) for v in value)  # type: ignore[union-attr]
    if op == "$nin":
        return not any(_equal(stored, v) for v in value)  # type: ignore[union-attr]
    return _range(op, stored, value)


def _family(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else None


def _equal(stored: Any, value: Any) -> bool:
    family = _family(stored)
    return family is not None and family == _family(value) and stored == value


def _range(op: str, stored: Any, bound: Any) -> bool:
    bound_date = as_date(bound)
    if bound_date is not None:
        left: Any = as_date(stored)
        right: Any = bound_date
    elif _family(stored) == "number":
        left, right = stored, bound
    else:
        return False
    if left is None:
        return False
    return RANGE_COMPARE[op](left, right)
