"""``DistinctHashes``: a workspace's chunks and sentences numbered by distinct text in SQL."""

from __future__ import annotations

import numpy as np
import pytest

from kairox.workspace import index_pack_rows
from kairox.workspace.index_pack_rows import DistinctHashes, add_in_blocks
from kairox.workspace.index_schema import open_database
from kairox.workspace.rag_index import WorkspaceRagIndex

from .conftest import SMALL_CHUNKS


@pytest.fixture
def indexed(database, essay_project, embedder):
    WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS).index()
    db = open_database(database)
    yield db, str(essay_project.resolve())
    db.close()


def stored_vector(db, text_hash, embedder):
    (blob,) = db.execute(
        "SELECT vector FROM rag_embeddings WHERE text_hash = ? AND embedder = ?",
        (text_hash, embedder.name),
    ).fetchone()
    return np.frombuffer(blob, np.float32)


def test_every_chunk_and_sentence_points_at_its_own_vector_stored_once(indexed, embedder):
    db, workspace = indexed
    blocks: list[np.ndarray] = []
    with DistinctHashes(db, workspace, embedder) as distinct:
        assert distinct.complete()
        distinct.copy_vectors(lambda block: blocks.append(block.copy()))
        chunk_ids, chunk_rows, owner_ids, sentence_rows = distinct.positions()
    vectors = np.concatenate(blocks)
    hashes = db.execute(
        "SELECT text_hash FROM rag_chunks WHERE workspace = ? UNION "
        "SELECT s.text_hash FROM rag_sentences s JOIN rag_chunks c ON c.id = s.chunk_id "
        "WHERE c.workspace = ?",
        (workspace, workspace),
    ).fetchall()
    assert distinct.count == len(vectors) == len(hashes)
    chunks = db.execute(
        "SELECT id, text_hash FROM rag_chunks WHERE workspace = ? ORDER BY id", (workspace,)
    ).fetchall()
    assert chunk_ids.tolist() == [i for i, _ in chunks]
    for (_, text_hash), row in zip(chunks, chunk_rows, strict=True):
        assert np.array_equal(vectors[row], stored_vector(db, text_hash, embedder))
    sentences = db.execute("SELECT chunk_id, text_hash FROM rag_sentences").fetchall()
    assert len(owner_ids) == len(sentence_rows) == len(sentences) > len(chunks)
    for chunk_id, row in zip(owner_ids, sentence_rows, strict=True):
        assert any(
            np.array_equal(vectors[row], stored_vector(db, h, embedder))
            for owner, h in sentences
            if owner == chunk_id
        )


def test_a_missing_vector_makes_it_incomplete(indexed, embedder):
    db, workspace = indexed
    with db:
        db.execute(
            "DELETE FROM rag_embeddings WHERE text_hash = "
            "(SELECT text_hash FROM rag_sentences LIMIT 1)"
        )
    with DistinctHashes(db, workspace, embedder) as distinct:
        assert not distinct.complete()


def test_add_in_blocks_hands_every_vector_once_in_order(monkeypatch):
    monkeypatch.setattr(index_pack_rows, "BLOCK_ROWS", 2)
    vectors = np.arange(15, dtype=np.float32).reshape(5, 3)
    blocks: list[np.ndarray] = []
    add_in_blocks((row.tobytes() for row in vectors), 3, lambda b: blocks.append(b.copy()))
    assert [len(b) for b in blocks] == [2, 2, 1]
    assert np.array_equal(np.concatenate(blocks), vectors)
