"""Embedding the workspace index (:mod:`kairox.workspace.index_embedding`): sentence vectors
beside chunk vectors, kept in step with the files and the model."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from kairox.testing import CountingEmbedder, ModelHoldingEmbedder
from kairox.workspace.rag_index import WorkspaceRagIndex

from .conftest import ESSAY


def sentence_rows(database):
    db = sqlite3.connect(database)
    try:
        return db.execute(
            "SELECT chunk_id, sentence_index, text_hash FROM rag_sentences"
        ).fetchall()
    finally:
        db.close()


def unit(vector):
    return vector / np.linalg.norm(vector)


def test_a_chunk_scores_with_its_best_sentence(database, essay_project, embedder):
    index = WorkspaceRagIndex(database, essay_project, embedder)
    stats = index.index()
    assert stats.sentences_embedded == 5  # voyage.txt's sentences; flux.txt is one sentence
    assert stats.as_json()["sentences_embedded"] == 5
    assert len(sentence_rows(database)) == 6
    query = embedder.embed(
        ["Quantum flux capacitors need careful calibration before every launch."]
    )[0]
    hits = index.search_vector(query, 2)
    assert hits[0].metadata["path"] == "voyage.txt"
    whole = float(unit(embedder.embed([ESSAY])[0]) @ unit(query))
    # The pack stores float16: a cosine moves by about 1e-4.
    assert hits[0].score == pytest.approx(0.5 * whole + 0.5 * 1.0, abs=1e-3)
    plain = WorkspaceRagIndex(database, essay_project, embedder, sentence_weight=0)
    assert plain.search_vector(query, 1)[0].score == pytest.approx(whole, abs=1e-3)
    index.close()
    plain.close()


def test_weight_zero_embeds_no_sentences_and_a_later_run_adds_them(
    database, essay_project, embedder
):
    plain = WorkspaceRagIndex(database, essay_project, embedder, sentence_weight=0)
    stats = plain.index()
    assert stats.sentences_embedded == 0 and sentence_rows(database) == []
    assert embedder.texts_embedded == stats.chunks_embedded == 2
    plain.close()
    index = WorkspaceRagIndex(database, essay_project, embedder)
    stats = index.index()
    assert (stats.unchanged, stats.chunks_embedded, stats.sentences_embedded) == (2, 0, 5)
    assert embedder.texts_embedded == 2 + 5
    assert index.index().sentences_embedded == 0  # done once, not every run
    index.close()


def test_an_index_from_before_sentence_vectors_is_upgraded(database, essay_project, embedder):
    WorkspaceRagIndex(database, essay_project, embedder).index()
    db = sqlite3.connect(database)
    with db:  # make it look like a version 1 index: no sentence table
        db.execute("DROP TABLE rag_sentences")
        db.execute("UPDATE kairox_schema SET version = 1 WHERE component = 'workspace_index'")
    db.close()
    index = WorkspaceRagIndex(database, essay_project, embedder)
    stats = index.index()
    assert stats.chunks_embedded == 0  # the chunks and their vectors were kept
    assert stats.sentences_embedded == 0  # the sentence vectors were still there, too
    assert len(sentence_rows(database)) == 6
    index.close()


def test_changed_and_deleted_files_take_their_sentences_and_vectors_along(
    database, essay_project, embedder
):
    index = WorkspaceRagIndex(database, essay_project, embedder)
    index.index()
    (essay_project / "voyage.txt").write_text("A short note. It replaces the whole voyage story.")
    index.index()
    (essay_project / "flux.txt").unlink()
    index.index()
    db = sqlite3.connect(database)
    try:
        assert db.execute("SELECT count(*) FROM rag_sentences").fetchone()[0] == 1
        assert db.execute(
            "SELECT count(*) FROM rag_sentences s LEFT JOIN rag_chunks c ON c.id = s.chunk_id "
            "WHERE c.id IS NULL"
        ).fetchone() == (0,)
        # Only the remaining chunk's vector survives, in the pack (no row waits).
        assert db.execute("SELECT count(*) FROM rag_embeddings").fetchone()[0] == 0
        assert len(index._store_pack().vectors) == 1
    finally:
        db.close()
    index.close()


def test_missing_sentence_vectors_are_embedded_after_a_model_switch(database, essay_project):
    WorkspaceRagIndex(database, essay_project, CountingEmbedder(dim=384)).index()
    second = CountingEmbedder(dim=64)
    switched = WorkspaceRagIndex(database, essay_project, second)
    stats = switched.index()
    assert (stats.chunks_embedded, stats.sentences_embedded) == (2, 5)
    assert second.texts_embedded == 7
    query = second.embed(["Quantum flux capacitors need careful calibration before every launch."])
    assert switched.search_vector(query[0], 1)[0].metadata["path"] == "voyage.txt"
    switched.close()


def test_a_model_the_run_loaded_is_released_after_its_last_batch(database, essay_project):
    embedder = ModelHoldingEmbedder()
    index = WorkspaceRagIndex(database, essay_project, embedder)
    stats = index.index()
    assert stats.chunks_embedded == 2 and stats.pack_bytes  # the pack came after
    assert embedder.events[-1] == "release" and embedder.events.count("release") == 1
    assert not embedder.loaded
    # Searching loads it again, and it stays loaded for whoever searches next.
    assert index.search_vector(embedder.embed(["calibration"])[0], 1)
    assert embedder.loaded
    index.close()


def test_a_model_loaded_before_the_run_stays_loaded(database, essay_project):
    embedder = ModelHoldingEmbedder()
    embedder.embed(["a warm process searched first"])
    index = WorkspaceRagIndex(database, essay_project, embedder)
    assert index.index().chunks_embedded == 2
    assert embedder.loaded and "release" not in embedder.events
    index.close()


class StoredCountingEmbedder(CountingEmbedder):
    """Notes, at each batch it embeds, how many of its vectors are already stored."""

    def __init__(self, database, **options):
        super().__init__(**options)
        self.database = database
        self.stored_at_each_call: list[int] = []

    def embed(self, texts):
        db = sqlite3.connect(self.database)
        try:
            (stored,) = db.execute(
                "SELECT count(*) FROM rag_embeddings WHERE embedder = ?", (self.name,)
            ).fetchone()
        finally:
            db.close()
        self.stored_at_each_call.append(stored)
        return super().embed(texts)


def test_a_model_switch_re_embeds_and_writes_a_page_at_a_time(database, essay_project, monkeypatch):
    WorkspaceRagIndex(database, essay_project, CountingEmbedder(name="first")).index()
    monkeypatch.setattr("kairox.workspace.index_embedding.EMBED_BATCH", 2)
    second = StoredCountingEmbedder(database, name="second")
    stats = WorkspaceRagIndex(database, essay_project, second).index()
    total = stats.chunks_embedded + stats.sentences_embedded
    assert total == sum(len(batch) for batch in second.calls) > 4
    # Each page is written before the next is read and embedded.
    assert second.stored_at_each_call == list(range(0, total, 2))
