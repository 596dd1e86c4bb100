"""``kairox_weaviate.testing.WeaviateTestServer`` on its own, driven by the plain v4 client
the way a plugin user's tests would drive it."""

from __future__ import annotations

import pytest
import weaviate
from kairox_weaviate.testing import TestCollection, WeaviateTestServer
from weaviate.classes.init import Auth
from weaviate.classes.query import Filter, MetadataQuery


def connect(server: WeaviateTestServer, key: str | None = None) -> weaviate.WeaviateClient:
    return weaviate.connect_to_custom(
        http_host=server.host,
        http_port=server.http_port,
        http_secure=False,
        grpc_host=server.host,
        grpc_port=server.grpc_port,
        grpc_secure=False,
        auth_credentials=Auth.api_key(key) if key else None,
        skip_init_checks=True,  # the init checks would also ask pypi.org for a newer client
    )


@pytest.fixture
def docs():
    spec = TestCollection("Docs", properties={"rank": "int"})
    with WeaviateTestServer(collections=[spec, TestCollection("Mt", True, ("a", "b"))]) as server:
        server.seed(
            "Docs",
            [
                {"text": "alpha beta", "rank": 1, "tags": ["x", "y"]},
                {"text": "beta gamma", "rank": 2, "tags": ["y"]},
                {"text": "gamma delta", "rank": 3, "tags": []},
            ],
            vectors=[[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]],
            uuids=[
                "00000000-0000-0000-0000-000000000001",
                "00000000-0000-0000-0000-000000000002",
                "00000000-0000-0000-0000-000000000003",
            ],
        )
        yield server


def test_health_readiness_schema_and_tenants(docs):
    with connect(docs) as client:
        assert client.is_live() and client.is_ready()
        assert docs.count("Health") == 1
        assert set(client.collections.list_all(simple=True)) == {"Docs", "Mt"}
        config = client.collections.get("Docs").config.get()
        assert {p.name for p in config.properties} == {"text", "rank", "tags"}
        assert set(client.collections.get("Mt").tenants.get()) == {"a", "b"}
        assert client.collections.exists("Docs") and not client.collections.exists("Nope")


def test_fetch_filter_and_sort_semantics(docs):
    with connect(docs) as client:
        coll = client.collections.get("Docs")
        assert len(coll.query.fetch_objects(limit=2).objects) == 2

        def ranks(where):
            return sorted(
                o.properties["rank"] for o in coll.query.fetch_objects(filters=where).objects
            )

        assert ranks(Filter.by_property("rank").greater_than(1)) == [2, 3]
        assert ranks(Filter.by_property("rank").not_equal(2)) == [1, 3]
        assert ranks(Filter.by_property("tags").contains_any(["x"])) == [1]
        assert ranks(Filter.by_property("tags").contains_all(["x", "y"])) == [1]
        assert ranks(Filter.by_property("text").equal("beta")) == [1, 2]  # word tokens
        assert ranks(Filter.by_property("rank").equal(2.0)) == [2]  # number -> int property
        either = Filter.any_of(
            [
                Filter.by_property("rank").equal(1),
                Filter.by_id().equal("00000000-0000-0000-0000-000000000003"),
            ]
        )
        assert ranks(either) == [1, 3]
        with pytest.raises(weaviate.exceptions.WeaviateQueryError, match="floating point"):
            ranks(Filter.by_property("rank").equal(2.5))


def test_search_metadata_and_offsets(docs):
    with connect(docs) as client:
        coll = client.collections.get("Docs")
        nv = coll.query.near_vector(
            [1.0, 0.0], limit=3, return_metadata=MetadataQuery(distance=True)
        )
        assert [o.properties["rank"] for o in nv.objects] == [1, 2, 3]
        assert nv.objects[0].metadata.distance == pytest.approx(0.0, abs=1e-6)
        assert nv.objects[1].metadata.distance == pytest.approx(0.4, abs=1e-6)
        page = coll.query.bm25("beta gamma", limit=1, offset=1)
        assert len(page.objects) == 1
        with_vec = coll.query.fetch_objects(limit=1, include_vector=True).objects[0]
        assert with_vec.vector["default"] == pytest.approx([1.0, 0.0])


def test_writes_autoschema_and_counts(docs):
    with connect(docs) as client:
        coll = client.collections.get("Docs")
        coll.data.insert_many([{"text": "new", "score": 7, "rank": 4}])
        stored = {o.properties["text"]: o.properties for o in docs.objects("Docs")}
        assert stored["new"]["rank"] == 4 and isinstance(stored["new"]["rank"], int)
        assert stored["new"]["score"] == 7.0 and isinstance(stored["new"]["score"], float)
        assert coll.data.delete_many(where=Filter.by_property("rank").less_than(3)).successful == 2
        assert docs.count("BatchObjects") == 1 and docs.count("BatchDelete") == 1
        docs.clear_requests()
        assert docs.requests == [] and docs.searches == []


def test_the_api_key_guards_rest_and_grpc(docs):
    docs.api_key = "k1"
    with pytest.raises(weaviate.exceptions.WeaviateBaseError, match="401"):
        connect(docs)
    with connect(docs, "k1") as client:
        assert client.collections.get("Docs").query.bm25("alpha").objects
        docs.api_key = "rotated"
        with pytest.raises(weaviate.exceptions.WeaviateQueryError, match="invalid api key"):
            client.collections.get("Docs").query.bm25("alpha")


def test_fault_injection_api(docs):
    with pytest.raises(ValueError, match="HTTP status"):
        docs.fail("UNAVAILABLE", target="GET /v1/meta")
    with pytest.raises(ValueError, match="gRPC status"):
        docs.fail(503, target="Search")
    with pytest.raises(ValueError, match="malform mode"):
        docs.malformed(None, target="Search", mode="weird")
    docs.fail(503, target="GET /v1/meta", times=1)
    with pytest.raises(weaviate.exceptions.WeaviateBaseError):
        connect(docs)
    with connect(docs) as client:  # the fault was used up
        docs.fail("INTERNAL", target="Search", times=None, message="boom")
        for _ in range(2):
            with pytest.raises(weaviate.exceptions.WeaviateQueryError, match="boom"):
                client.collections.get("Docs").query.bm25("alpha")
        docs.clear_faults()
        assert client.collections.get("Docs").query.bm25("alpha").objects
    assert docs.count("GET /v1/meta") == 2 and docs.count("Search") == 3


def test_seed_and_objects_validate_tenants(docs):
    with pytest.raises(ValueError, match="multi-tenant"):
        docs.seed("Mt", [{"text": "x"}])
    with pytest.raises(ValueError, match="multi-tenancy disabled"):
        docs.seed("Docs", [{"text": "x"}], tenant="a")
    docs.seed("Mt", [{"text": "in c"}], tenant="c")  # a new tenant
    assert [o.properties["text"] for o in docs.objects("Mt", tenant="c")] == ["in c"]
    with pytest.raises(KeyError):
        docs.objects("Mt", tenant="zzz")
    with pytest.raises(KeyError):
        docs.objects("Nope")
