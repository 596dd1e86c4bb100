"""Kairox metadata filters as a Weaviate ``Filter``: equality, any-of lists, checked
values; a filter that can match nothing is the ``_MATCH_NOTHING`` sentinel."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kairox.retrieval import QueryError
from kairox_weaviate.config import PROPERTY_NAME

if TYPE_CHECKING:
    pass

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
