"""The ``bedrock`` reranker against the loopback server's ``Rerank`` operation, over a real
boto3 client with SigV4 (the fake environment credentials)."""

from __future__ import annotations

import pytest
from kairox_bedrock import BedrockError, BedrockReranker, BedrockRerankSettings
from kairox_bedrock.testing.rerank import rerank_model_arn

from kairox.plugin_host.manager import build_plugin_manager
from kairox.retrieval import FusedHit, Provenance, Query

TEXTS = [
    "Billing runs nightly.",
    "Failed uploads are retried three times with backoff.",
    "Uploads go to the storage bucket.",
]


def hits() -> list[FusedHit]:
    return [
        FusedHit(f"h{n}", text, 1.0 - n / 10, None, {}, (Provenance("kb", n + 1, 1.0),))
        for n, text in enumerate(TEXTS)
    ]


def reranker(server, credentials, **keys) -> BedrockReranker:
    _, _, region = credentials
    keys.setdefault("bedrock_rerank_model_arn", rerank_model_arn(region))
    return BedrockReranker(BedrockRerankSettings(bedrock_rerank_endpoint_url=server.url, **keys))


def test_candidates_come_back_in_the_services_order(server, credentials):
    reranked = reranker(server, credentials).rerank(Query("how are failed uploads retried"), hits())
    assert [hit.id for hit in reranked] == ["h1", "h2", "h0"]
    (request,) = [r for r in server.requests if r.path == "/rerank"]
    body = request.json
    assert body["queries"] == [
        {"type": "TEXT", "textQuery": {"text": "how are failed uploads retried"}}
    ]
    assert [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]] == TEXTS
    config = body["rerankingConfiguration"]["bedrockRerankingConfiguration"]
    assert config["numberOfResults"] == 3


def test_a_refused_model_is_an_error_naming_the_code(server, credentials):
    bad = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-v2"
    with pytest.raises(BedrockError, match="AccessDeniedException"):
        reranker(server, credentials, bedrock_rerank_model_arn=bad).rerank(Query("q"), hits())


def test_no_model_configured_says_what_to_set():
    with pytest.raises(BedrockError, match="bedrock_rerank_model_arn"):
        BedrockReranker(BedrockRerankSettings())


def test_a_malformed_arn_is_refused_by_the_schema():
    with pytest.raises(ValueError, match="is not a Bedrock model ARN"):
        BedrockRerankSettings(bedrock_rerank_model_arn="amazon.rerank-v1:0")


def test_the_plugin_registers_the_reranker():
    pm = build_plugin_manager(entry_points=True)
    assert pm.registry.rerankers.provider("bedrock") == "bedrock"
    assert pm.registry.rerankers["bedrock"].config_model is BedrockRerankSettings
