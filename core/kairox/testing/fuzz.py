"""Hypothesis strategies for random metadata filters, and the check every source must pass
on them: at most ``k`` hits, or a :class:`~kairox.retrieval.QueryError` (requires hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kairox.retrieval import Hit, Query, QueryError, Source
from kairox.testing import run

__all__ = ["check_hits_or_query_error", "random_filters"]


def random_filters(
    keys: st.SearchStrategy[str],
    *,
    text_size: int,
    max_size: int = 3,
    operator_objects: bool = False,
) -> st.SearchStrategy[dict[str, Any]]:
    """Filter mappings of ``keys`` to scalars (text up to ``text_size``, numbers, booleans),
    lists of them, ``None`` and, with ``operator_objects``, one-key objects of numbers."""
    scalar = st.one_of(st.text(max_size=text_size), st.integers(), st.floats(), st.booleans())
    values = [scalar, st.lists(scalar, max_size=3), st.none()]
    if operator_objects:
        values.append(st.dictionaries(st.text(), st.integers(), max_size=1))
    return st.dictionaries(keys, st.one_of(*values), max_size=max_size)


def check_hits_or_query_error(
    source: Source, text: str, filters: Any, k: int = 5
) -> list[Hit] | None:
    """Assert that asking ``source`` for ``k`` hits on ``text`` with ``filters`` gives a
    list of at most ``k`` hits, or a QueryError (``None`` then; a filter the query itself
    refuses counts): anything else fails."""
    try:
        hits = run(source.retrieve(Query(text, k=k, filters=filters)))
    except QueryError:
        return None
    assert isinstance(hits, list) and len(hits) <= k
    return hits
