"""Kairox filters as tantivy query objects over the ``filter`` field's terms.

Each scalar metadata value (and each string of a list) is indexed as one raw term
``"key"=json(value)`` (:func:`kairox_tantivy.index.filter_term`), so equality, ``$in``,
``$contains`` are term queries, ``$exists`` a regex over the key's prefix, and
``$and``/``$or``/``$not`` boolean queries (``$not`` is everything minus the inner query).
No query string is ever built. Ranges need typed per-field columns, which the schema
does not have: they are refused (:data:`SUPPORT`) rather than approximated.
"""

from __future__ import annotations

import json
from typing import Any

from kairox.retrieval.filters import (
    OPERATORS,
    RANGES,
    And,
    Condition,
    FilterExpr,
    FilterSupport,
    Not,
    Or,
)

__all__ = ["SUPPORT", "compile_filter"]

#: Everything but ranges.
SUPPORT = FilterSupport(OPERATORS - RANGES, date_ranges=False)

_REGEX_META = set('\\.+*?()|[]{}^$#&-~"')


def _literal(text: str) -> str:
    """``text`` as a literal in tantivy's (Rust) regex syntax."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def compile_filter(expr: FilterExpr, tantivy: Any, schema: Any) -> Any:
    """A tantivy ``Query`` selecting exactly the documents ``expr`` selects."""
    from kairox_tantivy.index import filter_term

    Occur, Query = tantivy.Occur, tantivy.Query

    def everything_but(query: Any) -> Any:
        return Query.boolean_query([(Occur.Must, Query.all_query()), (Occur.MustNot, query)])

    def node(e: FilterExpr) -> Any:
        if isinstance(e, Not):
            return everything_but(node(e.item))
        if isinstance(e, And):
            return Query.boolean_query([(Occur.Must, node(item)) for item in e.items])
        if isinstance(e, Or):
            return Query.boolean_query([(Occur.Should, node(item)) for item in e.items])
        return condition(e)

    def condition(c: Condition) -> Any:
        if c.op in ("$eq", "$ne", "$contains"):
            query = Query.term_query(schema, "filter", filter_term(c.field, c.value))  # type: ignore[arg-type]
            return everything_but(query) if c.op == "$ne" else query
        if c.op in ("$in", "$nin"):
            assert isinstance(c.value, tuple)
            terms = [filter_term(c.field, v) for v in c.value]
            query = Query.term_set_query(schema, "filter", terms) if terms else Query.empty_query()
            return everything_but(query) if c.op == "$nin" else query
        if c.op == "$exists":
            query = Query.regex_query(schema, "filter", _literal(json.dumps(c.field) + "=") + ".*")
            return query if c.value else everything_but(query)
        raise AssertionError(f"{c.op} is not in SUPPORT")  # the source checks SUPPORT first

    return node(expr)
