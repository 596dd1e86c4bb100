"""The workspace index's vector packs (:mod:`kairox.workspace.index_packs`): written, kept,
replaced and never trusted when stale."""

from __future__ import annotations

import sqlite3

import pytest

from kairox.testing import CountingEmbedder
from kairox.workspace.rag_index import WorkspaceRagIndex

from .conftest import ESSAY, SMALL_CHUNKS


def pack_tokens(database):
    db = sqlite3.connect(database)
    try:
        return db.execute("SELECT workspace, embedder, token FROM rag_vector_packs").fetchall()
    finally:
        db.close()


def drop_pack_records(database):
    db = sqlite3.connect(database)
    with db:
        db.execute("DELETE FROM rag_vector_packs")
    db.close()


def ranked(index, query, k=10):
    return [(hit.id, round(hit.score, 6)) for hit in index.search_vector(query, k)]


def test_an_index_run_leaves_a_pack_that_searches_exactly_like_the_rows(
    database, essay_project, embedder, essay_query
):
    WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS).index()
    [(workspace, backend, _)] = pack_tokens(database)
    assert (workspace, backend) == (str(essay_project.resolve()), embedder.name)
    packed = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    assert packed._stored_pack() is not None
    from_pack = ranked(packed, essay_query)
    packed.close()
    drop_pack_records(database)
    rows = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    assert rows._stored_pack() is None
    assert len(from_pack) > 1 and ranked(rows, essay_query) == from_pack
    rows.close()


def test_an_unchanged_run_keeps_the_pack_and_a_change_replaces_it(
    database, essay_project, embedder, essay_query
):
    index = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    written = index.index().pack_bytes
    [(_, _, first)] = pack_tokens(database)
    files = (database.parent / "vectors").iterdir()
    assert written == sum(path.stat().st_size for path in files) > 0
    assert index.index().pack_bytes is None  # nothing changed: nothing rewritten
    assert [t for *_, t in pack_tokens(database)] == [first]
    (essay_project / "voyage.txt").write_text("Quantum flux capacitors. " + ESSAY)
    index.index()
    [(_, _, second)] = pack_tokens(database)
    assert second != first
    files = sorted(p.name for p in (database.parent / "vectors").iterdir())
    assert all(second in name for name in files) and len(files) == 2  # the old pair is gone
    index.close()
    fresh = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    texts = [hit.text for hit in fresh.search_vector(essay_query, 10)]
    fresh.close()
    assert any(text.startswith("Quantum flux capacitors. The expedition") for text in texts)


def test_a_run_that_fails_half_way_leaves_no_pack_to_mislead_searches(
    database, essay_project, embedder, monkeypatch, essay_query
):
    index = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    index.index()
    assert pack_tokens(database)
    (essay_project / "flux.txt").write_text("Capacitors of quantum flux, calibrated at dawn.")
    (essay_project / "late.txt").write_text("A file the broken embedder never reaches.")
    monkeypatch.setattr("kairox.workspace.rag_index.FILES_PER_BATCH", 1)
    calls = {"n": 0}
    real_embed = embedder.embed

    def fail_on_the_second_batch(texts):
        calls["n"] += 1
        if calls["n"] > 1:  # flux.txt (one sentence: one call) goes through, late.txt not
            raise RuntimeError("embedding service went away")
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", fail_on_the_second_batch)
    with pytest.raises(RuntimeError, match="went away"):
        index.index()
    index.close()
    monkeypatch.setattr(embedder, "embed", real_embed)
    assert pack_tokens(database) == []  # dropped with the first batch that changed rows
    fresh = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    texts = [hit.text for hit in fresh.search_vector(essay_query, 10)]
    assert any("calibrated at dawn" in text for text in texts)  # rows, not the old pack
    fresh.close()


def test_a_damaged_pack_falls_back_on_the_rows(database, essay_project, embedder, essay_query):
    WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS).index()
    intact = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    expected = ranked(intact, essay_query)
    intact.close()
    for path in (database.parent / "vectors").glob("*.npy"):
        path.write_bytes(b"\x93NUMPY garbage")
    damaged = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    assert damaged._stored_pack() is None
    assert ranked(damaged, essay_query) == expected
    damaged.close()


def test_an_index_with_a_vector_missing_is_not_packed(database, essay_project, embedder):
    index = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    index.index()
    drop_pack_records(database)
    db = sqlite3.connect(database)
    with db:
        db.execute(
            "DELETE FROM rag_embeddings WHERE rowid = (SELECT min(rowid) FROM rag_embeddings)"
        )
    db.close()
    index._refresh_pack()
    assert pack_tokens(database) == []
    index.close()


def test_vectors_for_another_model_leave_this_models_pack_alone(database, essay_project, embedder):
    WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS).index()
    [(_, _, token)] = pack_tokens(database)
    # What `kairox kb sync` does for a vector store searched with another model.
    other = WorkspaceRagIndex(
        database, essay_project, CountingEmbedder(dim=64), sentence_weight=0, **SMALL_CHUNKS
    )
    assert other.embed_missing() > 0
    other.close()
    assert [(backend, t) for _, backend, t in pack_tokens(database)] == [(embedder.name, token)]


def test_packs_switched_off_are_not_used_and_go_on_the_next_run(
    database, essay_project, embedder, essay_query
):
    WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS).index()
    assert pack_tokens(database)
    packed = WorkspaceRagIndex(database, essay_project, embedder, **SMALL_CHUNKS)
    expected = ranked(packed, essay_query)
    packed.close()
    off = WorkspaceRagIndex(database, essay_project, embedder, vector_pack=False, **SMALL_CHUNKS)
    assert off._stored_pack() is None
    assert ranked(off, essay_query) == expected  # from the rows
    off.index()
    off.close()
    assert pack_tokens(database) == []
    assert list((database.parent / "vectors").iterdir()) == []
