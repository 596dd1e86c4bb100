"""An expression back in the canonical JSON form (what ``--filter`` accepts and reports show)."""

from __future__ import annotations

import json
from typing import Any

from kairox.retrieval.filters.model import And, Condition, FilterExpr, Not, Or

__all__ = ["describe", "to_canonical"]


def to_canonical(expr: FilterExpr | None) -> dict[str, Any]:
    """The canonical JSON object for ``expr`` (``{}`` for no filter)."""
    if expr is None:
        return {}
    if isinstance(expr, Condition):
        value = list(expr.value) if isinstance(expr.value, tuple) else expr.value
        return {expr.field: {expr.op: value}}
    if isinstance(expr, Not):
        return {"$not": to_canonical(expr.item)}
    key = "$and" if isinstance(expr, And) else "$or"
    assert isinstance(expr, And | Or)
    return {key: [to_canonical(item) for item in expr.items]}


def describe(expr: FilterExpr | None) -> str:
    """One line of JSON for messages and logs."""
    return json.dumps(to_canonical(expr), ensure_ascii=False, sort_keys=True)
