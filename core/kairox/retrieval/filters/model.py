"""The typed filter expression: conditions on one field, combined with and/or/not.

Every source compiles this one tree for its engine (:mod:`kairox.retrieval.filters`
documents the language). Nodes are frozen and hashable, so a parsed filter can be
shared by every source of one retrieval.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from kairox.retrieval.documents import QueryError

__all__ = [
    "COMBINATORS",
    "COMPARISONS",
    "OPERATORS",
    "RANGES",
    "RANGE_COMPARE",
    "And",
    "Condition",
    "FilterError",
    "FilterExpr",
    "Not",
    "Or",
    "Scalar",
    "operators_of",
]

Scalar: TypeAlias = str | int | float | bool

#: Range comparisons (numbers, or ISO dates compared as dates).
RANGES: frozenset[str] = frozenset({"$gt", "$gte", "$lt", "$lte"})
#: Each range operator as a test of a stored value against the bound:
#: ``RANGE_COMPARE["$gt"](stored, bound)`` is ``stored > bound``.
RANGE_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType(
    {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
)
#: Every field operator.
COMPARISONS: frozenset[str] = frozenset(
    {"$eq", "$ne", *RANGES, "$in", "$nin", "$exists", "$contains"}
)
#: Operators that combine sub-expressions.
COMBINATORS: frozenset[str] = frozenset({"$and", "$or", "$not"})
OPERATORS: frozenset[str] = COMPARISONS | COMBINATORS


class FilterError(QueryError):
    """A filter that is malformed or over a limit; ``path`` locates the bad node.

    A :class:`~kairox.retrieval.QueryError` (so a ``ValueError`` and a ``KairoxError``)."""

    def __init__(self, message: str, path: str = "filter") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


@dataclass(frozen=True, slots=True)
class Condition:
    """``field <op> value``. ``value`` is a scalar, a tuple of scalars for ``$in``/``$nin``,
    or a bool for ``$exists``."""

    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[FilterExpr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[FilterExpr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: FilterExpr


FilterExpr: TypeAlias = Condition | And | Or | Not


def operators_of(expr: FilterExpr) -> frozenset[str]:
    """Every operator the expression uses (``$and`` for an :class:`And`, ...)."""
    if isinstance(expr, Condition):
        return frozenset({expr.op})
    if isinstance(expr, Not):
        return frozenset({"$not"}) | operators_of(expr.item)
    found = {"$and" if isinstance(expr, And) else "$or"}
    for item in expr.items:
        found |= operators_of(item)
    return frozenset(found)
