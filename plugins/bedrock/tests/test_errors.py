"""Failures, each through real boto3 against the loopback server: retries on throttling and
5xx (counted on the server), no retry on auth errors, messages that name the fix, slow
replies against the deadline, malformed payloads, and the credential chain."""

from __future__ import annotations

import asyncio

import kairox_bedrock
import pytest
from kairox_bedrock import (
    BedrockAuthError,
    BedrockNotFoundError,
    BedrockResponseError,
    BedrockTimeoutError,
    BedrockUnavailableError,
)
from kairox_bedrock.testing import BedrockTestServer, corpus_documents

from kairox.retrieval import (
    CompositeWorkspaceRetriever,
    Hit,
    Query,
    QueryError,
    ScoreKind,
    SourceStatus,
)
from kairox.support.retry import RetryPolicy
from kairox.testing import run


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


def ask(source, text: str = "saturn rings ice", k: int = 3, **filters):
    return run(source.retrieve(Query(text, k=k, filters=filters)))


# -- retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("InternalServerException", 500),
        ("BadGatewayException", 502),
        ("ServiceUnavailableException", 503),
    ],
)
def test_throttling_and_5xx_are_retried_until_they_pass(server, make_source, code, status):
    source = make_source(server, timeout_ms=5000)
    server.fail(code, times=2)
    assert ids(ask(source))[:1] == ["astro-1"]
    assert server.count() == 3
    assert [r.status for r in server.requests] == [status, status, 200]


def test_a_bare_5xx_html_page_is_retried_too(server, make_source):
    source = make_source(server, timeout_ms=5000)
    server.malformed(
        body="<html><body>502 Bad Gateway</body></html>", status=502, content_type="text/html"
    )
    assert ids(ask(source))[:1] == ["astro-1"]
    assert server.count() == 2


def test_retries_stop_after_the_policy_attempts(server, make_source):
    source = make_source(server, timeout_ms=5000)
    server.fail("ThrottlingException", times=50)
    with pytest.raises(BedrockUnavailableError) as caught:
        ask(source)
    assert server.count() == 4 == RetryPolicy().attempts
    error = caught.value
    assert error.attempts == 4 and error.code == "ThrottlingException"
    assert "throttled" in str(error) and "after 4 attempts" in str(error)
    assert "quota" in str(error)


def test_retries_stop_at_the_time_budget(server, make_source):
    # Retry-After asks for 1 s, more than the 300 ms budget allows: no retry is started.
    source = make_source(server, timeout_ms=300)
    server.fail("ThrottlingException", times=50, retry_after=1)
    with pytest.raises(BedrockUnavailableError):
        ask(source)
    assert server.count() == 1


def test_a_custom_retry_policy_applies(server, bedrock_kind):
    config = bedrock_kind.config_model(
        kind="bedrock",
        knowledge_base_id=server.knowledge_base_id,
        region="us-east-1",
        endpoint_url=server.url,
    )
    source = kairox_bedrock.BedrockSource(
        "papers", config, retry_policy=RetryPolicy(attempts=2, base_delay=0.01)
    )
    server.fail("InternalServerException", times=5)
    with pytest.raises(BedrockUnavailableError, match="after 2 attempts"):
        ask(source)
    assert server.count() == 2


# -- auth: never retried, and the message names the fix ---------------------------------------


def test_an_unknown_access_key_is_not_retried_and_names_the_credential_chain(make_source):
    with BedrockTestServer(corpus_documents(), access_key="AKIAOTHERKEY00000000") as server:
        source = make_source(server)
        with pytest.raises(BedrockAuthError) as caught:
            ask(source)
        assert server.count() == 1
    message = str(caught.value)
    assert caught.value.code == "UnrecognizedClientException"
    assert "AWS_ACCESS_KEY_ID" in message and "aws_profile" in message
    assert "kairox.toml" in message


def test_a_wrong_secret_key_fails_the_signature_check(monkeypatch, server, make_source):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    source = make_source(server)
    with pytest.raises(BedrockAuthError) as caught:
        ask(source)
    assert server.count() == 1
    assert server.requests[0].error_code == "InvalidSignatureException"
    assert "AWS_SECRET_ACCESS_KEY" in str(caught.value)


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        ("AccessDeniedException", "bedrock:Retrieve"),
        ("ExpiredTokenException", "aws sso login"),
        ("UnrecognizedClientException", "AWS_SECRET_ACCESS_KEY"),
    ],
)
def test_auth_errors_are_not_retried(server, make_source, code, fix):
    source = make_source(server, timeout_ms=5000)
    server.fail(code, times=3)
    with pytest.raises(BedrockAuthError) as caught:
        ask(source)
    assert server.count() == 1
    assert caught.value.code == code
    assert fix in str(caught.value)


def test_signing_for_another_region_is_refused(server, make_source):
    source = make_source(server, region="eu-west-1")
    with pytest.raises(BedrockAuthError, match="region"):
        ask(source)
    assert server.requests[0].region == "eu-west-1"


def test_no_credentials_at_all_never_sends_a_request(monkeypatch, server, make_source):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    source = make_source(server)
    with pytest.raises(BedrockAuthError) as caught:
        ask(source)
    assert server.count() == 0
    message = str(caught.value)
    assert "AWS_ACCESS_KEY_ID" in message and 'aws_profile = "NAME"' in message
    assert "[knowledge_bases.papers]" in message


def test_credentials_come_from_aws_profile(monkeypatch, tmp_path, make_source):
    credentials_file = tmp_path / "credentials"
    credentials_file.write_text(
        "[kairox-test]\naws_access_key_id = AKIAPROFILEKEY000001\n"
        "aws_secret_access_key = profile-secret\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials_file))
    with BedrockTestServer(
        corpus_documents(), access_key="AKIAPROFILEKEY000001", secret_key="profile-secret"
    ) as server:
        source = make_source(server, aws_profile="kairox-test")
        assert ids(ask(source))[:1] == ["astro-1"]
        assert server.requests[0].access_key == "AKIAPROFILEKEY000001"


def test_an_unknown_aws_profile_is_named(server, make_source):
    source = make_source(server, aws_profile="no-such-profile")
    with pytest.raises(BedrockAuthError) as caught:
        ask(source)
    assert "'no-such-profile'" in str(caught.value) and "aws_profile" in str(caught.value)
    assert server.count() == 0


def test_requests_are_signed_for_bedrock_in_the_configured_region(server, make_source, credentials):
    access_key, _, region = credentials
    ask(make_source(server))
    (request,) = server.requests
    assert (request.access_key, request.region, request.service) == (access_key, region, "bedrock")
    assert request.method == "POST"
    assert request.path == f"/knowledgebases/{server.knowledge_base_id}/retrieve"


# -- not found, invalid ---------------------------------------------------------------------


def test_an_unknown_knowledge_base_names_the_id_and_region(server, make_source):
    source = make_source(server, knowledge_base_id="NOSUCHKB00")
    with pytest.raises(BedrockNotFoundError) as caught:
        ask(source)
    message = str(caught.value)
    assert "'NOSUCHKB00'" in message and "'us-east-1'" in message
    assert "knowledge_base_id" in message and "[knowledge_bases.papers]" in message
    assert server.count() == 1


def test_a_validation_error_becomes_a_query_error(server, make_source):
    source = make_source(server)
    server.fail("ValidationException", message="HYBRID search is not supported for this index")
    with pytest.raises(QueryError) as caught:
        ask(source)
    assert "HYBRID search is not supported" in str(caught.value)
    assert "search_type" in str(caught.value)
    assert server.count() == 1


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        ("ServiceQuotaExceededException", "higher quota"),
        ("DependencyFailedException", "vector store"),
    ],
)
def test_quota_and_vector_store_failures_say_what_failed(server, make_source, code, fix):
    source = make_source(server)
    server.fail(code)
    with pytest.raises(BedrockUnavailableError, match=fix):
        ask(source)
    assert server.count() == 1


# -- malformed payloads ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "{this is not json",
        "",
        '{"results": []}',
        '{"retrievalResults": "oops"}',
        '{"retrievalResults": [{"content": {"text": "x"}, "score": "high"}]}',
        '{"retrievalResults": [{"score": 0.5, "metadata": {"a": 1}}]}',
    ],
    ids=[
        "invalid-json",
        "empty",
        "no-results-key",
        "results-not-a-list",
        "bad-score",
        "no-content",
    ],
)
def test_a_malformed_payload_is_a_clear_error(server, make_source, body):
    source = make_source(server)
    server.malformed(body=body)
    with pytest.raises(BedrockResponseError) as caught:
        ask(source)
    message = str(caught.value)
    assert "papers" in message
    assert server.count() == 1  # not retried: a broken reply stays broken
    assert ids(ask(source))[:1] == ["astro-1"]  # and the source stays usable


def test_a_service_error_with_a_non_json_body_keeps_its_status(server, make_source):
    source = make_source(server)
    server.malformed(body="Forbidden", status=403, content_type="text/plain")
    with pytest.raises(BedrockAuthError, match="Forbidden"):
        ask(source)


# -- slow replies and deadlines ------------------------------------------------------------------


def test_a_slow_reply_within_the_deadline_is_awaited(server, make_source):
    source = make_source(server, timeout_ms=3000)
    server.delay(0.3)
    assert ids(ask(source))[:1] == ["astro-1"]


def test_a_reply_slower_than_timeout_ms_is_a_timeout_error(server, make_source):
    source = make_source(server, timeout_ms=300)
    ask(source)  # warm up: the client is built on first use
    server.delay(5)
    with pytest.raises(BedrockTimeoutError) as caught:
        ask(source)
    assert "300 ms" in str(caught.value) and "timeout_ms" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)


class _Fast:
    name = "fast"
    score_kind = ScoreKind.BM25

    async def retrieve(self, query):
        return [Hit("f1", "saturn rings, fast", 1.0, self.name)]


def test_a_slow_bedrock_costs_the_composite_only_its_deadline(server, make_source):
    bedrock = make_source(server, kb_id="kb", timeout_ms=5000)
    server.delay(5)
    composite = CompositeWorkspaceRetriever(
        [bedrock, _Fast()], timeouts_ms={"kb": 300, "fast": 2000}
    )
    # retrieve_sync, as the CLI calls it: asyncio.run would join the worker thread still
    # waiting for the slow reply before returning.
    result = composite.retrieve_sync(Query("saturn rings", k=3))
    reports = {report.source: report for report in result.reports}
    assert reports["kb"].status is SourceStatus.TIMEOUT
    assert reports["fast"].status is SourceStatus.OK
    assert [hit.id for hit in result.hits] == ["f1"]


def test_the_composite_reports_bedrock_errors_by_name(server, make_source):
    bedrock = make_source(server, kb_id="kb")
    server.fail("AccessDeniedException")
    # A generous deadline: building the boto3 client on first use can outlast the 800 ms
    # default on a loaded machine, and this test is about the error report, not timing.
    composite = CompositeWorkspaceRetriever([bedrock, _Fast()], default_timeout_ms=10_000)
    result = asyncio.run(composite.retrieve(Query("saturn rings", k=3)))
    reports = {report.source: report for report in result.reports}
    assert reports["kb"].status is SourceStatus.ERROR
    assert "BedrockAuthError" in reports["kb"].error and "bedrock:Retrieve" in reports["kb"].error
