"""Files a converter could not read, remembered so ``kairox index`` does not retry them.

A corrupt or encrypted PDF fails the same way on every run; reading and parsing it again
costs time and says nothing new. ``rag_failed_files`` keeps each failure with the file's
size and modification time; until either changes the file is skipped unread, still
reported as skipped with the reason it failed with. A missing converter library is not
remembered: installing it fixes the file without touching it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FAILED_SCHEMA", "Failure", "forget_and_remember", "known_failures"]

FAILED_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS rag_failed_files (
    workspace TEXT NOT NULL,
    relpath TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (workspace, relpath)
)""",
)


@dataclass(frozen=True)
class Failure:
    """One file's failed conversion, and the file as it was then."""

    relpath: str
    size: int
    mtime_ns: int
    reason: str
    detail: str

    def matches(self, size: int, mtime_ns: int) -> bool:
        """Whether the file is still the one that failed."""
        return (self.size, self.mtime_ns) == (size, mtime_ns)


def known_failures(db: sqlite3.Connection, workspace: str) -> dict[str, Failure]:
    """The failures remembered for ``workspace``, by relative path."""
    rows = db.execute(
        "SELECT relpath, size, mtime_ns, reason, detail FROM rag_failed_files WHERE workspace=?",
        (workspace,),
    )
    return {row[0]: Failure(*row) for row in rows}


def forget_and_remember(
    db: sqlite3.Connection, workspace: str, failures: Iterable[Failure]
) -> None:
    """Replace ``workspace``'s remembered failures with ``failures`` (this run's); call
    inside a transaction. Files that were fixed, changed or removed are forgotten."""
    db.execute("DELETE FROM rag_failed_files WHERE workspace=?", (workspace,))
    db.executemany(
        "INSERT INTO rag_failed_files VALUES (?, ?, ?, ?, ?, ?)",
        [(workspace, f.relpath, f.size, f.mtime_ns, f.reason, f.detail) for f in failures],
    )
