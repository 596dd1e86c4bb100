"""The stored side of a kairox-tantivy index: one SQLite table beside the Tantivy files.

Tantivy keeps only what it searches (terms) and one numeric fast field per document,
``key``; everything a hit shows (id, title, body, uri, metadata) and the fingerprint live
here, one row per key. A search reads its hits' keys from the fast field in one call and
their rows in one ``IN (...)`` query: decoding 100 stored Tantivy documents (every field,
copied into Python dicts) cost more than the search itself.

Keys come from ``AUTOINCREMENT`` and are never reused, and a row never changes (a new
version of a document is a new row), so a key read from an older searcher names either
its own row or none, and rows once read can be kept in memory without ever going stale:
the latest ones, up to :data:`CACHE_CHARS` characters of text, are (fetching 100 rows
from SQLite, even with the pages cached, was as dear as the search). Rows are written before the Tantivy commit that
refers to them and pruned after it, both under the Tantivy writer lock: a crash leaves at
worst rows no document refers to, never a document without its row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["CACHE_CHARS", "STORE_FILE", "DocumentStore", "HitRow", "Row"]

#: The SQLite file in the index folder.
STORE_FILE = "documents.sqlite"
#: Characters of hit text (title + body) kept in memory per index: ~32 MB of ASCII.
CACHE_CHARS = 32_000_000
#: Bytes of ``documents.sqlite`` each reading connection may map (pages read without
#: a system call per page).
MMAP_BYTES = 1 << 30

#: ``(id, title, body, uri, fingerprint, metadata JSON)``, as written.
Row = tuple[str, str, str, str | None, str, str]
#: ``(id, title, text, uri, metadata JSON)``, as a hit reads it: ``text`` is
#: ``title + "\n" + body``, or just ``body`` without a title (joined once, not per hit).
HitRow = tuple[str, str, str, str | None, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    uri TEXT,
    fingerprint TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_by_id ON documents (id);
"""

_HIT_COLUMNS = (
    "id, title, CASE title WHEN '' THEN body ELSE title || char(10) || body END, uri, metadata"
)

# SQLite's default limit on bound parameters is 32,766; stay well under it.
_CHUNK = 10_000


class DocumentStore:
    """``documents.sqlite`` in an index folder: rows by key, written under the writer lock.

    Reads use one connection per thread (WAL mode: readers never wait for the writer);
    writes use one connection the caller serialises (the index's write lock).
    """

    def __init__(self, folder: Path, *, create: bool) -> None:
        self.path = folder / STORE_FILE
        if not create and not self.path.is_file():
            raise FileNotFoundError(self.path)
        self._local = threading.local()
        self._sql: dict[int, str] = {}
        self._cache: dict[int, HitRow] = {}
        self._cached_chars = 0
        self._cache_lock = threading.Lock()
        self._pid = os.getpid()
        self._writer = self._connect()
        # Only a new file needs its schema: a search need not take any write lock.
        known = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'"
        if self._writer.execute(known).fetchone() is None:
            self._writer.execute("PRAGMA journal_mode=WAL")
            self._writer.executescript(_SCHEMA)

    def _check_fork(self) -> None:
        """A forked child never uses its parent's connections (SQLite forbids it)."""
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._local = threading.local()
            self._writer = self._connect()

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)

    def close(self) -> None:
        self._writer.close()

    def _reader(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None or os.getpid() != self._pid:
            self._check_fork()
            connection = self._local.connection = self._connect()
            connection.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        return connection

    # -- writing (the caller holds the index's write lock) ---------------------------------

    def add(self, rows: Sequence[Row]) -> list[int]:
        """Insert ``rows`` in one transaction; their new keys, in order."""
        self._check_fork()
        db = self._writer
        insert = (
            "INSERT INTO documents (id, title, body, uri, fingerprint, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )
        db.execute("BEGIN IMMEDIATE")
        try:
            keys = [db.execute(insert, row).lastrowid for row in rows]
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return [int(key) for key in keys if key is not None]

    def discard(self, keys: Iterable[int]) -> None:
        """Delete the rows of ``keys`` (a write whose Tantivy commit did not happen)."""
        self._delete("DELETE FROM documents WHERE key = ?", [(key,) for key in keys])

    def prune(self, kept: Iterable[tuple[str, int]]) -> None:
        """For each ``(id, key)`` just committed, delete that id's other (older) rows."""
        self._delete("DELETE FROM documents WHERE id = ? AND key <> ?", list(kept))

    def remove(self, ids: Iterable[str]) -> None:
        """Delete every row of ``ids`` (their documents were deleted from Tantivy)."""
        self._delete("DELETE FROM documents WHERE id = ?", [(doc_id,) for doc_id in ids])

    def keep_only(self, keys: Sequence[int]) -> None:
        """Delete every row whose key is not in ``keys`` (rows a crash left unreferenced)."""
        self._delete(
            "DELETE FROM documents WHERE key NOT IN (SELECT value FROM json_each(?))",
            [(json.dumps(list(keys)),)],
        )

    def _delete(self, sql: str, params: list[tuple]) -> None:
        if not params:
            return
        self._check_fork()
        db = self._writer
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(sql, params)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- reading ---------------------------------------------------------------------------

    def _in(self, count: int, columns: str) -> str:
        sql = self._sql.get(count)
        if sql is None:
            marks = ",".join("?" * count)
            sql = self._sql[count] = f"SELECT key, {columns} FROM documents WHERE key IN ({marks})"
        return sql

    def hits(self, keys: Sequence[int]) -> list[HitRow | None]:
        """The row of each key, in order; ``None`` for a key without a row."""
        found = list(map(self._cache.get, keys))
        if None not in found:
            return found
        missing = [key for key, row in zip(keys, found, strict=True) if row is None]
        read = self._read(missing)
        self._remember(read)
        pairs = zip(keys, found, strict=True)
        return [row if row is not None else read.get(key) for key, row in pairs]

    def _read(self, keys: Sequence[int]) -> dict[int, HitRow]:
        db = self._reader()
        out: dict[int, HitRow] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            sql = self._in(len(chunk), _HIT_COLUMNS)
            out.update((row[0], row[1:]) for row in db.execute(sql, chunk))
        return out

    def _remember(self, rows: dict[int, HitRow]) -> None:
        """Keep ``rows``, dropping the oldest kept ones past :data:`CACHE_CHARS`."""
        with self._cache_lock:
            cache = self._cache
            for key, row in rows.items():
                size = len(row[1]) + len(row[2])
                if key in cache or size > CACHE_CHARS:
                    continue
                while cache and self._cached_chars + size > CACHE_CHARS:
                    _old, dropped = _pop_oldest(cache)
                    self._cached_chars -= len(dropped[1]) + len(dropped[2])
                cache[key] = row
                self._cached_chars += size

    def documents(self, keys: Sequence[int]) -> dict[int, tuple[str, str, str, str]]:
        """``key -> (id, title, body, metadata JSON)`` for the rows of ``keys``."""
        db = self._reader()
        out: dict[int, tuple[str, str, str, str]] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT key, id, title, body, metadata FROM documents WHERE key IN ({marks})"
            out.update((row[0], row[1:]) for row in db.execute(sql, chunk))
        return out

    def fingerprints(self, keys: Sequence[int]) -> dict[str, str]:
        """``id -> fingerprint`` for the rows of ``keys``."""
        db = self._reader()
        out: dict[str, str] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, fingerprint FROM documents WHERE key IN ({marks})"
            out.update(db.execute(sql, chunk))
        return out


def _pop_oldest(cache: dict[int, HitRow]) -> tuple[int, HitRow]:
    key = next(iter(cache))  # dicts keep insertion order: the first is the oldest
    return key, cache.pop(key)
