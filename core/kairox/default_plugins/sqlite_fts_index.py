"""The ``sqlite-fts`` knowledge base's index file: documents, their FTS5 index, searches.

Documents live in a plain table; an external-content FTS5 table (``porter unicode61``)
indexes their title and body and is kept in step by triggers, so add/update/delete by id
is one statement on the documents table. Unfiltered searches score a memory-mapped copy
of the postings instead, with the same ranking, while it matches the documents
(:mod:`kairox.default_plugins.sqlite_fts_pack`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw

from kairox.default_plugins.sqlite_fts_pack import INVALIDATE, WordsPacks
from kairox.default_plugins.sqlite_fts_pack import SCHEMA as WORDS_PACK_SCHEMA
from kairox.default_plugins.sqlite_vectors import DocumentVectors
from kairox.retrieval import Document, QueryError, sqlite_engine
from kairox.retrieval.bm25_pack import Weights
from kairox.retrieval.embedding import EmbeddingBackend
from kairox.retrieval.filters import FilterExpr, parse_filter
from kairox.retrieval.filters.sql import compile_sql, register_functions
from kairox.retrieval.fts5 import match_terms
from kairox.retrieval.fts5_common import CommonTerms
from kairox.retrieval.fts5_merge import (
    defer_merges,
    merge_segments,
    merges_deferred,
    resume_merges,
    worth_merging,
)
from kairox.retrieval.sqlite_engine import connect, enable_wal
from kairox.store.sqlite import immediate_transaction
from kairox.support.errors import KairoxError
from kairox.support.paths import SQLITE_COMPANIONS, in_kairox_home, private_file, private_folder

#: One stored document: (id, title, body, uri, metadata).
_Row = tuple[str, str, str, "str | None", dict[str, Any]]

# 2: kb_words_packs (kairox.default_plugins.sqlite_fts_pack); a version 1 file gains it.
_SCHEMA_VERSION = 2
_TOKENIZE = "porter unicode61 remove_diacritics 2"

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS documents (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    uri TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    fingerprint TEXT NOT NULL DEFAULT ''
);
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    title, body, content='documents', content_rowid='rowid',
    tokenize='"""
    + _TOKENIZE
    + """'
);
CREATE TRIGGER IF NOT EXISTS documents_ai AFTER INSERT ON documents BEGIN
    INSERT INTO documents_fts(rowid, title, body) VALUES (new.rowid, new.title, new.body);
END;
CREATE TRIGGER IF NOT EXISTS documents_ad AFTER DELETE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, body)
    VALUES ('delete', old.rowid, old.title, old.body);
END;
CREATE TRIGGER IF NOT EXISTS documents_au AFTER UPDATE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, body)
    VALUES ('delete', old.rowid, old.title, old.body);
    INSERT INTO documents_fts(rowid, title, body) VALUES (new.rowid, new.title, new.body);
END;
"""
    + WORDS_PACK_SCHEMA
)


class SqliteFtsError(KairoxError, RuntimeError):
    """The index file is missing, unreadable or not a Kairox FTS index."""


def _filter_sql(filters: Mapping[str, Any] | FilterExpr | None) -> tuple[str, list[Any]]:
    # The one compiler over the JSON metadata column: names and values are bound.
    expr = parse_filter(filters)
    if expr is None:
        return "", []
    sql, params = compile_sql(expr, "d.metadata")
    return f" AND {sql}", params


class SqliteFtsIndex:
    """One FTS5 index file: add, replace, delete and search documents by id."""

    def __init__(self, path: Path | str, *, create: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise SqliteFtsError(f"index file {self.path} does not exist")
        if create and in_kairox_home(self.path):
            # Inside Kairox's own state: owner-only like the rest of it (kairox.support.paths).
            private_folder(self.path.parent)
            private_file(self.path, companions=SQLITE_COMPANIONS)
        elif create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the worker threads of asyncio.to_thread; the lock
        # serialises use of it (SQLite would serialise the writes anyway).
        self._lock = threading.Lock()
        #: documents written (added, replaced, deleted) since opened or last compacted.
        self._written = 0
        #: whether a bulk upsert switched FTS5's automerge off (until compact).
        self._merges_deferred = False
        self._common = CommonTerms("documents_fts")
        try:
            self._db = connect(self.path, create=create)
        except apsw.Error as exc:
            raise SqliteFtsError(
                f"cannot open the index file {self.path}: {exc}; check that the path is "
                "right and that its folder is readable and writable"
            ) from exc
        try:
            if create and not self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                # A new file gives the pages it frees back (set before anything else: a
                # file's first table fixes the mode). Vectors wait as rows until an
                # ingest's end packs them; their pages then go (sqlite_vector_store).
                self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            enable_wal(self._db)
            register_functions(self._db)
            if self._schema_version() != _SCHEMA_VERSION:
                self._create_schema()
        except apsw.BusyError as exc:
            self._db.close()
            raise SqliteFtsError(
                f"{self.path} stayed locked by another connection for "
                f"{sqlite_engine.BUSY_TIMEOUT_S:g} s ({exc}); if `kairox kb ingest` is writing "
                "to it, try again when it has finished"
            ) from exc
        except apsw.Error as exc:
            self._db.close()
            raise SqliteFtsError(f"{self.path} is not a readable SQLite FTS index: {exc}") from exc
        except SqliteFtsError:
            self._db.close()
            raise
        self.words = WordsPacks(self._db, self._lock, self.path, _TOKENIZE)

    def _schema_version(self) -> int:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise SqliteFtsError(
                f"{self.path} was written by a newer Kairox (schema {version}); upgrade kairox"
            )
        return version

    def _create_schema(self) -> None:
        # IMMEDIATE takes the write lock before reading, so a second opener of a new file
        # waits out the busy timeout and then finds the schema there. A deferred
        # transaction would read first and then fail at once with "database is locked"
        # (SQLITE_BUSY_SNAPSHOT) when another connection wrote in between.
        with immediate_transaction(self._db):
            if self._schema_version() != _SCHEMA_VERSION:
                self._db.execute(_SCHEMA)
                self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def upsert(
        self,
        documents: Iterable[Document],
        *,
        bulk: bool = False,
        also: Callable[[], None] | None = None,
    ) -> int:
        """Add or replace ``documents`` by id in one transaction, ``also`` run inside it,
        the lock held (their vectors' rows); how many were written. ``bulk``: part of a
        run that ends in :meth:`compact`, so FTS5 need not merge its segments meanwhile
        (:func:`~kairox.retrieval.fts5_merge.defer_merges`)."""
        rows = [
            (
                d.id,
                d.title,
                d.text,
                d.uri,
                # (most documents carry no metadata: no encoder for them)
                json.dumps(dict(d.metadata), sort_keys=True, default=str) if d.metadata else "{}",
                d.fingerprint,
            )
            for d in documents
        ]
        # One transaction per batch: a crash leaves every document old or new, never torn.
        with self._lock, self._db:
            if bulk and not self._merges_deferred:
                defer_merges(self._db, "documents_fts")
                self._merges_deferred = True
            self._db.execute(INVALIDATE)
            self._db.executemany(
                "INSERT INTO documents(id, title, body, uri, metadata, fingerprint) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET title=excluded.title, body=excluded.body, "
                "uri=excluded.uri, metadata=excluded.metadata, fingerprint=excluded.fingerprint",
                rows,
            )
            if also is not None:
                also()
            self._written += len(rows)
        return len(rows)

    def fingerprints(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT id, fingerprint FROM documents"))

    def delete(self, ids: Iterable[str], *, also: Callable[[], None] | None = None) -> int:
        """Delete the documents ``ids`` (``also`` run in the same transaction, as by
        :meth:`upsert`); how many there were."""
        deleted = 0
        with self._lock, self._db:
            self._db.execute(INVALIDATE)
            for doc_id in ids:
                self._db.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
                deleted += self._db.changes()  # the row itself, not the trigger's FTS rows
            if also is not None:
                also()
            self._written += deleted
        return deleted

    def compact(self) -> bool:
        """Merge the full-text index into one segment when enough of its documents were
        written since this object opened or last compacted
        (:func:`~kairox.retrieval.fts5_merge.worth_merging`); whether it did. FTS5's own
        merging, deferred by a bulk :meth:`upsert` (this run's or one cut short), resumes."""
        with self._lock:
            if self._merges_deferred or merges_deferred(self._db, "documents_fts"):
                resume_merges(self._db, "documents_fts")
                self._merges_deferred = False
            total = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
            if not worth_merging(self._written, total):
                return False
            merge_segments(self._db, "documents_fts")
            self._written = 0
            return True

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM documents").fetchone()[0]

    def vectors(self, embedder: EmbeddingBackend, **options: Any) -> DocumentVectors:
        """The vectors of this file for ``embedder`` (same connection, same lock)."""
        return DocumentVectors(self._db, self._lock, self.path, embedder, **options)

    def rows(self, rowids: Sequence[int]) -> dict[int, _Row]:
        """``rowid -> (id, title, body, uri, metadata)`` of the given documents."""
        with self._lock:
            found = self._db.execute(
                "SELECT rowid, id, title, body, uri, metadata FROM documents "
                "WHERE rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(list(rowids)),),
            ).fetchall()
        return {r: (i, t, b, u, _metadata(m)) for r, i, t, b, u, m in found}

    def matching_rowids(self, filters: Mapping[str, Any]) -> list[int]:
        """The rowids of the documents whose metadata passes ``filters``."""
        where, params = _filter_sql(filters)
        with self._lock:
            return [
                row[0]
                for row in self._db.execute(
                    f"SELECT d.rowid FROM documents d WHERE 1{where}", params
                )
            ]

    def documents(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents with these ids, in that order (missing ids left out)."""
        found: dict[str, Document] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for doc_id, title, body, uri, metadata in self._db.execute(
                    f"SELECT id, title, body, uri, metadata FROM documents WHERE id IN ({marks})",
                    part,
                ):
                    found[doc_id] = Document(
                        doc_id, body, title=title, uri=uri, metadata=_metadata(metadata)
                    )
        return [found[i] for i in ids if i in found]

    def search(
        self,
        text: str,
        k: int,
        filters: Mapping[str, Any] | FilterExpr | None = None,
        *,
        title_weight: float = 1.0,
        body_weight: float = 1.0,
    ) -> list[tuple[str, str, str, str | None, dict[str, Any], float]]:
        """Best first: ``(id, title, body, uri, metadata, score)`` with score = -bm25."""
        terms = match_terms(text)
        if not terms:
            return []
        where, params = _filter_sql(filters)
        if not where:
            best = self.words.top(terms, k, Weights(title_weight, body_weight))
            if best is not None:
                found = self.rows([rowid for rowid, _ in best])
                return [(*found[rowid], score) for rowid, score in best if rowid in found]
        if where:
            sql = (
                "SELECT d.id, d.title, d.body, d.uri, d.metadata, "
                "bm25(documents_fts, ?, ?) AS rank "
                "FROM documents_fts JOIN documents d ON d.rowid = documents_fts.rowid "
                f"WHERE documents_fts MATCH ?{where} ORDER BY rank, d.rowid LIMIT ?"
            )
        else:
            # Rank inside FTS5 first and join only the top k: joining every match before
            # sorting costs more than the ranking itself on long OR queries.
            sql = (
                "SELECT d.id, d.title, d.body, d.uri, d.metadata, top.rank FROM ("
                "SELECT rowid, bm25(documents_fts, ?, ?) AS rank FROM documents_fts "
                "WHERE documents_fts MATCH ? ORDER BY rank, rowid LIMIT ?"
                ") AS top JOIN documents d ON d.rowid = top.rowid ORDER BY top.rank, d.rowid"
            )

        def ranked(expression: str) -> list[Any]:
            return self._db.execute(
                sql, [title_weight, body_weight, expression, *params, k]
            ).fetchall()

        try:
            with self._lock:
                # Terms that bm25() scores as nothing are left out while the rest still
                # fill the k (kairox.retrieval.fts5_common).
                rows = self._common.ranked(self._db, terms, k, ranked)
        except apsw.SQLError as exc:
            if "fts5" not in str(exc):
                raise
            # Every term is quoted, so this should not happen; if FTS5 still objects,
            # say so plainly rather than leaking the engine's parser error.
            raise QueryError(f"SQLite FTS5 could not run the query {text!r}: {exc}") from exc
        return [(i, t, b, u, _metadata(m), -rank) for i, t, b, u, m, rank in rows]


def _metadata(stored: str) -> dict[str, Any]:
    # Most documents carry none; skipping the parser for them is measurable per query.
    return {} if stored == "{}" else json.loads(stored)
