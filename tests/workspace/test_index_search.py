"""Searching the workspace index (:mod:`kairox.workspace.index_search`): by vector and by
words, per workspace."""

from __future__ import annotations

import sqlite3

import pytest

from kairox.testing import CountingEmbedder
from kairox.workspace.index_search import FTS_WEIGHTS
from kairox.workspace.rag_index import WorkspaceRagIndex

from .conftest import ESSAY, SMALL_CHUNKS


def test_vector_and_word_search_with_filters(index, embedder):
    index.index()
    vector = embedder.embed(["orbital period radius"])[0]
    assert index.search_vector(vector, 1)[0].metadata["path"] == "src/orbit.py"
    mixed = embedder.embed(["orbital period of tomatoes"])[0]
    assert {h.metadata["path"] for h in index.search_vector(mixed, 10)} >= {
        "src/orbit.py",
        "notes/garden.txt",
    }
    filtered = index.search_vector(mixed, 10, {"ext": ".txt"})
    assert [h.metadata["path"] for h in filtered] == ["notes/garden.txt"]
    assert index.search_vector(vector, 10, {"ext": "txt"}) == []  # no similarity at all
    assert index.search_words("kerosene", 10, {"path": "src/fuel.py"})[0].id == "src/fuel.py#0"
    assert index.search_words('"kerosene" AND (NOT -fuel*)', 3)


def test_workspaces_do_not_see_each_other(database, tmp_path, embedder):
    for name, text in (("one", "alpha centauri"), ("two", "beta pictoris")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "star.txt").write_text(text)
        WorkspaceRagIndex(database, tmp_path / name, embedder).index()
    one = WorkspaceRagIndex(database, tmp_path / "one", embedder)
    assert [h.text for h in one.search_words("alpha beta", 10)] == ["alpha centauri"]


def test_vectors_load_the_same_whether_read_through_or_looked_up(database, tmp_path, embedder):
    # Alone in the database, a workspace's vectors are read in one pass over the table;
    # next to a larger workspace, looked up by hash. Both must find the same hits.
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "notes.txt").write_text(ESSAY + "\n\nAlpha centauri is near. " * 3)
    small = WorkspaceRagIndex(database, tmp_path / "small", embedder, **SMALL_CHUNKS)
    small.index()
    query = embedder.embed(["calibration before every launch"])[0]
    alone = [(h.id, h.score) for h in small.search_vector(query, 10)]
    small.close()
    (tmp_path / "large").mkdir()
    for number in range(40):
        (tmp_path / "large" / f"f{number}.txt").write_text(f"Large file {number}. " + ESSAY)
    WorkspaceRagIndex(database, tmp_path / "large", embedder, **SMALL_CHUNKS).index()
    again = WorkspaceRagIndex(database, tmp_path / "small", embedder, **SMALL_CHUNKS)
    assert again._load_vectors({"x"})[1].shape == (0, embedder.dim)
    beside = [(h.id, h.score) for h in again.search_vector(query, 10)]
    again.close()
    assert len(alone) > 1
    assert [i for i, _ in beside] == [i for i, _ in alone]
    assert [s for _, s in beside] == pytest.approx([s for _, s in alone], abs=1e-6)


def test_a_chunk_removed_while_a_search_runs_is_left_out_not_a_crash(
    database, essay_project, embedder, essay_query
):
    index = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    index.index()
    ids, _, _ = index._matrix()  # what this process loaded before another one re-indexed
    db = sqlite3.connect(database)
    with db:
        db.execute("DELETE FROM rag_chunks WHERE id = ?", (int(ids[0]),))
    db.close()
    hits = index._hits([(int(ids[0]), 0.9), (int(ids[1]), 0.8)], "workspace")
    assert [hit.score for hit in hits] == [0.8]
    index.close()


def test_words_search_leaves_out_common_terms_only_where_the_ranking_holds(tmp_path):
    project = tmp_path / "cells"
    project.mkdir()
    texts = [f"the cell part {i} regulates transport" for i in range(4)]
    texts += [f"the organelle number {i} does other work" for i in range(6)]
    for i, text in enumerate(texts):
        (project / f"f{i}.txt").write_text(text)
    index = WorkspaceRagIndex(tmp_path / "index.db", project, CountingEmbedder(dim=64))
    index.index()

    def whole_query(k):
        return [
            row[0]
            for row in index._db.execute(
                "SELECT c.relpath FROM rag_chunks_fts JOIN rag_chunks c "
                'ON c.id = rag_chunks_fts.rowid WHERE rag_chunks_fts MATCH \'"the" OR "cell"\' '
                "ORDER BY bm25(rag_chunks_fts, ?, ?, ?), c.id LIMIT ?",
                (*FTS_WEIGHTS, k),
            )
        ]

    for k in (3, 7):  # "cell" alone fills 3; 7 needs files that only hold "the"
        hits = index.search_words("the cell", k)
        assert len(hits) == k
        assert [h.metadata["path"] for h in hits] == whole_query(k)
    index.close()
