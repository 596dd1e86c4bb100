"""Kairox metadata filters as a Weaviate ``Filter``: equality, any-of lists, checked
values; a filter that can match nothing is the ``_MATCH_NOTHING`` sentinel."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kairox.retrieval import QueryError
from kairox.retrieval.filters import (
    OPERATORS,
    And,
    Condition,
    FilterExpr,
    FilterSupport,
    FilterUnsupportedError,
    Not,
    Or,
)
from kairox.retrieval.filters.compiling import join_parts
from kairox_weaviate.config import PROPERTY_NAME

_MATCH_NOTHING = object()


def _check_scalar(key: str, value: Any) -> None:
    if isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise QueryError(f"filter {key!r}: {value} is outside Weaviate's 64-bit integers")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QueryError(f"filter {key!r}: {value!r} is not a finite number")
        return
    raise QueryError(
        f"filter {key!r}: Weaviate can only compare strings, numbers and booleans, "
        f"got {type(value).__name__} {value!r}"
    )


def _any_of_values(key: str, values: list[Any]) -> list[Any]:
    for value in values:
        _check_scalar(key, value)
    if all(isinstance(v, str) for v in values) or all(isinstance(v, bool) for v in values):
        return values
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        if all(isinstance(v, int) for v in values):
            return values
        return [float(v) for v in values]
    raise QueryError(
        f"filter {key!r}: an any-of list must hold one kind of value (all strings, all "
        f"numbers or all booleans), got {values!r}"
    )


def build_filter(*filter_maps: Mapping[str, Any]) -> Any:
    """Kairox filters -> a ``weaviate.classes.query.Filter`` (``None``: no filter).

    ``{"k": v}`` is ``Filter.by_property("k").equal(v)``; ``{"k": [a, b]}`` is
    ``.contains_any([a, b])``; several keys (and the maps given) are AND-ed with
    ``Filter.all_of``. An empty any-of list can match nothing: the sentinel
    ``_MATCH_NOTHING`` is returned and the search is not sent.
    """
    clauses: list[tuple[str, Any]] = []
    for filters in filter_maps:
        for key, value in filters.items():
            if not isinstance(key, str) or not PROPERTY_NAME.fullmatch(key):
                raise QueryError(
                    f"filter key {key!r} is not a Weaviate property name (a letter or _, "
                    "then letters, digits or _)"
                )
            if isinstance(value, list | tuple | set | frozenset):
                values = list(value)
                if not values:
                    return _MATCH_NOTHING
                clauses.append((key, _any_of_values(key, values)))
            else:
                _check_scalar(key, value)
                clauses.append((key, value))
    if not clauses:
        return None
    from weaviate.classes.query import Filter

    built = [
        Filter.by_property(key).contains_any(value)
        if isinstance(value, list)
        else Filter.by_property(key).equal(value)
        for key, value in clauses
    ]
    return built[0] if len(built) == 1 else Filter.all_of(built)


# -- the Kairox filter language ------------------------------------------------------------

#: Weaviate's v4 filters express every operator; ranges here compare numbers (a date
#: range needs a ``date`` property and RFC 3339 values, which is not wired up yet).
SUPPORT = FilterSupport(OPERATORS, date_ranges=False)


def compile_filter(source: str, expr: FilterExpr | None) -> Any:
    """A parsed Kairox filter as a v4 ``Filter`` (``None``: no filter; ``_MATCH_NOTHING``
    when nothing can match).

    ``$not`` is ``Filter.not_``; ``$in`` is ``contains_any`` (``$nin`` its negation, so a
    missing property matches it as the language says); ``$exists`` is ``is_none``;
    ``$contains`` is ``contains_any`` of one value on a ``text[]`` property.

    :raises FilterUnsupportedError: for a field that is not a Weaviate property name.
    """
    if expr is None:
        return None
    SUPPORT.check(source, expr)
    from weaviate.classes.query import Filter

    def node(e: FilterExpr) -> Any:
        if isinstance(e, Not):
            inner = node(e.item)
            if inner is _MATCH_NOTHING:
                return None  # not(nothing): everything
            return _MATCH_NOTHING if inner is None else Filter.not_(inner)
        if isinstance(e, And | Or):
            parts = [node(item) for item in e.items]
            if isinstance(e, And):  # nothing absorbs, None (everything) drops out
                return join_parts(parts, _MATCH_NOTHING, None, Filter.all_of)
            return join_parts(parts, None, _MATCH_NOTHING, Filter.any_of)
        assert isinstance(e, Condition)
        if not PROPERTY_NAME.fullmatch(e.field):
            raise FilterUnsupportedError(
                source,
                f"the field {e.field!r}",
                "fields that are Weaviate property names (a letter or _, then letters, "
                "digits or _)",
            )
        prop = Filter.by_property(e.field)
        value = e.value
        if e.op == "$eq":
            return prop.equal(value)
        if e.op == "$ne":
            return prop.not_equal(value)
        if e.op in ("$in", "$nin"):
            assert isinstance(value, tuple)
            if not value:
                return _MATCH_NOTHING if e.op == "$in" else None
            any_of = prop.contains_any(list(value))
            return any_of if e.op == "$in" else Filter.not_(any_of)
        if e.op == "$exists":
            return prop.is_none(not value)
        if e.op == "$contains":
            return prop.contains_any([value])
        return {
            "$gt": prop.greater_than,
            "$gte": prop.greater_or_equal,
            "$lt": prop.less_than,
            "$lte": prop.less_or_equal,
        }[e.op](value)

    return node(expr)
