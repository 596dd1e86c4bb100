"""The loopback index itself (``kairox_pinecone.testing``), through the real SDK where a
client would notice: it is a test utility plugin users rely on, so it is tested too."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pinecone
import pytest
from kairox_pinecone.testing import (
    BadRequest,
    PineconeTestServer,
    StoredVector,
    closed_url,
    matches_filter,
)
from pinecone.errors import ApiError, ServiceError, UnauthorizedError

from kairox.retrieval import VectorRecord

KEY = "server-test-key"


def _post(server: PineconeTestServer, path: str, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{server.url}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Api-Key": KEY, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def index_server():
    with PineconeTestServer(3, api_key=KEY) as server:
        yield server


@pytest.fixture
def index(index_server):
    client = index_server.sdk_index()  # SDK retries off: see every status the server sends
    yield client
    client.close()


# -- the API, as the SDK sees it ---------------------------------------------------------


def test_upsert_query_fetch_and_stats(index_server, index):
    assert (
        index.upsert(vectors=[("a", [1, 0, 0], {"t": "x"}), ("b", [0, 1, 0])]).upserted_count == 2
    )
    index.upsert(vectors=[("c", [0, 0, 1])], namespace="ns")
    result = index.query(vector=[1, 0.2, 0], top_k=5, include_metadata=True, include_values=True)
    assert [m.id for m in result.matches] == ["a", "b"]
    assert result.matches[0].metadata == {"t": "x"} and result.matches[0].values == [1, 0, 0]
    assert result.matches[0].score == pytest.approx(1 / (1.04**0.5))
    by_id = index.query(id="b", top_k=1)
    assert by_id.matches[0].id == "b" and by_id.matches[0].metadata is None
    assert set(index.fetch(ids=["a", "zz"]).vectors) == {"a"}
    stats = index.describe_index_stats()
    assert (stats.dimension, stats.total_vector_count, stats.metric) == (3, 3, "cosine")
    assert {name: s.vector_count for name, s in stats.namespaces.items()} == {
        "__default__": 2,
        "ns": 1,
    }
    assert index_server.namespaces() == ["", "ns"]
    assert index_server.vectors("ns") == {"c": StoredVector("c", (0.0, 0.0, 1.0), {})}


def test_list_paginates(index_server, index):
    index_server.seed([(f"id-{i:03d}", [1, i, 0]) for i in range(250)])
    pages = list(index.list(prefix="id-1"))
    assert [len(page.vectors) for page in pages] == [100]
    first = index.list_paginated(limit=100)
    assert first.pagination is not None and len(first.vectors) == 100
    every = [v.id for page in index.list() for v in page.vectors]
    assert every == sorted(f"id-{i:03d}" for i in range(250))


def test_delete_by_ids_filter_and_all(index_server, index):
    index_server.seed([("a", [1, 0, 0], {"k": 1}), ("b", [0, 1, 0], {"k": 2}), ("c", [0, 0, 1])])
    index.delete(ids=["a", "missing"])
    assert set(index_server.vectors()) == {"b", "c"}
    index.delete(filter={"k": {"$eq": 2}})
    assert set(index_server.vectors()) == {"c"}
    index.delete(delete_all=True)
    assert index_server.vectors() == {}


def test_the_dimension_is_enforced(index):
    with pytest.raises(ApiError) as caught:
        index.upsert(vectors=[("a", [1, 0])])
    assert caught.value.status_code == 400
    assert "Vector dimension 2 does not match the dimension of the index 3" in str(caught.value)
    with pytest.raises(ApiError, match="does not match"):
        index.query(vector=[1, 0, 0, 0], top_k=1)


@pytest.mark.parametrize(
    ("vector", "words"),
    [
        ({"id": "a", "values": [0, 0, 0]}, "at least one non-zero value"),
        ({"id": "a", "values": [1, 0, 0], "metadata": {"k": None}}, "Metadata value"),
        ({"id": "a", "values": [1, 0, 0], "metadata": {"k": [1, 2]}}, "Metadata value"),
    ],
)
def test_vectors_the_service_refuses(index_server, vector, words):
    # Raw HTTP: the SDK already refuses some of these itself, before sending anything.
    status, body = _post(index_server, "/vectors/upsert", {"vectors": [vector]})
    assert status == 400 and words in body["message"] and body["code"] == 3
    assert index_server.vectors() == {}


def test_query_limits(index_server, index):
    index_server.seed([("a", [1, 0, 0])])
    with pytest.raises(ApiError, match="at most 1000"):
        index.query(vector=[1, 0, 0], top_k=1001, include_metadata=True)
    assert index.query(vector=[1, 0, 0], top_k=5000).matches[0].id == "a"


def test_upsert_and_delete_caps():
    with PineconeTestServer(3, api_key=KEY, max_upsert_vectors=2, max_delete_ids=2) as server:
        client = pinecone.Index(host=server.url, api_key=KEY)
        with pytest.raises(ApiError, match="Too many vectors"):
            client.upsert(vectors=[(str(i), [1, 0, 0]) for i in range(3)])
        with pytest.raises(ApiError, match="Too many ids"):
            client.delete(ids=["a", "b", "c"])
        client.close()


@pytest.mark.parametrize("metric", ["dotproduct", "euclidean"])
def test_other_metrics(metric):
    with PineconeTestServer(2, api_key=KEY, metric=metric) as server:
        server.seed([("near", [1, 0]), ("far", [5, 5])])
        client = pinecone.Index(host=server.url, api_key=KEY)
        matches = client.query(vector=[1, 0.1], top_k=2).matches
        client.close()
    if metric == "dotproduct":
        assert [m.id for m in matches] == ["far", "near"] and matches[0].score == pytest.approx(5.5)
    else:
        assert [m.id for m in matches] == ["near", "far"]
        assert matches[0].score == pytest.approx(0.01)


# -- faults -----------------------------------------------------------------------------


def test_a_wrong_key_gets_pinecones_401(index_server):
    client = index_server.sdk_index(api_key="wrong")
    with pytest.raises(UnauthorizedError) as caught:
        client.query(vector=[1, 0, 0], top_k=1)
    client.close()
    assert caught.value.status_code == 401
    assert caught.value.body == {"code": 16, "message": "Invalid API Key", "details": []}


def test_a_missing_key_gets_401(index_server):
    request = urllib.request.Request(
        f"{index_server.url}/describe_index_stats", data=b"{}", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 401


def test_throttling_carries_retry_after(index_server, index):
    index_server.throttle(2, retry_after=1.5, target="/query")
    for _ in range(2):
        with pytest.raises(ApiError) as caught:
            index.query(vector=[1, 0, 0], top_k=1)
        assert caught.value.status_code == 429
        assert caught.value.headers["retry-after"] == "1.5"
    index.query(vector=[1, 0, 0], top_k=1)
    index.describe_index_stats()  # other paths were never throttled
    assert [r.status for r in index_server.requests] == [429, 429, 200, 200]


def test_server_errors_and_counting(index_server, index):
    index_server.fail(503, times=1)
    with pytest.raises(ServiceError):
        index.describe_index_stats()
    index.describe_index_stats()
    assert index_server.count() == 2
    assert index_server.count("/describe_index_stats", method="POST") == 2
    assert index_server.requests[0].headers["api-key"] == KEY
    assert index_server.requests[0].headers["x-pinecone-api-version"]
    index_server.clear_requests()
    assert index_server.count() == 0


def test_failing_forever_until_cleared(index_server, index):
    index_server.fail(500, times=None, message="boom")
    for _ in range(3):
        with pytest.raises(ServiceError, match="boom"):
            index.describe_index_stats()
    index_server.clear_faults()
    index.describe_index_stats()


def test_malformed_and_slow_replies(index_server, index):
    index_server.malformed(target="/describe_index_stats")
    with pytest.raises(pinecone.errors.ResponseParsingError):
        index.describe_index_stats()
    index_server.delay(1.0, times=1)
    with pytest.raises(pinecone.errors.PineconeTimeoutError):
        index.describe_index_stats(timeout=0.2)
    index.describe_index_stats(timeout=5)


def test_a_request_body_that_is_not_json_is_a_400(index_server):
    request = urllib.request.Request(
        f"{index_server.url}/query", data=b"{not json", method="POST", headers={"Api-Key": KEY}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["code"] == 3


# -- seeding, lifecycle -------------------------------------------------------------------


def test_seed_takes_tuples_mappings_and_vector_records():
    with PineconeTestServer(2, api_key=None) as server:
        count = server.seed(
            [
                ("t", [1, 0]),
                {"id": "m", "values": [0, 1], "metadata": {"k": "v"}},
                VectorRecord("r", [1, 1], "the text", {"path": "a.md"}),
            ],
            namespace="__default__",
        )
        assert count == 3
        assert server.vectors()["r"].metadata == {"path": "a.md", "text": "the text"}
        with pytest.raises(ValueError, match="does not match the dimension"):
            server.seed([("bad", [1, 0, 0])])
        client = pinecone.Index(host=server.url, api_key="anything")  # api_key=None: no auth
        assert client.describe_index_stats().total_vector_count == 3
        client.close()


def test_close_releases_the_port():
    server = PineconeTestServer(2).start()
    host, port = server.url, server.port
    server.close()
    assert server.url == host  # still readable after close
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    server.close()  # twice is fine


def test_closed_url_refuses_connections():
    port = int(closed_url().rsplit(":", 1)[1])
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


# -- filters --------------------------------------------------------------------------------

META = {"genre": "drama", "year": 2020, "tags": ["a", "b"], "live": True, "score": 0.5}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, True),
        ({"genre": "drama"}, True),
        ({"genre": {"$eq": "drama"}}, True),
        ({"genre": {"$ne": "drama"}}, False),
        ({"year": {"$eq": 2020.0}}, True),
        ({"year": {"$eq": "2020"}}, False),
        ({"live": {"$eq": 1}}, False),
        ({"live": {"$eq": True}}, True),
        ({"year": {"$gt": 2019, "$lte": 2020}}, True),
        ({"year": {"$gte": 2021}}, False),
        ({"score": {"$lt": 1}}, True),
        ({"genre": {"$in": ["comedy", "drama"]}}, True),
        ({"genre": {"$nin": ["comedy", "drama"]}}, False),
        ({"tags": {"$eq": "b"}}, True),
        ({"tags": {"$in": ["x", "a"]}}, True),
        ({"tags": {"$ne": "a"}}, False),
        ({"tags": {"$nin": ["x"]}}, True),
        ({"missing": {"$ne": "x"}}, True),
        ({"missing": {"$eq": "x"}}, False),
        ({"missing": {"$exists": False}}, True),
        ({"genre": {"$exists": True}}, True),
        ({"$and": [{"genre": "drama"}, {"year": 2020}]}, True),
        ({"$and": [{"genre": "drama"}, {"year": 2021}]}, False),
        ({"$or": [{"genre": "comedy"}, {"year": 2020}]}, True),
        ({"$or": [{"genre": "comedy"}, {"year": 2021}]}, False),
        ({"genre": "drama", "year": 2021}, False),
    ],
)
def test_matches_filter(flt, expected):
    assert matches_filter(META, flt) is expected


@pytest.mark.parametrize(
    "flt",
    [
        {"$nor": []},
        {"$and": []},
        {"$or": {"a": 1}},
        {"genre": {"$regex": "d"}},
        {"genre": {}},
        {"year": {"$gt": "2019"}},
        {"genre": {"$in": []}},
        {"genre": {"$in": [True]}},
        {"genre": {"$eq": None}},
        {"genre": {"$exists": 1}},
        ["not", "an", "object"],
    ],
)
def test_filters_the_service_rejects(flt):
    with pytest.raises(BadRequest):
        matches_filter(META, flt)


def test_a_bad_filter_is_a_400_through_the_sdk(index_server, index):
    index_server.seed([("a", [1, 0, 0], {"k": 1})])
    with pytest.raises(ApiError) as caught:
        index.query(vector=[1, 0, 0], top_k=1, filter={"k": {"$regex": "x"}})
    assert caught.value.status_code == 400
