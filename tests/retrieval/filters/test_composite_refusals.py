"""The composite never lets a source answer a filter it cannot express: ``skipped`` for
a source without filter support, ``error`` naming the operator for one lacking it."""

from __future__ import annotations

from kairox.retrieval import CompositeWorkspaceRetriever, Hit, Query, ScoreKind, SourceStatus
from kairox.retrieval.filters import FilterSupport, parse_filter
from kairox.testing import run


class Recording:
    score_kind = ScoreKind.BM25

    def __init__(self, name, support=None):
        self.name = name
        if support is not None:
            self.filter_support = support
        self.asked: list[Query] = []

    async def retrieve(self, query):
        self.asked.append(query)
        return [Hit(f"{self.name}-1", "text", 1.0, self.name)]


def test_refused_sources_are_not_asked():
    plain = Recording("plain")
    equality = Recording("equality", FilterSupport(frozenset({"$eq", "$and"})))
    full = Recording("full", FilterSupport())
    composite = CompositeWorkspaceRetriever([plain, equality, full])
    result = run(composite.retrieve(Query("x", filters="year >= 2020")))
    reports = {r.source: r for r in result.reports}
    assert [r.source for r in result.reports] == ["plain", "equality", "full"]
    assert reports["plain"].status is SourceStatus.SKIPPED
    assert "declares no filter support" in reports["plain"].error
    assert reports["equality"].status is SourceStatus.ERROR
    assert "'equality'" in reports["equality"].error and "$gte" in reports["equality"].error
    assert "$and $eq" in reports["equality"].error  # what it does support
    assert reports["full"].status is SourceStatus.OK
    assert not plain.asked and not equality.asked and len(full.asked) == 1
    assert {h.id for h in result.hits} == {"full-1"}


def test_unfiltered_queries_reach_every_source():
    plain = Recording("plain")
    result = run(CompositeWorkspaceRetriever([plain]).retrieve(Query("x")))
    assert result.reports[0].status is SourceStatus.OK and plain.asked


def test_a_source_filter_is_anded_into_its_queries_only():
    own, other = Recording("own", FilterSupport()), Recording("other", FilterSupport())
    composite = CompositeWorkspaceRetriever(
        [own, other], source_filters={"own": parse_filter({"lang": "en"})}
    )
    run(composite.retrieve(Query("x", filters={"year": 2020})))
    assert own.asked[0].filter == parse_filter({"year": 2020, "lang": "en"})
    assert other.asked[0].filter == parse_filter({"year": 2020})
    run(composite.retrieve(Query("x")))
    assert own.asked[1].filter == parse_filter({"lang": "en"}) and other.asked[1].filter is None
