"""``WorkspaceRagIndex`` runs: incremental indexing, model pinning, skipped files, crash and
lock safety."""

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

from kairox.store.events import SqliteEventStore
from kairox.testing import CountingEmbedder
from kairox.testing.unprivileged import require_permissions, run_unprivileged
from kairox.workspace.chunking import chunk_text
from kairox.workspace.rag_index import IndexBusyError, WorkspaceIndexError, WorkspaceRagIndex


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


def test_files_are_written_a_batch_at_a_time_while_the_walk_goes_on(
    database, embedder, two_file_batches
):
    root = two_file_batches(7)
    seen: list[tuple[int, int, int]] = []  # (files walked, of how many, files committed)

    def progress(relpath: str, done: int, total: int) -> None:
        seen.append((done, total, len(indexed_paths(database, str(root)))))

    index = WorkspaceRagIndex(database, root, embedder)
    try:
        stats = index.index(progress=progress)
    finally:
        index.close()
    assert stats.added == 7
    assert [done for done, _, _ in seen] == list(range(1, 8))
    assert {total for _, total, _ in seen} == {7}, "counted before the first file is read"
    # Never more than one batch read and not yet written; the last file is walked with
    # three batches already committed.
    assert all(done - committed <= 2 for done, _, committed in seen)
    assert seen[-1][2] == 6
    assert len(indexed_paths(database, str(root))) == 7


def test_deleted_files_leave_a_page_at_a_time(database, embedder, two_file_batches):
    root = two_file_batches(6)
    index = WorkspaceRagIndex(database, root, embedder)
    try:
        index.index()
        for n in range(1, 6):
            (root / f"f{n}.txt").unlink()
        stats = index.index()
        assert (stats.removed, stats.unchanged) == (5, 1)
        assert indexed_paths(database, str(root)) == ["f0.txt"]
        assert index.chunk_count() == 1
    finally:
        index.close()


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
    hashes = [row[0] for row in db.execute("SELECT DISTINCT text_hash FROM rag_chunks")]
    # Every chunk has its vector, waiting as a row or in the pack.
    missing_vectors = len(set(hashes) - index._have_vectors(hashes))
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


def test_the_workspace_config_reaches_the_index(tmp_path, embedder):
    from kairox.config.schema import WorkspaceConfig
    from kairox.default_plugins.workspace_rag import build_index
    from kairox.plugin_host.registry import BuildContext

    ctx = BuildContext(
        workspace_root=tmp_path,
        state_dir=tmp_path / "state",
        base_dir=tmp_path,
        embedding_backend=lambda name: embedder,
        workspace=WorkspaceConfig(vector_pack=False, sentence_weight=0.3, vector_format="int8"),
    )
    index = build_index(ctx)
    assert (index.vector_pack, index.sentence_weight, index.vector_format) == (False, 0.3, "int8")
    index.close()


def _fts_segments(database) -> int:
    # FTS5 keys a segment's pages by segment id << 37 (ids up to 10 are its own records).
    db = sqlite3.connect(database)
    try:
        query = "SELECT count(DISTINCT id >> 37) FROM rag_chunks_fts_data WHERE id > 10"
        return db.execute(query).fetchone()[0]
    finally:
        db.close()


def test_a_run_that_rewrites_a_share_of_the_files_merges_the_words_index(
    database, tmp_path, embedder
):
    from kairox.retrieval.fts5_merge import merge_segments
    from kairox.workspace.rag_index import FILES_PER_BATCH

    root = tmp_path / "many"
    root.mkdir()
    count = 3 * FILES_PER_BATCH  # three write batches: three segments before merging
    for n in range(count):
        (root / f"f{n}.txt").write_text(f"note {n} about harbour storms and provisions\n")
    index = WorkspaceRagIndex(database, root, embedder, chunk_tokens=32, chunk_overlap=4)
    query = "note cook quartermaster"
    try:
        index.index()
        assert _fts_segments(database) == 1
        (root / "f0.txt").write_text("a changed note about the quartermaster\n")
        index.index()  # 1 file of 96: under an eighth, FTS5's own merging only
        assert _fts_segments(database) > 1
        before = [(h.id, h.score) for h in index.search_words(query, 50)]
        other = sqlite3.connect(database)
        merge_segments(other, "rag_chunks_fts")
        other.close()
        assert _fts_segments(database) == 1
        assert [(h.id, h.score) for h in index.search_words(query, 50)] == before
        assert len(before) == 50
        for n in range(1, count // 4):  # 23 more files of 96: an eighth and more
            (root / f"f{n}.txt").write_text(f"rewritten note {n} about the cook\n")
        (root / "f0.txt").write_text("the quartermaster again\n")
        index.index()
        assert _fts_segments(database) == 1
    finally:
        index.close()


def test_an_index_without_vectors_keeps_words_only_and_drops_its_packs(database, project):
    first = WorkspaceRagIndex(
        database, project, CountingEmbedder(), chunk_tokens=32, chunk_overlap=4
    )
    try:
        assert first.index().chunks_embedded > 0 and first._store() is not None
    finally:
        first.close()
    words = CountingEmbedder()
    index = WorkspaceRagIndex(
        database, project, words, vectors=False, chunk_tokens=32, chunk_overlap=4
    )
    try:
        stats = index.index()
        assert words.texts_embedded == 0 and stats.chunks_embedded == 0
        assert stats.pack_bytes is None and index._store() is None
        assert not list((database.parent / "vectors").glob(f"{index._pack_key()}-*"))
        assert index.search_words("def", 3)  # words still search
        project.joinpath("new.md").write_text("A new file about rockets and oxygen.\n")
        assert index.index().added == 1 and words.texts_embedded == 0
    finally:
        index.close()


def test_is_indexed_says_whether_this_workspace_has_a_file_not_another(
    index, database, project, tmp_path, embedder
):
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = WorkspaceRagIndex(database, other_root, embedder)
    try:
        assert not index.is_indexed() and not other.is_indexed()
        index.index()
        assert index.is_indexed() and index.file_count() == 5
        assert not other.is_indexed()  # the same database, another workspace
        for path in [p for p in project.rglob("*") if p.is_file()]:
            path.unlink()
        index.index()
        assert not index.is_indexed()
    finally:
        other.close()
