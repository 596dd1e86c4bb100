"""kairox.retrieval.fts5_postings: the postings read back from an FTS5 table are those of
its tokenizer's tokens, row by row and column by column, whatever the ranges read."""

from __future__ import annotations

from collections import Counter

import apsw
import numpy as np
import pytest

from kairox.retrieval import fts5_postings
from kairox.retrieval.fts5_postings import read_postings, row_ids

TOKENIZE = "porter unicode61 remove_diacritics 2"
ROWS = {
    3: ("Cells", "the cell membrane regulates transport of ions in cells"),
    4: ("", "the cell cycle has checkpoints and the cycle repeats"),
    9: ("Énergie cell", "energy energy énergie; CELL walls"),
    12: ("", ""),
    40: ("Plants", "the cell wall of plants is rigid"),
}


@pytest.fixture
def db():
    db = apsw.Connection(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(title, body, tokenize='{TOKENIZE}')")
    db.executemany(
        "INSERT INTO t(rowid, title, body) VALUES (?, ?, ?)",
        [(rowid, title, body) for rowid, (title, body) in ROWS.items()],
    )
    return db


def expected(db) -> dict[tuple[str, int], tuple[int, int]]:
    """``(term, rowid) -> (count in title, count in body)`` by the tokenizer itself."""
    name, *arguments = TOKENIZE.split()
    tokenizer = db.fts5_tokenizer(name, arguments)
    counts: dict[tuple[str, int], list[int]] = {}
    for rowid, columns in ROWS.items():
        for column, text in enumerate(columns):
            tokens = tokenizer(
                text.encode(),
                apsw.FTS5_TOKENIZE_DOCUMENT,
                None,
                include_offsets=False,
                include_colocated=False,
            )
            for term, count in Counter(tokens).items():
                counts.setdefault((term, rowid), [0, 0])[column] += count
    return {key: (title, body) for key, (title, body) in counts.items()}


def read(db) -> tuple[list[str], dict[tuple[str, int], tuple[int, int]]]:
    terms: list[str] = []
    found: dict[tuple[str, int], tuple[int, int]] = {}
    rowids = row_ids(db, "SELECT rowid FROM t ORDER BY rowid")
    for postings in read_postings(db, "t", "body", rowids):
        assert len(postings.counts) == len(postings.terms)
        term_of = np.repeat(np.arange(len(postings.terms)), postings.counts)
        for index, rowid, title, body in zip(
            term_of, postings.rowids, postings.title_tf, postings.body_tf, strict=True
        ):
            found[(postings.terms[index], int(rowid))] = (int(title), int(body))
        # A common term read in parts comes once per part.
        continued = bool(terms) and postings.terms[0] == terms[-1]
        terms.extend(postings.terms[1:] if continued else postings.terms)
    return terms, found


# chunk 1: every term of more than one instance read in parts, by ranges of rows;
# whole 0: every range read by its own statement, 12: the first ranges held back, then so.
@pytest.mark.parametrize("whole", [fts5_postings.WHOLE_INSTANCES, 0, 12])
@pytest.mark.parametrize("chunk", [fts5_postings.CHUNK_INSTANCES, 1, 2, 5])
def test_postings_are_the_tokenizers_counts_per_row_and_column(db, chunk, whole, monkeypatch):
    monkeypatch.setattr(fts5_postings, "CHUNK_INSTANCES", chunk)
    monkeypatch.setattr(fts5_postings, "TERM_PART_INSTANCES", chunk)
    monkeypatch.setattr(fts5_postings, "WHOLE_INSTANCES", whole)
    terms, found = read(db)
    assert found == expected(db)
    assert terms == sorted(terms, key=str.encode)  # FTS5's byte order, each term once
    assert len(set(terms)) == len(terms)


def test_row_ids_are_every_row_ascending(db):
    assert list(row_ids(db, "SELECT rowid FROM t ORDER BY rowid")) == sorted(ROWS)
    db.execute("DELETE FROM t")
    assert len(row_ids(db, "SELECT rowid FROM t ORDER BY rowid")) == 0
    assert list(read_postings(db, "t", "body", np.zeros(0, np.int64))) == []


def test_rowids_out_of_order_are_refused(db):
    with pytest.raises(ValueError, match="ascending"):
        row_ids(db, "SELECT rowid FROM t ORDER BY rowid DESC")


def test_a_small_table_read_at_once_comes_in_the_same_ranges(db, monkeypatch):
    monkeypatch.setattr(fts5_postings, "CHUNK_INSTANCES", 3)
    statements: list[str] = []
    db.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
    _, found = read(db)
    db.exec_trace = None
    assert found == expected(db)
    reads = [sql for sql in statements if "group_concat(doc" in sql]
    assert len(reads) == 1 and "BETWEEN" not in reads[0]  # one statement, no bounds
    monkeypatch.setattr(fts5_postings, "WHOLE_INSTANCES", 0)
    ranged = [list(postings.terms) for postings in read_postings(db, "t", "body", _rowids(db))]
    monkeypatch.setattr(fts5_postings, "WHOLE_INSTANCES", 10**6)
    whole = [list(postings.terms) for postings in read_postings(db, "t", "body", _rowids(db))]
    assert whole == ranged and len(whole) > 1


def _rowids(db) -> np.ndarray:
    return row_ids(db, "SELECT rowid FROM t ORDER BY rowid")
