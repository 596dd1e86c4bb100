"""kairox.retrieval.bm25_pack: a pack of FTS5's own postings ranks as FTS5's bm25() does,
whatever the ranges and blocks of its build, and a broken or unfinished pack is never read."""

from __future__ import annotations

import apsw
import pytest

from kairox.retrieval import bm25_pack, fts5_postings
from kairox.retrieval.bm25_pack import Weights, read_pack, remove_packs, write_pack
from kairox.retrieval.fts5_postings import read_postings, row_ids

TOKENIZE = "porter unicode61 remove_diacritics 2"
# (title, body): repeats, stems shared by several words, an empty title, a tie.
ROWS = [
    ("Cells", "the cell membrane regulates transport of ions in cells"),
    ("", "the cell cycle has checkpoints and the cycle repeats"),
    ("Plants", "the cell wall of plants is rigid"),
    ("", "mitochondria make energy for the cell"),
    ("Energy", "energy energy energy"),
    ("", "ribosomes build proteins; proteins fold"),
    ("", "ribosomes build proteins; proteins fold"),
    ("Café", "naïve diacritics are folded"),
]


@pytest.fixture
def table():
    db = apsw.Connection(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(title, body, tokenize='{TOKENIZE}')")
    db.executemany(
        "INSERT INTO t(rowid, title, body) VALUES (?, ?, ?)",
        [(10 + 3 * n, title, body) for n, (title, body) in enumerate(ROWS)],
    )
    name, *arguments = TOKENIZE.split()
    tokenizer = db.fts5_tokenizer(name, arguments)

    def tokenize(text: str, flags: int = apsw.FTS5_TOKENIZE_DOCUMENT) -> list[str]:
        return tokenizer(text.encode(), flags, None, include_offsets=False, include_colocated=False)

    return db, tokenize


def fts5(db, words, k, weights):
    expression = " OR ".join(f'"{word}"' for word in words)
    return [
        (rowid, -rank)
        for rowid, rank in db.execute(
            "SELECT rowid, bm25(t, ?, ?) AS rank FROM t WHERE t MATCH ? "
            "ORDER BY rank, rowid LIMIT ?",
            (weights.title, weights.body, expression, k),
        )
    ]


def write(folder, db, weights):
    rowids = row_ids(db, "SELECT rowid FROM t ORDER BY rowid")
    return write_pack(folder, rowids, read_postings(db, "t", "body", rowids), weights)


def packed(tmp_path, db, weights):
    pack = read_pack(tmp_path, write(tmp_path, db, weights))
    assert pack is not None
    return pack


QUERIES = [
    ["cells"],
    ["cell", "energy"],
    ["ribosomes", "proteins"],  # two rows tie: the lower rowid first
    ["cafe", "naive"],  # folded diacritics
    ["cells", "cell"],  # one stem twice: FTS5 counts both phrases
    ["the", "rigid"],
    ["absent"],
]


@pytest.mark.parametrize("weights", [Weights(1.0, 1.0), Weights(3.0, 1.0), Weights(0.5, 2.0)])
def test_the_pack_ranks_as_fts5s_bm25(tmp_path, table, weights):
    db, tokenize = table
    pack = packed(tmp_path, db, weights)
    for words in QUERIES:
        tokens = [tokenize(word, apsw.FTS5_TOKENIZE_QUERY)[0] for word in words]
        for k in (1, 3, 20):
            expected = fts5(db, words, k, weights)
            got = pack.top(tokens, k)
            assert [rowid for rowid, _ in got] == [rowid for rowid, _ in expected], words
            assert [score for _, score in got] == pytest.approx(
                [score for _, score in expected], rel=1e-6
            )
    assert pack.frequency("cell") == 4
    assert pack.frequency("absent") == 0


def test_ranges_and_blocks_do_not_change_the_pack(tmp_path, table, monkeypatch):
    db, _ = table
    weights = Weights(3.0, 1.0)
    whole = packed(tmp_path / "whole", db, weights)
    for chunk in (4, 1):  # (1: every term read in parts, by ranges of rows)
        monkeypatch.setattr(fts5_postings, "CHUNK_INSTANCES", chunk)
        monkeypatch.setattr(fts5_postings, "TERM_PART_INSTANCES", chunk)
        monkeypatch.setattr(bm25_pack, "_BLOCK_POSTINGS", 3)
        split = packed(tmp_path / f"split{chunk}", db, weights)
        assert_same(split, whole)


def assert_same(split, whole):
    assert split.terms == whole.terms
    for term, position in whole.terms.items():
        start, end = whole.spans[position]
        other_start, other_end = split.spans[position]
        assert list(split.docs[other_start:other_end]) == list(whole.docs[start:end]), term
        assert list(split.impacts[other_start:other_end]) == list(whole.impacts[start:end])
    assert list(split.rowids) == list(whole.rowids)


def test_sparse_rowids_and_rows_without_tokens_rank_as_fts5(tmp_path, table):
    db, tokenize = table
    # Far apart (positions found by search, not by a table), and rows FTS5 holds no
    # token of: they count in N all the same.
    db.execute("INSERT INTO t(rowid, title, body) VALUES (4000000000, 'Cells', 'cell cell')")
    db.executemany("INSERT INTO t(rowid, title, body) VALUES (?, '', '...')", [(7,), (9,)])
    weights = Weights(3.0, 1.0)
    pack = packed(tmp_path, db, weights)
    assert pack.rows == len(ROWS) + 3
    for words in QUERIES:
        tokens = [tokenize(word, apsw.FTS5_TOKENIZE_QUERY)[0] for word in words]
        expected = fts5(db, words, 20, weights)
        assert [rowid for rowid, _ in pack.top(tokens, 20)] == [r for r, _ in expected], words


def test_an_empty_table_packs_to_nothing_found(tmp_path, table):
    db, _ = table
    db.execute("DELETE FROM t")
    assert packed(tmp_path, db, Weights(1.0, 1.0)).top(["cell"], 5) == []


def test_a_failed_build_leaves_nothing_behind(tmp_path, table, monkeypatch):
    db, _ = table
    monkeypatch.setattr(fts5_postings, "CHUNK_INSTANCES", 4)

    rowids = row_ids(db, "SELECT rowid FROM t ORDER BY rowid")

    def failing():
        for number, postings in enumerate(read_postings(db, "t", "body", rowids)):
            if number == 2:
                raise RuntimeError("reading failed")
            yield postings

    with pytest.raises(RuntimeError, match="reading failed"):
        write_pack(tmp_path / "words", rowids, failing(), Weights(1.0, 1.0))
    assert list((tmp_path / "words").iterdir()) == []


def test_postings_of_rows_the_rowids_lack_are_refused(tmp_path, table):
    db, _ = table
    rowids = row_ids(db, "SELECT rowid FROM t WHERE rowid > 10 ORDER BY rowid")
    with pytest.raises(ValueError, match="rows the documents do not"):
        postings = read_postings(db, "t", "body", row_ids(db, "SELECT rowid FROM t"))
        write_pack(tmp_path / "words", rowids, postings, Weights(1, 1))
    assert list((tmp_path / "words").iterdir()) == []


def test_a_missing_or_inconsistent_pack_is_not_read(tmp_path, table):
    db, _ = table
    token = write(tmp_path, db, Weights(1.0, 1.0))
    assert read_pack(tmp_path, "0123456789abcdef") is None
    terms = tmp_path / f"{token}.terms.txt"
    terms.write_text(terms.read_text() + "\nextra")  # one term more than spans
    assert read_pack(tmp_path, token) is None
    (tmp_path / f"{token}.docs.npy").write_bytes(b"not an array")
    assert read_pack(tmp_path, token) is None


def test_remove_packs_keeps_only_the_one_named(tmp_path, table):
    db, _ = table
    tokens = [write(tmp_path, db, Weights(1, 1)) for _ in range(2)]
    remove_packs(tmp_path, keep=tokens[1])
    assert read_pack(tmp_path, tokens[0]) is None
    assert read_pack(tmp_path, tokens[1]) is not None
    remove_packs(tmp_path)
    assert list(tmp_path.iterdir()) == []
