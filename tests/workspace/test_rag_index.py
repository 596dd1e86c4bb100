"""``WorkspaceRagIndex``: incremental indexing, model pinning, search, crash and lock safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kairox.retrieval import Query
from kairox.testing import run
from kairox.workspace.chunking import chunk_text
from kairox.workspace.rag_index import (
    IndexBusyError,
    WorkspaceDenseRetriever,
    WorkspaceIndexError,
    WorkspaceLexicalRetriever,
    WorkspaceRagIndex,
)

from .conftest import CountingEmbedder


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
    first = CountingEmbedder(384)
    WorkspaceRagIndex(database, project, first).index()
    second = CountingEmbedder(64)
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


SLOW_INDEXER = """
import sys, time
from pathlib import Path
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.workspace import rag_index

rag_index.FILES_PER_BATCH = 2

class Slow(HashingEmbedder):
    def embed(self, texts):
        time.sleep(float(sys.argv[3]))
        return super().embed(texts)

index = rag_index.WorkspaceRagIndex(Path(sys.argv[1]), Path(sys.argv[2]), Slow())
print("started", flush=True)
index.index()
print("finished", flush=True)
"""


def start_slow_indexer(database, root, delay):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SLOW_INDEXER), str(database), str(root), str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for_files(database, workspace, at_least, process, limit=60.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if database.exists() and len(indexed_paths(database, workspace)) >= at_least:
            return
        assert process.poll() is None, "the indexer ended before it was killed"
        time.sleep(0.05)
    raise AssertionError("the indexer made no progress")


def test_killed_run_leaves_a_consistent_index_and_the_next_run_completes(
    database, tmp_path, embedder
):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(12):
        (root / f"doc{i:02}.txt").write_text(f"document {i} " + "word " * 200)
    indexer = start_slow_indexer(database, root, 0.3)
    wait_for_files(database, str(root), 2, indexer)
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
    indexer = start_slow_indexer(database, root, 0.4)
    try:
        assert indexer.stdout.readline().strip() == "started"
        index = WorkspaceRagIndex(database, root, embedder)
        deadline = time.monotonic() + 30
        while not index.is_busy():
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.02)
        with pytest.raises(IndexBusyError, match="another `kairox index` is running"):
            index.index(wait=False)
        stats = index.index(wait=True)  # blocks until the first run is done
        assert indexer.wait(timeout=60) == 0
        assert stats.unchanged == 6 and stats.added == 0
    finally:
        if indexer.poll() is None:
            indexer.kill()
        indexer.wait()
