"""Merging an FTS5 index into one segment after a large write (every FTS5-backed index).

Each write transaction leaves FTS5 a new segment (its automerge folds them together only
level by level), and a query reads every segment: SciFact's 5,183 documents written in six
batches answered a query in 7.2 ms of CPU, 5.8 ms once merged (``benchmarks/README.md``).
FTS5's ``optimize`` rewrites the whole index, so it runs only after a run that wrote at
least :data:`MERGE_SHARE` of it: the merges' cost stays proportional to what was written.
Rankings do not change (bm25 reads no segment structure); only their speed does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MERGE_SHARE", "merge_segments", "worth_merging"]

#: The share of an index a run must have written (added, replaced, deleted) to merge it.
MERGE_SHARE = 0.125


def worth_merging(written: int, total: int) -> bool:
    """Whether a run that wrote ``written`` of ``total`` items should merge the index."""
    return written > 0 and written >= MERGE_SHARE * total


def merge_segments(db: Any, table: str) -> None:
    """Merge FTS5 table ``table`` (a trusted identifier) into one segment, in a transaction."""
    with db:
        db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
