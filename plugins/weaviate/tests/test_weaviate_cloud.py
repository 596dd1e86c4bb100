"""Against a real Weaviate: runs only when ``KAIROX_WEAVIATE_URL`` is set.

    KAIROX_WEAVIATE_URL=https://xyz.weaviate.cloud \\
    KAIROX_WEAVIATE_API_KEY=... \\
    KAIROX_WEAVIATE_GRPC_HOST=grpc-xyz.weaviate.cloud KAIROX_WEAVIATE_GRPC_PORT=443 \\
    pytest -m cloud

The test creates a throw-away collection (``KairoxTest<random>``, self-provided vectors),
syncs the conformance corpus into it through ``upsert_vectors``, searches it in every mode,
and drops it again.
"""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query, VectorRecord
from kairox.testing import CORPUS, run

URL = os.environ.get("KAIROX_WEAVIATE_URL")
KEY_ENV = "KAIROX_WEAVIATE_API_KEY"

pytestmark = [
    pytest.mark.cloud,
    pytest.mark.skipif(not URL, reason="set KAIROX_WEAVIATE_URL to run against a real Weaviate"),
]


def _connect():
    import weaviate
    from weaviate.classes.init import Auth

    parts = urlsplit(URL)
    secure = parts.scheme == "https"
    key = os.environ.get(KEY_ENV)
    return weaviate.connect_to_custom(
        http_host=parts.hostname,
        http_port=parts.port or (443 if secure else 80),
        http_secure=secure,
        grpc_host=os.environ.get("KAIROX_WEAVIATE_GRPC_HOST", parts.hostname),
        grpc_port=int(os.environ.get("KAIROX_WEAVIATE_GRPC_PORT", "50051")),
        grpc_secure=secure,
        auth_credentials=Auth.api_key(key) if key else None,
    )


@pytest.fixture
def collection():
    from weaviate.classes.config import Configure, DataType, Property

    name = f"KairoxTest{uuid.uuid4().hex[:10]}"
    properties = [
        Property(name="text", data_type=DataType.TEXT),
        Property(name="doc_id", data_type=DataType.TEXT),
        Property(name="uri", data_type=DataType.TEXT),
        Property(name="topic", data_type=DataType.TEXT),
    ]
    with _connect() as client:
        try:  # weaviate-client >= 4.16
            client.collections.create(
                name, properties=properties, vector_config=Configure.Vectors.self_provided()
            )
        except (AttributeError, TypeError):
            client.collections.create(
                name, properties=properties, vectorizer_config=Configure.Vectorizer.none()
            )
        try:
            yield name
        finally:
            client.collections.delete(name)


@pytest.mark.parametrize("mode", ["bm25", "near_vector", "hybrid"])
def test_a_real_weaviate(collection, make_source, mode):
    parts = urlsplit(URL)
    options = {"api_key_env": KEY_ENV} if os.environ.get(KEY_ENV) else {}
    if os.environ.get("KAIROX_WEAVIATE_GRPC_HOST"):
        options["grpc_host"] = os.environ["KAIROX_WEAVIATE_GRPC_HOST"]
    source = make_source(
        url=f"{parts.scheme}://{parts.netloc}",
        grpc_port=int(os.environ.get("KAIROX_WEAVIATE_GRPC_PORT", "50051")),
        collection=collection,
        mode=mode,
        embedding_backend="hashing",
        timeout_ms=10000,
        **options,
    )
    embedder = HashingEmbedder()
    vectors = embedder.embed([f"{d.title}. {d.text}" for d in CORPUS])
    source.upsert_vectors(
        [
            VectorRecord(d.id, vectors[i], d.text, {"uri": d.uri, "topic": d.metadata["topic"]})
            for i, d in enumerate(CORPUS)
        ]
    )
    hits = run(source.retrieve(Query("sourdough starter yeast", k=3)))
    assert hits and hits[0].id == "cook-1"
    filtered = run(source.retrieve(Query("water", k=5, filters={"topic": "cooking"})))
    assert filtered and {h.metadata["topic"] for h in filtered} == {"cooking"}
    source.delete_vectors([d.id for d in CORPUS])
    assert run(source.retrieve(Query("sourdough starter yeast", k=3))) == []
