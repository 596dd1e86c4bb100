"""The workspace index's tables in the per-user SQLite database, and opening it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kairox.store.sqlite import enable_wal, ensure_component_schema
from kairox.support.paths import SQLITE_COMPANIONS, private_file, private_folder, state_errors
from kairox.workspace.failed_files import FAILED_SCHEMA
from kairox.workspace.filtering import register as register_filter_functions
from kairox.workspace.line_store import LINE_SCHEMA

# Storage is keyed by workspace root:
#
# * rag_files: one row per indexed file with its content hash;
# * rag_chunks: the chunks of each file (character spans into the file), with an FTS5
#   table over them for lexical search;
# * rag_embeddings: vectors addressed by (chunk-text hash, embedder name), float32 blobs,
#   L2-normalised. Content addressing means an unchanged chunk is never embedded twice,
#   even when the file around it changes, and vectors of different models (or widths)
#   sit side by side without ever being compared;
# * rag_vector_store: which pack under vectors/ next to the database is the store of a
#   workspace's vectors (kairox.workspace.index_packs): each vector once, compact, with
#   the rows of rag_embeddings as the vectors waiting for the next pack;
# * rag_vector_packs: before version 6, which files under vectors/ held a copy of a
#   workspace's rows ready to map into memory; read until the next run converts it.
#
# Version 2 added rag_sentences; its statements only create what is missing, and chunks
# indexed before it get their sentences on the next run (_add_missing_sentences).
# Version 3 added rag_vector_packs (kairox.workspace.vector_pack); an index without any
# is searched from its rows until the next run writes one.
# Version 4 added line ranges (kairox.workspace.line_store); files indexed before get
# them on the next run, which cuts them again.
# Version 5 added rag_chunks.context (what search sees besides the text: a code chunk's
# symbol path and enclosing headers) as a third FTS column, and rag_chunk_lines.labels
# (a converted document's page and heading); _add_context migrates. It also added
# rag_failed_files (kairox.workspace.failed_files).
# Version 6 added rag_vector_store: the pack became the store, rag_embeddings the vectors
# waiting for it; the next run merges an older index's rows into a pack.
_SCHEMA_VERSION = 6
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rag_files (
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    PRIMARY KEY (workspace, relpath)
)""",
    """CREATE TABLE IF NOT EXISTS rag_chunks (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    context TEXT NOT NULL DEFAULT '',
    UNIQUE (workspace, relpath, chunk_index)
)""",
    """CREATE INDEX IF NOT EXISTS rag_chunks_text_hash ON rag_chunks(text_hash)""",
    """CREATE TABLE IF NOT EXISTS rag_embeddings (
    text_hash TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (text_hash, embedder)
)""",
    """CREATE TABLE IF NOT EXISTS rag_sentences (
    chunk_id INTEGER NOT NULL,
    sentence_index INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    PRIMARY KEY (chunk_id, sentence_index)
)""",
    """CREATE INDEX IF NOT EXISTS rag_sentences_text_hash ON rag_sentences(text_hash)""",
    # Which vector pack matches a workspace's rows now; every change to them deletes it.
    """CREATE TABLE IF NOT EXISTS rag_vector_packs (
    workspace TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    token TEXT NOT NULL,
    PRIMARY KEY (workspace, embedder, dim)
)""",
    # Which pack is a workspace's store, its format, and whether its index arrays match
    # the chunks and sentences (every change to them clears ``arranged``).
    """CREATE TABLE IF NOT EXISTS rag_vector_store (
    workspace TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    token TEXT NOT NULL,
    form TEXT NOT NULL,
    arranged INTEGER NOT NULL,
    PRIMARY KEY (workspace, embedder, dim)
)""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS rag_chunks_fts USING fts5(
    relpath, text, context, content='rag_chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
)""",
    """CREATE TRIGGER IF NOT EXISTS rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rowid, relpath, text, context)
    VALUES (new.id, new.relpath, new.text, new.context);
END""",
    """CREATE TRIGGER IF NOT EXISTS rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
    INSERT INTO rag_chunks_fts(rag_chunks_fts, rowid, relpath, text, context)
    VALUES ('delete', old.id, old.relpath, old.text, old.context);
END""",
    *LINE_SCHEMA,
    *FAILED_SCHEMA,
)


def _add_context(db: sqlite3.Connection) -> bool:
    """Give a version 4 index the ``context`` and ``labels`` columns and drop its
    two-column FTS table (the schema statements then create the new one); True when the
    FTS table needs filling again."""
    db.execute("BEGIN IMMEDIATE")
    try:
        columns = {row[1] for row in db.execute("PRAGMA table_info(rag_chunks)")}
        migrate = bool(columns) and "context" not in columns
        if migrate:
            db.execute("ALTER TABLE rag_chunks ADD COLUMN context TEXT NOT NULL DEFAULT ''")
            db.execute("DROP TRIGGER IF EXISTS rag_chunks_ai")
            db.execute("DROP TRIGGER IF EXISTS rag_chunks_ad")
            db.execute("DROP TABLE IF EXISTS rag_chunks_fts")
        lines = {row[1] for row in db.execute("PRAGMA table_info(rag_chunk_lines)")}
        if lines and "labels" not in lines:
            db.execute("ALTER TABLE rag_chunk_lines ADD COLUMN labels TEXT NOT NULL DEFAULT ''")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return migrate


def open_database(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the state database with the RAG tables in place."""
    with state_errors(path):
        private_folder(path.parent)
        private_file(path, companions=SQLITE_COMPANIONS)
        db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        register_filter_functions(db)
    try:
        with state_errors(path):
            db.execute("PRAGMA busy_timeout=30000")
            migrated = _add_context(db)
            # Versioned per component: the database is shared with events and memories.
            ensure_component_schema(db, "workspace_index", _SCHEMA_VERSION, _SCHEMA)
            if migrated:
                with db:  # the new FTS table, filled from the rows already there
                    db.execute("INSERT INTO rag_chunks_fts(rag_chunks_fts) VALUES ('rebuild')")
            enable_wal(db, 30)
    except BaseException:
        db.close()
        raise
    return db


def indexed_workspaces(path: Path) -> list[str]:
    """The workspace ids (root folders) with files in the index at ``path``; read only,
    nothing is created (no database or no index yet: none)."""
    if not path.is_file():
        return []
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        return [row[0] for row in db.execute("SELECT DISTINCT workspace FROM rag_files")]
    except sqlite3.Error:  # no rag_files table yet, or the database is busy
        return []
    finally:
        db.close()
