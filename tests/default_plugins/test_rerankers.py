"""The built-in rerankers: ``mmr`` over the real hashing embedder, ``llm`` through the real
openai-compatible backend against the loopback OpenAI server (scripted rankings, garbage,
a model that does not answer in time)."""

from __future__ import annotations

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.openai_compatible import OpenAICompatibleModel
from kairox.default_plugins.rerankers import LlmReranker, MmrReranker, parse_ranking
from kairox.retrieval import FusedHit, Provenance, Query
from kairox.testing import run
from kairox.testing.openai_server import OpenAITestServer


def fused(texts: list[str]) -> list[FusedHit]:
    return [
        FusedHit(
            id=f"h{n}",
            text=text,
            score=1.0 - n / 100,
            uri=f"doc{n}.md",
            metadata={},
            sources=(Provenance("words", n + 1, 1.0),),
        )
        for n, text in enumerate(texts)
    ]


DUPLICATES = [
    "Retry failed uploads with exponential backoff and jitter.",
    "Retry failed uploads with exponential backoff and jitter!",
    "Retry failed uploads with exponential backoff, and jitter.",
    "Billing runs nightly and emails the invoice to the account owner.",
    "The search index is rebuilt when files change on disk.",
]


def mean_pairwise_cosine(embedder, hits) -> float:
    import numpy as np

    vectors = embedder.embed([hit.text for hit in hits])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    n = len(hits)
    return float((sims.sum() - n) / (n * (n - 1)))


def test_mmr_stops_near_duplicates_crowding_the_top():
    embedder = HashingEmbedder()
    hits = fused(DUPLICATES)
    reranked = MmrReranker(embedder, mmr_lambda=0.5).rerank(Query("retry uploads"), hits)
    assert reranked[0] is hits[0]  # the most relevant stays first
    top3 = [hit.id for hit in reranked[:3]]
    assert sum(hit in top3 for hit in ("h0", "h1", "h2")) == 1
    assert sorted(hit.id for hit in reranked) == sorted(hit.id for hit in hits)
    assert mean_pairwise_cosine(embedder, reranked[:3]) < mean_pairwise_cosine(embedder, hits[:3])


def test_mmr_with_lambda_one_keeps_the_relevance_order():
    hits = fused(DUPLICATES)
    reranked = MmrReranker(HashingEmbedder(), mmr_lambda=1.0).rerank(Query("q"), hits)
    assert reranked == hits


@pytest.mark.parametrize(
    ("reply", "order"),
    [("3, 1, 2", [3, 1, 2]), ("[2] then [2] then [9] and 1", [2, 1]), ("none fit", [])],
)
def test_parse_ranking_takes_each_valid_number_once_in_order(reply, order):
    assert parse_ranking(reply, 3) == order


def llm_reranker(server: OpenAITestServer) -> LlmReranker:
    backend = OpenAICompatibleModel(server.base_url, api_key_env=None, timeout_s=10)
    return LlmReranker(lambda: backend, "test-model", passage_chars=80)


def test_the_llm_reranker_follows_the_models_ranking():
    hits = fused([*DUPLICATES[3:], "Uploads are retried three times."])
    with OpenAITestServer(["Ranking: 3, 1"]) as server:
        reranked = run(llm_reranker(server).rerank(Query("how are uploads retried?"), hits))
        (request,) = server.chat_requests
    assert [hit.id for hit in reranked] == ["h2", "h0"]
    prompt = request.json["messages"][-1]["content"]
    assert "how are uploads retried?" in prompt and "[3] Uploads are retried" in prompt


class OneSource:
    """A source returning fixed hits, so the staged search has something to rerank."""

    name = "words"
    score_kind = None

    def __init__(self, texts: list[str]) -> None:
        from kairox.retrieval import Hit

        self.hits = [
            Hit(id=f"h{n}", text=t, score=10.0 - n, source="words", uri=f"d{n}")
            for n, t in enumerate(texts)
        ]

    async def retrieve(self, query):
        return self.hits[: query.k]


@pytest.fixture
def staged_search(run_staged):
    """``staged_search(reranker, **options)``: the ids found, and the rerank stage's report."""

    def search(reranker, **options):
        from kairox.retrieval import ScoreKind

        source = OneSource(DUPLICATES)
        source.score_kind = ScoreKind.BM25
        result = run_staged(source, "retry uploads", reranker=reranker, **options)
        return [hit.id for hit in result.hits], result.stages[0]

    return search


def test_a_model_reply_naming_no_passage_keeps_the_fused_order(staged_search):
    with OpenAITestServer(["I cannot rank these, sorry."]) as server:
        order, report = staged_search(llm_reranker(server))
    assert order == ["h0", "h1", "h2", "h3", "h4"]
    assert str(report.status) == "error" and "names no passage number" in report.error


def test_a_model_that_does_not_answer_in_time_keeps_the_fused_order(staged_search):
    with OpenAITestServer(["1, 2"]) as server:
        server.delay(600)  # held until the server stops, long after the deadline
        order, report = staged_search(llm_reranker(server), rerank_timeout_ms=100)
    assert order == ["h0", "h1", "h2", "h3", "h4"]
    assert str(report.status) == "timeout"


def test_a_model_error_keeps_the_fused_order(staged_search):
    with OpenAITestServer(["1, 2"]) as server:
        server.fail(400, times=None)
        order, report = staged_search(llm_reranker(server))
    assert order == ["h0", "h1", "h2", "h3", "h4"]
    assert str(report.status) == "error" and "HTTP 400" in report.error
