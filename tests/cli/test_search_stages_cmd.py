"""``kairox search`` with search stages: ``--rerank``/``--query-transform``, a profile's
``rerank`` with the built-ins on a real workspace index, and a model that answers badly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kairox.testing.openai_server import OpenAITestServer

QUERY = "how are failed uploads retried"
TEXT = "Failed uploads are retried with exponential backoff and jitter, {n} times at most.\n"


@pytest.fixture
def indexed(invoke, workspace):
    docs = workspace / "docs"
    docs.mkdir()
    for n in range(4):  # near-duplicates: one sentence, a different count each
        (docs / f"retry{n}.md").write_text(TEXT.format(n=n + 2))
    (docs / "billing.md").write_text("The billing job retried failed invoice uploads overnight.\n")
    (docs / "search.md").write_text("Search uploads by name; failed searches are retried.\n")
    assert invoke("index", ".").exit_code == 0
    return workspace


def search(invoke, *args):
    result = invoke("search", QUERY, "-k", "4", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_rerank_mmr_spreads_the_top_hits_over_different_files(invoke, indexed):
    plain = search(invoke, "--rerank", "none")
    diverse = search(invoke, "--rerank", "mmr")
    duplicates = [h for h in plain["hits"] if "retry" in h["uri"]]
    assert len(duplicates) >= 3 and plain["stages"] == []
    assert sum("retry" in h["uri"] for h in diverse["hits"]) < len(duplicates)
    assert diverse["stages"][0]["source"] == "rerank:mmr"
    assert diverse["stages"][0]["status"] == "ok"
    assert [h["reranked_rank"] for h in diverse["hits"]] == [1, 2, 3, 4]
    assert all("fused_rank" in h for h in diverse["hits"])


def test_an_unknown_reranker_is_exit_2_with_a_suggestion(invoke, indexed):
    result = invoke("search", "x", "--rerank", "mrm")
    assert result.exit_code == 2
    assert "no reranker named 'mrm'; did you mean 'mmr'?" in result.output
    assert "llm, mmr" in result.output


def _talk_to(server: OpenAITestServer, workspace: Path, more: str = "") -> None:
    """The default profile's model is ``server``'s (and ``more`` of its settings)."""
    (workspace / "kairox.toml").write_text(
        f'[profiles.default]\nmodel = "test-model"\nbase_url = "{server.base_url}"\n'
        'api_key_env = "NO_SUCH_KEY_SET"\n' + more
    )


def test_a_profiles_llm_reranker_that_answers_garbage_keeps_the_search(invoke, indexed):
    with OpenAITestServer(["I would rather not."]) as server:
        _talk_to(server, indexed, 'rerank = "llm"\n')
        plain = search(invoke, "--rerank", "none")
        table = invoke("search", QUERY, "-k", "4")
        found = search(invoke)
    assert table.exit_code == 0, table.output
    assert "rerank:llm: error" in table.output and "names no passage number" in table.output
    assert [h["uri"] for h in found["hits"]] == [h["uri"] for h in plain["hits"]]
    assert found["stages"][0]["status"] == "error"


def test_query_transform_hyde_reports_its_passage(invoke, indexed):
    with OpenAITestServer(["Uploads that fail are retried with backoff."]) as server:
        _talk_to(server, indexed)
        found = search(invoke, "--query-transform", "hyde")
        (request,) = server.chat_requests
    assert request.json["messages"][-1]["content"] == QUERY
    assert found["stages"] == [
        {
            "source": "transform:hyde",
            "status": "ok",
            "latency_ms": found["stages"][0]["latency_ms"],
            "hits": 1,
            "error": "passage of 7 words",
        }
    ]
    assert found["hits"]


def test_kairox_context_names_the_stages_that_ran_and_each_hits_ranks(invoke, indexed):
    (indexed / "kairox.toml").write_text('[profiles.default]\nrerank = "mmr"\n')
    result = invoke("context", QUERY, "--json")
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)
    (stage,) = trace["stages"]
    assert (stage["stage"], stage["status"], stage["error"]) == ("rerank:mmr", "ok", None)
    assert stage["latency_ms"] >= 0
    assert trace["hits"] and all("fused_rank" in hit for hit in trace["hits"])
    assert [hit["reranked_rank"] for hit in trace["hits"]] == list(range(1, len(trace["hits"]) + 1))
    table = invoke("context", QUERY)
    assert "rerank:mmr: ok" in table.output
