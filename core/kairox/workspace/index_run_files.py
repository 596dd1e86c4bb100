"""What one ``kairox index`` run knows of the files it walks, without holding the workspace.

A run compares each walked file with its stored row (content hash, size, modification
time, chunker) and, at the end, removes the stored files it never saw. Both would grow
with the workspace if kept in memory; here the stored rows are looked up a group of files
at a time, and the paths seen go into a temporary table of the index's own connection
(SQLite keeps it in a temporary file and drops it with the run), so a run's memory stays
flat however many files the workspace holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

__all__ = ["RunFiles", "StoredFile"]

# Paths per lookup (one bound parameter each; SQLite allows 32766).
_LOOKUP = 500


@dataclass(frozen=True)
class StoredFile:
    """One indexed file as the index last stored it."""

    content_hash: str
    size: int
    mtime_ns: int
    #: The chunker that cut it (``None``: indexed before chunkers were recorded).
    chunker: str | None


class RunFiles:
    """The stored rows of the files a run walks, and the paths it has seen so far."""

    def __init__(self, db: sqlite3.Connection, workspace: str) -> None:
        self._db = db
        self._workspace = workspace
        with db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS rag_run_seen (relpath TEXT PRIMARY KEY)")
            db.execute("DELETE FROM temp.rag_run_seen")

    def __enter__(self) -> RunFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._db:
            self._db.execute("DROP TABLE IF EXISTS temp.rag_run_seen")

    def stored(self, relpaths: Sequence[str]) -> dict[str, StoredFile]:
        """The stored rows of those of ``relpaths`` that are indexed."""
        found: dict[str, StoredFile] = {}
        for start in range(0, len(relpaths), _LOOKUP):
            part = list(relpaths[start : start + _LOOKUP])
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                "SELECT f.relpath, f.content_hash, f.size, f.mtime_ns, k.chunker FROM rag_files f "
                "LEFT JOIN rag_file_chunking k ON k.workspace = f.workspace "
                f"AND k.relpath = f.relpath WHERE f.workspace = ? AND f.relpath IN ({marks})",
                (self._workspace, *part),
            )
            for relpath, *row in rows:
                found[relpath] = StoredFile(*row)
        return found

    def see(self, relpaths: Iterable[str]) -> None:
        """Note files that stay in the index (unchanged, or read and about to be written)."""
        with self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO temp.rag_run_seen VALUES (?)", ((r,) for r in relpaths)
            )

    def unseen(self, size: int) -> Iterator[list[str]]:
        """The indexed files this run has not seen, ``size`` at a time, in path order; the
        caller may delete each page before asking for the next."""
        after = ""
        while True:
            # Keyset pages, each a fresh query: deleting rows under an open cursor of
            # the same table is not something SQLite promises to survive.
            page = [
                relpath
                for (relpath,) in self._db.execute(
                    "SELECT relpath FROM rag_files WHERE workspace = ? AND relpath > ? "
                    "AND relpath NOT IN (SELECT relpath FROM temp.rag_run_seen) "
                    "ORDER BY relpath LIMIT ?",
                    (self._workspace, after, size),
                )
            ]
            if not page:
                return
            yield page
            after = page[-1]
