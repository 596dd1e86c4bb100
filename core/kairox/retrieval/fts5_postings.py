"""An FTS5 table's postings read back from its own index, for the BM25 pack.

FTS5 already tokenized every row when it was written; its ``fts5vocab`` tables hand those
tokens back (``row``: each term and how many instances it has; ``instance``: one row per
instance, by term, then rowid, then column). Reading them costs a fifth of tokenizing the
text again in Python (10k SciFact-built passages: 0.06 s to walk the instances, against
0.32 s for the tokenizer's calls alone) and gives exactly the terms FTS5 ranks by.

Rows reach Python as one comma-separated string of ``rowid * 2 + column`` per range of
terms (SQLite builds it, numpy parses it), not as a Python object per instance; a range
holds about :data:`CHUNK_INSTANCES` instances, so memory does not grow with the table
(a table of at most :data:`WHOLE_INSTANCES` is read at once: bounding a range costs a
check on each of its instances).
Each range is checked against the ``row`` counts and for its order, so a reply that is not
what this reading expects is a ``ValueError`` (the caller then keeps to FTS5), never a
wrong pack.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CHUNK_INSTANCES", "WHOLE_INSTANCES", "Postings", "read_postings", "row_ids"]

#: Instances read per range of terms (1M passages of SciFact-built text: ~226M in all):
#: at 100k passages, 250k a range took no more CPU than 4M, and 45 MB against 280 MB.
CHUNK_INSTANCES = 250_000
#: A term with more instances is read in parts of at most this many (about 100 MB). FTS5
#: cannot seek to a row here, so each part walks all of the term's instances: parts of
#: 250k made 1M passages' build as slow as tokenizing again (the commonest terms, 9M
#: instances each, walked 38 times).
TERM_PART_INSTANCES = 2_000_000
#: A table of at most this many instances is read in one statement (its text and its
#: int64 values: about 55 MB at most, held while the ranges are parsed).
WHOLE_INSTANCES = 4_000_000


@dataclass(frozen=True)
class Postings:
    """The postings of a range of terms, in term order then rowid order.

    ``counts[i]`` postings belong to ``terms[i]``; each posting is one row holding the term,
    with how often it holds it in the first (title) and second (body) column.
    """

    terms: list[str]
    counts: np.ndarray
    rowids: np.ndarray
    title_tf: np.ndarray
    body_tf: np.ndarray


def row_ids(db: Any, sql: str) -> np.ndarray:
    """The rowids ``sql`` selects (one column, ascending), as int64."""
    text = db.execute(f"SELECT group_concat(rowid, ',') FROM ({sql})").fetchone()[0]
    ids = _integers(text)
    if len(ids) > 1 and bool(np.any(ids[1:] <= ids[:-1])):
        raise ValueError("rowids not in ascending order")
    return ids


def _integers(text: str | None) -> np.ndarray:
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)


def read_postings(
    db: Any, table: str, second_column: str, rowids: np.ndarray, *, schema: str = "main"
) -> Iterator[Postings]:
    """The postings of FTS5 table ``table`` (a trusted identifier) of two columns, the
    second named ``second_column``, whose rows are ``rowids`` (:func:`row_ids`), a range
    of terms at a time; run inside one read transaction so the ranges agree.

    A term with more instances than a range holds comes alone; one with more than
    :data:`TERM_PART_INSTANCES` in several parts, by ranges of rows, each a
    :class:`Postings` of that one term (its later parts continue it). A table of at most
    :data:`WHOLE_INSTANCES` instances is read in one statement and then split into the
    same ranges.

    :raises ValueError: when the instances read are not the ones the counts announce, or
        not in (term, rowid, column) order.
    """
    rows, instances = _vocab_tables(db, table, schema)
    vocabulary = db.execute(f"SELECT term, cnt FROM {rows}")
    held: list[tuple[str, int]] = []
    total = 0
    for term, count in vocabulary:
        held.append((term, count))
        total += count
        if total > WHOLE_INSTANCES or count > TERM_PART_INSTANCES:
            break
    else:
        yield from _whole(db, instances, second_column, held)
        return
    for terms, counts in _ranges(itertools.chain(held, vocabulary)):
        if counts[0] > TERM_PART_INSTANCES:
            yield from _parts(db, instances, second_column, terms[0], counts[0], rowids)
        else:
            yield _range(db, instances, second_column, terms, counts)


def _ranges(vocabulary: Iterable[tuple[str, int]]) -> Iterator[tuple[list[str], list[int]]]:
    """``(term, instances)`` in term order, as ranges of terms of at most
    :data:`CHUNK_INSTANCES` instances (a term with more comes alone)."""
    terms: list[str] = []
    counts: list[int] = []
    held = 0
    for term, count in vocabulary:
        if held and held + count > CHUNK_INSTANCES:
            yield terms, counts
            terms, counts, held = [], [], 0
        terms.append(term)
        counts.append(count)
        held += count
    if terms:
        yield terms, counts


def _whole(
    db: Any, instances: str, second_column: str, vocabulary: list[tuple[str, int]]
) -> Iterator[Postings]:
    """Every instance in one statement (a range's bounds would be checked on every
    instance: 10k passages read in 0.17 s instead of 0.24), parsed by the same ranges."""
    sql = f"SELECT group_concat(doc * 2 + (col = ?), ',') FROM {instances}"
    values = _integers(db.execute(sql, (second_column,)).fetchone()[0])
    read = 0
    for terms, counts in _ranges(vocabulary):
        end = read + sum(counts)
        yield _postings(terms, np.asarray(counts, dtype=np.int64), values[read:end])
        read = end
    if read != len(values):
        raise ValueError("the table holds instances its vocabulary does not count")


def _vocab_tables(db: Any, table: str, schema: str) -> tuple[str, str]:
    names = []
    for kind in ("row", "instance"):
        name = f"temp.kairox_{table}_{kind}"
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5vocab({schema}, {table}, {kind})"
        )
        names.append(name)
    return names[0], names[1]


def _range(
    db: Any, instances: str, second_column: str, terms: list[str], counts: list[int]
) -> Postings:
    # (BETWEEN reads each instance's term once where >= AND <= read it twice: 10 % of
    # the reading at 10k passages)
    sql = (
        f"SELECT group_concat(doc * 2 + (col = ?), ',') FROM {instances} WHERE term BETWEEN ? AND ?"
    )
    values = _integers(db.execute(sql, (second_column, terms[0], terms[-1])).fetchone()[0])
    return _postings(terms, np.asarray(counts, dtype=np.int64), values)


def _parts(
    db: Any, instances: str, second_column: str, term: str, count: int, rowids: np.ndarray
) -> Iterator[Postings]:
    """A term too common to be read at once, by ranges of rows of about
    :data:`TERM_PART_INSTANCES` instances each (at 100k passages no term is that common)."""
    parts = -(-count // TERM_PART_INSTANCES)
    cuts = [int(rowids[n * len(rowids) // parts]) for n in range(1, parts)]
    sql = (
        f"SELECT group_concat(doc * 2 + (col = ?), ',') FROM {instances} "
        "WHERE term = ? AND doc >= ? AND doc < ?"
    )
    lows = [-(2**63), *cuts]
    highs = [*cuts, 2**63 - 1]
    read = 0
    for low, high in zip(lows, highs, strict=True):
        values = _integers(db.execute(sql, (second_column, term, low, high)).fetchone()[0])
        read += len(values)
        yield _postings([term], np.asarray([len(values)], dtype=np.int64), values)
    if read != count:
        raise ValueError(f"term {term!r}: instances and counts differ")


def _postings(terms: list[str], per_term: np.ndarray, values: np.ndarray) -> Postings:
    """The postings in ``values`` (``rowid * 2 + column`` per instance, ``per_term[i]``
    of them for ``terms[i]``)."""
    if len(values) != int(per_term.sum()):
        raise ValueError(f"terms {terms[0]!r}..{terms[-1]!r}: instances and counts differ")
    if not len(values):
        empty = np.zeros(0, dtype=np.int64)
        return Postings(terms, np.zeros(len(terms), np.int64), empty, empty, empty)
    docs = values >> 1
    term_starts = np.cumsum(per_term) - per_term
    new_term = np.zeros(len(values), dtype=bool)
    new_term[term_starts] = True
    step = np.diff(docs)
    if bool(np.any((step < 0) & ~new_term[1:])):
        raise ValueError(f"terms {terms[0]!r}..{terms[-1]!r}: instances out of rowid order")
    # One posting per (term, row): a run of its instances.
    new_term[1:] |= step != 0
    starts = np.flatnonzero(new_term)
    body_tf = np.add.reduceat(values & 1, starts)
    first_postings = np.searchsorted(starts, term_starts)
    return Postings(
        terms=terms,
        counts=np.diff(first_postings, append=len(starts)),
        rowids=docs[starts],
        title_tf=np.diff(starts, append=len(values)) - body_tf,
        body_tf=body_tf,
    )
