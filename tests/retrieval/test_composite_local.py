"""The composite's local path: sources that all answer locally are asked in turn, in the
calling thread (or on the loop's, or in one worker thread for an ``async`` caller).

A retrieval of sources with ``retrieve_local`` runs with no thread hand-off per source,
yet reports, filters, failures and deadlines as the concurrent path does.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kairox.default_plugins.sqlite_fts import SqliteFtsSource
from kairox.retrieval import (
    FAN_OUT,
    CompositeWorkspaceRetriever,
    Hit,
    Query,
    RetrievalResult,
    SourceStatus,
)
from kairox.retrieval.documents import Document
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


def test_every_local_source_is_asked_in_turn_in_the_calling_thread() -> None:
    first, second = LocalSource("first", ["a", "b"]), LocalSource("second", ["b", "c"])
    composite = CompositeWorkspaceRetriever([first, second])
    assert composite.answers_here()

    result = composite.retrieve_sync(Query("q", k=3))

    here = (threading.current_thread(), False, 2)  # FAN_OUT as on the loop
    assert first.local_calls == [here] and second.local_calls == [here]
    assert first.loop_calls == second.loop_calls == 0
    assert [r.status for r in result.reports] == [SourceStatus.OK, SourceStatus.OK]
    assert [h.id for h in result.hits] == ["b", "a", "c"]  # fused once: b from both


def test_a_source_without_retrieve_local_sends_every_source_to_worker_threads() -> None:
    local, remote = LocalSource("local", ["a"]), StaticSource("remote", ["x"])
    composite = CompositeWorkspaceRetriever([local, remote])
    try:
        assert not composite.answers_here()
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert local.local_calls == [] and local.loop_calls == 1
    assert {h.id for h in result.hits} == {"a", "x"}


def test_switching_the_local_path_off_asks_the_sources_concurrently() -> None:
    first, second = LocalSource("first", ["a"]), LocalSource("second", ["b"])
    composite = CompositeWorkspaceRetriever([first, second])
    composite.local_path = False
    try:
        assert not composite.answers_here()
        composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert first.local_calls == second.local_calls == []
    assert first.loop_calls == second.loop_calls == 1


def test_an_async_retrieval_hands_the_group_off_once_then_asks_on_the_loop_while_cheap() -> None:
    first, second = LocalSource("first", ["a"]), LocalSource("second", ["b"])
    composite = CompositeWorkspaceRetriever([first, second])
    composite.loop_budget_ms = float("inf")  # every group is cheap enough

    async def twice() -> threading.Thread:
        await composite.retrieve(Query("q"))  # its cost unknown: one worker thread
        await composite.retrieve(Query("q"))  # cheap: on the loop's thread
        return threading.current_thread()

    loop_thread = run(twice())
    (worker, _, _), (on_loop, running, _) = first.local_calls
    assert worker is not loop_thread and [c[0] for c in second.local_calls] == [worker, on_loop]
    assert on_loop is loop_thread and running
    assert first.loop_calls == second.loop_calls == 0


def test_an_async_retrieval_of_a_costly_group_stays_in_one_worker_thread() -> None:
    first, second = LocalSource("first", ["a"]), LocalSource("second", ["b"])
    composite = CompositeWorkspaceRetriever([first, second])
    composite.loop_budget_ms = 0.0  # no group is cheap enough for the loop's thread

    async def twice() -> list[list[str]]:
        results = [await composite.retrieve(Query("q")) for _ in range(2)]
        return [[h.id for h in r.hits] for r in results]

    assert run(twice()) == [["a", "b"], ["a", "b"]]
    threads = [call[0] for call in first.local_calls + second.local_calls]
    assert len(threads) == 4 and threading.main_thread() not in threads
    # One hand-off per retrieval: both sources in the same worker thread each time.
    assert threads[0] is threads[2] and threads[1] is threads[3]


@pytest.mark.parametrize("cheap", [True, False], ids=["cheap", "costly"])
def test_beside_a_remote_source_local_ones_are_asked_on_the_loop_once_known_cheap(cheap) -> None:
    first, remote, second = (
        LocalSource("first", ["a"]),
        StaticSource("remote", ["x"]),
        LocalSource("second", ["b"]),
    )
    composite = CompositeWorkspaceRetriever([first, remote, second])
    composite.loop_budget_ms = float("inf") if cheap else 0.0
    try:
        composite.retrieve_sync(Query("q"))  # their cost is not known yet: in tasks
        assert first.local_calls == [] and first.loop_calls == 1
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert len(remote.received) == 2
    if cheap:  # on the private loop, which runs in the calling thread
        here = [(threading.current_thread(), True, 3)]
        assert first.local_calls == here and second.local_calls == here
        assert first.loop_calls == second.loop_calls == 1
    else:
        assert first.local_calls == second.local_calls == []
        assert first.loop_calls == second.loop_calls == 2
    assert [r.status for r in result.reports] == [SourceStatus.OK] * 3
    assert {h.id for h in result.hits} == {"a", "x", "b"}


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
        assert "no answer within 1 ms (asked in turn" in (timed_out.error or "")
        assert first.hits == []
        assert not composite.answers_here()

        # A deadline the next search cannot miss: a loaded machine may take more than 1 ms
        # to reach the source's thread, and then it would rightly not be asked at all.
        composite._timeouts_ms["slow"] = 60_000
        composite.retrieve_sync(Query("q"))
        assert slow.loop_calls == 1 and len(slow.local_calls) == 1
    finally:
        composite.close()


def test_only_the_source_past_its_deadline_leaves_the_loop_s_thread() -> None:
    slow, quick = OverrunningLocalSource("slow", ["s"]), LocalSource("quick", ["q"])
    composite = CompositeWorkspaceRetriever([slow, quick], timeouts_ms={"slow": 1})
    composite.loop_budget_ms = float("inf")
    try:
        composite.retrieve_sync(Query("q"))  # slow overruns its deadline
        composite._timeouts_ms["slow"] = 60_000  # one the next search cannot miss (as above)
        result = composite.retrieve_sync(Query("q"))
    finally:
        composite.close()
    assert slow.loop_calls == 1 and len(slow.local_calls) == 1  # now in a worker thread
    assert [c[0] for c in quick.local_calls] == [threading.current_thread()] * 2
    assert quick.loop_calls == 0
    assert report(result, "quick").status is SourceStatus.OK


class BlockedLocalSource(LocalSource):
    """Answers only once ``release`` is set (or after 3 s), in whichever thread asks it."""

    def __init__(self, name: str, ids=()) -> None:
        super().__init__(name, ids)
        self.release = threading.Event()

    def retrieve_local(self, query: Query) -> list[Hit]:
        self.release.wait(3)
        return super().retrieve_local(query)


def test_a_source_whose_deadline_passed_before_its_turn_is_not_asked() -> None:
    quick, slow, after = (
        LocalSource("quick", ["q"]),
        OverrunningLocalSource("slow", ["s"]),
        LocalSource("after", ["a"]),
    )
    composite = CompositeWorkspaceRetriever(
        [quick, slow, after], timeouts_ms={"slow": 1, "after": 1}
    )
    result = composite.retrieve_sync(Query("q"))

    assert [(r.source, r.status) for r in result.reports] == [
        ("quick", SourceStatus.OK),
        ("slow", SourceStatus.TIMEOUT),
        ("after", SourceStatus.TIMEOUT),
    ]
    assert "its deadline passed while the local sources before it answered" in (
        report(result, "after").error or ""
    )
    assert after.received == [] and [h.id for h in result.hits] == ["q"]
    assert not composite.answers_here()  # later searches ask all three concurrently


def test_in_one_worker_thread_the_caller_stops_waiting_at_the_longest_deadline() -> None:
    blocked, after = BlockedLocalSource("blocked", ["b"]), LocalSource("after", ["a"])
    composite = CompositeWorkspaceRetriever([blocked, after], default_timeout_ms=20)

    async def search() -> RetrievalResult:
        try:
            return await composite.retrieve(Query("q"))  # the first: in one worker thread
        finally:
            blocked.release.set()

    result = run(search())  # which waits for the worker thread to end

    assert [(r.source, r.status) for r in result.reports] == [
        ("blocked", SourceStatus.TIMEOUT),
        ("after", SourceStatus.TIMEOUT),
    ]
    assert "no answer within 20 ms (the local sources asked in turn in one worker thread" in (
        report(result, "after").error or ""
    )
    assert after.received == []  # the thread asked no more once the caller stopped waiting
    assert result.hits == [] and not composite.answers_here()


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


# -- real SQLite: two knowledge bases, asked in turn and concurrently --------------------


class LoopOnly:
    """``source`` without its ``retrieve_local``: a composite asks it concurrently."""

    def __init__(self, source) -> None:
        self.source = source
        self.name = source.name
        self.score_kind = source.score_kind
        self.filter_support = source.filter_support

    async def retrieve(self, query: Query) -> list[Hit]:
        return await self.source.retrieve(query)


WORDS = ["release", "train", "deploy", "freeze", "friday", "rollback", "canary", "hotfix"]


def _documents(prefix: str, count: int, step: int) -> list[Document]:
    """``count`` passages of different lengths and mixes of :data:`WORDS`."""
    return [
        Document(
            f"{prefix}{n}",
            " ".join(WORDS[(n * step + j) % len(WORDS)] for j in range(n % 5 + 2)) + f" item {n}",
            title=f"{prefix} {WORDS[n % len(WORDS)]}",
            metadata={"year": 2020 + n % 3, "lang": "en" if n % 2 else "fr"},
        )
        for n in range(count)
    ]


@pytest.fixture
def two_knowledge_bases(tmp_path: Path) -> list[SqliteFtsSource]:
    papers = SqliteFtsSource("papers", tmp_path / "papers.db")
    notes = SqliteFtsSource("notes", tmp_path / "notes.db")
    papers.upsert(_documents("p", 24, 3))
    # One passage in both: fusion merges it, keeping both sources' ranks.
    notes.upsert([*_documents("n", 24, 5), _documents("p", 24, 3)[1]])
    return [papers, notes]


def _outputs(result: RetrievalResult) -> tuple[list, list]:
    hits = [(h.id, h.score, h.sources) for h in result.hits]
    reports = [(r.source, r.status, r.hit_count, r.error) for r in result.reports]
    return hits, reports


def _both_ways(sources: list, **options) -> tuple[CompositeWorkspaceRetriever, ...]:
    return (
        CompositeWorkspaceRetriever(sources, **options),
        CompositeWorkspaceRetriever([LoopOnly(source) for source in sources], **options),
    )


@pytest.mark.parametrize("filters", [None, {"year": {"$gte": 2021}}])
def test_two_sqlite_knowledge_bases_rank_alike_in_turn_and_concurrently(
    two_knowledge_bases, filters
) -> None:
    own_filters = {"notes": parse_filter({"lang": "en"})}
    in_turn, concurrent = _both_ways(two_knowledge_bases, source_filters=own_filters)
    papers, notes = two_knowledge_bases
    mixed = CompositeWorkspaceRetriever([papers, LoopOnly(notes)], source_filters=own_filters)
    mixed.loop_budget_ms = float("inf")
    try:
        for text in ["release train", "freeze canary", 'deploy "freeze" AND (train: -']:
            query = Query(text, k=5, filters=filters)
            expected = _outputs(concurrent.retrieve_sync(query))
            assert in_turn.answers_here()
            assert _outputs(in_turn.retrieve_sync(query)) == expected
            for budget in (0.0, float("inf")):  # one worker thread, then the loop's thread
                in_turn.loop_budget_ms = budget
                assert _outputs(run(in_turn.retrieve(query))) == expected
            # Beside a source asked concurrently: in a task, then on the loop's thread.
            assert _outputs(mixed.retrieve_sync(query)) == expected
            assert _outputs(mixed.retrieve_sync(query)) == expected
        assert expected[0] and {r[1] for r in expected[1]} == {SourceStatus.OK}
        shared = concurrent.retrieve_sync(Query("freeze friday rollback", k=5, filters=filters))
        assert [len(hit.sources) for hit in shared.hits if hit.id == "p1"] == [2]
    finally:
        for composite in (concurrent, in_turn, mixed):
            composite.close()


@pytest.mark.parametrize(
    ("contents", "error"),
    [(b"not a database " * 100, "is not a readable SQLite FTS index"), (None, "does not exist")],
    ids=["corrupt", "missing"],
)
def test_a_broken_sqlite_knowledge_base_is_reported_alike_in_turn(
    two_knowledge_bases, tmp_path, contents, error
) -> None:
    if contents is not None:
        (tmp_path / "broken.db").write_bytes(contents)
    broken = SqliteFtsSource("broken", tmp_path / "broken.db")
    in_turn, concurrent = _both_ways([*two_knowledge_bases, broken])
    try:
        expected = _outputs(concurrent.retrieve_sync(Query("release train")))
        failed = expected[1][2]
        assert failed[:2] == ("broken", SourceStatus.ERROR) and error in failed[3]
        assert _outputs(in_turn.retrieve_sync(Query("release train"))) == expected
        assert in_turn.answers_here()  # a source that fails is no reason to leave the path
    finally:
        concurrent.close()
        in_turn.close()
