"""Leaving out of an FTS5 query the terms that its ``bm25()`` scores as nothing.

FTS5's ``bm25()`` gives a term held by at least half of the rows an IDF of 1e-6 (its
``log((N - n + 0.5) / (n + 0.5))`` would be zero or less), so such a term adds at most
about 1e-5 to a row's score; yet an OR query must still visit and rank every row it
holds. On SciFact almost every query has a few ("of", "the", "in"): its OR matches 5,180
of 5,183 abstracts, and ranking them is most of the query's cost. Asked without those
terms, FTS5 ranks what the informative ones match (3,128 rows at the median), and the
top k is the same except where two scores differ by less than what the left-out terms
add. When the informative terms find fewer than k rows the caller runs the whole query,
so the rows that match only common terms are still there to fill the list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["CommonTerms"]

Row = TypeVar("Row")

# Terms whose row counts are kept; a query's terms are counted once, then looked up.
_KEPT = 65_536


class CommonTerms:
    """Row counts of one FTS5 table's terms, cached until the database changes.

    :param table: the FTS5 table's name (trusted: a name from the code, not a user).
    """

    def __init__(self, table: str) -> None:
        self._table = table
        self._counts: dict[str, int] = {}
        self._rows = 0
        self._version: tuple[int, int] | None = None

    def ranked(
        self, db: Any, terms: Sequence[str], k: int, rank: Callable[[str], list[Row]]
    ) -> list[Row]:
        """``rank(expression)`` (the caller's top-``k`` query) for the OR of the
        informative ``terms`` when that finds ``k`` rows, else for the OR of them all."""
        informative = self.informative(db, terms)
        if informative is not None:
            rows = rank(" OR ".join(informative))
            if len(rows) >= k:
                return rows
        return rank(" OR ".join(terms))

    def informative(self, db: Any, terms: Sequence[str]) -> list[str] | None:
        """The quoted ``terms`` held by fewer than half of the rows, or ``None`` when
        leaving the others out would change nothing (none is common, or all are).

        ``db`` is an apsw or sqlite3 connection the caller holds (its lock, if shared).
        """
        self._check_version(db)
        if not self._rows:
            return None
        kept = [term for term in terms if 2 * self._count(db, term) < self._rows]
        return kept if kept and len(kept) < len(terms) else None

    def _check_version(self, db: Any) -> None:
        # data_version moves when another connection commits; total_changes when we do.
        changes = db.total_changes  # a method in apsw, an attribute in sqlite3
        version = (
            db.execute("PRAGMA data_version").fetchone()[0],
            changes() if callable(changes) else changes,
        )
        if version != self._version:
            self._counts.clear()
            self._rows = _row_count(db, self._table)
            self._version = version

    def _count(self, db: Any, term: str) -> int:
        count = self._counts.get(term)
        if count is None:
            if len(self._counts) >= _KEPT:
                self._counts.clear()
            count = db.execute(
                f"SELECT count(*) FROM {self._table} WHERE {self._table} MATCH ?", (term,)
            ).fetchone()[0]
            self._counts[term] = count
        return count


def _row_count(db: Any, table: str) -> int:
    """The rows FTS5's ``bm25()`` counts (its N), read from the table's averages record.

    ``count(*)`` would give the same number, but over an external-content table it reads
    the whole content table: 5-14 ms on this repository's workspace index, on every new
    process's first search.
    """
    found = db.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    return 0 if found is None else _varint(bytes(found[0]))


def _varint(data: bytes) -> int:
    """The SQLite varint at the start of ``data`` (the averages record's first field)."""
    value = 0
    for position, byte in enumerate(data[:9]):
        if position == 8:  # a ninth byte carries all 8 bits
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value
