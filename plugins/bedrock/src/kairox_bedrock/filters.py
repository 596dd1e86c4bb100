"""Kairox metadata filters, translated into Bedrock's ``RetrievalFilter`` grammar.

The Kairox form (``Query.filters`` and the ``filter`` key of a ``bedrock`` table)::

    {"topic": "cooking"}                      # equality          -> equals
    {"topic": ["astronomy", "biology"]}       # any of            -> in (value: a list)
    {"year": {"gte": 2020, "lt": 2024}}       # operators         -> greaterThanOrEquals, lessThan
    {"$or": [{"topic": "cooking"}, {"year": {"lt": 2018}}]}   # -> orAll
    {"$and": [{...}, {...}]}                  # -> andAll (several keys already mean "and")

Several conditions are joined with ``andAll``; a single condition is sent bare, because
Bedrock's ``andAll``/``orAll`` need at least two members. ``in`` always carries a list
(``{"in": {"key": k, "value": [v1, v2]}}``), never a scalar and never a chain of
``equals``. An empty any-of list matches nothing, so such a query is answered with no
hits without calling the service. Anything that cannot be translated is a
:class:`kairox.retrieval.QueryError` that says what to write instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kairox import QueryError
from kairox.retrieval.filters import (
    OPERATORS as KAIROX_OPERATORS,
)
from kairox.retrieval.filters import (
    And,
    Condition,
    FilterExpr,
    FilterSupport,
    FilterUnsupportedError,
    Not,
    Or,
)
from kairox.retrieval.filters.compiling import join_parts

__all__ = [
    "BEDROCK_OPERATORS",
    "COMBINATORS",
    "OPERATORS",
    "SUPPORT",
    "BedrockFilter",
    "compile_filter",
    "translate_filters",
    "upgrade_old_filter",
]

#: Kairox operator -> Bedrock ``RetrievalFilter`` member.
OPERATORS: dict[str, str] = {
    "eq": "equals",
    "ne": "notEquals",
    "in": "in",
    "not_in": "notIn",
    "gt": "greaterThan",
    "gte": "greaterThanOrEquals",
    "lt": "lessThan",
    "lte": "lessThanOrEquals",
    "starts_with": "startsWith",
    "string_contains": "stringContains",
    "list_contains": "listContains",
}

#: Keys that combine sub-filters instead of naming a metadata attribute.
COMBINATORS: dict[str, str] = {"$and": "andAll", "$or": "orAll"}

#: Every member of Bedrock's ``RetrievalFilter`` union (used to spot filters written in
#: Bedrock's own grammar and say how to write them in the Kairox form).
BEDROCK_OPERATORS: frozenset[str] = frozenset({*OPERATORS.values(), "andAll", "orAll"})

_LIST_OPERATORS = frozenset({"in", "not_in"})
_NUMBER_OPERATORS = frozenset({"gt", "gte", "lt", "lte"})
_STRING_OPERATORS = frozenset({"starts_with", "string_contains"})
_MAX_KEY_LENGTH = 100  # FilterKey: 1..100 characters

_VALID_OPS = ", ".join(OPERATORS)
_VALID_COMBINATORS = ", ".join(COMBINATORS)


class _Everything:
    """No condition at all (an empty filter, ``not_in: []``)."""


class _Nothing:
    """A condition no document meets (``in: []``, ``{"topic": []}``)."""


_EVERYTHING = _Everything()
_NOTHING = _Nothing()
_Node = dict[str, Any] | _Everything | _Nothing


@dataclass(frozen=True, slots=True)
class BedrockFilter:
    """The translation of one or more Kairox filters.

    :param expression: the ``RetrievalFilter`` to send, or ``None`` when there is no
        condition (send no ``filter`` at all).
    :param matches_nothing: no document can match (an empty any-of list): do not call
        the service, the answer is no hits.
    """

    expression: dict[str, Any] | None
    matches_nothing: bool = False


def translate_filters(*filters: Mapping[str, Any] | None) -> BedrockFilter:
    """Translate Kairox filters (all of them must hold) into one Bedrock filter.

    :raises QueryError: an unknown operator or combinator, a value of the wrong type
        (``in`` without a list, a range bound that is not a number, ...), a bad key.
    """
    node = _and([_mapping(f, "filter") for f in filters if f is not None])
    if isinstance(node, _Nothing):
        return BedrockFilter(None, matches_nothing=True)
    if isinstance(node, _Everything):
        return BedrockFilter(None)
    return BedrockFilter(node)


# -- combinations ------------------------------------------------------------------------


def _flat(member: str) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    # Bedrock's andAll/orAll need at least two members: nested ones of the same kind
    # are flattened into one.
    return lambda parts: {member: [m for part in parts for m in part.get(member, [part])]}


def _and(parts: Sequence[_Node]) -> _Node:
    return join_parts(parts, _NOTHING, _EVERYTHING, _flat("andAll"))


def _or(parts: Sequence[_Node]) -> _Node:
    return join_parts(parts, _EVERYTHING, _NOTHING, _flat("orAll"))


# -- the Kairox form ---------------------------------------------------------------------


def _mapping(spec: Any, where: str) -> _Node:
    if not isinstance(spec, Mapping):
        raise QueryError(
            f"{where}: expected a table of conditions such as {{'topic': 'cooking'}}, "
            f"got {type(spec).__name__} {spec!r}"
        )
    return _and([_entry(key, value, where) for key, value in spec.items()])


def _entry(key: Any, value: Any, where: str) -> _Node:
    if not isinstance(key, str):
        raise QueryError(f"{where}: keys must be strings, got {key!r}")
    if key.startswith("$"):
        return _combinator(key, value, where)
    _check_key(key, where)
    label = f"filter {key!r}"
    if isinstance(value, Mapping):
        return _operators(key, value, label)
    if isinstance(value, list | tuple | set | frozenset):
        return _condition(key, "in", list(value), label)
    return _condition(key, "eq", value, label)


def _combinator(key: str, value: Any, where: str) -> _Node:
    if key not in COMBINATORS:
        raise QueryError(
            f"{where}: unknown combinator {key!r}; valid combinators: {_VALID_COMBINATORS} "
            "(a key starting with '$' is not a metadata attribute)"
        )
    if not isinstance(value, list | tuple):
        raise QueryError(
            f"{where}: {key} takes a list of filters, e.g. "
            f"{{{key!r}: [{{'topic': 'cooking'}}, {{'year': {{'lt': 2018}}}}]}}; got {value!r}"
        )
    parts = [_mapping(sub, f"{where} {key}[{i}]") for i, sub in enumerate(value)]
    return _or(parts) if key == "$or" else _and(parts)


def _operators(key: str, spec: Mapping[str, Any], label: str) -> _Node:
    if not spec:
        raise QueryError(
            f"{label}: an empty table of operators; use one of: {_VALID_OPS}, "
            f"e.g. {{{key!r}: {{'gte': 2020}}}}"
        )
    parts: list[_Node] = []
    for op, operand in spec.items():
        if op not in OPERATORS:
            raise QueryError(_unknown_operator(key, op, spec, label))
        parts.append(_condition(key, op, operand, label))
    return _and(parts)


def _unknown_operator(key: str, op: Any, spec: Mapping[str, Any], label: str) -> str:
    message = f"{label}: unknown operator {op!r}; valid operators: {_VALID_OPS}"
    if key in BEDROCK_OPERATORS or set(spec) <= {"key", "value"}:
        message += (
            ". This looks like Bedrock's own filter grammar: write the Kairox form instead, "
            "e.g. {'year': {'gte': 2020}} or {'topic': ['a', 'b']}"
        )
    return message


def _condition(key: str, op: str, operand: Any, label: str) -> _Node:
    if op in _LIST_OPERATORS:
        if not isinstance(operand, list | tuple | set | frozenset):
            raise QueryError(
                f"{label}: {op!r} takes a list of values, e.g. {{{key!r}: {{{op!r}: "
                f"['a', 'b']}}}}; got {operand!r}"
            )
        values = [_scalar(v, label) for v in operand]
        if not values:
            return _NOTHING if op == "in" else _EVERYTHING
        return {OPERATORS[op]: {"key": key, "value": values}}
    if op in _NUMBER_OPERATORS:
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise QueryError(
                f"{label}: {op!r} compares numbers; got {operand!r}. "
                f"Write e.g. {{{key!r}: {{{op!r}: 2020}}}}"
            )
        return {OPERATORS[op]: {"key": key, "value": _scalar(operand, label)}}
    if op in _STRING_OPERATORS and not isinstance(operand, str):
        raise QueryError(f"{label}: {op!r} takes a string; got {operand!r}")
    return {OPERATORS[op]: {"key": key, "value": _scalar(operand, label)}}


def _scalar(value: Any, label: str) -> str | int | float | bool:
    if isinstance(value, float) and not math.isfinite(value):
        raise QueryError(f"{label}: {value!r} is not a finite number")
    if isinstance(value, str | bool | int | float):
        return value
    raise QueryError(
        f"{label}: {value!r} is not a string, number or boolean; metadata filters compare "
        f"plain values (operators go in a table: {_VALID_OPS})"
    )


def _check_key(key: str, where: str) -> None:
    if not key or len(key) > _MAX_KEY_LENGTH:
        raise QueryError(
            f"{where}: metadata key {key[:40]!r} must be 1 to {_MAX_KEY_LENGTH} characters "
            f"long (Bedrock's limit), got {len(key)}"
        )


# -- the Kairox filter language ------------------------------------------------------------

#: Bedrock has no ``exists``, and its ranges compare numbers only; ``$not`` is pushed
#: down with De Morgan where the result stays exact (not over a range or ``listContains``
#: would also have to hold where the key is missing, which Bedrock cannot say).
SUPPORT = FilterSupport(KAIROX_OPERATORS - {"$exists"}, date_ranges=False)

_RANGE_MEMBERS = {
    "$gt": "greaterThan",
    "$gte": "greaterThanOrEquals",
    "$lt": "lessThan",
    "$lte": "lessThanOrEquals",
}
_OLD_TO_NEW = {
    "eq": "$eq",
    "ne": "$ne",
    "in": "$in",
    "not_in": "$nin",
    "gt": "$gt",
    "gte": "$gte",
    "lt": "$lt",
    "lte": "$lte",
    "list_contains": "$contains",
}


def compile_filter(source: str, expr: FilterExpr | None) -> BedrockFilter:
    """A parsed Kairox filter as Bedrock's ``RetrievalFilter``.

    :raises FilterUnsupportedError: for what Bedrock cannot express exactly.
    """
    if expr is None:
        return BedrockFilter(None)
    SUPPORT.check(source, expr)
    node = _node(source, expr, negate=False)
    if isinstance(node, _Nothing):
        return BedrockFilter(None, matches_nothing=True)
    if isinstance(node, _Everything):
        return BedrockFilter(None)
    return BedrockFilter(node)


def _node(source: str, expr: FilterExpr, negate: bool) -> _Node:
    if isinstance(expr, Not):
        return _node(source, expr.item, not negate)
    if isinstance(expr, And | Or):
        parts = [_node(source, item, negate) for item in expr.items]
        return _and(parts) if isinstance(expr, And) != negate else _or(parts)
    assert isinstance(expr, Condition)
    key, op, value = expr.field, expr.op, expr.value
    if len(key) > _MAX_KEY_LENGTH:
        raise QueryError(f"filter {key[:40]!r}...: Bedrock keys are at most 100 characters")
    if op in ("$eq", "$ne"):
        member = "notEquals" if (op == "$eq") == negate else "equals"
        return {member: {"key": key, "value": value}}
    if op in ("$in", "$nin"):
        assert isinstance(value, tuple)
        positive = (op == "$in") != negate
        if not value:
            return _NOTHING if positive else _EVERYTHING
        return {"in" if positive else "notIn": {"key": key, "value": list(value)}}
    if negate:
        raise FilterUnsupportedError(
            source,
            f"$not over {op}",
            SUPPORT.describe() + ("; $not only over $eq $ne $in $nin and their combinations"),
        )
    if op == "$contains":
        return {"listContains": {"key": key, "value": value}}
    return {_RANGE_MEMBERS[op]: {"key": key, "value": value}}


def upgrade_old_filter(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A ``filter`` table in the operator names of older releases (``gte``, ``not_in``)
    rewritten in the Kairox language (``$gte``, ``$nin``).

    :raises QueryError: for ``starts_with``/``string_contains``, which have no equivalent.
    """
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key in ("$and", "$or") and isinstance(value, list | tuple):
            out[key] = [upgrade_old_filter(v) if isinstance(v, Mapping) else v for v in value]
        elif isinstance(value, Mapping):
            ops: dict[str, Any] = {}
            for op, operand in value.items():
                if op not in _OLD_TO_NEW:
                    raise QueryError(
                        f"filter {key!r}: {op!r} has no equivalent in the Kairox filter "
                        "language; write it with $eq/$in/$gte... (docs/filters.md)"
                    )
                ops[_OLD_TO_NEW[op]] = operand
            out[key] = ops
        else:
            out[key] = value
    return out
