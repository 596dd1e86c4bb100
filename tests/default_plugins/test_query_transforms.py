"""The built-in query transforms, ``multi-query`` and ``hyde``, through the real
openai-compatible backend against the loopback OpenAI server."""

from __future__ import annotations

import pytest

from kairox.default_plugins.openai_compatible import OpenAICompatibleModel
from kairox.default_plugins.query_transforms import HydeTransform, MultiQueryTransform
from kairox.retrieval import Query
from kairox.testing import run
from kairox.testing.openai_server import OpenAITestServer


def backend(server: OpenAITestServer):
    model = OpenAICompatibleModel(server.base_url, api_key_env=None, timeout_s=10)
    return lambda: model


def test_multi_query_searches_the_users_text_and_each_rephrasing():
    reply = "1. how do retries of failed uploads work\n2) upload retry policy\n- retry uploads\n"
    with OpenAITestServer([reply]) as server:
        planned = run(
            MultiQueryTransform(backend(server), "test-model", 3).transform(Query("retry uploads"))
        )
        (request,) = server.chat_requests
    # numbering and bullets go; the user's own text is not searched twice
    assert planned.texts == (
        "retry uploads",
        "how do retries of failed uploads work",
        "upload retry policy",
    )
    assert planned.embed_text is None and planned.note == "2 rephrasings"
    assert "3 different rephrasings" in request.json["messages"][0]["content"]
    assert request.json["messages"][-1]["content"] == "retry uploads"


def test_multi_query_keeps_at_most_count_rephrasings():
    with OpenAITestServer(["a\nb\nc\nd\n"]) as server:
        planned = run(MultiQueryTransform(backend(server), "test-model", 2).transform(Query("q")))
    assert planned.texts == ("q", "a", "b")


def test_multi_query_with_no_rephrasing_is_an_error():
    with OpenAITestServer(["\n\n"]) as server, pytest.raises(ValueError, match="no rephrasing"):
        run(MultiQueryTransform(backend(server), "test-model").transform(Query("q")))


def test_hyde_embeds_the_models_passage_and_searches_the_users_words():
    passage = "Failed uploads are retried three times with exponential backoff."
    with OpenAITestServer([f"  {passage}\n"]) as server:
        planned = run(
            HydeTransform(backend(server), "test-model").transform(Query("upload retries?"))
        )
    assert planned.texts == ("upload retries?",)
    assert planned.embed_text == passage
    assert planned.note == "passage of 9 words"


def test_hyde_with_an_empty_passage_is_an_error():
    with OpenAITestServer([" "]) as server, pytest.raises(ValueError, match="empty passage"):
        run(HydeTransform(backend(server), "test-model").transform(Query("q")))


class Words:
    """A source that records what it was asked and finds passages sharing a word."""

    name = "words"

    def __init__(self) -> None:
        from kairox.retrieval import ScoreKind

        self.score_kind = ScoreKind.BM25
        self.asked: list[str] = []

    async def retrieve(self, query):
        from kairox.retrieval import Hit

        self.asked.append(query.text)
        texts = ["failed uploads are retried", "billing runs nightly"]
        return [
            Hit(id=f"d{n}", text=t, score=1.0, source=self.name)
            for n, t in enumerate(texts)
            if set(query.text.split()) & set(t.split())
        ]


@pytest.fixture
def staged(run_staged):
    """``staged(transform, **options)``: what the source was asked, and the result."""

    def search(transform, **options):
        source = Words()
        return source.asked, run_staged(source, "uploads retried", transform=transform, **options)

    return search


def test_a_model_that_does_not_answer_in_time_leaves_the_users_query(staged):
    with OpenAITestServer(["uploads again"]) as server:
        server.delay(600)  # held until the server stops, long after the deadline
        asked, result = staged(
            MultiQueryTransform(backend(server), "test-model"), transform_timeout_ms=100
        )
    assert asked == ["uploads retried"]
    assert [hit.id for hit in result.hits] == ["d0"]
    assert str(result.stages[0].status) == "timeout"


def test_a_model_that_writes_garbage_leaves_the_users_query(staged):
    with OpenAITestServer(["   "]) as server:
        asked, result = staged(HydeTransform(backend(server), "test-model"))
    assert asked == ["uploads retried"]
    assert [hit.id for hit in result.hits] == ["d0"]
    (report,) = result.stages
    assert str(report.status) == "error" and "empty passage" in report.error
