"""Kairox filters as tantivy query objects over the ``filter`` field's terms.

Each scalar metadata value (and each string of a list) is indexed as one raw term
``"key"=json(value)`` (:func:`kairox_tantivy.documents.filter_term`), so equality, ``$in``,
``$contains`` are term queries, ``$exists`` a regex over the key's prefix, and
``$and``/``$or``/``$not`` boolean queries (``$not`` is everything minus the inner query).
No query string is ever built.

Ranges: every number (and every ISO date string) is also indexed as a term holding an
order-preserving hex encoding of its float64 value (``"key"#<16 hex>``, dates as epoch
seconds under ``"key"@``), so a range is a regex over those fixed-width terms: for
``> h``, "the same first i digits, then a greater digit, then anything", one branch per
position. Indexes written before these terms existed have no marker file
(:data:`RANGE_MARKER`) and refuse ranges with the fix, instead of matching nothing.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
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
    as_date,
)
from kairox_tantivy.documents import filter_term

__all__ = ["RANGE_MARKER", "SUPPORT", "compile_filter", "range_terms"]

#: Every operator, dates included.
SUPPORT = FilterSupport(OPERATORS)
#: What an index without range terms (written before them) can do.
WITHOUT_RANGES = FilterSupport(OPERATORS - RANGES, date_ranges=False)
#: The file in an index folder that says its documents carry range terms.
RANGE_MARKER = "kairox-range-terms"

_HEX = "0123456789abcdef"


def _sortable(number: float) -> str:
    """16 hex digits that sort like the numbers do."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", float(number) + 0.0))
    bits = (~bits & 0xFFFF_FFFF_FFFF_FFFF) if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}"


def _range_key(key: str, value: Any) -> str | None:
    """The range term of a metadata value (``None``: not a number or ISO date)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return json.dumps(key) + "#" + _sortable(value)
    date = as_date(value)
    return None if date is None else json.dumps(key) + "@" + _sortable(date.timestamp())


def range_terms(metadata: Mapping[str, Any]) -> list[str]:
    """The range terms of a document's scalar metadata values (lists have none: ranges
    never hold on a list)."""
    out = []
    for key, value in metadata.items():
        term = _range_key(str(key), value)
        if term is not None:
            out.append(term)
    return out


def _range_regex(key: str, op: str, bound: Any) -> str:
    date = as_date(bound)
    marker = "@" if date is not None else "#"
    digits = _sortable(date.timestamp() if date is not None else bound)
    greater = op in ("$gt", "$gte")
    branches = []
    for i, digit in enumerate(digits):
        position = _HEX.index(digit)
        allowed = _HEX[position + 1 :] if greater else _HEX[:position]
        if allowed:
            rest = 15 - i
            branches.append(digits[:i] + f"[{allowed}]" + (f"[0-9a-f]{{{rest}}}" if rest else ""))
    if op in ("$gte", "$lte"):
        branches.append(digits)
    if not branches:
        return ""
    return _literal(json.dumps(key) + marker) + "(" + "|".join(branches) + ")"


_REGEX_META = set('\\.+*?()|[]{}^$#&-~"')


def _literal(text: str) -> str:
    """``text`` as a literal in tantivy's (Rust) regex syntax."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def compile_filter(expr: FilterExpr, tantivy: Any, schema: Any) -> Any:
    """A tantivy ``Query`` selecting exactly the documents ``expr`` selects (ranges need
    an index with range terms: check :data:`WITHOUT_RANGES` first on one without)."""
    return _compile(expr, tantivy, schema)


def _compile(expr: FilterExpr, tantivy: Any, schema: Any) -> Any:
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
        pattern = _range_regex(c.field, c.op, c.value)
        if not pattern:
            return Query.empty_query()
        return Query.regex_query(schema, "filter", pattern)

    return node(expr)
