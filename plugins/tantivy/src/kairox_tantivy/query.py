"""What a search asks tantivy: user text as terms, a filter as must-clauses, one query.

User text never reaches tantivy's query parser. The text is run through the analysis
``en_stem`` applies at indexing time (:func:`~kairox_tantivy.engine.build_analyzer`) and
the terms become a boolean SHOULD query of per-field term queries; a filter
(:mod:`kairox_tantivy.filters`) is added as must-clauses that score 0.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

from kairox import QueryError
from kairox.retrieval.filters import FilterUnsupportedError, parse_filter
from kairox_tantivy.documents import valid_utf8
from kairox_tantivy.engine import build_analyzer
from kairox_tantivy.filters import SUPPORT, WITHOUT_RANGES, compile_filter

__all__ = ["CLAUSE_CACHE_SIZE", "MAX_QUERY_TERMS", "Boosts", "QueryBuilder", "query_error"]

#: Distinct query terms beyond this are ignored (a pasted megabyte still answers fast).
MAX_QUERY_TERMS = 1024
#: Per-term query clauses kept for reuse (built in Python, one FFI call each).
CLAUSE_CACHE_SIZE = 4096


class Boosts(TypedDict, total=False):
    """The field weights of a search (each 1.0 unless given; 0 leaves the field out)."""

    title_boost: float
    body_boost: float


class QueryBuilder:
    """Builds the tantivy queries of one index (its schema; ranges if it has their terms)."""

    def __init__(self, tantivy: ModuleType, schema: Any, path: Path) -> None:
        self._tantivy = tantivy
        self._schema = schema
        self._path = path
        self._analyzer = build_analyzer(tantivy)
        # Term clauses depend only on (field, term, boost), never on the index contents,
        # so they stay valid across commits; building them was a tenth of a query.
        self._clause = functools.lru_cache(maxsize=CLAUSE_CACHE_SIZE)(self._build_clause)

    def terms(self, text: str) -> list[str]:
        """The distinct ``en_stem`` terms of ``text``, in order (at most MAX_QUERY_TERMS)."""
        terms = dict.fromkeys(self._analyzer.analyze(valid_utf8(text)))
        return list(terms)[:MAX_QUERY_TERMS]

    def filter_clauses(self, filters: Any, *, has_range_terms: bool) -> list[Any]:
        """Must clauses (scoring 0) for the filter (:mod:`kairox_tantivy.filters`)."""
        expr = parse_filter(filters)
        if expr is None:
            return []
        support = SUPPORT if has_range_terms else WITHOUT_RANGES
        try:
            support.check(f"tantivy index {self._path}", expr)
        except FilterUnsupportedError as exc:
            raise FilterUnsupportedError(
                f"tantivy index {self._path}",
                exc.operator,
                "everything but ranges: the index was written before range terms; delete "
                "the folder and run `kairox kb ingest` again to filter on ranges",
            ) from None
        query = compile_filter(expr, self._tantivy, self._schema)
        return [(self._tantivy.Occur.Must, self._tantivy.Query.const_score_query(query, 0.0))]

    def _build_clause(self, name: str, term: str, boost: float) -> Any:
        Query = self._tantivy.Query
        clause = Query.term_query(self._schema, name, term)
        return clause if boost == 1.0 else Query.boost_query(clause, boost)

    def build(
        self, text: str, filters: Any, boosts: Boosts, *, has_range_terms: bool
    ) -> Any | None:
        """The query for ``text`` under ``filters``, or ``None`` when nothing can match
        (no terms, or every field weighed 0)."""
        weights = (
            ("title", boosts.get("title_boost", 1.0)),
            ("body", boosts.get("body_boost", 1.0)),
        )
        fields = [(f, boost) for f, boost in weights if boost > 0]
        terms = self.terms(text)
        if not terms or not fields:
            return None
        filter_clauses = self.filter_clauses(filters, has_range_terms=has_range_terms)
        Occur, Query = self._tantivy.Occur, self._tantivy.Query
        clause = self._clause
        should = Occur.Should
        try:
            query = Query.boolean_query(
                [(should, clause(name, term, boost)) for term in terms for name, boost in fields]
            )
            if filter_clauses:
                query = Query.boolean_query([(Occur.Must, query), *filter_clauses])
        except ValueError as exc:
            raise query_error(text, exc) from exc
        return query


def query_error(text: str, exc: ValueError) -> QueryError:
    """What to raise if tantivy objects to a query: terms are built, not parsed, so this
    should not happen; if it does, say so plainly rather than leak the engine's error."""
    return QueryError(f"tantivy could not run the query {text[:200]!r}: {exc}")
