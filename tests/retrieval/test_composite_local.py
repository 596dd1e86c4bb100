"""The composite's local path: sources that answer locally are asked in the calling thread.

A synchronous retrieval whose every source has ``retrieve_local`` runs with no event loop
and no thread hand-off, yet reports, filters, failures and deadlines as the loop does.
"""

from __future__ import annotations

import threading

import pytest

from kairox.blocking import loop_running
from kairox.retrieval import FAN_OUT, CompositeWorkspaceRetriever, Hit, Query, SourceStatus
from kairox.retrieval.filters import parse_filter
from kairox.testing import run
from tests.retrieval.test_composite import (
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


def test_local_sources_answer_in_the_calling_thread_with_no_loop() -> None:
    one, two = LocalSource("one", ["a", "b"]), LocalSource("two", ["b", "c"])
    composite = CompositeWorkspaceRetriever([one, two])
    assert composite.answers_here()

    result = composite.retrieve_sync(Query("q", k=3))

    for source in (one, two):
        # Asked here, with no event loop, one after the other: none runs next to another.
        assert source.local_calls == [(threading.current_thread(), False, 1)]
        assert source.loop_calls == 0
    assert [r.status for r in result.reports] == [SourceStatus.OK, SourceStatus.OK]
    # The same ranking the event loop gives.
    on_loop = run(composite.retrieve(Query("q", k=3)))
    assert [(h.id, h.score) for h in result.hits] == [(h.id, h.score) for h in on_loop.hits]
    assert [h.id for h in result.hits] == ["b", "a", "c"]


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(StaticSource("remote", ["x"]), id="a source without retrieve_local"),
        pytest.param(
            LocalSource("dense", ["x"], embedder=CountingEmbedder("e")),
            id="one needing a vector its embedder does not make locally",
        ),
    ],
)
def test_any_other_source_sends_the_retrieval_to_the_worker_threads(other) -> None:
    local = LocalSource("local", ["a"])
    composite = CompositeWorkspaceRetriever([local, other])
    try:
        assert not composite.answers_here()
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert local.local_calls == [] and local.loop_calls == 1
    assert {h.id for h in result.hits} == {"a", "x"}


def test_a_raising_or_malformed_local_source_is_an_error_and_the_others_answer() -> None:
    composite = CompositeWorkspaceRetriever(
        [RaisingLocalSource("broken"), MalformedLocalSource("odd"), LocalSource("fine", ["a"])]
    )
    result = composite.retrieve_sync(Query("q"))
    assert report(result, "broken").status is SourceStatus.ERROR
    assert "RuntimeError: index file is corrupt" in (report(result, "broken").error or "")
    assert report(result, "odd").status is SourceStatus.ERROR
    assert "expected a list of Hit" in (report(result, "odd").error or "")
    assert report(result, "fine").status is SourceStatus.OK
    assert [h.id for h in result.hits] == ["a"]


def test_filters_apply_on_the_local_path() -> None:
    unfiltered = UnfilteredLocalSource("plain", ["a"])
    own = LocalSource("own", ["b"])
    composite = CompositeWorkspaceRetriever(
        [unfiltered, own], source_filters={"own": parse_filter({"lang": "en"})}
    )
    result = composite.retrieve_sync(Query("q", filters={"year": 2024}))
    assert report(result, "plain").status is SourceStatus.SKIPPED
    assert unfiltered.received == []
    # The knowledge base's own filter is ANDed into the query's.
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
    slow, fast = OverrunningLocalSource("slow", ["s"]), LocalSource("fast", ["f"])
    composite = CompositeWorkspaceRetriever([slow, fast], timeouts_ms={"slow": 1})
    try:
        first = composite.retrieve_sync(Query("q"))
        # Its late answer is dropped, as on the loop, and it is asked there from now on.
        timed_out = report(first, "slow")
        assert timed_out.status is SourceStatus.TIMEOUT
        assert "no answer within 1 ms" in (timed_out.error or "")
        assert [h.id for h in first.hits] == ["f"]
        assert not composite.answers_here()

        composite.retrieve_sync(Query("q"))
        assert slow.loop_calls == 1 and fast.loop_calls == 1
        assert len(slow.local_calls) == 1
    finally:
        composite.close()


class LocalEmbedder(CountingEmbedder):
    local = True


class BrokenLocalEmbedder(BrokenEmbedder):
    local = True


def test_a_local_embedder_embeds_the_query_here_once_per_backend() -> None:
    embedder = LocalEmbedder("e")
    one, two = (LocalSource(name, [name], embedder=embedder) for name in ("one", "two"))
    composite = CompositeWorkspaceRetriever([one, two, LocalSource("words", ["w"])])
    assert composite.answers_here()

    result = composite.retrieve_sync(Query("q"))

    assert embedder.calls == [["q"]]
    for source in (one, two):
        assert source.local_calls[0][0] is threading.current_thread()
        assert source.received[0].embeddings["e"].tolist() == [1.0] * 4
    assert {h.id for h in result.hits} == {"one", "two", "w"}


def test_a_failing_local_embedding_is_an_error_for_the_sources_that_need_it() -> None:
    embedder = BrokenLocalEmbedder("e")
    dense = LocalSource("dense", ["d"], embedder=embedder)
    composite = CompositeWorkspaceRetriever([dense, LocalSource("words", ["w"])])
    result = composite.retrieve_sync(Query("q"))
    failed = report(result, "dense")
    assert failed.status is SourceStatus.ERROR
    assert "could not embed the query with backend 'e'" in (failed.error or "")
    assert dense.local_calls == []
    assert [h.id for h in result.hits] == ["w"]
