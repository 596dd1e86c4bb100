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

__all__ = ["NO_MATCH", "merge_filters", "to_pinecone_filter"]


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
