"""The workspace index's vectors stored once (:mod:`kairox.workspace.index_packs`): a pack
that is the store, rows that wait for it, an old layout read and converted, and a run cut
short that leaves a searchable index."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from kairox.testing import CountingEmbedder
from kairox.workspace.rag_index import WorkspaceRagIndex
from kairox.workspace.vector_pack import write_pack

from .conftest import ESSAY, SMALL_CHUNKS


def query(database, sql, *params):
    db = sqlite3.connect(database)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def stores(database):
    return query(
        database, "SELECT workspace, embedder, token, form, arranged FROM rag_vector_store"
    )


def waiting(database):
    return query(database, "SELECT count(*) FROM rag_embeddings")[0][0]


def pack_files(database):
    return sorted(path.name for path in (database.parent / "vectors").iterdir())


def ranked(index, vector, k=10):
    return [(hit.id, hit.score) for hit in index.search_vector(vector, k)]


def same_ranking(found, expected, tolerance=1e-3):
    """The same hits in the same order, each score within ``tolerance`` (float16)."""
    assert [i for i, _ in found] == [i for i, _ in expected] and len(found) > 1
    assert np.allclose([s for _, s in found], [s for _, s in expected], atol=tolerance)


def open_index(database, root, embedder, **options):
    return WorkspaceRagIndex(database, root, embedder, **{**SMALL_CHUNKS, **options})


def test_a_run_stores_each_vector_once_in_a_float16_pack(
    database, essay_project, embedder, essay_query
):
    index = open_index(database, essay_project, embedder)
    written = index.index().pack_bytes
    [(workspace, backend, _, form, arranged)] = stores(database)
    assert (workspace, backend, form, arranged) == (
        str(essay_project.resolve()),
        embedder.name,
        "float16",
        1,
    )
    assert waiting(database) == 0  # the pack is the only copy
    assert index._stored_pack().vectors.dtype == np.float16
    assert written == sum(
        (database.parent / "vectors" / n).stat().st_size for n in pack_files(database)
    )
    packed = ranked(index, essay_query)
    index.close()
    # Moved back to float32 rows (packs switched off), the search agrees within float16.
    rows = open_index(database, essay_project, embedder, vector_pack=False)
    rows.index()
    assert stores(database) == [] and pack_files(database) == []
    assert rows._stored_pack() is None and waiting(database) > 0
    same_ranking(ranked(rows, essay_query), packed)
    rows.close()
    exact = open_index(database, essay_project, embedder, vector_format="float32")
    exact.index()
    assert exact._stored_pack().vectors.dtype == np.float32 and waiting(database) == 0
    same_ranking(ranked(exact, essay_query), packed)
    exact.close()


def test_an_unchanged_run_keeps_the_pack_and_a_change_merges_a_new_one(
    database, essay_project, embedder, essay_query
):
    index = open_index(database, essay_project, embedder)
    index.index()
    [(*_, first, _, _)] = stores(database)
    embedded = embedder.texts_embedded
    assert index.index().pack_bytes is None  # nothing changed: nothing rewritten
    assert embedder.texts_embedded == embedded  # the pack's vectors count as embedded
    assert [row[2] for row in stores(database)] == [first]
    (essay_project / "voyage.txt").write_text("Quantum flux capacitors. " + ESSAY)
    index.index()
    [(*_, second, _, arranged)] = stores(database)
    assert second != first and arranged == 1 and waiting(database) == 0
    files = pack_files(database)
    assert all(second in name for name in files) and len(files) == 3  # the old pack is gone
    index.close()
    fresh = open_index(database, essay_project, embedder)
    texts = [hit.text for hit in fresh.search_vector(essay_query, 10)]
    fresh.close()
    assert any(text.startswith("Quantum flux capacitors. The expedition") for text in texts)


def test_a_run_that_fails_half_way_searches_the_pack_and_the_waiting_rows(
    database, essay_project, embedder, monkeypatch, essay_query
):
    index = open_index(database, essay_project, embedder)
    index.index()
    before = {hit.text for hit in index.search_vector(essay_query, 50)}
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
    [(*_, arranged)] = stores(database)
    assert arranged == 0 and waiting(database) > 0  # the pack stays, the new rows wait
    fresh = open_index(database, essay_project, embedder)
    assert fresh._stored_pack() is None  # its arrays no longer match the chunks
    texts = {hit.text for hit in fresh.search_vector(essay_query, 50)}
    assert any("calibrated at dawn" in text for text in texts)  # a waiting row
    # The essay's chunks, not embedded again, are searched from the pack.
    essay = {text for text in before if "laboratory" not in text}
    assert len(essay) > 1 and essay <= texts
    fresh.index()
    assert stores(database)[0][-1] == 1 and waiting(database) == 0
    assert any("calibrated at dawn" in hit.text for hit in fresh.search_vector(essay_query, 50))
    fresh.close()


def test_a_merge_that_fails_before_it_is_recorded_changes_nothing(
    database, essay_project, embedder, monkeypatch, essay_query
):
    index = open_index(database, essay_project, embedder)
    index.index()
    (essay_project / "flux.txt").write_text("Capacitors of quantum flux, calibrated at dawn.")
    recorded = stores(database)

    def killed(self, token):
        raise OSError("killed between the new pack's files and its record")

    monkeypatch.setattr(WorkspaceRagIndex, "_record", killed)
    assert index.index().pack_bytes is None
    assert [row[2] for row in stores(database)] == [recorded[0][2]] and waiting(database) > 0
    assert any("calibrated at dawn" in hit.text for hit in index.search_vector(essay_query, 50))
    monkeypatch.undo()
    index.index()
    [(*_, token, _, arranged)] = stores(database)
    assert arranged == 1 and all(token in name for name in pack_files(database))
    index.close()


def test_a_damaged_pack_is_embedded_again_by_the_next_run(
    database, essay_project, embedder, essay_query
):
    open_index(database, essay_project, embedder).index()
    intact = open_index(database, essay_project, embedder)
    expected = ranked(intact, essay_query)
    intact.close()
    for path in (database.parent / "vectors").glob("*.npy"):
        path.write_bytes(b"\x93NUMPY garbage")
    damaged = open_index(database, essay_project, embedder)
    assert damaged._stored_pack() is None and ranked(damaged, essay_query) == []
    assert damaged.index().chunks_embedded > 0
    same_ranking(ranked(damaged, essay_query), expected, tolerance=1e-6)
    assert waiting(database) == 0 and stores(database)[0][-1] == 1
    damaged.close()


def test_vectors_for_another_model_leave_this_models_pack_alone(database, essay_project, embedder):
    open_index(database, essay_project, embedder).index()
    [(*_, token, _, _)] = stores(database)
    # What `kairox kb sync` does for a vector store searched with another model.
    other = open_index(database, essay_project, CountingEmbedder(dim=64), sentence_weight=0)
    assert other.embed_missing() > 0
    other.close()
    assert [(row[1], row[2], row[4]) for row in stores(database)] == [(embedder.name, token, 1)]


def test_rows_another_workspace_waits_on_stay_when_one_is_packed(tmp_path, database, embedder):
    roots = [tmp_path / "one", tmp_path / "two"]
    for root in roots:
        root.mkdir()
        (root / "shared.txt").write_text(ESSAY)
    rows_only = open_index(database, roots[1], embedder, vector_pack=False)
    rows_only.index()
    held = waiting(database)
    packed = open_index(database, roots[0], embedder)
    packed.index()
    assert stores(database)[0][0] == str(roots[0].resolve())
    assert waiting(database) == held  # still the second workspace's only copy
    assert rows_only.search_vector(embedder.embed([ESSAY])[0], 3)
    packed.close()
    rows_only.close()


def test_an_index_written_before_the_pack_was_the_store_is_read_then_converted(
    database, essay_project, embedder, essay_query
):
    # Version 5: every vector a float32 row, the pack a recorded copy of them.
    old = open_index(database, essay_project, embedder, vector_pack=False)
    old.index()
    rows = waiting(database)
    copy = write_pack(
        database.parent / "vectors", old._pack_key(), old._load_from_rows(with_sentences=True)
    )
    expected = ranked(old, essay_query)
    old.close()
    db = sqlite3.connect(database)
    with db:
        db.execute(
            "INSERT INTO rag_vector_packs VALUES (?, ?, ?, ?)",
            (str(essay_project.resolve()), embedder.name, embedder.dim, copy),
        )
        db.execute("DROP TABLE rag_vector_store")
        db.execute("UPDATE kairox_schema SET version = 5 WHERE component = 'workspace_index'")
    db.close()
    upgraded = open_index(database, essay_project, embedder)
    assert upgraded._stored_pack() is not None  # the old copy, until the next run
    assert ranked(upgraded, essay_query) == expected
    stats = upgraded.index()
    assert stats.chunks_embedded == stats.sentences_embedded == 0  # nothing embedded again
    assert waiting(database) == 0 and len(upgraded._store_pack().vectors) == rows
    assert query(database, "SELECT count(*) FROM rag_vector_packs") == [(0,)]
    assert copy not in " ".join(pack_files(database))
    same_ranking(ranked(upgraded, essay_query), expected)
    upgraded.close()


def test_a_pack_of_another_format_is_rewritten_and_int8_is_close(
    database, essay_project, embedder, essay_query
):
    index = open_index(database, essay_project, embedder, vector_format="float32")
    index.index()
    exact = ranked(index, essay_query)
    index.close()
    compact = open_index(database, essay_project, embedder, vector_format="int8")
    assert compact.index().pack_bytes > 0
    assert stores(database)[0][3] == "int8"
    same_ranking(ranked(compact, essay_query), exact, tolerance=2e-2)
    compact.close()


def test_a_moved_state_folder_keeps_its_vectors(tmp_path, essay_project, embedder, essay_query):
    """The packs' key is the workspace the rows are recorded under, not where the
    database is: the state folder moved (kairox.db with vectors/), nothing is embedded."""
    database = tmp_path / "state" / "kairox.db"
    index = open_index(database, essay_project, embedder)
    index.index()
    before = ranked(index, essay_query)
    index.close()
    (tmp_path / "state").rename(tmp_path / "moved")
    embedder.calls.clear()
    moved = open_index(tmp_path / "moved" / "kairox.db", essay_project, embedder)
    assert moved._stored_pack() is not None
    same_ranking(ranked(moved, essay_query), before, tolerance=0)
    assert moved.index().chunks_embedded == 0 and embedder.calls == []
