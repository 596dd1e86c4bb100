"""``VectorSyncTarget``: upsert_vectors / delete_vectors through the client's gRPC batch
calls, with stable uuids so a re-sync overwrites instead of duplicating."""

from __future__ import annotations

import numpy as np
import pytest
from kairox_weaviate import WeaviateNotFoundError, WeaviateSourceError
from kairox_weaviate.testing import TestCollection, WeaviateTestServer
from weaviate.util import generate_uuid5

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query, VectorRecord, VectorSyncTarget
from kairox.testing import run

CHUNKS = {
    "ws:src/app.py#0": "def main(): start the web server and open the database",
    "ws:src/app.py#1": "the retry loop backs off exponentially on throttling",
    "ws:docs/guide.md#0": "installation guide: pip install the package, then configure it",
}


def records(texts=CHUNKS):
    embedder = HashingEmbedder()
    vectors = embedder.embed(list(texts.values()))
    return [
        VectorRecord(
            id=rid,
            vector=vectors[i],
            text=text,
            metadata={
                "path": rid.split(":", 1)[1].split("#")[0],
                "chunk": int(rid.rsplit("#", 1)[1]),
                "start": 0,
                "end": len(text),
                "workspace": "ws",
                "fingerprint": f"fp-{i}",
            },
        )
        for i, (rid, text) in enumerate(texts.items())
    ]


@pytest.fixture
def empty_server():
    with WeaviateTestServer(collections=["Chunks"]) as server:
        yield server


def test_is_a_vector_sync_target(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    assert isinstance(source, VectorSyncTarget)
    assert source.embedding_backend == "hashing"


def test_upsert_stores_text_metadata_and_vectors_under_stable_uuids(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    source.upsert_vectors(records())
    stored = {o.uuid: o for o in empty_server.objects("Chunks")}
    assert set(stored) == {generate_uuid5(rid) for rid in CHUNKS}
    obj = stored[generate_uuid5("ws:src/app.py#1")]
    assert obj.properties["text"] == CHUNKS["ws:src/app.py#1"]
    assert obj.properties["doc_id"] == "ws:src/app.py#1"
    assert obj.properties["path"] == "src/app.py" and obj.properties["chunk"] == 1
    expected = HashingEmbedder().embed([CHUNKS["ws:src/app.py#1"]])[0]
    np.testing.assert_allclose(obj.vectors["default"], expected, atol=1e-6)
    assert empty_server.count("BatchObjects") == 1


def test_re_upserting_overwrites_instead_of_duplicating(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    source.upsert_vectors(records())
    changed = dict(CHUNKS, **{"ws:src/app.py#0": "def main(): serve forever"})
    source.upsert_vectors(records(changed))
    source.upsert_vectors(records(changed))
    stored = empty_server.objects("Chunks")
    assert len(stored) == len(CHUNKS)
    texts = {o.properties["doc_id"]: o.properties["text"] for o in stored}
    assert texts["ws:src/app.py#0"] == "def main(): serve forever"


def test_synced_chunks_are_searchable_with_their_record_ids(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="hybrid")
    source.upsert_vectors(records())
    hit = run(source.retrieve(Query("retry loop throttling", k=1)))[0]
    assert hit.id == "ws:src/app.py#1"
    assert hit.uri == "src/app.py"
    assert hit.metadata["start"] == 0 and hit.metadata["chunk"] == 1
    assert "path" not in hit.metadata and "text" not in hit.metadata


def test_delete_is_idempotent_and_ignores_missing_ids(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    source.upsert_vectors(records())
    source.delete_vectors(["ws:src/app.py#0", "ws:never-synced#9"])
    left = {o.properties["doc_id"] for o in empty_server.objects("Chunks")}
    assert left == {"ws:src/app.py#1", "ws:docs/guide.md#0"}
    source.delete_vectors(["ws:src/app.py#0"])
    assert len(empty_server.objects("Chunks")) == 2
    source.delete_vectors([])
    assert empty_server.count("BatchDelete") == 2


def test_large_syncs_are_batched(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    many = {f"ws:f{i}.txt#0": f"file number {i}" for i in range(230)}
    source.upsert_vectors(records(many))
    assert len(empty_server.objects("Chunks")) == 230
    assert empty_server.count("BatchObjects") == 3  # 100 + 100 + 30
    source.delete_vectors(list(many))
    assert empty_server.objects("Chunks") == []


def test_named_target_vector_and_tenant_are_written(make_source):
    spec = TestCollection("Chunks", multi_tenancy=True, tenants=("team",))
    with WeaviateTestServer(collections=[spec]) as server:
        source = make_source(
            server,
            collection="Chunks",
            mode="near_vector",
            tenant="team",
            target_vector="body",
        )
        source.upsert_vectors(records())
        stored = server.objects("Chunks", tenant="team")
        assert len(stored) == 3 and all(set(o.vectors) == {"body"} for o in stored)
        hit = run(source.retrieve(Query("installation guide pip", k=1)))[0]
        assert hit.id == "ws:docs/guide.md#0"


def test_throttled_batches_are_retried(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="near_vector")
    empty_server.fail("RESOURCE_EXHAUSTED", target="BatchObjects", times=1)
    empty_server.fail("UNAVAILABLE", target="BatchDelete", times=1)
    source.upsert_vectors(records())
    source.delete_vectors(["ws:src/app.py#0"])
    assert len(empty_server.objects("Chunks")) == 2
    assert empty_server.count("BatchObjects") == 2
    assert empty_server.count("BatchDelete") == 2


def test_objects_the_server_refuses_are_reported(make_source):
    spec = TestCollection("Chunks", multi_tenancy=True, tenants=("team",))
    with WeaviateTestServer(collections=[spec]) as server:
        source = make_source(server, collection="Chunks", mode="near_vector", tenant="team")
        server.drop_collection("Chunks")
        server.create_collection("Chunks", multi_tenancy=True)  # the tenant is gone
        with pytest.raises(WeaviateSourceError, match="tenant not found"):
            source.upsert_vectors(records())


def test_syncing_into_a_missing_collection_names_it(empty_server, make_source):
    source = make_source(empty_server, collection="Missing", mode="near_vector")
    with pytest.raises(WeaviateNotFoundError, match="no collection 'Missing'"):
        source.upsert_vectors(records())


def test_without_embedding_backend_sync_is_refused(empty_server, make_source):
    source = make_source(empty_server, collection="Chunks", mode="bm25")
    assert source.embedding_backend == ""
    with pytest.raises(WeaviateSourceError, match="embedding_backend"):
        source.upsert_vectors(records())
    source.upsert_vectors([])  # nothing to do is fine


def test_a_bm25_knowledge_base_syncs_the_workspace_backend(empty_server, make_source):
    from kairox.config.schema import WorkspaceConfig

    workspace = WorkspaceConfig(embedding_backend="hashing")
    source = make_source(empty_server, collection="Chunks", mode="bm25", workspace=workspace)
    assert source.embedding_backend == "hashing"
    source.upsert_vectors(records())
    assert len(empty_server.objects("Chunks")) == 3
    hit = run(source.retrieve(Query("installation guide", k=1)))[0]
    assert hit.id == "ws:docs/guide.md#0"
