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
from tests.retrieval.test_composite import CountingEmbedder, StaticSource, report


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
        # Asked here, with no event loop, each seeing how many sources run next to it.
        assert source.local_calls == [(threading.current_thread(), False, 2)]
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
            LocalSource("dense", ["x"], embedder=CountingEmbedder("e")), id="one needing a vector"
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
