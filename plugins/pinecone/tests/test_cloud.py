"""Against a real Pinecone index: runs only when ``PINECONE_API_KEY`` and
``KAIROX_PINECONE_HOST`` are set (the index host, e.g. https://NAME-PROJECT.svc.REGION.pinecone.io).

The index must be a dense cosine index whose dimension fits the embedding backend
``KAIROX_PINECONE_EMBEDDING_BACKEND`` (default ``hashing``: 384). The tests write into a
fresh namespace of their own and delete what they wrote.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import kairox_pinecone
import pytest

from kairox.plugin_host.manager import get_plugin_manager
from kairox.plugin_host.registry import BuildContext
from kairox.retrieval import Query, VectorRecord
from kairox.testing import CORPUS, run

HOST = os.environ.get("KAIROX_PINECONE_HOST", "")
BACKEND = os.environ.get("KAIROX_PINECONE_EMBEDDING_BACKEND", "hashing")

pytestmark = [
    pytest.mark.cloud,
    pytest.mark.skipif(
        not (HOST and os.environ.get("PINECONE_API_KEY")),
        reason="set PINECONE_API_KEY and KAIROX_PINECONE_HOST to test against a real index",
    ),
]


def _source(namespace: str, **options) -> kairox_pinecone.PineconeSource:
    registry = get_plugin_manager().registry
    config = kairox_pinecone.PineconeConfig(
        kind="pinecone",
        host=HOST,
        embedding_backend=BACKEND,
        namespace=namespace,
        timeout_ms=10_000,
        **options,
    )
    ctx = BuildContext(
        workspace_root=Path.cwd(),
        state_dir=Path.cwd(),
        base_dir=Path.cwd(),
        embedding_backend=lambda name: registry.embedding_backends[name].factory(),
    )
    return kairox_pinecone.build_source("cloud-test", config, ctx)


def test_sync_search_filter_and_delete_on_a_real_index():
    namespace = f"kairox-test-{uuid.uuid4().hex[:12]}"
    source = _source(namespace)
    passages = [f"{doc.title}. {doc.text}" for doc in CORPUS]
    vectors = source.embedder.embed(passages)
    records = [
        VectorRecord(doc.id, vector.tolist(), passage, {"uri": doc.uri, **doc.metadata})
        for doc, passage, vector in zip(CORPUS, passages, vectors, strict=True)
    ]
    try:
        source.upsert_vectors(records)
        deadline = time.monotonic() + 60  # writes become searchable after a moment
        while True:
            hits = run(source.retrieve(Query("saturn rings ice", k=3)))
            if (hits and hits[0].id == "astro-1") or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert hits and hits[0].id == "astro-1"
        assert hits[0].uri == "corpus://astro-1" and "Saturn" in hits[0].text
        cooking = run(source.retrieve(Query("water", k=10, filters={"topic": "cooking"})))
        assert cooking and {h.metadata["topic"] for h in cooking} == {"cooking"}
    finally:
        source.delete_vectors([r.id for r in records])
        source.close()


def test_a_wrong_key_is_refused_and_names_the_variable(monkeypatch):
    monkeypatch.setenv("KAIROX_PINECONE_WRONG_KEY", "pcsk_not_a_real_key")
    source = _source("kairox-test-auth", api_key_env="KAIROX_PINECONE_WRONG_KEY")
    try:
        with pytest.raises(kairox_pinecone.PineconeAuthError, match="KAIROX_PINECONE_WRONG_KEY"):
            run(source.retrieve(Query("saturn rings")))
    finally:
        source.close()
