"""Failure modes, injected into the loopback server: throttling and unavailability (retried,
counted), auth failures (not retried, naming api_key_env), slow and malformed replies."""

from __future__ import annotations

import pytest
from kairox_weaviate import (
    WeaviateAuthError,
    WeaviateDeadlineError,
    WeaviateReplyError,
    WeaviateSourceError,
)
from kairox_weaviate.testing import WeaviateTestServer

from kairox.retrieval import CompositeWorkspaceRetriever, Query, SourceStatus
from kairox.testing import run

KEY_ENV = "KAIROX_TEST_WEAVIATE_KEY"


# -- retries ------------------------------------------------------------------------------------


def test_throttled_searches_are_retried(server, make_source):
    server.fail("RESOURCE_EXHAUSTED", target="Search", times=2)
    hits = run(make_source(server, mode="bm25").retrieve(Query("saturn rings")))
    assert hits[0].id == "astro-1"
    assert server.count("Search") == 3


def test_unavailable_searches_are_retried_quickly(server, make_source):
    source = make_source(server, mode="hybrid")
    assert run(source.retrieve(Query("saturn rings")))  # connected
    server.fail("UNAVAILABLE", target="Search", times=2)
    hits = run(source.retrieve(Query("saturn rings")))
    # the channel re-sent the call itself (the client's own retry would have slept 1 s + 2 s)
    assert hits[0].id == "astro-1"
    assert server.count("Search") == 1 + 3


@pytest.mark.parametrize(("target", "status"), [("GET /v1/meta", 503), ("GET /v1/schema", 429)])
def test_rest_5xx_and_429_are_retried(server, make_source, target, status):
    server.fail(status, target=target, times=2)
    assert run(make_source(server, mode="bm25").retrieve(Query("saturn")))
    assert server.count(target) == 3


def test_retries_stop_at_the_policy_and_report_the_status(server, make_source):
    server.fail("RESOURCE_EXHAUSTED", target="Search", times=None, message="rate limit exceeded")
    source = make_source(server, mode="bm25", timeout_ms=3000)
    with pytest.raises(WeaviateSourceError, match=r"RESOURCE_EXHAUSTED.*rate limit exceeded"):
        run(source.retrieve(Query("saturn")))
    assert server.count("Search") == 4  # RetryPolicy.attempts


def test_retries_stay_within_the_time_budget(server, make_source):
    server.fail("RESOURCE_EXHAUSTED", target="Search", times=None)
    server.delay(0.15, target="Search", times=None)
    source = make_source(server, mode="bm25", timeout_ms=400)
    with pytest.raises(WeaviateSourceError):
        run(source.retrieve(Query("saturn")))
    assert server.count("Search") < 4


def test_other_server_errors_are_not_retried(server, make_source):
    server.fail("INVALID_ARGUMENT", target="Search", times=None, message="bad request")
    with pytest.raises(WeaviateSourceError, match="bad request"):
        run(make_source(server, mode="bm25").retrieve(Query("saturn")))
    assert server.count("Search") == 1


# -- auth ---------------------------------------------------------------------------------------


@pytest.fixture
def secured(helpers):
    with WeaviateTestServer(collections=["Corpus"], api_key="s3cret") as server:
        helpers.seed_corpus(server)
        yield server


def test_the_api_key_from_api_key_env_is_sent(secured, make_source, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "s3cret")
    source = make_source(secured, mode="hybrid", api_key_env=KEY_ENV)
    assert run(source.retrieve(Query("saturn rings")))[0].id == "astro-1"


def test_a_wrong_key_is_not_retried_and_names_api_key_env(secured, make_source, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "wrong")
    source = make_source(secured, mode="bm25", api_key_env=KEY_ENV)
    with pytest.raises(WeaviateAuthError, match=rf"401.*{KEY_ENV} \(api_key_env\)"):
        run(source.retrieve(Query("saturn")))
    assert secured.count("GET /v1/meta") == 1


def test_no_key_for_a_secured_server_says_to_set_api_key_env(secured, make_source):
    source = make_source(secured, mode="bm25")
    with pytest.raises(WeaviateAuthError, match="set api_key_env"):
        run(source.retrieve(Query("saturn")))


@pytest.mark.parametrize("code", ["UNAUTHENTICATED", "PERMISSION_DENIED"])
def test_grpc_auth_failures_are_not_retried(server, make_source, monkeypatch, code):
    monkeypatch.setenv(KEY_ENV, "anything")
    server.fail(code, target="Search", times=None, message="no access to collection Corpus")
    source = make_source(server, mode="bm25", api_key_env=KEY_ENV)
    with pytest.raises(WeaviateAuthError, match=KEY_ENV):
        run(source.retrieve(Query("saturn")))
    assert server.count("Search") == 1


def test_an_unset_api_key_env_is_named_when_building(server, make_source, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(WeaviateAuthError, match=rf"{KEY_ENV}, which is not set"):
        make_source(server, mode="bm25", api_key_env=KEY_ENV)


def test_an_api_key_env_unset_after_building_is_named(server, make_source, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "s3cret")
    source = make_source(server, mode="bm25", api_key_env=KEY_ENV)
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(WeaviateAuthError, match=rf"{KEY_ENV}, which is not set"):
        run(source.retrieve(Query("saturn")))
    assert server.requests == []


# -- slow and malformed replies ------------------------------------------------------------------


def test_a_reply_slower_than_timeout_ms_is_a_deadline_error(server, make_source):
    source = make_source(server, mode="bm25", timeout_ms=300)
    assert run(source.retrieve(Query("saturn")))
    server.delay(3.0, target="Search")
    with pytest.raises(WeaviateDeadlineError, match="timeout_ms = 300 ms"):
        run(source.retrieve(Query("saturn")))


def test_a_slow_rest_endpoint_is_a_deadline_error(server, make_source):
    server.delay(3.0, target="GET /v1/schema")
    source = make_source(server, mode="bm25", timeout_ms=300)
    with pytest.raises(WeaviateDeadlineError):
        run(source.retrieve(Query("saturn")))


def test_the_composite_reports_a_slow_source_as_timeout(server, make_source):
    slow = make_source(server, kb_id="slow", mode="bm25", timeout_ms=5000)
    fast = make_source(server, kb_id="fast", mode="bm25")
    assert run(slow.retrieve(Query("saturn")))
    server.delay(3.0, target="Search", times=1)
    composite = CompositeWorkspaceRetriever([slow, fast], timeouts_ms={"slow": 200, "fast": 2000})
    result = composite.retrieve_sync(Query("saturn rings", k=3))
    statuses = {r.source: r.status for r in result.reports}
    assert statuses == {"slow": SourceStatus.TIMEOUT, "fast": SourceStatus.OK}
    assert result.hits[0].id == "astro-1"


def test_results_without_properties_name_text_property(server, make_source):
    server.malformed(None, target="Search", mode="drop_properties")
    with pytest.raises(WeaviateReplyError, match=r"'text' \(text_property\)"):
        run(make_source(server, mode="bm25").retrieve(Query("saturn")))


@pytest.mark.parametrize("mode", ["bm25", "near_vector", "hybrid"])
def test_results_without_scores_are_reply_errors(server, make_source, mode):
    server.malformed(None, target="Search", mode="no_score")
    with pytest.raises(WeaviateReplyError, match="without a usable"):
        run(make_source(server, mode=mode).retrieve(Query("saturn")))


def test_a_meta_reply_that_is_not_json_is_a_clear_error(server, make_source):
    server.malformed(None, target="GET /v1/meta", mode="bad_json")
    with pytest.raises(WeaviateSourceError, match=r"Weaviate at http://127\.0\.0\.1"):
        run(make_source(server, mode="bm25").retrieve(Query("saturn")))
