"""A filter as an SQLite ``WHERE`` fragment over a JSON metadata column, values bound.

Each condition looks its field up with ``json_each`` over the metadata object (``key =
?``), so field names and values are always bound parameters, never spliced into SQL or
into a JSON path (whose quoting cannot hold every name). ``EXISTS`` keeps every
condition true or false, never NULL, so ``NOT`` is classical logic as the reference
evaluator has it. ISO-date ranges call ``kairox_date`` (registered by
:func:`register_functions`), the same parser the evaluator uses.
"""

from __future__ import annotations

from typing import Any

from kairox.retrieval.filters.mapping import as_date
from kairox.retrieval.filters.model import And, Condition, FilterExpr, Not, Or

__all__ = ["compile_sql", "register_functions"]

_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _date_seconds(value: Any) -> float | None:
    parsed = as_date(value)
    return None if parsed is None else parsed.timestamp()


def register_functions(connection: Any) -> None:
    """Give an ``sqlite3`` or ``apsw`` connection the ``kairox_date`` function."""
    if hasattr(connection, "create_scalar_function"):  # apsw
        connection.create_scalar_function("kairox_date", _date_seconds, 1, deterministic=True)
    else:
        connection.create_function("kairox_date", 1, _date_seconds, deterministic=True)


def compile_sql(expr: FilterExpr | None, column: str) -> tuple[str, list[Any]]:
    """``(sql, params)``: a boolean SQL expression over the JSON object in ``column`` (a
    trusted column reference such as ``d.metadata``); ``("1", [])`` for no filter."""
    if expr is None:
        return "1", []
    params: list[Any] = []
    return _node(expr, column, params), params


def _node(expr: FilterExpr, column: str, params: list[Any]) -> str:
    if isinstance(expr, Not):
        return f"(NOT {_node(expr.item, column, params)})"
    if isinstance(expr, And | Or):
        joiner = " AND " if isinstance(expr, And) else " OR "
        return "(" + joiner.join(_node(item, column, params) for item in expr.items) + ")"
    return _condition(expr, column, params)


def _typed(value: Any, params: list[Any]) -> str:
    """The test that ``j`` (one json_each row) holds ``value``'s kind and equals it."""
    if isinstance(value, bool):
        return "j.type = 'true'" if value else "j.type = 'false'"
    params.append(value)
    if isinstance(value, str):
        return "(j.type = 'text' AND j.atom = ?)"
    return "(j.type IN ('integer', 'real') AND j.atom = ?)"


def _condition(cond: Condition, column: str, params: list[Any]) -> str:
    op, value = cond.op, cond.value
    params.append(cond.field)
    lookup = f"EXISTS (SELECT 1 FROM json_each({column}) j WHERE j.key = ? AND "
    if op in ("$eq", "$ne"):
        body = _typed(value, params)
    elif op in ("$in", "$nin"):
        assert isinstance(value, tuple)
        body = "0" if not value else "(" + " OR ".join(_typed(v, params) for v in value) + ")"
    elif op == "$exists":
        body = "j.type != 'null'"
    elif op == "$contains":
        body = (
            "j.type = 'array' AND EXISTS (SELECT 1 FROM json_each(j.value) e "
            "WHERE e.type = 'text' AND e.atom = ?)"
        )
        params.append(value)
    else:
        seconds = _date_seconds(value)
        if seconds is not None:
            body = f"j.type = 'text' AND kairox_date(j.atom) {_RANGE_SQL[op]} ?"
            params.append(seconds)
        else:
            body = f"j.type IN ('integer', 'real') AND j.atom {_RANGE_SQL[op]} ?"
            params.append(value)
    sql = lookup + body + ")"
    negate = op == "$ne" or op == "$nin" or (op == "$exists" and value is False)
    return f"(NOT {sql})" if negate else sql
