"""Kairox's conformance suite against a loopback Bedrock, the kind registration, lazy
boto3, and discovery through ``kairox plugins``."""

from __future__ import annotations

import subprocess
import sys

import kairox_bedrock
import pytest
from kairox_bedrock.testing import BedrockTestServer, corpus_documents

from kairox.retrieval import Query, ScoreKind
from kairox.testing import (
    DATE_RANGE_CASES,
    FILTER_CORPUS,
    FilterConformance,
    SourceConformance,
    check_kind_registration,
    check_listed_by_kairox_plugins,
    run,
)


@pytest.fixture(scope="module")
def filter_server(credentials):
    access, secret, region = credentials
    with BedrockTestServer(
        corpus_documents(FILTER_CORPUS), access_key=access, secret_key=secret, region=region
    ) as srv:
        yield srv


class TestBedrockFilters(FilterConformance):
    # No `exists` in Bedrock, ranges on numbers only, and a negated range or listContains
    # would have to hold where the key is missing, which Bedrock cannot say: refused.
    filter_refuses = DATE_RANGE_CASES | {
        "exists-true",
        "exists-false",
        "exists-absent-field",
        "not-range",
        "not-or",
        "not-contains",
        "not-exists",
        "unicode-field-exists",
        "text-form-missing",
    }
    filter_max_k = 100  # numberOfResults

    @pytest.fixture
    def filter_source(self, filter_server, make_source):
        return make_source(filter_server, number_of_results=100)


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


def test_registers_the_bedrock_kind():
    kind = check_kind_registration(kairox_bedrock, "bedrock")
    assert kind.config_model is kairox_bedrock.BedrockConfig
    assert kind.factory is kairox_bedrock.build_source


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


@pytest.fixture(scope="module")
def shared_source(corpus_server, make_source):
    return make_source(corpus_server)


# -- lazy boto3 and discovery ------------------------------------------------------------


def test_importing_the_plugin_does_not_import_boto3():
    code = (
        "import sys, kairox_bedrock, kairox_bedrock.testing; "
        "print(sorted(m for m in ('boto3', 'botocore') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_missing_boto3_gives_an_install_hint(monkeypatch, make_source, corpus_server):
    monkeypatch.setitem(sys.modules, "boto3", None)  # makes `import boto3` fail
    source = make_source(corpus_server)
    with pytest.raises(ImportError, match="pip install kairox-bedrock"):
        run(source.retrieve(Query("saturn rings")))
    with pytest.raises(ImportError, match="pip install kairox-bedrock"):
        kairox_bedrock.load_boto3()


def test_kairox_plugins_lists_bedrock_as_ok():
    check_listed_by_kairox_plugins(
        "bedrock", "kairox-bedrock", "kairox_register_knowledge_base_kinds"
    )
