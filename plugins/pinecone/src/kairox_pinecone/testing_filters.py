"""Pinecone's metadata-filter language evaluated the way the service does, for the
loopback index of :mod:`kairox_pinecone.testing`; :class:`BadRequest` is what the
service would refuse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kairox.retrieval.filters import RANGE_COMPARE

__all__ = ["BadRequest", "matches_filter", "value_kind"]


class BadRequest(Exception):
    """A request the service would refuse with 400 (or ``status``)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def value_kind(value: Any) -> str | None:
    """``"bool"``, ``"number"`` or ``"str"``: the types Pinecone metadata values have."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    return None


def _equal(a: Any, b: Any) -> bool:
    return value_kind(a) is not None and value_kind(a) == value_kind(b) and a == b


def _field_matches(stored: Any, op: str, operand: Any) -> bool:
    present = stored is not None
    values = stored if isinstance(stored, list) else [stored] if present else []
    if op == "$exists":
        if not isinstance(operand, bool):
            raise BadRequest("$exists takes true or false")
        return present == operand
    if op in ("$eq", "$ne"):
        if value_kind(operand) is None:
            raise BadRequest(f"{op} takes a string, number or boolean, got {operand!r}")
        hit = any(_equal(v, operand) for v in values)
        return hit if op == "$eq" else not hit
    if op in ("$in", "$nin"):
        if not isinstance(operand, list) or not operand:
            raise BadRequest(f"{op} takes a non-empty array")
        for item in operand:
            if value_kind(item) not in ("str", "number"):
                raise BadRequest(f"{op} takes strings or numbers, got {item!r}")
        hit = any(_equal(v, item) for v in values for item in operand)
        return hit if op == "$in" else not hit
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if value_kind(operand) != "number":
            raise BadRequest(f"{op} takes a number, got {operand!r}")
        numbers = [v for v in values if value_kind(v) == "number"]
        return any(RANGE_COMPARE[op](v, operand) for v in numbers)
    raise BadRequest(f"unknown filter operator {op!r}")


def matches_filter(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` satisfies a Pinecone metadata ``filter`` (``None``: always).

    A list-valued field matches ``$eq``/``$in`` when any element does, and ``$ne``/``$nin``
    when none does. Values are typed: ``"2021"`` is not ``2021``, ``true`` is not ``1``.

    :raises BadRequest: a filter the service would reject.
    """
    if filter is None:
        return True
    if not isinstance(filter, Mapping):
        raise BadRequest(f"a filter must be an object, got {filter!r}")
    for key, condition in filter.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list) or not condition:
                raise BadRequest(f"{key} takes a non-empty array of filters")
            results = [matches_filter(metadata, part) for part in condition]
            if not (all(results) if key == "$and" else any(results)):
                return False
        elif key.startswith("$"):
            raise BadRequest(f"unknown filter operator {key!r}")
        elif isinstance(condition, Mapping):
            if not condition:
                raise BadRequest(f"the condition on {key!r} is empty")
            for op, operand in condition.items():
                if not _field_matches(metadata.get(key), op, operand):
                    return False
        elif not _field_matches(metadata.get(key), "$eq", condition):
            return False
    return True
