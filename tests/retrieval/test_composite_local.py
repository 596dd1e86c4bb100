"""The composite's local path: one source that answers locally is asked in the calling thread.

A synchronous retrieval of one source with ``retrieve_local`` runs with no event loop and
no thread hand-off, yet reports, filters, failures and deadlines as the loop does.
"""

from __future__ import annotations

import threading

import pytest

from kairox.retrieval import FAN_OUT, CompositeWorkspaceRetriever, Hit, Query, SourceStatus
from kairox.retrieval.filters import parse_filter
from kairox.support.blocking import loop_running
from kairox.testing import run
from tests.retrieval.composite_doubles import (
    BrokenEmbedder,
    CountingEmbedder,
    StaticSource,
    report,
)


class LocalSource(StaticSource):
    """Answers in the calling thread too; records where and how each answer was computed."""

    def __init__(self, name: str, ids=(), **options) -> None:
        super().__init__(name, ids, **options)
        self.local_calls: list[tuple[threading.Thread, bool, int]] = []
        self.loop_calls = 0

    async def retrieve(self, query: Query) -> list[Hit]:
        self.loop_calls += 1
        return await super().retrieve(query)

    def retrieve_local(self, query: Query) -> list[Hit]:
        self.received.append(query)
        self.local_calls.append((threading.current_thread(), loop_running(), FAN_OUT.get()))
        return self.hits[: query.k]


class RaisingLocalSource(LocalSource):
    def retrieve_local(self, query: Query) -> list[Hit]:
        raise RuntimeError("index file is corrupt")


class MalformedLocalSource(LocalSource):
    def retrieve_local(self, query: Query) -> list[Hit]:
        return "not a list"  # type: ignore[return-value]


class UnfilteredLocalSource(LocalSource):
    """Declares no filter support: skipped for a filtered query, never asked it."""

    filter_support = None


class OverrunningLocalSource(LocalSource):
    """Takes 50 ms in the calling thread: always past the 1 ms deadline its tests give it."""

    def retrieve_local(self, query: Query) -> list[Hit]:
        threading.Event().wait(0.05)
        return super().retrieve_local(query)


def test_a_local_source_answers_in_the_calling_thread_with_no_loop() -> None:
    local = LocalSource("local", ["a", "b", "c"])
    composite = CompositeWorkspaceRetriever([local])
    assert composite.answers_here()

    result = composite.retrieve_sync(Query("q", k=2))

    assert local.local_calls == [(threading.current_thread(), False, 1)]
    assert local.loop_calls == 0
    assert [r.status for r in result.reports] == [SourceStatus.OK]
    # The same ranking the event loop gives.
    on_loop = run(composite.retrieve(Query("q", k=2)))
    assert [(h.id, h.score) for h in result.hits] == [(h.id, h.score) for h in on_loop.hits]
    assert [h.id for h in result.hits] == ["a", "b"]


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(StaticSource("remote", ["x"]), id="a source without retrieve_local"),
        pytest.param(LocalSource("second", ["x"]), id="a second local source, asked at once"),
    ],
)
def test_several_sources_are_asked_at_once_in_worker_threads(other) -> None:
    local = LocalSource("local", ["a"])
    composite = CompositeWorkspaceRetriever([local, other])
    try:
        assert not composite.answers_here()
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert local.local_calls == [] and local.loop_calls == 1
    assert {h.id for h in result.hits} == {"a", "x"}


def test_a_source_needing_a_vector_its_embedder_does_not_make_locally_is_asked_on_the_loop():
    dense = LocalSource("dense", ["x"], embedder=CountingEmbedder("e"))
    composite = CompositeWorkspaceRetriever([dense])
    try:
        assert not composite.answers_here()
        composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert dense.local_calls == [] and dense.loop_calls == 1


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (RaisingLocalSource("broken"), "RuntimeError: index file is corrupt"),
        (MalformedLocalSource("broken"), "expected a list of Hit"),
    ],
)
def test_a_raising_or_malformed_local_answer_is_an_error(source, error) -> None:
    result = CompositeWorkspaceRetriever([source]).retrieve_sync(Query("q"))
    failed = report(result, "broken")
    assert failed.status is SourceStatus.ERROR
    assert error in (failed.error or "")
    assert result.hits == []


def test_a_source_without_filter_support_is_not_asked_a_filtered_query() -> None:
    unfiltered = UnfilteredLocalSource("plain", ["a"])
    result = CompositeWorkspaceRetriever([unfiltered]).retrieve_sync(
        Query("q", filters={"year": 2024})
    )
    assert report(result, "plain").status is SourceStatus.SKIPPED
    assert unfiltered.received == [] and result.hits == []


def test_a_knowledge_base_s_own_filter_is_anded_in_on_the_local_path() -> None:
    own = LocalSource("own", ["b"])
    composite = CompositeWorkspaceRetriever(
        [own], source_filters={"own": parse_filter({"lang": "en"})}
    )
    result = composite.retrieve_sync(Query("q", filters={"year": 2024}))
    assert own.received[0].filter == parse_filter({"$and": [{"year": 2024}, {"lang": "en"}]})
    assert [h.id for h in result.hits] == ["b"]


def test_skipped_sources_are_reported_on_the_local_path() -> None:
    composite = CompositeWorkspaceRetriever(
        [LocalSource("local", ["a"])], skipped={"tantivy": "kind 'tantivy' is not installed"}
    )
    result = composite.retrieve_sync(Query("q"))
    assert [(r.source, r.status) for r in result.reports] == [
        ("local", SourceStatus.OK),
        ("tantivy", SourceStatus.SKIPPED),
    ]


def test_a_local_source_past_its_deadline_times_out_and_moves_to_a_worker_thread() -> None:
    slow = OverrunningLocalSource("slow", ["s"])
    composite = CompositeWorkspaceRetriever([slow], timeouts_ms={"slow": 1})
    try:
        first = composite.retrieve_sync(Query("q"))
        # Its late answer is dropped, as on the loop, and it is asked there from now on.
        timed_out = report(first, "slow")
        assert timed_out.status is SourceStatus.TIMEOUT
        assert "no answer within 1 ms" in (timed_out.error or "")
        assert first.hits == []
        assert not composite.answers_here()

        composite.retrieve_sync(Query("q"))
        assert slow.loop_calls == 1 and len(slow.local_calls) == 1
    finally:
        composite.close()


class LocalEmbedder(CountingEmbedder):
    local = True


class BrokenLocalEmbedder(BrokenEmbedder):
    local = True


def test_a_local_embedder_embeds_the_query_in_the_calling_thread() -> None:
    embedder = LocalEmbedder("e")
    dense = LocalSource("dense", ["d"], embedder=embedder)
    composite = CompositeWorkspaceRetriever([dense])
    assert composite.answers_here()

    result = composite.retrieve_sync(Query("q"))

    assert embedder.calls == [["q"]]
    assert dense.local_calls[0][0] is threading.current_thread()
    assert dense.received[0].embeddings["e"].tolist() == [1.0] * 4
    assert [h.id for h in result.hits] == ["d"]


def test_a_failing_local_embedding_is_an_error_and_the_source_is_not_asked() -> None:
    dense = LocalSource("dense", ["d"], embedder=BrokenLocalEmbedder("e"))
    result = CompositeWorkspaceRetriever([dense]).retrieve_sync(Query("q"))
    failed = report(result, "dense")
    assert failed.status is SourceStatus.ERROR
    assert "could not embed the query with backend 'e'" in (failed.error or "")
    assert dense.local_calls == [] and result.hits == []
