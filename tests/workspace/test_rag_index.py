"""``WorkspaceRagIndex``: incremental indexing, model pinning, search, crash and lock safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kairox.events import SqliteEventStore
from kairox.retrieval import Query
from kairox.testing import CountingEmbedder, run
from kairox.testing.unprivileged import require_permissions, run_unprivileged
from kairox.workspace.chunking import chunk_text
from kairox.workspace.rag_index import (
    IndexBusyError,
    WorkspaceDenseRetriever,
    WorkspaceIndexError,
    WorkspaceLexicalRetriever,
    WorkspaceRagIndex,
)


@pytest.fixture
def index(database, project, embedder):
    made = WorkspaceRagIndex(database, project, embedder, chunk_tokens=32, chunk_overlap=4)
    yield made
    made.close()


def indexed_paths(database, workspace):
    db = sqlite3.connect(database)
    try:
        return sorted(
            r[0]
            for r in db.execute("SELECT relpath FROM rag_files WHERE workspace=?", (workspace,))
        )
    except sqlite3.OperationalError:  # another process is still creating the schema
        return []
    finally:
        db.close()


def test_first_run_adds_text_files_honouring_gitignore(index, database, project):
    stats = index.index()
    assert stats.added == 5  # .gitignore, README.md and three text files; build/ ignored
    assert stats.skipped == 1  # logo.png
    assert "build/output.txt" not in indexed_paths(database, str(project))
    assert "logo.png" not in indexed_paths(database, str(project))
    assert stats.chunks_embedded == stats.chunks_total > 0


def test_unchanged_workspace_embeds_nothing(index, embedder):
    index.index()
    before = embedder.texts_embedded
    stats = index.index()
    assert embedder.texts_embedded == before
    assert (stats.added, stats.updated, stats.removed, stats.chunks_embedded) == (0, 0, 0, 0)
    assert stats.unchanged == 5


def test_touched_but_identical_file_is_not_re_embedded(index, embedder, project):
    index.index()
    before = embedder.texts_embedded
    path = project / "src" / "fuel.py"
    path.write_text(path.read_text())
    os.utime(path, ns=(1, 1))
    stats = index.index()
    assert stats.unchanged == 5 and stats.updated == 0
    assert embedder.texts_embedded == before


def test_changed_file_is_updated_and_only_new_chunks_embedded(index, embedder, project):
    index.index()
    before = embedder.texts_embedded
    (project / "src" / "fuel.py").write_text("HYDROGEN_DENSITY = 0.07\n")
    stats = index.index()
    assert stats.updated == 1
    assert embedder.texts_embedded - before == stats.chunks_embedded == 1
    hits = index.search_words("hydrogen", 5)
    assert [h.metadata["path"] for h in hits] == ["src/fuel.py"]
    assert [h.metadata["path"] for h in index.search_words("kerosene", 5)] == ["README.md"]


def test_deleted_file_leaves_the_index(index, project, database):
    index.index()
    (project / "notes" / "garden.txt").unlink()
    stats = index.index()
    assert stats.removed == 1
    assert "notes/garden.txt" not in indexed_paths(database, str(project))
    assert index.search_words("tomatoes", 5) == []


def test_switching_the_embedder_re_embeds_and_never_mixes_models(database, project):
    first = CountingEmbedder(dim=384)
    WorkspaceRagIndex(database, project, first).index()
    second = CountingEmbedder(dim=64)
    switched = WorkspaceRagIndex(database, project, second)
    stats = switched.index()
    assert stats.unchanged == 5 and stats.added == 0
    assert second.texts_embedded == stats.chunks_embedded == stats.chunks_total
    hits = switched.search_vector(second.embed(["liquid oxygen rocket engine"])[0], 3)
    assert hits[0].metadata["path"] == "README.md"
    with pytest.raises(WorkspaceIndexError, match="dimensions"):
        switched.search_vector(np.ones(384, dtype=np.float32), 3)


def test_file_that_becomes_binary_leaves_the_index(index, project, database):
    index.index()
    (project / "notes" / "garden.txt").write_bytes(b"\x00\x01binary now")
    stats = index.index()
    assert stats.removed == 1 and stats.skipped == 2
    assert "notes/garden.txt" not in indexed_paths(database, str(project))


def test_each_skipped_file_is_counted_under_its_reason(database, project, embedder):
    (project / "huge.txt").write_text("w" * 5000)
    index = WorkspaceRagIndex(database, project, embedder, max_file_bytes=4096)
    stats = index.index()
    assert stats.skipped_reasons == {"binary": 1, "too large": 1}
    assert stats.skipped == 2 and sorted(stats.skipped_files) == ["huge.txt", "logo.png"]
    assert stats.as_json()["skipped_reasons"] == {"binary": 1, "too large": 1}


def test_a_path_too_long_to_open_is_counted(database, project, embedder):
    # A folder whose own path fits in PATH_MAX (4096) but whose file's path does not.
    folder = os.open(project, os.O_RDONLY)
    try:
        for _ in range((4090 - len(str(project))) // 201):
            os.mkdir("d" * 200, dir_fd=folder)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = inner
        os.close(os.open("f" * 200 + ".txt", os.O_CREAT | os.O_WRONLY, dir_fd=folder))
    finally:
        os.close(folder)
    stats = WorkspaceRagIndex(database, project, embedder).index()
    assert stats.skipped_reasons == {"binary": 1, "path too long": 1}
    assert stats.added == 5


def test_a_file_gone_between_the_walk_and_the_read_is_skipped(database, project, embedder):
    index = WorkspaceRagIndex(database, project, embedder)

    def delete_the_next_file(relpath: str, done: int, total: int) -> None:
        if relpath == "README.md":
            (project / "notes" / "garden.txt").unlink()

    stats = index.index(progress=delete_the_next_file)
    assert stats.skipped_reasons == {"binary": 1, "vanished": 1}
    assert "notes/garden.txt" not in indexed_paths(database, str(project))
    assert stats.added == 4


UNREADABLE_INDEX = """
import json, sys
from pathlib import Path
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.workspace.rag_index import WorkspaceRagIndex

index = WorkspaceRagIndex(Path(sys.argv[1]), Path(sys.argv[2]), HashingEmbedder())
print(json.dumps(index.index().as_json()))
"""


def test_an_unreadable_file_is_skipped_and_the_rest_indexed(database, project, tmp_path):
    require_permissions(tmp_path)
    secret = project / "notes" / "garden.txt"
    secret.chmod(0)
    done = run_unprivileged(UNREADABLE_INDEX, str(database), str(project))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["skipped_reasons"] == {"binary": 1, "unreadable": 1}
    assert stats["added"] == 4
    # Readable again: the next run picks it up.
    secret.chmod(0o644)
    again = json.loads(run_unprivileged(UNREADABLE_INDEX, str(database), str(project)).stdout)
    assert again["added"] == 1 and again["skipped_reasons"] == {"binary": 1}


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


def test_retrievers_report_not_indexed_and_pass_the_protocol(index, embedder):
    dense = WorkspaceDenseRetriever(index)
    lexical = WorkspaceLexicalRetriever(index)
    assert "kairox index" in dense.unavailable_reason()
    index.index()
    assert dense.unavailable_reason() is None and lexical.unavailable_reason() is None
    vector = embedder.embed(["tomatoes garden"])[0]
    before = embedder.texts_embedded
    hits = run(dense.retrieve(Query("tomatoes garden", k=2, embeddings={embedder.name: vector})))
    assert embedder.texts_embedded == before  # used the vector it was handed
    assert hits[0].metadata["path"] == "notes/garden.txt"
    assert run(lexical.retrieve(Query("", k=2))) == []


def test_workspaces_do_not_see_each_other(database, tmp_path, embedder):
    for name, text in (("one", "alpha centauri"), ("two", "beta pictoris")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "star.txt").write_text(text)
        WorkspaceRagIndex(database, tmp_path / name, embedder).index()
    one = WorkspaceRagIndex(database, tmp_path / "one", embedder)
    assert [h.text for h in one.search_words("alpha beta", 10)] == ["alpha centauri"]


SMALL_CHUNKS = {"chunk_tokens": 32, "chunk_overlap": 4}


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


GATED_INDEXER = """
import sys
from pathlib import Path
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.workspace import rag_index

rag_index.FILES_PER_BATCH = 2

class Gated(HashingEmbedder):
    def embed(self, texts):
        # The test lets each embedding through with a line on stdin (EOF lets all through),
        # so where the run is when the test looks never depends on the machine's speed.
        print("embedding", flush=True)
        sys.stdin.readline()
        return super().embed(texts)

index = rag_index.WorkspaceRagIndex(Path(sys.argv[1]), Path(sys.argv[2]), Gated())
print("started", flush=True)
index.index()
print("finished", flush=True)
"""


def start_gated_indexer(database, root):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(GATED_INDEXER), str(database), str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def next_line(process) -> str:
    line = process.stdout.readline().strip()
    assert line, "the indexer ended early"
    return line


def run_until_files(database, workspace, at_least, process) -> None:
    """Let embeddings through one at a time until ``at_least`` files are committed; the
    indexer is then blocked in its next embedding."""
    assert next_line(process) == "started"
    while True:
        assert next_line(process) == "embedding"
        if database.exists() and len(indexed_paths(database, workspace)) >= at_least:
            return
        process.stdin.write("\n")
        process.stdin.flush()


def test_killed_run_leaves_a_consistent_index_and_the_next_run_completes(
    database, tmp_path, embedder
):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(12):
        (root / f"doc{i:02}.txt").write_text(f"document {i} " + "word " * 200)
    indexer = start_gated_indexer(database, root)
    run_until_files(database, str(root), 2, indexer)
    indexer.send_signal(signal.SIGKILL)
    indexer.wait()

    index = WorkspaceRagIndex(database, root, embedder)
    stats = index.index()
    assert stats.added + stats.unchanged == 12
    db = sqlite3.connect(database)
    workspace = str(root.resolve())
    # every file's chunks are exactly those of its current text: one version, no duplicates
    for i in range(12):
        relpath = f"doc{i:02}.txt"
        rows = db.execute(
            'SELECT chunk_index, start, "end", text FROM rag_chunks '
            "WHERE workspace=? AND relpath=? ORDER BY chunk_index",
            (workspace, relpath),
        ).fetchall()
        expected = chunk_text((root / relpath).read_text())
        assert [(c.index, c.start, c.end, c.text) for c in expected] == [tuple(r) for r in rows]
    orphans = db.execute(
        "SELECT count(*) FROM rag_chunks c LEFT JOIN rag_files f "
        "ON f.workspace = c.workspace AND f.relpath = c.relpath WHERE f.relpath IS NULL"
    ).fetchone()[0]
    missing_vectors = db.execute(
        "SELECT count(*) FROM rag_chunks c LEFT JOIN rag_embeddings e "
        "ON e.text_hash = c.text_hash AND e.embedder = ? WHERE e.text_hash IS NULL",
        (embedder.name,),
    ).fetchone()[0]
    assert (orphans, missing_vectors) == (0, 0)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_second_run_waits_or_says_one_is_busy(database, tmp_path, embedder):
    root = tmp_path / "busy"
    root.mkdir()
    for i in range(6):
        (root / f"doc{i}.txt").write_text(f"text {i} " * 50)
    indexer = start_gated_indexer(database, root)
    try:
        assert next_line(indexer) == "started"
        assert next_line(indexer) == "embedding"  # the first run holds the lock, blocked
        index = WorkspaceRagIndex(database, root, embedder)
        assert index.is_busy()
        with pytest.raises(IndexBusyError, match="another `kairox index` is running"):
            index.index(wait=False)
        indexer.stdin.close()  # let the first run finish
        stats = index.index(wait=True)  # blocks until the first run is done
        assert indexer.wait(timeout=60) == 0
        assert stats.unchanged == 6 and stats.added == 0
    finally:
        if indexer.poll() is None:
            indexer.kill()
        indexer.wait()


# -- sentence vectors ----------------------------------------------------------------

ESSAY = (
    "The expedition left the harbour before dawn under a grey sky. "
    "Provisions were counted twice by the quartermaster and the cook. "
    "Nobody expected the storm that came in from the west that evening. "
    "Quantum flux capacitors need careful calibration before every launch. "
    "By morning the crew had repaired the mast and the sails once more."
)


@pytest.fixture
def essay_project(tmp_path):
    root = tmp_path / "essay"
    root.mkdir()
    (root / "voyage.txt").write_text(ESSAY)
    (root / "flux.txt").write_text("Quantum flux physics of capacitors in a laboratory.")
    return root


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
    assert hits[0].score == pytest.approx(0.5 * whole + 0.5 * 1.0, abs=1e-5)
    plain = WorkspaceRagIndex(database, essay_project, embedder, sentence_weight=0)
    assert plain.search_vector(query, 1)[0].score == pytest.approx(whole, abs=1e-5)
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


def test_index_and_event_store_opening_a_new_database_at_once_all_open(
    tmp_path, project, embedder, all_at_once
):
    # `kairox chat` and `kairox web` started together on a fresh KAIROX_HOME: switching the
    # new file to WAL is answered "database is locked" at once, without the busy wait, when
    # another connection is creating its tables; every opener must still get through.
    for attempt in range(10):
        database = tmp_path / f"new-{attempt}.db"

        def index(database=database):
            return WorkspaceRagIndex(database, project, embedder)

        def store(database=database):
            return SqliteEventStore(database)

        opened = all_at_once(index, store, index, store)
        try:
            assert [each.search_words("anything", 1) for each in opened[::2]] == [[], []]
            assert [each.get(1) for each in opened[1::2]] == [None, None]
        finally:
            for each in opened:
                each.close()


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
        # Only the remaining chunk's vector survives garbage collection.
        assert db.execute("SELECT count(*) FROM rag_embeddings").fetchone()[0] == 1
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


# -- vector packs ---------------------------------------------------------------------


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


@pytest.fixture
def essay_query(embedder):
    return embedder.embed(["calibration of flux capacitors before launch"])[0]


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


def test_the_workspace_config_reaches_the_index(tmp_path, embedder):
    from kairox.config import WorkspaceConfig
    from kairox.default_plugins.workspace_rag import build_index
    from kairox.registry import BuildContext

    ctx = BuildContext(
        workspace_root=tmp_path,
        state_dir=tmp_path / "state",
        base_dir=tmp_path,
        embedding_backend=lambda name: embedder,
        workspace=WorkspaceConfig(vector_pack=False, sentence_weight=0.3),
    )
    index = build_index(ctx)
    assert (index.vector_pack, index.sentence_weight) == (False, 0.3)
    index.close()


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
