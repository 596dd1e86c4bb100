"""Search stages around the composite: a query transform before it, a reranker after it.

The sources are small test doubles of the ``Source`` protocol (a word matcher that records
what it was asked, a dense one that records what it embedded); the stages are plain objects
following the protocols. Deadlines are exercised with stages that block on an event the
test sets afterwards, never with a sleep racing a timer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from kairox.retrieval import CompositeWorkspaceRetriever, FusedHit, Hit, Query, ScoreKind
from kairox.retrieval.stages import StagedRetrieval, TransformedQuery
from kairox.testing import run

PASSAGES = {
    f"p{n}": f"passage {n} about {topic}"
    for n, topic in enumerate(
        ["retry", "uploads", "retry uploads", "billing", "retry billing", "search"]
    )
}


class WordSource:
    """Hits for every passage sharing a word with the query, more shared words first."""

    name = "words"
    score_kind = ScoreKind.BM25

    def __init__(self) -> None:
        self.asked: list[Query] = []

    async def retrieve(self, query: Query) -> list[Hit]:
        self.asked.append(query)
        words = set(query.text.split())
        scored = [
            (len(words & set(text.split()) - {"passage", "about"}), pid, text)
            for pid, text in PASSAGES.items()
        ]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [
            Hit(id=pid, text=text, score=float(score), source=self.name, uri=f"kb/{pid}")
            for score, pid, text in ranked[: query.k]
        ]


class RecordingEmbedder:
    name = "recording"
    dim = 2

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.ones((len(texts), 2), dtype=np.float32)


class DenseSource:
    name = "dense"
    score_kind = ScoreKind.COSINE

    def __init__(self) -> None:
        self.embedder = RecordingEmbedder()

    async def retrieve(self, query: Query) -> list[Hit]:
        assert self.embedder.name in query.embeddings
        return [Hit(id="p5", text=PASSAGES["p5"], score=0.9, source=self.name, uri="kb/p5")]


@pytest.fixture
def words() -> WordSource:
    return WordSource()


@pytest.fixture
def composite(words: WordSource):
    composite = CompositeWorkspaceRetriever([words], fusion="rrf")
    yield composite
    composite.close()


class Reverse:
    name = "reverse"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def rerank(self, query: Query, hits: Sequence[FusedHit]) -> list[FusedHit]:
        self.seen.append([hit.id for hit in hits])
        return list(reversed(hits))


def ids(result) -> list[str]:
    return [hit.id for hit in result.hits]


def test_without_stages_the_ranking_is_the_composites(composite):
    plain = run(composite.retrieve(Query("retry uploads", k=5)))
    staged = run(StagedRetrieval(composite).retrieve(Query("retry uploads", k=5)))
    assert ids(staged) == ids(plain) and staged.stages == []
    assert [hit.fused_rank for hit in staged.hits] == list(range(1, len(plain.hits) + 1))


def test_a_reranker_reorders_the_top_candidates_and_each_hit_keeps_both_ranks(composite, words):
    fused = ids(run(composite.retrieve(Query("retry uploads billing", k=10))))
    reverse = Reverse()
    staged = StagedRetrieval(composite, reranker=reverse, rerank_depth=3)
    result = run(staged.retrieve(Query("retry uploads billing", k=2)))
    assert reverse.seen == [fused[:3]]  # only rerank_depth candidates, though k is 2
    assert ids(result) == [fused[2], fused[1]]
    assert [(h.fused_rank, h.reranked_rank) for h in result.hits] == [(3, 1), (2, 2)]
    (report,) = result.stages
    assert (report.source, str(report.status), report.hit_count) == ("rerank:reverse", "ok", 3)


def test_hits_a_reranker_leaves_out_follow_in_fused_order(composite):
    class KeepLast:
        name = "keep-last"

        def rerank(self, query, hits):
            return [hits[-1]]

    fused = ids(run(composite.retrieve(Query("retry uploads billing", k=4))))
    result = run(
        StagedRetrieval(composite, reranker=KeepLast(), rerank_depth=4).retrieve(
            Query("retry uploads billing", k=4)
        )
    )
    assert ids(result) == [fused[3], *fused[:3]]


def test_an_async_reranker_is_awaited(composite):
    class AsyncReverse(Reverse):
        async def rerank(self, query, hits):
            await asyncio.sleep(0)
            return list(reversed(hits))

    fused = ids(run(composite.retrieve(Query("retry", k=3))))
    result = run(StagedRetrieval(composite, reranker=AsyncReverse()).retrieve(Query("retry", k=3)))
    assert ids(result) == fused[::-1]


class Broken:
    name = "broken"

    def __init__(self, answer) -> None:
        self.answer = answer

    def rerank(self, query, hits):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(hits)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (RuntimeError("model fell over"), "RuntimeError: model fell over"),
        (lambda hits: "3, 1, 2", "returned str, not a list of the given hits"),
        (lambda hits: [hits[0], hits[0]], "twice"),
        (
            lambda hits: [FusedHit("x", "forged", 1.0, None, {}, hits[0].sources)],
            "a hit it was not given",
        ),
    ],
    ids=["raises", "not-a-list", "duplicate", "foreign-hit"],
)
def test_a_failing_reranker_leaves_the_fused_ranking(composite, answer, why):
    fused = ids(run(composite.retrieve(Query("retry uploads", k=4))))
    result = run(
        StagedRetrieval(composite, reranker=Broken(answer)).retrieve(Query("retry uploads", k=4))
    )
    assert ids(result) == fused
    assert all(hit.reranked_rank is None for hit in result.hits)
    (report,) = result.stages
    assert str(report.status) == "error" and why in report.error
    assert "kept the search as it was" in report.error


def test_a_reranker_past_its_deadline_is_not_waited_for(composite):
    release = threading.Event()

    class Stuck:
        name = "stuck"

        def rerank(self, query, hits):
            release.wait()
            return list(reversed(hits))

    fused = ids(composite.retrieve_sync(Query("retry uploads", k=4)))
    staged = StagedRetrieval(composite, reranker=Stuck(), rerank_timeout_ms=50)
    try:
        result = staged.retrieve_sync(Query("retry uploads", k=4))
    finally:
        release.set()
    assert ids(result) == fused
    (report,) = result.stages
    assert str(report.status) == "timeout" and "50 ms" in report.error
    # the worker threads were let go; the next search runs on fresh ones, and the
    # reranker, released, answers in time
    again = staged.retrieve_sync(Query("retry uploads", k=4))
    assert ids(again) == fused[::-1] and str(again.stages[0].status) == "ok"


class Rephrase:
    name = "rephrase"

    def __init__(self, *texts: str, embed_text: str | None = None) -> None:
        self.texts = texts
        self.embed_text = embed_text

    def transform(self, query):
        return TransformedQuery((query.text, *self.texts), embed_text=self.embed_text, note="n")


def test_every_transformed_text_is_searched_and_the_rankings_fused(composite, words):
    staged = StagedRetrieval(composite, transform=Rephrase("billing"))
    result = run(staged.retrieve(Query("uploads", k=10)))
    assert [q.text for q in words.asked] == ["uploads", "billing"]
    assert set(ids(result)) == {"p1", "p2", "p3", "p4"}
    (report,) = result.stages
    assert (report.source, report.hit_count, report.error) == ("transform:rephrase", 2, "n")


def test_a_passage_every_rephrasing_finds_rises(composite):
    # p2 ("retry uploads") is second for "uploads" alone, but found by both texts.
    alone = ids(run(composite.retrieve(Query("uploads", k=5))))
    assert alone[0] == "p1"
    fused = ids(
        run(StagedRetrieval(composite, transform=Rephrase("retry")).retrieve(Query("uploads", k=5)))
    )
    assert fused[0] == "p2"


def test_dense_sources_embed_the_transforms_passage_and_lexical_ones_keep_the_words(words):
    dense = DenseSource()
    composite = CompositeWorkspaceRetriever([words, dense])
    try:
        staged = StagedRetrieval(
            composite, transform=Rephrase(embed_text="a hypothetical passage on retries")
        )
        run(staged.retrieve(Query("retry uploads", k=3)))
    finally:
        composite.close()
    assert dense.embedder.texts == ["a hypothetical passage on retries"]
    assert [q.text for q in words.asked] == ["retry uploads"]


@pytest.mark.parametrize(
    ("transform", "why"),
    [
        (
            type("Empty", (), {"name": "empty", "transform": lambda s, q: TransformedQuery(("",))}),
            "no text to search for",
        ),
        (
            type("Wrong", (), {"name": "wrong", "transform": lambda s, q: ["a", "b"]}),
            "not a TransformedQuery",
        ),
        (type("Boom", (), {"name": "boom", "transform": lambda s, q: 1 / 0}), "ZeroDivisionError"),
    ],
    ids=["empty", "wrong-type", "raises"],
)
def test_a_failing_transform_leaves_the_users_query(composite, words, transform, why):
    result = run(StagedRetrieval(composite, transform=transform()).retrieve(Query("retry", k=5)))
    assert [q.text for q in words.asked] == ["retry"]
    assert ids(result) == ["p0", "p2", "p4"]
    (report,) = result.stages
    assert str(report.status) == "error" and why in report.error


def test_a_transform_past_its_deadline_leaves_the_users_query(composite, words):
    release = threading.Event()

    class Stuck:
        name = "stuck"

        def transform(self, query):
            release.wait()
            return TransformedQuery(("billing",))

    staged = StagedRetrieval(composite, transform=Stuck(), transform_timeout_ms=50)
    try:
        result = staged.retrieve_sync(Query("retry", k=5))
    finally:
        release.set()
    assert [q.text for q in words.asked] == ["retry"]
    assert str(result.stages[0].status) == "timeout"
    assert ids(result) == ["p0", "p2", "p4"]


def test_rerank_depth_must_be_positive(composite):
    with pytest.raises(ValueError, match="rerank_depth"):
        StagedRetrieval(composite, rerank_depth=0)
