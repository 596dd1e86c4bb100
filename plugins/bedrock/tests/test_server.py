"""The loopback server itself (a shipped test utility): driven by plain boto3 clients and
raw HTTP, it must answer like the service where a client can tell the difference."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ParamValidationError
from kairox_bedrock.testing import (
    ERROR_STATUS,
    BedrockDocument,
    BedrockTestServer,
    corpus_documents,
    evaluate_filter,
)

FAKE_AUTH = (
    "AWS4-HMAC-SHA256 Credential=AKIAKAIROXTEST000001/20250101/us-east-1/bedrock/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64
)


def client(server, *, keys: tuple[str, str] | None = None, **config):
    """A boto3 client of ``server`` (one attempt per call), signing with ``keys``
    (access key id, secret key) when given, else the fake environment's credentials."""
    credentials = {}
    if keys is not None:
        credentials = {"aws_access_key_id": keys[0], "aws_secret_access_key": keys[1]}
    return boto3.client(
        "bedrock-agent-runtime",
        region_name="us-east-1",
        endpoint_url=server.url,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}, **config),
        **credentials,
    )


def retrieve(c, server, text="saturn rings", **search):
    kwargs = {"knowledgeBaseId": server.knowledge_base_id, "retrievalQuery": {"text": text}}
    if search:
        kwargs["retrievalConfiguration"] = {"vectorSearchConfiguration": search}
    return c.retrieve(**kwargs)


def raw_post(server, path, body: bytes, auth: str | None = FAKE_AUTH):
    request = urllib.request.Request(server.url + path, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if auth:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


@pytest.fixture
def open_server():
    """A server that checks no credentials (any signed request passes)."""
    with BedrockTestServer(corpus_documents()) as srv:
        yield srv
        assert not srv.errors, srv.errors


def test_answers_with_the_retrieve_response_shape(open_server):
    response = retrieve(client(open_server), open_server, "saturn rings water", numberOfResults=2)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert response["ResponseMetadata"]["RequestId"]
    (first, second) = response["retrievalResults"]
    assert first["content"]["text"].startswith("Saturn's rings")
    assert first["location"] == {
        "type": "S3",
        "s3Location": {"uri": "s3://kairox-corpus/astro-1.txt"},
    }
    assert first["metadata"]["x-amz-bedrock-kb-chunk-id"] == "astro-1"
    assert 0 < second["score"] <= first["score"] <= 1
    assert response["nextToken"]  # a third document mentions water


def test_default_number_of_results_is_five(open_server):
    response = retrieve(client(open_server), open_server, "water energy light coffee sql")
    assert len(response["retrievalResults"]) == 5
    assert response["nextToken"]


def test_boto3s_own_paginator_walks_every_page():
    with BedrockTestServer(corpus_documents(), page_size=2) as server:
        pages = list(
            client(server)
            .get_paginator("retrieve")
            .paginate(
                knowledgeBaseId=server.knowledge_base_id,
                retrievalQuery={"text": "saturn hole plants mitochondria sourdough espresso"},
            )
        )
    chunk_ids = [
        r["metadata"]["x-amz-bedrock-kb-chunk-id"]
        for page in pages
        for r in page["retrievalResults"]
    ]
    assert len(pages) == 3 and sorted(chunk_ids) == [
        "astro-1",
        "astro-2",
        "bio-1",
        "bio-2",
        "cook-1",
        "cook-2",
    ]


def test_a_token_for_another_query_is_refused(open_server):
    c = client(open_server)
    token = retrieve(c, open_server, "water energy light coffee sql")["nextToken"]
    with pytest.raises(ClientError) as caught:
        c.retrieve(
            knowledgeBaseId=open_server.knowledge_base_id,
            retrievalQuery={"text": "something else"},
            nextToken=token,
        )
    assert caught.value.response["Error"]["Code"] == "ValidationException"


@pytest.mark.parametrize("code", sorted(ERROR_STATUS))
def test_scripted_errors_reach_botocore_with_code_and_status(open_server, code):
    open_server.fail(code, message=f"scripted {code}")
    with pytest.raises(ClientError) as caught:
        retrieve(client(open_server), open_server)
    error = caught.value.response
    assert error["Error"]["Code"] == code
    assert error["Error"]["Message"] == f"scripted {code}"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == ERROR_STATUS[code]
    assert retrieve(client(open_server), open_server)["retrievalResults"]  # then served


def test_retry_after_and_counts(open_server):
    open_server.fail("ThrottlingException", times=2, retry_after=2)
    c = client(open_server)
    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            retrieve(c, open_server)
        assert caught.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == "2"
    retrieve(c, open_server)
    assert [r.status for r in open_server.requests] == [429, 429, 200]
    open_server.reset()
    assert open_server.count() == 0


def test_in_with_a_scalar_value_is_a_validation_error(open_server):
    with pytest.raises(ClientError) as caught:
        retrieve(
            client(open_server),
            open_server,
            filter={"in": {"key": "topic", "value": "cooking"}},
        )
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "must be a list" in caught.value.response["Error"]["Message"]


def test_and_all_with_one_member_is_refused_by_botocore_and_by_the_server(open_server):
    single = {"andAll": [{"equals": {"key": "topic", "value": "cooking"}}]}
    with pytest.raises(ParamValidationError):
        retrieve(client(open_server), open_server, filter=single)
    unchecked = client(open_server, parameter_validation=False)
    with pytest.raises(ClientError) as caught:
        retrieve(unchecked, open_server, filter=single)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert "greater than or equal to 2" in caught.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("search", "code"),
    [
        ({"numberOfResults": 0}, "ValidationException"),
        ({"overrideSearchType": "KEYWORD"}, "ValidationException"),
        ({"filter": {"greaterThan": {"key": "year", "value": "2020"}}}, "ValidationException"),
        ({"filter": {"equals": {"key": "year"}}}, "ValidationException"),
    ],
)
def test_invalid_requests_are_refused_as_the_service_would(open_server, search, code):
    unchecked = client(open_server, parameter_validation=False)
    with pytest.raises(ClientError) as caught:
        retrieve(unchecked, open_server, **search)
    assert caught.value.response["Error"]["Code"] == code


def test_empty_query_text_is_a_validation_error(open_server):
    with pytest.raises(ClientError) as caught:
        retrieve(client(open_server), open_server, text="  ")
    assert caught.value.response["Error"]["Code"] == "ValidationException"


def test_raw_http_errors(open_server):
    path = f"/knowledgebases/{open_server.knowledge_base_id}/retrieve"
    status, headers, body = raw_post(open_server, path, b"{}", auth=None)
    assert status == 403
    assert headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException")
    assert body == {"message": "Missing Authentication Token"}

    status, headers, _ = raw_post(open_server, path, b"{not json")
    assert (status, headers["x-amzn-ErrorType"]) == (400, "SerializationException")

    status, headers, _ = raw_post(open_server, path, b"{}")
    assert (status, headers["x-amzn-ErrorType"]) == (400, "ValidationException")

    status, headers, _ = raw_post(open_server, "/knowledgebases/short/retrieve", b"{}")
    assert (status, headers["x-amzn-ErrorType"]) == (400, "ValidationException")

    status, headers, _ = raw_post(open_server, "/agents/x/sessions", b"{}")
    assert (status, headers["x-amzn-ErrorType"]) == (404, "UnknownOperationException")

    status, headers, _ = raw_post(open_server, path, b"{}", auth="Bearer nope")
    assert (status, headers["x-amzn-ErrorType"].split(":")[0]) == (
        403,
        "IncompleteSignatureException",
    )
    assert [r.access_key for r in open_server.requests][:2] == [None, "AKIAKAIROXTEST000001"]


def test_an_unknown_knowledge_base_is_404(open_server):
    c = client(open_server)
    with pytest.raises(ClientError) as caught:
        c.retrieve(knowledgeBaseId="OTHERKB000", retrievalQuery={"text": "saturn"})
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_signatures_are_verified():
    with BedrockTestServer(
        corpus_documents(), access_key="AKIAKAIROXTEST000001", secret_key="s3cr3t"
    ) as server:
        good = client(server, keys=("AKIAKAIROXTEST000001", "s3cr3t"))
        assert retrieve(good, server)["retrievalResults"]
        forged = client(server, keys=("AKIAKAIROXTEST000001", "guessed"))
        with pytest.raises(ClientError) as caught:
            retrieve(forged, server)
        assert caught.value.response["Error"]["Code"] == "InvalidSignatureException"


def test_close_frees_the_port_and_ends_sleeping_replies():
    server = BedrockTestServer(corpus_documents()).start()
    server.delay(30)
    c = client(server, read_timeout=20)
    outcome: list[BaseException | dict] = []

    def call():
        try:
            outcome.append(retrieve(c, server))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while server.count() == 0:
        time.sleep(0.01)
    server.close()
    thread.join(timeout=10)
    assert outcome and isinstance(outcome[0], Exception)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=2)


def test_evaluate_filter_semantics():
    meta = {
        "topic": "cooking",
        "year": 2021,
        "flag": True,
        "tags": ["a", "bb"],
        "title": "Espresso",
    }

    def check(f):
        return evaluate_filter(f, meta)

    def attr(op, key, value):
        return {op: {"key": key, "value": value}}

    assert check(attr("equals", "year", 2021.0))
    assert not check(attr("equals", "year", "2021"))
    assert not check(attr("equals", "flag", 1)) and check(attr("equals", "flag", True))
    assert check(attr("notEquals", "missing", 1)) and not check(attr("equals", "missing", 1))
    assert check(attr("in", "topic", ["x", "cooking"])) and check(attr("notIn", "topic", ["x"]))
    assert check(attr("greaterThan", "year", 2020)) and not check(attr("lessThan", "year", 2021))
    assert check(attr("lessThanOrEquals", "year", 2021)) and check(
        attr("greaterThanOrEquals", "year", 2021)
    )
    assert not check(attr("greaterThan", "topic", 1))
    assert check(attr("listContains", "tags", "bb")) and not check(
        attr("listContains", "topic", "c")
    )
    assert check(attr("startsWith", "title", "Esp")) and check(attr("stringContains", "tags", "b"))
    assert check({"andAll": [attr("equals", "year", 2021), attr("equals", "topic", "cooking")]})
    assert check({"orAll": [attr("equals", "year", 1), attr("equals", "topic", "cooking")]})
    assert not check({"andAll": [attr("equals", "year", 1), attr("equals", "topic", "cooking")]})


def test_documents_need_no_location_or_metadata():
    with BedrockTestServer([BedrockDocument("plain widget")], data_source_id="DS") as server:
        (result,) = retrieve(client(server), server, "widget")["retrievalResults"]
    assert "location" not in result
    assert result["metadata"] == {"x-amz-bedrock-kb-data-source-id": "DS"}


def test_constructor_checks():
    with pytest.raises(ValueError, match="10 letters or digits"):
        BedrockTestServer(knowledge_base_id="short")
    with pytest.raises(ValueError, match="page_size"):
        BedrockTestServer(page_size=0)
    with pytest.raises(RuntimeError, match="not started"):
        _ = BedrockTestServer().url
