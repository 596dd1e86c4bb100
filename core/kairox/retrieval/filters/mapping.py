"""The canonical JSON form of a filter (a mapping, or its JSON text) validated into a
:data:`FilterExpr`; the text form (:mod:`.text`) is checked here too, once translated.

Every refusal is a :class:`FilterError` naming the path of the bad node (``filter.$and[1].year``)
and what is allowed there, raised before any source is asked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kairox.retrieval.filters.model import (
    COMBINATORS,
    COMPARISONS,
    RANGES,
    And,
    Condition,
    FilterError,
    FilterExpr,
    Not,
    Or,
    Scalar,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_FIELD_LENGTH",
    "MAX_IN",
    "MAX_NODES",
    "as_date",
    "parse_json",
    "parse_mapping",
]

#: How deeply ``$and``/``$or``/``$not`` may nest.
MAX_DEPTH = 10
#: How many values one ``$in``/``$nin`` may list.
MAX_IN = 1024
#: How many conditions and combinators one filter may hold.
MAX_NODES = 512
#: The longest field name.
MAX_FIELD_LENGTH = 256
#: Integers beyond +-2**53 lose precision in JSON numbers and in several engines.
MAX_INT = 2**53

_ALLOWED = ", ".join(sorted(COMPARISONS))
_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:\d{2})?)?"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def as_date(value: Any) -> datetime | None:
    """``value`` as an aware datetime when it is an ISO 8601 date or date-time string
    (``2021-03-04``, ``2021-03-04T10:00:00Z``; naive means UTC), else ``None``."""
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_mapping(spec: Any) -> FilterExpr | None:
    """The canonical form as one validated expression; ``None`` for ``{}``.

    :raises FilterError: naming the bad node's path and what is allowed there.
    """
    return _Parser().mapping(spec, "filter", 0)


def parse_json(text: str) -> FilterExpr | None:
    """The JSON text of the canonical form as one validated expression."""
    return parse_mapping(_json_object(text))


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise FilterError(f"nested deeper than {MAX_DEPTH} levels; flatten it") from None
    except json.JSONDecodeError as exc:
        raise FilterError(
            f"not valid JSON ({exc.msg} at character {exc.pos}); write a JSON object such as "
            '{"path": "docs/intro.md"} or the text form such as path = docs/intro.md'
        ) from None


class _Parser:
    def __init__(self) -> None:
        self.nodes = 0

    def _count(self, path: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FilterError(f"the filter has more than {MAX_NODES} conditions; simplify it", path)

    def mapping(self, spec: Any, path: str, depth: int) -> FilterExpr | None:
        if not isinstance(spec, Mapping):
            raise FilterError(
                f'expected an object such as {{"lang": "en"}}, got {_kind(spec)}', path
            )
        if depth > MAX_DEPTH:
            raise FilterError(f"nested deeper than {MAX_DEPTH} levels; flatten it", path)
        parts: list[FilterExpr] = []
        for key, value in spec.items():
            if not isinstance(key, str):
                raise FilterError(f"keys must be strings, got {_kind(key)}", path)
            if key.startswith("$"):
                parts.append(self.combinator(key, value, f"{path}.{key}", depth))
            else:
                parts.extend(self.field(key, value, f"{path}.{key}"))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def combinator(self, key: str, value: Any, path: str, depth: int) -> FilterExpr:
        self._count(path)
        if key not in COMBINATORS:
            hint = ' (field operators go inside a field: {"year": {"$gte": 2020}})'
            raise FilterError(
                f"unknown operator {key!r} here; allowed: $and, $or, $not, or a field "
                f"name{hint if key in COMPARISONS else ''}",
                path,
            )
        if key == "$not":
            inner = self.mapping(value, path, depth + 1)
            if inner is None:
                raise FilterError("$not needs a non-empty filter object", path)
            return Not(inner)
        if not isinstance(value, list | tuple) or not value:
            raise FilterError(f"{key} takes a non-empty list of filter objects", path)
        items: list[FilterExpr] = []
        for i, sub in enumerate(value):
            item = self.mapping(sub, f"{path}[{i}]", depth + 1)
            if item is None:
                raise FilterError("an empty filter object inside " + key, f"{path}[{i}]")
            items.append(item)
        if len(items) == 1:
            return items[0]
        return And(tuple(items)) if key == "$and" else Or(tuple(items))

    def field(self, name: str, value: Any, path: str) -> list[FilterExpr]:
        if not name or len(name) > MAX_FIELD_LENGTH or _CONTROL.search(name):
            raise FilterError(
                f"a field name must be 1 to {MAX_FIELD_LENGTH} characters without control "
                "characters",
                path,
            )
        if isinstance(value, Mapping):
            if not value:
                raise FilterError(f"an empty operator object; allowed: {_ALLOWED}", path)
            conditions: list[FilterExpr] = []
            for op, operand in value.items():
                conditions.append(self.condition(name, op, operand, f"{path}.{op}"))
            return conditions
        if isinstance(value, list | tuple):
            # The equality subset of older releases: a list means "any of these".
            return [self.condition(name, "$in", value, path)]
        return [self.condition(name, "$eq", value, path)]

    def condition(self, name: str, op: Any, operand: Any, path: str) -> Condition:
        self._count(path)
        if op not in COMPARISONS:
            raise FilterError(f"unknown operator {op!r}; allowed: {_ALLOWED}", path)
        if op in ("$in", "$nin"):
            if not isinstance(operand, list | tuple):
                raise FilterError(f"{op} takes a list of values, got {_kind(operand)}", path)
            if len(operand) > MAX_IN:
                raise FilterError(
                    f"{op} lists {len(operand)} values; at most {MAX_IN} are allowed", path
                )
            values = tuple(_scalar(v, f"{path}[{i}]") for i, v in enumerate(operand))
            kinds = {_family(v) for v in values}
            if len(kinds) > 1:
                raise FilterError(
                    f"{op} must list one kind of value (all strings, all numbers or all "
                    f"booleans), got {sorted(kinds)}",
                    path,
                )
            return Condition(name, op, values)
        if op == "$exists":
            if not isinstance(operand, bool):
                raise FilterError(f"$exists takes true or false, got {_kind(operand)}", path)
            return Condition(name, op, operand)
        if op == "$contains":
            if not isinstance(operand, str):
                raise FilterError(
                    f"$contains tests a list-of-strings field for one string, got {_kind(operand)}",
                    path,
                )
            return Condition(name, op, _scalar(operand, path))
        value = _scalar(operand, path)
        if op in RANGES and not (_family(value) == "number" or as_date(value) is not None):
            raise FilterError(
                f"{op} compares numbers or ISO dates (2021-03-04, 2021-03-04T10:00:00Z), "
                f"got {_kind(value)} {value!r:.40}",
                path,
            )
        return Condition(name, op, value)


def _scalar(value: Any, path: str) -> Scalar:
    if isinstance(value, bool | str):
        if isinstance(value, str) and len(value) > 4096:
            raise FilterError("a string value longer than 4096 characters", path)
        return value
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise FilterError(f"the integer is beyond +-2**53 ({MAX_INT}); use a smaller one", path)
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > 1e300:
            raise FilterError(f"{value!r} is not a finite number within +-1e300", path)
        return value
    raise FilterError(
        f"values are strings, numbers or booleans (a list for $in/$nin), got {_kind(value)}",
        path,
    )


def _family(value: Scalar) -> str:
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else "number"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", tuple: "a list", str: "a string"}.get(
        type(value), type(value).__name__
    )
