"""Merging an FTS5 index into one segment after a large write (every FTS5-backed index).

Each write transaction leaves FTS5 a new segment (its automerge folds them together only
level by level), and a query reads every segment: SciFact's 5,183 documents written in six
batches answered a query in 7.2 ms of CPU, 5.8 ms once merged (``benchmarks/README.md``).
FTS5's ``optimize`` rewrites the whole index, so it runs only after a run that wrote at
least :data:`MERGE_SHARE` of it: the merges' cost stays proportional to what was written.
Rankings do not change (bm25 reads no segment structure); only their speed does.

A bulk write that ends in that merge need not merge as it goes: with FTS5's automerge
off (:func:`defer_merges`) 100k SciFact-built passages were written and merged in 11.2 s
of CPU instead of 12.6 (500 a transaction), the final merge costing the same. FTS5's
crisis merge still bounds the segments meanwhile, at :data:`DEFERRED_CRISIS_MERGE` on a
level rather than its 16: each of its merges rewrites what the final one rewrites again
(10k SciFact-built passages, about 100 segments: none before the final merge, ingest CPU
-6 %; 100k: -7 % against 16, +1.4 % against 64), and a search meanwhile (the words pack
is stale until the run ends) reads at most that many segments a level.
:func:`resume_merges` puts both back.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AUTOMERGE",
    "CRISIS_MERGE",
    "DEFERRED_CRISIS_MERGE",
    "MERGE_SHARE",
    "defer_merges",
    "merge_segments",
    "merges_deferred",
    "resume_merges",
    "worth_merging",
]

#: The share of an index a run must have written (added, replaced, deleted) to merge it.
MERGE_SHARE = 0.125
#: FTS5's own automerge setting: segments of a level merged once this many are there.
AUTOMERGE = 4
#: FTS5's own crisis merge: a level's segments merged at once when this many are there.
CRISIS_MERGE = 16
#: The crisis merge while merges are deferred (a merge of this many segments holds one
#: page of each; FTS5 allows 2,000 segments in all).
DEFERRED_CRISIS_MERGE = 128


def worth_merging(written: int, total: int) -> bool:
    """Whether a run that wrote ``written`` of ``total`` items should merge the index."""
    return written > 0 and written >= MERGE_SHARE * total


def merge_segments(db: Any, table: str) -> None:
    """Merge FTS5 table ``table`` (a trusted identifier) into one segment, in a transaction."""
    with db:
        db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


def _set(db: Any, table: str, option: str, segments: int) -> None:
    db.execute(f"INSERT INTO {table}({table}, rank) VALUES (?, ?)", (option, segments))


def defer_merges(db: Any, table: str) -> None:
    """Switch FTS5 table ``table``'s automerge off and raise its crisis merge to
    :data:`DEFERRED_CRISIS_MERGE`, in the caller's transaction (settings of the table:
    they last until :func:`resume_merges`)."""
    _set(db, table, "automerge", 0)
    _set(db, table, "crisismerge", DEFERRED_CRISIS_MERGE)


def merges_deferred(db: Any, table: str) -> bool:
    """Whether ``table``'s automerge is off (a run that deferred them was cut short)."""
    row = db.execute(f"SELECT v FROM {table}_config WHERE k = 'automerge'").fetchone()
    return row is not None and row[0] == 0


def resume_merges(db: Any, table: str) -> None:
    """Put FTS5's automerge and crisis merge back on ``table``, in a transaction."""
    with db:
        _set(db, table, "automerge", AUTOMERGE)
        _set(db, table, "crisismerge", CRISIS_MERGE)
