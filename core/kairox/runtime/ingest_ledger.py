"""The ids one ``kairox kb ingest`` run has seen, kept on disk so memory stays flat.

A streaming ingest reads its inputs twice (:mod:`kairox.runtime.ingest`): once to check every
record, once to write. What it must remember between and during the passes (which
document ids the inputs hold and how often, which stored ids this run produced) grows
with the corpus, so it lives in a private temporary SQLite file that SQLite deletes when
the ledger closes; only SQLite's page cache is held in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from kairox.support.closing import ClosedOnExit

# Enough cache that a run's inserts stay fast (SQLite's default is 2 MB).
_CACHE_KIB = 16_384
# Ids per membership query (one bound parameter each).
_LOOKUP = 500


def _key(doc_id: str) -> bytes:
    # Ids are kept as bytes: a path id may hold a surrogate-escaped byte, which SQLite's
    # text binding refuses.
    return doc_id.encode("utf-8", "surrogatepass")


class IngestLedger(ClosedOnExit):
    """Input ids with their copy counts, and the ids an ingest run produced."""

    def __init__(self) -> None:
        # "" is a private on-disk temporary database, removed on close.
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE inputs (id BLOB PRIMARY KEY, copies INTEGER NOT NULL)")
        self._db.execute("CREATE TABLE produced (id BLOB PRIMARY KEY)")

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, rows: Iterable[tuple[bytes]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany(sql, rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def add_inputs(self, ids: Sequence[str]) -> None:
        """Count one more copy of each id (an id may come from several inputs)."""
        self._write(
            "INSERT INTO inputs VALUES (?, 1) ON CONFLICT(id) DO UPDATE SET copies = copies + 1",
            ((_key(i),) for i in ids),
        )

    def forget_input(self, doc_id: str) -> None:
        """``doc_id`` turned out to hold nothing (a file skipped when read)."""
        self._db.execute("DELETE FROM inputs WHERE id = ?", (_key(doc_id),))

    def repeated(self) -> dict[str, int]:
        """``id -> copies`` of the ids given more than once (usually none)."""
        found = self._db.execute("SELECT id, copies FROM inputs WHERE copies > 1")
        return {key.decode("utf-8", "surrogatepass"): copies for key, copies in found}

    def add_produced(self, ids: Sequence[str]) -> None:
        """Note ids this run stored (or found stored unchanged)."""
        self._write("INSERT OR IGNORE INTO produced VALUES (?)", ((_key(i),) for i in ids))

    def inputs_among(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` an input holds as a document id."""
        return self._among("inputs", ids)

    def produced_among(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` this run produced."""
        return self._among("produced", ids)

    def _among(self, table: str, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), _LOOKUP):
            part = [_key(i) for i in ids[start : start + _LOOKUP]]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(f"SELECT id FROM {table} WHERE id IN ({marks})", part)
            found.update(key.decode("utf-8", "surrogatepass") for (key,) in rows)
        return found
