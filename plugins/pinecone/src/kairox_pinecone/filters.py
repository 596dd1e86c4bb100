"""Kairox metadata filters, translated into Pinecone's metadata-filter language.

Kairox's ``Query.filters`` is equality on metadata: ``{"topic": "cooking"}``; a list means
any of its values (``{"topic": ["astronomy", "biology"]}``); several keys must all match.
Pinecone writes the same thing as ``{"topic": {"$eq": "cooking"}}``,
``{"topic": {"$in": ["astronomy", "biology"]}}`` and ``{"$and": [...]}``. A knowledge
base's static ``filter`` (already in Pinecone syntax) is AND-ed with the query's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kairox import QueryError
from kairox.retrieval.filters import OPERATORS, Condition, FilterExpr, FilterSupport, Not, Or
from kairox.retrieval.filters import And as And
from kairox.retrieval.filters.compiling import join_parts

__all__ = ["NO_MATCH", "SUPPORT", "compile_filter", "merge_filters", "to_pinecone_filter"]


class _NoMatch:
    """The filter that matches nothing (``{"k": []}``): no request needs to be sent."""

    def __repr__(self) -> str:
        return "NO_MATCH"


#: Returned by :func:`to_pinecone_filter` for a filter no vector can satisfy.
NO_MATCH: Any = _NoMatch()


def _scalar(key: str, value: Any) -> str | int | float | bool:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise QueryError(f"filter {key!r}: {value} is too large for a Pinecone filter")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QueryError(f"filter {key!r}: {value!r} cannot be compared; use a finite number")
        return value
    raise QueryError(
        f"filter {key!r}: a {type(value).__name__} value cannot be compared; use a string, "
        "a number, a boolean, or a list of them (Pinecone operators such as $gt belong "
        "in the knowledge base's static `filter`)"
    )


def to_pinecone_filter(filters: Mapping[str, Any]) -> Any:
    """``Query.filters`` as a Pinecone filter: ``None`` for no filter, :data:`NO_MATCH`
    when a key has an empty list of allowed values.

    :raises QueryError: a key that is empty or starts with ``$`` (it would be read as an
        operator), or a value that is not a string, number, boolean or list of them.
    """
    clauses: list[dict[str, Any]] = []
    no_match = False
    for key, value in filters.items():
        if not isinstance(key, str) or not key:
            raise QueryError(f"filter key {key!r} is not a metadata field name")
        if key.startswith("$"):
            raise QueryError(
                f"filter key {key!r} starts with '$', which Pinecone reads as an operator; "
                "filter on a metadata field name"
            )
        if isinstance(value, list | tuple | set | frozenset):
            values = [_scalar(key, item) for item in value]
            if not values:
                no_match = True
                continue
            # Pinecone's $in takes strings or numbers; a boolean list is written as $eq's.
            if any(isinstance(item, bool) for item in values):
                clauses.append({"$or": [{key: {"$eq": item}} for item in values]})
            else:
                clauses.append({key: {"$in": values}})
        else:
            clauses.append({key: {"$eq": _scalar(key, value)}})
    if no_match:
        return NO_MATCH
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def merge_filters(
    static: Mapping[str, Any] | None, query: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Both filters must hold: ``{"$and": [static, query]}``, or whichever one is set."""
    parts = [dict(part) for part in (static, query) if part]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


# -- the Kairox filter language ------------------------------------------------------------

#: Pinecone has every operator but ``$contains`` (a list field's ``$in``), ``$not`` (pushed
#: down with De Morgan) and ranges over dates (its ranges compare numbers only).
SUPPORT = FilterSupport(OPERATORS, date_ranges=False)


class _All:
    """No condition: every vector matches."""


_ALL: Any = _All()


def compile_filter(expr: FilterExpr | None) -> Any:
    """A parsed Kairox filter as a Pinecone filter: ``None`` for none, :data:`NO_MATCH`
    when nothing can match. ``$not`` is pushed down to the conditions (``$eq`` <->
    ``$ne``, ``$in`` <-> ``$nin``, a negated range is "the other range, or missing")."""
    if expr is None:
        return None
    node = _compile(expr, negate=False)
    if node is _ALL:
        return None
    return node


def _join(op: str, parts: list[Any]) -> Any:
    # op "$and": NO_MATCH absorbs, _ALL vanishes; "$or" the other way round.
    absorbing, neutral = (NO_MATCH, _ALL) if op == "$and" else (_ALL, NO_MATCH)
    return join_parts(parts, absorbing, neutral, lambda kept: {op: kept})


_FLIP = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}


def _compile(expr: FilterExpr, negate: bool) -> Any:
    if isinstance(expr, Not):
        return _compile(expr.item, not negate)
    if isinstance(expr, And | Or):
        op = "$and" if isinstance(expr, And) != negate else "$or"
        return _join(op, [_compile(item, negate) for item in expr.items])
    assert isinstance(expr, Condition)
    field, op, value = expr.field, expr.op, expr.value
    if op == "$exists":
        return {field: {"$exists": value != negate}}
    if op == "$contains":
        return {field: {"$nin" if negate else "$in": [value]}}
    if op in ("$eq", "$ne"):
        return {field: {"$ne" if (op == "$eq") == negate else "$eq": value}}
    if op in ("$in", "$nin"):
        assert isinstance(value, tuple)
        positive = (op == "$in") != negate
        if not value:
            return NO_MATCH if positive else _ALL
        if isinstance(value[0], bool):  # Pinecone's $in takes strings or numbers only
            cond = "$eq" if positive else "$ne"
            return _join("$or" if positive else "$and", [{field: {cond: v}} for v in value])
        return {field: {"$in" if positive else "$nin": list(value)}}
    if not negate:
        return {field: {op: value}}
    # not (f > v) holds where f <= v and where f is missing.
    return {"$or": [{field: {_FLIP[op]: value}}, {field: {"$exists": False}}]}
