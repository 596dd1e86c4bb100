"""Kairox's source and plugin conformance suites against a loopback Bedrock: the kind
registration, lazy boto3, and discovery through ``kairox plugins``."""

from __future__ import annotations

import sys

import kairox_bedrock
import pytest
from kairox_bedrock.testing import BedrockTestServer

from kairox.retrieval import Query, ScoreKind
from kairox.testing import PluginConformance, SourceConformance, run


class TestBedrockConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 60, 300

    @pytest.fixture
    def conformance_source(self, corpus_server, make_source):
        return make_source(corpus_server)

    @pytest.fixture
    def broken_source(self, make_source):
        with BedrockTestServer() as stopped:
            pass  # closed: nothing listens on its port any more
        return make_source(stopped.url)


def test_the_broken_source_names_the_endpoint_and_the_fix(make_source):
    with BedrockTestServer() as stopped:
        pass
    source = make_source(stopped.url)
    with pytest.raises(kairox_bedrock.BedrockConnectionError) as caught:
        run(source.retrieve(Query("saturn rings")))
    message = str(caught.value)
    assert stopped.url in message
    assert "endpoint_url" in message and "region" in message
    assert caught.value.attempts > 1  # a refused connection is retried within the budget


def test_scores_are_cosine_like_relevance_best_first(corpus_server, make_source):
    source = make_source(corpus_server)
    assert source.score_kind is ScoreKind.COSINE
    hits = run(source.retrieve(Query("saturn rings water", k=5)))
    assert hits[0].id == "astro-1" and len(hits) > 1
    assert all(0 < hit.score <= 1 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_empty_and_blank_queries_never_reach_the_service(server, make_source):
    source = make_source(server)
    for text in ("", "   ", "\n\t"):
        assert run(source.retrieve(Query(text))) == []
    assert server.count() == 0


def test_very_long_queries_are_cut_to_the_service_limit(server, make_source):
    source = make_source(server)
    hits = run(source.retrieve(Query("saturn rings " + "x" * 30_000, k=1)))
    assert [h.id for h in hits] == ["astro-1"]
    (request,) = server.requests
    assert len(request.json["retrievalQuery"]["text"]) == 20_000


# -- lazy boto3 and discovery ------------------------------------------------------------


class TestBedrockPlugin(PluginConformance):
    plugin, kind, distribution = kairox_bedrock, "bedrock", "kairox-bedrock"
    config_model = kairox_bedrock.BedrockConfig
    lazy_modules = ("boto3", "botocore")
    also_imported = ("kairox_bedrock.testing",)


def test_missing_boto3_gives_an_install_hint(monkeypatch, make_source, corpus_server):
    monkeypatch.setitem(sys.modules, "boto3", None)  # makes `import boto3` fail
    source = make_source(corpus_server)
    with pytest.raises(ImportError, match="pip install kairox-bedrock"):
        run(source.retrieve(Query("saturn rings")))
    with pytest.raises(ImportError, match="pip install kairox-bedrock"):
        kairox_bedrock.load_boto3()
