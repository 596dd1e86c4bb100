"""What a source can filter on, and the loud refusal when a filter asks for more.

A source declares ``filter_support`` (a :class:`FilterSupport`); the composite checks
every filtered query against it before asking the source, and a source whose compiler
meets something it cannot express raises :class:`FilterUnsupportedError` itself. Either
way the source reports ``error``; it never returns unfiltered hits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kairox.retrieval.documents import QueryError
from kairox.retrieval.filters.mapping import as_date
from kairox.retrieval.filters.model import (
    OPERATORS,
    RANGES,
    And,
    Condition,
    FilterExpr,
    Not,
    Or,
)

__all__ = ["ALL_OPERATORS", "FilterSupport", "FilterUnsupportedError", "conditions"]


class FilterUnsupportedError(QueryError):
    """A source cannot express part of a filter: names the source, the operator and
    what the source supports."""

    def __init__(self, source: str, operator: str, supported: FilterSupport | str) -> None:
        listed = supported.describe() if isinstance(supported, FilterSupport) else supported
        super().__init__(
            f"source {source!r} cannot filter with {operator}; it supports {listed}. "
            "Rewrite the filter, or leave this source out with --source"
        )
        self.source = source
        self.operator = operator


def conditions(expr: FilterExpr) -> Iterator[Condition]:
    """Every condition of ``expr``, depth first."""
    if isinstance(expr, Condition):
        yield expr
    elif isinstance(expr, Not):
        yield from conditions(expr.item)
    else:
        assert isinstance(expr, And | Or)
        for item in expr.items:
            yield from conditions(item)


@dataclass(frozen=True, slots=True)
class FilterSupport:
    """The operators a source can push down, and whether ranges may compare ISO dates."""

    operators: frozenset[str] = OPERATORS
    date_ranges: bool = True

    def first_unsupported(self, expr: FilterExpr | None) -> str | None:
        """The first operator (or ``$gt on a date``, ...) of ``expr`` not supported here."""
        if expr is None:
            return None
        if isinstance(expr, Not | And | Or):
            op = "$not" if isinstance(expr, Not) else "$and" if isinstance(expr, And) else "$or"
            if op not in self.operators:
                return op
            items = (expr.item,) if isinstance(expr, Not) else expr.items
            for item in items:
                found = self.first_unsupported(item)
                if found:
                    return found
            return None
        if expr.op not in self.operators:
            return expr.op
        if expr.op in RANGES and not self.date_ranges and as_date(expr.value) is not None:
            return f"{expr.op} on a date"
        return None

    def check(self, source: str, expr: FilterExpr | None) -> None:
        """:raises FilterUnsupportedError: when ``expr`` needs what is not supported."""
        found = self.first_unsupported(expr)
        if found is not None:
            raise FilterUnsupportedError(source, found, self)

    def describe(self) -> str:
        ops = " ".join(sorted(self.operators))
        return ops + ("" if self.date_ranges else " (ranges on numbers only, not dates)")


#: Everything the language has.
ALL_OPERATORS = FilterSupport()
