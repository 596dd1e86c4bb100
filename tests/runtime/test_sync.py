"""``kairox.runtime.sync``: the journal makes sync incremental, exact and resumable.

The target here is an in-memory store implementing ``VectorSyncTarget``; the Pinecone
and Weaviate plugins run the same flow against their protocol-level test servers.
"""

from __future__ import annotations

import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import VectorSyncTarget
from kairox.runtime.sync import record_id, sync_workspace
from kairox.workspace.rag_index import WorkspaceRagIndex


class MemoryStore:
    """A vector store in a dict; can be told to fail on the n-th upsert call."""

    name = "memory"
    embedding_backend = "hashing"

    def __init__(self, fail_on_call=None):
        self.records = {}
        self.calls = 0
        self.fail_on_call = fail_on_call

    def upsert_vectors(self, records):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise ConnectionError("503 from the store")
        for record in records:
            self.records[record.id] = record

    def delete_vectors(self, ids):
        for rid in ids:
            self.records.pop(rid, None)


@pytest.fixture
def workspace_index(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(30):
        (root / f"file{i:02}.txt").write_text(f"file {i} " + "lorem ipsum dolor " * (40 + i))
    index = WorkspaceRagIndex(
        tmp_path / "kairox.db", root, HashingEmbedder(), chunk_tokens=32, chunk_overlap=4
    )
    index.index()
    yield index
    index.close()


def expected_ids(index):
    return {
        record_id(index.workspace_id, c.relpath, c.chunk_index) for c in index.iter_chunk_vectors()
    }


def test_sync_pushes_everything_then_nothing(workspace_index):
    store = MemoryStore()
    assert isinstance(store, VectorSyncTarget)
    first = sync_workspace(workspace_index, store, kb_id="remote")
    assert set(store.records) == expected_ids(workspace_index)
    assert first.upserted == len(store.records) > 100  # several batches
    record = next(iter(store.records.values()))
    assert record.metadata["path"].startswith("file") and len(record.vector) == 384
    assert record.metadata["ext"] == ".txt" and record.metadata["language"] == "text"
    second = sync_workspace(workspace_index, store, kb_id="remote")
    assert (second.upserted, second.deleted) == (0, 0)
    assert second.unchanged == first.upserted


def test_deleted_and_changed_files_are_mirrored(workspace_index):
    store = MemoryStore()
    sync_workspace(workspace_index, store, kb_id="remote")
    (workspace_index.root / "file00.txt").unlink()
    (workspace_index.root / "file01.txt").write_text("completely new words")
    workspace_index.index()
    stats = sync_workspace(workspace_index, store, kb_id="remote")
    assert stats.deleted > 0 and stats.upserted >= 1
    assert set(store.records) == expected_ids(workspace_index)
    assert not any(r.metadata["path"] == "file00.txt" for r in store.records.values())


def test_a_failed_sync_resumes_without_duplicates(workspace_index):
    store = MemoryStore(fail_on_call=2)
    with pytest.raises(ConnectionError):
        sync_workspace(workspace_index, store, kb_id="remote")
    landed = len(store.records)
    assert 0 < landed < len(expected_ids(workspace_index))
    store.fail_on_call = None
    resumed = sync_workspace(workspace_index, store, kb_id="remote")
    assert resumed.unchanged == landed  # the first batch is not sent again
    assert set(store.records) == expected_ids(workspace_index)


def test_full_sync_repushes_after_the_store_was_wiped(workspace_index):
    store = MemoryStore()
    sync_workspace(workspace_index, store, kb_id="remote")
    store.records.clear()
    assert sync_workspace(workspace_index, store, kb_id="remote").upserted == 0
    full = sync_workspace(workspace_index, store, kb_id="remote", full=True)
    assert full.upserted == len(expected_ids(workspace_index)) == len(store.records)


def test_journals_are_per_knowledge_base(workspace_index):
    one, two = MemoryStore(), MemoryStore()
    sync_workspace(workspace_index, one, kb_id="one")
    assert sync_workspace(workspace_index, two, kb_id="two").upserted == len(one.records)


def test_a_store_on_another_model_gets_its_own_vectors(workspace_index, tmp_path):
    other = WorkspaceRagIndex(
        workspace_index.database,
        workspace_index.root,
        HashingEmbedder(64),
        chunk_tokens=32,
        chunk_overlap=4,
    )
    store = MemoryStore()
    stats = sync_workspace(other, store, kb_id="small")
    # vectors are per distinct chunk text, so repeated chunks are embedded once
    assert 0 < stats.embedded <= stats.upserted == len(expected_ids(other))
    assert {len(r.vector) for r in store.records.values()} == {64}
