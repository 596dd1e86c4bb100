"""The composite retriever: fan-out, deadlines, failures, skipped sources, shared query embedding.

The sources here are small test doubles of the ``Source`` protocol (static
lists, a sleeper, a raiser, a thread-bound blocker); real sources have their own tests.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from kairox.retrieval import (
    CompositeWorkspaceRetriever,
    FusedHit,
    Hit,
    Query,
    RetrievalResult,
    SourceReport,
    SourceStatus,
)
from kairox.retrieval.composite import CANDIDATE_DEPTH
from kairox.testing import run
from tests.retrieval.composite_doubles import (
    RaisingSource,
    SlowSource,
    StaticSource,
    ThreadBoundSource,
    report,
    retrieve,
)

# --- fan-out and fusion --------------------------------------------------------------------


def test_hits_from_every_source_are_fused() -> None:
    composite = CompositeWorkspaceRetriever(
        [StaticSource("A", ["x", "y"]), StaticSource("B", ["y", "z"])]
    )
    result = retrieve(composite)
    assert result.hits[0].id == "y"  # found by both
    assert {h.id for h in result.hits} == {"x", "y", "z"}
    assert [r.status for r in result.reports] == [SourceStatus.OK, SourceStatus.OK]
    assert [r.hit_count for r in result.reports] == [2, 2]
    assert all(r.latency_ms >= 0 and r.error is None for r in result.reports)


def test_sources_are_asked_for_a_deeper_list_and_the_result_is_cut_to_k() -> None:
    a = StaticSource("A", [f"a{i}" for i in range(30)])
    b = StaticSource("B", [f"b{i}" for i in range(30)])
    result = retrieve(CompositeWorkspaceRetriever([a, b]), k=5)
    assert [q.k for q in a.received + b.received] == [CANDIDATE_DEPTH, CANDIDATE_DEPTH]
    assert len(result.hits) == 5
    assert report(result, "A").hit_count == 30

    big_k = retrieve(CompositeWorkspaceRetriever([a]), k=CANDIDATE_DEPTH + 25)
    assert a.received[-1].k == CANDIDATE_DEPTH + 25 and len(big_k.hits) == 30

    retrieve(CompositeWorkspaceRetriever([a], candidates=7), k=5)
    assert a.received[-1].k == 7
    retrieve(CompositeWorkspaceRetriever([a], candidates=7), k=9)
    assert a.received[-1].k == 9  # never fewer than k


def test_the_top_ranks_do_not_depend_on_k() -> None:
    """Every k up to the candidate depth fuses the same lists, so a short list is the
    head of a long one (`kairox search -k 5` agrees with `-k 100`)."""
    a = StaticSource("A", [f"p{i}" for i in range(60)])
    b = StaticSource("B", [f"p{59 - i}" for i in range(0, 60, 2)])
    composite = CompositeWorkspaceRetriever([a, b], weights={"B": 0.7})
    longest = [h.id for h in retrieve(composite, k=100).hits]
    for k in (1, 5, 10, 30):
        assert [h.id for h in retrieve(composite, k=k).hits] == longest[:k]


def test_rescore_sees_every_candidate_before_the_cut() -> None:
    source = StaticSource("A", [f"p{i}" for i in range(40)])
    seen: list[int] = []

    def backwards(query: str, hits: list[FusedHit]) -> list[FusedHit]:
        seen.append(len(hits))
        assert query == "q"
        return hits[::-1]

    result = retrieve(CompositeWorkspaceRetriever([source], rescore=backwards), k=3)
    assert seen == [40]
    assert [h.id for h in result.hits] == ["p39", "p38", "p37"]


def test_the_query_is_passed_through() -> None:
    source = StaticSource("A", ["x"])
    run(
        CompositeWorkspaceRetriever([source]).retrieve(
            Query('"weird" AND (text)', k=3, filters={"lang": "en"})
        )
    )
    assert source.received[0].text == '"weird" AND (text)'
    assert source.received[0].filters == {"lang": "en"}


def test_weights_and_fusion_method_apply() -> None:
    sources = [StaticSource("A", ["a"]), StaticSource("B", ["b"]), StaticSource("C", ["a"])]
    assert [h.id for h in retrieve(CompositeWorkspaceRetriever(sources)).hits] == ["a", "b"]
    weighted = CompositeWorkspaceRetriever(sources, weights={"B": 3.0})
    assert [h.id for h in retrieve(weighted).hits] == ["b", "a"]
    minmax = CompositeWorkspaceRetriever(sources, fusion="minmax")
    assert [h.score for h in retrieve(minmax).hits] == [2.0, 1.0]


def test_reports_follow_source_order_not_finishing_order() -> None:
    sources = [
        StaticSource("late", ["l"], delay=0.05),
        StaticSource("early", ["e"]),
        StaticSource("middle", ["m"], delay=0.02),
    ]
    result = retrieve(CompositeWorkspaceRetriever(sources, default_timeout_ms=5000))
    assert [r.source for r in result.reports] == ["late", "early", "middle"]
    assert all(r.status is SourceStatus.OK for r in result.reports)


# --- failures and deadlines ----------------------------------------------------------------


def test_a_slow_source_times_out_and_the_others_still_answer() -> None:
    composite = CompositeWorkspaceRetriever(
        [StaticSource("fast", ["x", "y"]), SlowSource("slow", ["never"])],
        timeouts_ms={"slow": 50},
    )
    result = retrieve(composite)
    assert [h.id for h in result.hits] == ["x", "y"]
    slow = report(result, "slow")
    assert slow.status is SourceStatus.TIMEOUT
    assert slow.error == "no answer within 50 ms"
    assert slow.hit_count == 0
    assert report(result, "fast").status is SourceStatus.OK


def test_default_timeout_applies_to_unlisted_sources() -> None:
    composite = CompositeWorkspaceRetriever([SlowSource("slow")], default_timeout_ms=30)
    assert composite.timeout_ms("slow") == 30
    assert report(retrieve(composite), "slow").error == "no answer within 30 ms"


def test_a_raising_source_is_reported_and_the_others_are_fine() -> None:
    composite = CompositeWorkspaceRetriever([RaisingSource("bad"), StaticSource("good", ["x"])])
    result = retrieve(composite)
    bad = report(result, "bad")
    assert bad.status is SourceStatus.ERROR
    assert bad.error == "RuntimeError: index file is corrupt"
    assert [h.id for h in result.hits] == ["x"]
    assert report(result, "good").status is SourceStatus.OK


def test_a_malformed_answer_is_an_error_not_a_crash() -> None:
    class ReturnsStrings(StaticSource):
        async def retrieve(self, query: Query) -> list[Hit]:
            return ["not a hit"]  # type: ignore[list-item]

    result = retrieve(
        CompositeWorkspaceRetriever([ReturnsStrings("odd"), StaticSource("ok", ["x"])])
    )
    assert report(result, "odd").status is SourceStatus.ERROR
    assert report(result, "odd").error.startswith("TypeError: ")
    assert [h.id for h in result.hits] == ["x"]


def test_a_hit_with_malformed_fields_is_an_error_not_a_crash() -> None:
    class NoneMetadata(StaticSource):
        async def retrieve(self, query: Query) -> list[Hit]:
            return [Hit("h", "text", 1.0, self.name, metadata=None)]  # type: ignore[arg-type]

    result = retrieve(CompositeWorkspaceRetriever([NoneMetadata("odd"), StaticSource("ok", ["x"])]))
    assert report(result, "odd").status is SourceStatus.ERROR
    assert "mapping metadata" in report(result, "odd").error
    assert [h.id for h in result.hits] == ["x"]


def test_score_fusion_turns_a_nan_score_into_an_error_report() -> None:
    class NanScores(StaticSource):
        async def retrieve(self, query: Query) -> list[Hit]:
            return [Hit("h", "text", float("nan"), self.name)]

    sources = [NanScores("nan"), StaticSource("ok", ["x"])]
    scored = retrieve(CompositeWorkspaceRetriever(sources, fusion="dbsf"))
    assert report(scored, "nan").status is SourceStatus.ERROR
    assert "non-finite" in report(scored, "nan").error
    # Rank fusion never reads scores, so the same answer is usable there.
    ranked = retrieve(CompositeWorkspaceRetriever(sources))
    assert report(ranked, "nan").status is SourceStatus.OK


def test_a_thread_bound_source_does_not_hold_the_result() -> None:
    blocker = ThreadBoundSource("blocking")
    composite = CompositeWorkspaceRetriever(
        [blocker, StaticSource("fast", ["x"])], timeouts_ms={"blocking": 50}
    )

    async def scenario() -> tuple[RetrievalResult, bool]:
        result = await composite.retrieve(Query("q"))
        still_running = not blocker.finished.is_set()
        blocker.release.set()  # let the thread end so the event loop can close promptly
        return result, still_running

    result, still_running = run(scenario())
    assert still_running, "retrieve() waited for a thread that ignored cancellation"
    assert report(result, "blocking").status is SourceStatus.TIMEOUT
    assert [h.id for h in result.hits] == ["x"]


def test_a_source_past_its_deadline_is_not_waited_for_until_a_later_one() -> None:
    # The blocker's thread ends by itself after 3 s, long before the other source's
    # deadline: waiting for that deadline would see it answer, and report it "ok".
    blocker = ThreadBoundSource("blocking")
    composite = CompositeWorkspaceRetriever(
        [blocker, StaticSource("fast", ["x"])],
        timeouts_ms={"blocking": 50},
        default_timeout_ms=60_000,
    )

    async def scenario() -> tuple[RetrievalResult, bool]:
        result = await composite.retrieve(Query("q"))
        still_running = not blocker.finished.is_set()
        blocker.release.set()
        return result, still_running

    result, still_running = run(scenario())
    assert still_running, "retrieve() waited past the blocking source's own deadline"
    assert report(result, "blocking").status is SourceStatus.TIMEOUT
    assert report(result, "blocking").latency_ms < 60_000
    assert report(result, "fast").status is SourceStatus.OK


def test_retrieve_sync_does_not_wait_for_a_straggling_thread() -> None:
    blocker = ThreadBoundSource("blocking")
    composite = CompositeWorkspaceRetriever(
        [blocker, StaticSource("fast", ["x"])], timeouts_ms={"blocking": 50}
    )
    try:
        result = composite.retrieve_sync(Query("q"))
        assert not blocker.finished.is_set(), "retrieve_sync() joined the straggling thread"
    finally:
        blocker.release.set()
    assert report(result, "blocking").status is SourceStatus.TIMEOUT
    assert [h.id for h in result.hits] == ["x"]
    assert blocker.finished.wait(5)  # and the thread ends cleanly on its own


class BarrierSource(StaticSource):
    """Blocks a worker thread until every source sharing ``barrier`` is blocked too, and
    records which thread it ran on: the answer comes only if all ran at the same time."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        super().__init__(name, [f"{name}-hit"])
        self.barrier = barrier
        # Thread objects, not idents: an ended thread's ident can be handed out again.
        self.threads: list[threading.Thread] = []

    def _block(self) -> None:
        self.threads.append(threading.current_thread())
        self.barrier.wait(timeout=5)

    async def retrieve(self, query: Query) -> list[Hit]:
        await asyncio.to_thread(self._block)
        return self.hits


def test_retrieve_sync_gives_every_blocking_source_a_thread_and_keeps_them() -> None:
    # More sources than the default executor's min(32, CPUs + 4) workers on a small host.
    barrier = threading.Barrier(12)
    sources = [BarrierSource(f"s{n}", barrier) for n in range(12)]
    composite = CompositeWorkspaceRetriever(sources, default_timeout_ms=10_000)
    try:
        for _ in range(2):
            barrier.reset()
            result = composite.retrieve_sync(Query("q"))
            assert {r.status for r in result.reports} == {SourceStatus.OK}
            assert len(result.hits) == 10
        first = {source.threads[0] for source in sources}
        second = {source.threads[1] for source in sources}
        assert len(first) == 12  # all at once, one thread each
        # The second call ran in the same, kept pool. Not "the very same threads": a worker
        # marks itself idle only after its future is done, so on a loaded machine the pool
        # may add a thread for the next call before an old one says it is free.
        pools = {thread.name.rsplit("_", 1)[0] for thread in first | second}
        assert len(pools) == 1
        assert all(thread.is_alive() for thread in first)  # kept, not retired
    finally:
        composite.close()


class RecordingThreadBoundSource(ThreadBoundSource):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.threads: list[threading.Thread] = []

    def _block(self) -> None:
        self.threads.append(threading.current_thread())
        super()._block()


def test_after_a_timeout_retrieve_sync_starts_fresh_threads() -> None:
    blocker = RecordingThreadBoundSource("blocking")
    fast = BarrierSource("fast", threading.Barrier(1))
    composite = CompositeWorkspaceRetriever([blocker, fast], timeouts_ms={"blocking": 50})
    try:
        composite.retrieve_sync(Query("q"))
        blocker.release.set()
        assert blocker.finished.wait(5)
        composite.retrieve_sync(Query("q"))
        composite.retrieve_sync(Query("q"))
    finally:
        blocker.release.set()
        composite.close()

    def pool(call: int) -> set[str]:
        # Worker threads are named "kairox-retrieve-<pool number>_<worker number>".
        return {t.name.rsplit("_", 1)[0] for t in (fast.threads[call], blocker.threads[call])}

    # The pool the straggler held was let go; the next one was kept for the third call.
    assert len(pool(0)) == len(pool(1)) == 1
    assert pool(1) != pool(0)
    assert pool(2) == pool(1)


def test_retrieve_sync_inside_an_event_loop_runs_on_a_worker_thread() -> None:
    # A notebook or an async framework calling a sync retriever: the answer is the same.
    composite = CompositeWorkspaceRetriever([StaticSource("A", ["x", "y"])])

    async def inside() -> RetrievalResult:
        return composite.retrieve_sync(Query("q"))

    try:
        outside = composite.retrieve_sync(Query("q"))
        assert [h.id for h in run(inside()).hits] == [h.id for h in outside.hits] == ["x", "y"]
    finally:
        composite.close()


# --- skipped sources and configuration errors ----------------------------------------------


def test_skipped_sources_are_reported_every_time() -> None:
    reason = "kind 'tantivy' is not installed: kairox install kairox-tantivy"
    composite = CompositeWorkspaceRetriever(
        [StaticSource("A", ["x"])], skipped={"notes": reason}, weights={"notes": 2.0}
    )
    for _ in range(2):
        result = retrieve(composite)
        assert [r.source for r in result.reports] == ["A", "notes"]
        assert report(result, "notes") == SourceReport(
            "notes", SourceStatus.SKIPPED, 0.0, 0, reason
        )
        assert [h.id for h in result.hits] == ["x"]


def test_no_usable_source_gives_an_empty_result() -> None:
    result = retrieve(CompositeWorkspaceRetriever([], skipped={"kb": "no credentials"}))
    assert result.hits == []
    assert [r.status for r in result.reports] == [SourceStatus.SKIPPED]


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="'docs'"):
        CompositeWorkspaceRetriever([StaticSource("docs"), StaticSource("docs")])
    with pytest.raises(ValueError, match="'docs'"):
        CompositeWorkspaceRetriever([StaticSource("docs")], skipped={"docs": "why"})


def test_bad_configuration_is_rejected() -> None:
    source = StaticSource("A")
    with pytest.raises(ValueError, match="rrf, minmax, dbsf"):
        CompositeWorkspaceRetriever([source], fusion="borda")
    with pytest.raises(ValueError, match="weight for source 'A'"):
        CompositeWorkspaceRetriever([source], weights={"A": -1})
    with pytest.raises(ValueError, match="timeout for 'A'"):
        CompositeWorkspaceRetriever([source], timeouts_ms={"A": 0})
    with pytest.raises(ValueError, match="unknown sources \\['typo'\\]"):
        CompositeWorkspaceRetriever([source], timeouts_ms={"typo": 100})
    with pytest.raises(ValueError, match="candidates"):
        CompositeWorkspaceRetriever([source], candidates=0)


def test_retrieve_sync_keeps_its_loop_between_calls_and_lets_it_go_on_close() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    class LoopRecordingSource(StaticSource):
        async def retrieve(self, query: Query) -> list[Hit]:
            loops.append(asyncio.get_running_loop())
            return self.hits

    composite = CompositeWorkspaceRetriever([LoopRecordingSource("A", ["x"])])
    composite.local_path = False  # through the private loop, not the calling thread
    first = composite.retrieve_sync(Query("q"))
    second = composite.retrieve_sync(Query("q"))
    assert [h.id for h in first.hits] == [h.id for h in second.hits] == ["x"]
    assert loops[0] is loops[1] and not loops[0].is_closed()
    composite.close()
    assert loops[0].is_closed()


def test_closing_inside_a_running_loop_still_lets_the_kept_loop_go() -> None:
    composite = CompositeWorkspaceRetriever([StaticSource("A", ["x"])])
    composite.local_path = False
    composite.retrieve_sync(Query("q"))

    async def close_inside() -> None:
        composite.close()

    run(close_inside())
    assert [h.id for h in composite.retrieve_sync(Query("q")).hits] == ["x"]  # a fresh one
    composite.close()
