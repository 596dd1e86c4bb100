"""The ``pinecone`` source against a loopback index, driven through the real SDK:
namespaces, the dimension check, query vectors, retries, errors, filters and hits."""

from __future__ import annotations

import time

import kairox_pinecone
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kairox_pinecone import (
    PineconeAuthError,
    PineconeConfigurationError,
    PineconeServiceError,
    PineconeTimeoutError,
)
from kairox_pinecone.testing import PineconeTestServer

from kairox.retrieval import CompositeWorkspaceRetriever, Query, QueryError, SourceStatus
from kairox.support.retry import RetryPolicy
from kairox.testing import CORPUS, run
from kairox.testing.fuzz import check_hits_or_query_error, random_filters

# -- namespaces -----------------------------------------------------------------------


@pytest.fixture
def two_namespaces(server, corpus_records):
    """CORPUS in the default namespace; a different document in namespace ``other``."""
    server.seed(corpus_records)
    other = dict(corpus_records[0], id="other-astro", metadata={"text": "Saturn, elsewhere"})
    server.seed([other], namespace="other")
    return server


@pytest.mark.parametrize("namespace", [None, ""])
def test_an_unset_namespace_searches_only_the_default_one(two_namespaces, make_source, namespace):
    options = {} if namespace is None else {"namespace": namespace}
    source = make_source(two_namespaces.url, **options)
    hits = run(source.retrieve(Query("saturn rings ice", k=20)))
    ids = {hit.id for hit in hits}
    assert "astro-1" in ids and "other-astro" not in ids
    query = [r for r in two_namespaces.requests if r.path == "/query"][-1]
    assert query.json.get("namespace", "") == ""  # never a made-up name


def test_a_named_namespace_searches_only_that_one(two_namespaces, make_source):
    source = make_source(two_namespaces.url, namespace="other")
    hits = run(source.retrieve(Query("saturn rings ice", k=20)))
    assert [hit.id for hit in hits] == ["other-astro"]


# -- the dimension check --------------------------------------------------------------


def test_a_dimension_mismatch_fails_before_the_first_query(make_source, api_key):
    with PineconeTestServer(1536, api_key=api_key) as wide:
        source = make_source(wide.url)
        with pytest.raises(PineconeConfigurationError) as caught:
            run(source.retrieve(Query("saturn rings")))
        assert wide.count("/query") == 0
    message = str(caught.value)
    assert f"index at {wide.url} has dimension 1536" in message
    assert "embedding backend 'hashing' makes 384-dim vectors" in message
    assert "set embedding_backend to the model that filled the index" in message


def test_the_index_is_described_once(corpus_server, make_source):
    source = make_source(corpus_server.url)
    run(source.retrieve(Query("saturn rings")))
    run(source.retrieve(Query("black hole")))
    assert corpus_server.count("/describe_index_stats") == 1
    assert corpus_server.count("/query") == 2


def test_a_euclidean_index_is_refused(make_source, api_key, corpus_records):
    with PineconeTestServer(384, api_key=api_key, metric="euclidean") as index:
        index.seed(corpus_records)
        with pytest.raises(PineconeConfigurationError, match="'euclidean' metric"):
            run(make_source(index.url).retrieve(Query("saturn rings")))


# -- the query vector -----------------------------------------------------------------


def test_the_vector_in_query_embeddings_is_used(corpus_server, make_source, embedder):
    source = make_source(corpus_server.url)
    # The text says "saturn", the vector says "espresso": the vector must win.
    vector = embedder.inner.embed(["espresso coffee beans"])[0]
    hits = run(source.retrieve(Query("saturn rings", k=1, embeddings={embedder.name: vector})))
    assert hits[0].id == "cook-2"
    assert embedder.calls == []
    sent = corpus_server.requests[-1].json["vector"]
    np.testing.assert_allclose(sent, vector, rtol=1e-6)


def test_without_a_vector_the_source_embeds_the_text_once(corpus_server, make_source, embedder):
    source = make_source(corpus_server.url)
    hits = run(source.retrieve(Query("saturn rings", k=1)))
    assert hits[0].id == "astro-1"
    assert embedder.calls == [["saturn rings"]]


def test_the_composite_embeds_once_for_two_pinecone_sources(two_namespaces, make_source, embedder):
    default = make_source(two_namespaces.url, kb_id="default-ns")
    other = make_source(two_namespaces.url, kb_id="other-ns", namespace="other")
    composite = CompositeWorkspaceRetriever([default, other], default_timeout_ms=5000)
    result = composite.retrieve_sync(Query("saturn rings ice", k=5))
    assert [r.status for r in result.reports] == [SourceStatus.OK, SourceStatus.OK]
    assert embedder.calls == [["saturn rings ice"]]
    assert {h.id for h in result.hits} >= {"astro-1", "other-astro"}


def test_empty_and_featureless_queries_send_nothing(corpus_server, make_source):
    source = make_source(corpus_server.url)
    for text in ["", "   ", "\n\t", "?!", "*"]:
        assert run(source.retrieve(Query(text))) == []
    assert corpus_server.count() == 0


# -- retries --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_throttling_and_server_errors_are_retried(corpus_server, make_source, status):
    source = make_source(corpus_server.url, timeout_ms=3000)
    run(source.retrieve(Query("warm up")))  # the dimension check is done
    corpus_server.fail(status, times=2, target="/query", retry_after=0 if status == 429 else None)
    corpus_server.clear_requests()
    hits = run(source.retrieve(Query("saturn rings", k=3)))
    assert hits[0].id == "astro-1"
    assert corpus_server.count("/query") == 3


def test_retries_stop_after_the_policy_attempts(corpus_server, make_source):
    """Exactly ``attempts`` requests: the SDK's own retries are off, Kairox's count."""
    source = make_source(corpus_server.url, timeout_ms=5000)
    corpus_server.throttle(None, retry_after=0, target="/query")
    with pytest.raises(PineconeServiceError, match="429") as caught:
        run(source.retrieve(Query("saturn rings")))
    assert corpus_server.count("/query") == source.read_policy.attempts == 4
    assert "4 attempts" in str(caught.value)


def test_retry_after_is_honoured(corpus_server, make_source):
    source = make_source(corpus_server.url, timeout_ms=3000)
    run(source.retrieve(Query("warm up")))
    corpus_server.throttle(1, retry_after=0.4, target="/query")
    started = time.monotonic()
    hits = run(source.retrieve(Query("saturn rings", k=1)))
    assert hits[0].id == "astro-1"
    assert time.monotonic() - started >= 0.4


def test_a_retry_after_beyond_the_deadline_is_not_waited_for(corpus_server, make_source):
    source = make_source(corpus_server.url, timeout_ms=800)
    run(source.retrieve(Query("warm up")))
    corpus_server.throttle(1, retry_after=30, target="/query")
    with pytest.raises(PineconeServiceError, match="throttling"):
        run(source.retrieve(Query("saturn rings")))
    assert corpus_server.count("/query") == 2  # the warm-up and the throttled one


@pytest.mark.parametrize(
    ("status", "words"), [(401, "rejected the API key"), (403, "does not allow")]
)
def test_auth_failures_are_not_retried_and_name_api_key_env(
    corpus_server, make_source, status, words
):
    source = make_source(corpus_server.url)
    if status == 401:
        corpus_server.api_key = "another-key"
    else:
        corpus_server.fail(status, times=None)
    with pytest.raises(PineconeAuthError) as caught:
        run(source.retrieve(Query("saturn rings")))
    message = str(caught.value)
    assert words in message and str(status) in message
    assert "KAIROX_TEST_PINECONE_KEY (api_key_env)" in message
    assert corpus_server.count() == 1


def test_a_missing_key_variable_is_a_clear_error(corpus_server, make_source, monkeypatch):
    source = make_source(corpus_server.url, api_key_env="KAIROX_NO_SUCH_PINECONE_KEY")
    monkeypatch.delenv("KAIROX_NO_SUCH_PINECONE_KEY", raising=False)
    reason = source.unavailable_reason()
    assert "KAIROX_NO_SUCH_PINECONE_KEY is not set" in reason
    with pytest.raises(PineconeConfigurationError, match="KAIROX_NO_SUCH_PINECONE_KEY is not set"):
        run(source.retrieve(Query("saturn rings")))
    assert corpus_server.count() == 0


def test_the_default_key_variable_is_pinecone_api_key(corpus_server, make_source, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", corpus_server.api_key)
    source = make_source(corpus_server.url, api_key_env="PINECONE_API_KEY")
    assert source.unavailable_reason() is None
    assert run(source.retrieve(Query("saturn rings", k=1)))[0].id == "astro-1"
    monkeypatch.delenv("PINECONE_API_KEY")
    assert "PINECONE_API_KEY is not set" in source.unavailable_reason()


def test_a_slow_reply_past_the_deadline_times_out(corpus_server, make_source):
    source = make_source(corpus_server.url, timeout_ms=400)
    run(source.retrieve(Query("warm up")))
    corpus_server.delay(3.0, target="/query")
    with pytest.raises(PineconeTimeoutError) as caught:
        run(source.retrieve(Query("saturn rings")))
    assert isinstance(caught.value, TimeoutError)
    corpus_server.clear_faults()
    assert run(source.retrieve(Query("saturn rings", k=1)))[0].id == "astro-1"


def test_the_composite_reports_a_slow_index_and_returns_on_time(corpus_server, make_source):
    source = make_source(corpus_server.url, timeout_ms=300)
    corpus_server.delay(3.0)
    composite = CompositeWorkspaceRetriever([source], timeouts_ms={source.name: 300})
    result = composite.retrieve_sync(Query("saturn rings"))
    assert result.reports[0].status in (SourceStatus.ERROR, SourceStatus.TIMEOUT)
    assert result.hits == []


@pytest.mark.parametrize("path", ["/query", "/describe_index_stats"])
def test_a_malformed_response_is_a_clear_error(corpus_server, make_source, path):
    source = make_source(corpus_server.url)
    corpus_server.malformed(target=path)
    with pytest.raises(PineconeServiceError, match="cannot read"):
        run(source.retrieve(Query("saturn rings")))
    assert corpus_server.count(path) == 1  # not retried
    assert run(source.retrieve(Query("saturn rings", k=1)))[0].id == "astro-1"


def test_a_response_of_the_wrong_shape_is_a_clear_error(corpus_server, make_source):
    source = make_source(corpus_server.url)
    corpus_server.malformed(target="/query", body=b'{"matches": "not a list"}')
    with pytest.raises(PineconeServiceError, match="cannot read"):
        run(source.retrieve(Query("saturn rings")))


def test_a_404_says_to_check_host(corpus_server, make_source):
    corpus_server.fail(404, times=None)
    with pytest.raises(PineconeServiceError, match="Check host"):
        run(make_source(corpus_server.url).retrieve(Query("saturn rings")))


# -- filters --------------------------------------------------------------------------


def _ids(source, text="water energy light coffee python sql", **filters):
    return {h.id for h in run(source.retrieve(Query(text, k=20, filters=filters)))}


def test_filters_end_to_end(corpus_server, make_source):
    source = make_source(corpus_server.url)
    by_topic = {d.id: d.metadata["topic"] for d in CORPUS}
    cooking = _ids(source, topic="cooking")
    assert cooking and all(by_topic[i] == "cooking" for i in cooking)
    assert corpus_server.requests[-1].json["filter"] == {"topic": {"$eq": "cooking"}}

    either = _ids(source, topic=["astronomy", "biology"])
    assert either and {by_topic[i] for i in either} <= {"astronomy", "biology"}
    assert corpus_server.requests[-1].json["filter"] == {"topic": {"$in": ["astronomy", "biology"]}}

    both = _ids(source, topic="cooking", year=2023)
    assert both == {"cook-2"}
    assert corpus_server.requests[-1].json["filter"] == {
        "$and": [{"topic": {"$eq": "cooking"}}, {"year": {"$eq": 2023}}]
    }
    assert _ids(source, year="2023") == set()  # a string is not a number
    assert _ids(source, year=2023.0) == {"cook-2"}


def test_the_static_filter_is_anded_with_the_query_filters(corpus_server, make_source):
    source = make_source(corpus_server.url, filter={"year": {"$gte": 2020}})
    recent = {d.id for d in CORPUS if d.metadata["year"] >= 2020}
    found = _ids(source)
    assert found and found <= recent
    assert corpus_server.requests[-1].json["filter"] == {"year": {"$gte": 2020}}
    assert _ids(source, "plants sunlight water energy", topic="biology") == {"bio-1"}
    assert corpus_server.requests[-1].json["filter"] == {
        "$and": [{"year": {"$gte": 2020}}, {"topic": {"$eq": "biology"}}]
    }


def test_an_empty_any_of_matches_nothing_without_a_request(corpus_server, make_source):
    source = make_source(corpus_server.url)
    assert _ids(source, topic=[]) == set()
    assert corpus_server.count("/query") == 0


@pytest.mark.parametrize(
    "filters",
    [{"topic": None}, {"topic": {"$ne ": "x"}}, {"$or": "x"}, {"": 1}, {"year": float("nan")}],
)
def test_filters_that_cannot_be_compared_are_query_errors(corpus_server, make_source, filters):
    with pytest.raises(QueryError):
        run(make_source(corpus_server.url).retrieve(Query("water", filters=filters)))
    assert corpus_server.count("/query") == 0


@pytest.fixture
def shared_source(corpus_server, make_source):
    return make_source(corpus_server.url, timeout_ms=5000)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=40), filters=random_filters(st.text(max_size=8), text_size=12))
def test_any_filter_returns_hits_or_a_query_error(shared_source, text, filters):
    check_hits_or_query_error(shared_source, text, filters)


# -- hits -----------------------------------------------------------------------------


def test_hits_carry_text_uri_and_the_rest_of_the_metadata(corpus_server, make_source):
    hit = run(make_source(corpus_server.url).retrieve(Query("saturn rings ice", k=1)))[0]
    assert hit.id == "astro-1" and hit.source == "papers"
    assert hit.text.startswith("Saturn's rings. Saturn's rings are made")
    assert hit.uri == "corpus://astro-1"
    assert hit.metadata == {"topic": "astronomy", "year": 2021}


def test_path_is_the_uri_when_there_is_no_uri(server, make_source, hashing):
    vector = hashing.embed(["notes about saturn"])[0].tolist()
    server.seed([("n-1", vector, {"body": "notes about saturn", "path": "notes/saturn.md"})])
    hit = run(make_source(server.url, text_field="body").retrieve(Query("saturn")))[0]
    assert (hit.text, hit.uri) == ("notes about saturn", "notes/saturn.md")
    assert hit.metadata == {"path": "notes/saturn.md"}


def test_a_missing_text_field_names_text_field(corpus_server, make_source):
    source = make_source(corpus_server.url, text_field="body")
    with pytest.raises(PineconeConfigurationError) as caught:
        run(source.retrieve(Query("saturn rings")))
    assert "no metadata field 'body' (text_field)" in str(caught.value)


def test_k_is_capped_at_pinecones_limit(corpus_server, make_source):
    run(make_source(corpus_server.url).retrieve(Query("water", k=5000)))
    assert corpus_server.requests[-1].json["topK"] == kairox_pinecone.MAX_TOP_K


def test_scores_are_cosine_and_best_first(corpus_server, make_source):
    hits = run(make_source(corpus_server.url).retrieve(Query("water energy light", k=20)))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1.0 + 1e-6 for s in scores)


# -- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"host": "  "}, "host must be the index host"),
        ({"host": "ftp://example.com"}, "https://"),
        ({"api_key_env": "not a name"}, "not an environment variable name"),
        ({"filter": {"year": {"$gtee": 1}}}, "unknown operator '$gtee'"),
        ({"text_field": " "}, "must not be empty"),
        ({"api_key": "secret"}, "Extra inputs are not permitted"),
    ],
)
def test_config_validation(options, words):
    values = {
        "kind": "pinecone",
        "host": "https://x.svc.pinecone.io",
        "embedding_backend": "hashing",
    }
    with pytest.raises(ValueError, match=words.replace("$", r"\$")):
        kairox_pinecone.PineconeConfig(**{**values, **options})


def test_config_defaults():
    config = kairox_pinecone.PineconeConfig(
        kind="pinecone", host="https://x.svc.pinecone.io/", embedding_backend="minilm"
    )
    assert config.host == "https://x.svc.pinecone.io"
    assert config.namespace is None and config.filter is None
    assert (config.api_key_env, config.text_field) == ("PINECONE_API_KEY", "text")


def test_read_retries_fit_the_deadline(make_source, server):
    source = make_source(server.url, timeout_ms=1500)
    assert source.read_policy == RetryPolicy.within(1500)
