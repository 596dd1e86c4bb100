"""The filter conformance suite: every filter of :data:`FILTER_CASES` must select exactly
what the reference evaluator selects, pushed down (k hits whenever k passages match).

A plugin's tests subclass :class:`FilterConformance` and give a ``filter_source``
fixture: their source over every passage of :data:`FILTER_CORPUS`, with its metadata::

    class TestMyFilters(FilterConformance):
        filter_refuses = DATE_RANGE_CASES      # what the engine cannot express

        @pytest.fixture
        def filter_source(self, tmp_path):
            fill_my_index_with(FILTER_CORPUS, tmp_path / "index")
            return build_source(kairox_mine, "mine", base_dir=tmp_path, index="index")

A case in ``filter_refuses`` must be refused with a
:class:`~kairox.retrieval.QueryError` (normally
:class:`~kairox.retrieval.filters.FilterUnsupportedError`), never answered unfiltered.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from kairox.retrieval import Hit, Query, QueryError, Source
from kairox.retrieval.filters import FilterSupport
from kairox.testing.corpus import CorpusDocument
from kairox.testing.filter_corpus import (
    DATE_RANGE_CASES,
    FILTER_CASES,
    FILTER_CORPUS,
    UNICODE_FIELD_CASES,
    FilterCase,
    expected_ids,
)

__all__ = [
    "DATE_RANGE_CASES",
    "FILTER_CASES",
    "FILTER_CORPUS",
    "UNICODE_FIELD_CASES",
    "FilterConformance",
    "expected_ids",
]


class FilterConformance:
    """Checks that a source compiles every filter of the language exactly."""

    #: The passages the ``filter_source`` serves, and the cases asked of it.
    filter_documents: ClassVar[tuple[CorpusDocument, ...]] = FILTER_CORPUS
    filter_cases: ClassVar[tuple[FilterCase, ...]] = FILTER_CASES
    #: A query every passage matches.
    filter_query: ClassVar[str] = "passage"
    #: The most hits one request may ask for (the service's limit).
    filter_max_k: ClassVar[int] = 300
    #: Case names the source must refuse with a QueryError (FilterUnsupportedError).
    filter_refuses: ClassVar[frozenset[str]] = frozenset()

    @pytest.fixture
    def filter_source(self) -> Source:
        pytest.fail("define a `filter_source` fixture: your retriever over FILTER_CORPUS")

    def filter_hit_id(self, hit: Hit) -> str:
        """The passage id a hit stands for (override when hits are chunks of passages)."""
        return hit.id

    def _ask(self, source: Source, spec: Any, k: int) -> list[Hit]:
        return asyncio.run(source.retrieve(Query(self.filter_query, k=k, filters=spec)))

    def test_declares_its_filter_support(self, filter_source: Source) -> None:
        assert isinstance(getattr(filter_source, "filter_support", None), FilterSupport)

    def test_every_filter_selects_exactly_the_reference_passages(
        self, filter_source: Source
    ) -> None:
        k = min(len(self.filter_documents), self.filter_max_k)
        failures: list[str] = []
        for name, spec in self.filter_cases:
            if name in self.filter_refuses:
                try:
                    hits = self._ask(filter_source, spec, k)
                except QueryError as exc:
                    assert str(exc).strip(), f"{name}: the refusal must say why"
                    continue
                failures.append(f"{name}: should be refused, answered {len(hits)} hits")
                continue
            expected = expected_ids(spec, self.filter_documents)
            try:
                hits = self._ask(filter_source, spec, k)
            except Exception as exc:
                failures.append(f"{name}: raised {type(exc).__name__}: {exc}")
                continue
            got = [self.filter_hit_id(hit) for hit in hits]
            if len(expected) <= k:
                if set(got) != expected:
                    failures.append(
                        f"{name}: {len(set(got) - expected)} unexpected "
                        f"{sorted(set(got) - expected)[:5]}, {len(expected - set(got))} "
                        f"missing {sorted(expected - set(got))[:5]}"
                    )
            elif len(hits) != k or not set(got) <= expected:
                failures.append(f"{name}: {len(hits)} hits for k={k}, or some outside the filter")
        assert not failures, "\n".join(failures)

    @pytest.mark.parametrize("k", [1, 5])
    def test_k_hits_whenever_k_passages_match(self, filter_source: Source, k: int) -> None:
        # Post-filtering the engine's top k would return fewer: the filter is pushed down.
        for name, spec in self.filter_cases:
            if name in self.filter_refuses:
                continue
            expected = expected_ids(spec, self.filter_documents)
            if len(expected) < k:
                continue
            hits = self._ask(filter_source, spec, k)
            got = {self.filter_hit_id(hit) for hit in hits}
            assert len(hits) == k, f"{name}: {len(hits)} hits, {len(expected)} passages match"
            assert got <= expected, f"{name}: {sorted(got - expected)} do not match"
