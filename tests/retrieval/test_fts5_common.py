"""kairox.retrieval.fts5_common: terms bm25() scores as nothing are left out of a query
only where the top k stays what the whole query gives."""

from __future__ import annotations

import pytest

from kairox.default_plugins.sqlite_fts import SqliteFtsIndex
from kairox.retrieval import Document
from kairox.retrieval.fts5 import match_terms
from kairox.retrieval.fts5_common import CommonTerms

# "the" is in every document, "cell" in four of ten, the rest in one each.
TEXTS = [
    "the cell membrane regulates transport",
    "the cell cycle has checkpoints",
    "the cell wall of plants is rigid",
    "the cell nucleus holds chromosomes",
    "the mitochondria make energy",
    "the ribosome builds proteins",
    "the golgi apparatus packages proteins",
    "the lysosome digests waste",
    "the enzyme speeds reactions",
    "the gene encodes a protein",
]


@pytest.fixture
def index(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    index.upsert(Document(id=f"d{i}", text=text) for i, text in enumerate(TEXTS))
    yield index
    index.close()


def whole_query(index: SqliteFtsIndex, text: str, k: int) -> list[tuple[str, float]]:
    """The ranking with every term (no term left out), straight from FTS5."""
    expression = " OR ".join(match_terms(text))
    rows = index._db.execute(
        "SELECT d.id, bm25(documents_fts, 1.0, 1.0) AS rank FROM documents_fts "
        "JOIN documents d ON d.rowid = documents_fts.rowid WHERE documents_fts MATCH ? "
        "ORDER BY rank, d.rowid LIMIT ?",
        (expression, k),
    ).fetchall()
    return [(doc_id, -rank) for doc_id, rank in rows]


def test_only_terms_held_by_half_the_rows_or_more_are_left_out(index) -> None:
    common = CommonTerms("documents_fts")
    assert common.informative(index._db, match_terms("the cell nucleus")) == [
        '"cell"',
        '"nucleus"',
    ]
    assert common.informative(index._db, match_terms("cell nucleus")) is None  # none common
    assert common.informative(index._db, match_terms("the")) is None  # nothing else left


def test_counts_follow_writes(index) -> None:
    common = CommonTerms("documents_fts")
    assert common.informative(index._db, match_terms("the cell")) == ['"cell"']
    index.upsert(Document(id=f"x{i}", text="a cell among cells") for i in range(4))
    # "cell" is now in 8 of 14 documents: as common as "the".
    assert common.informative(index._db, match_terms("the cell nucleus")) == ['"nucleus"']


def test_the_top_k_is_the_whole_querys_when_the_rest_fill_it(index) -> None:
    hits = index.search("the cell", 3)
    expected = whole_query(index, "the cell", 3)
    assert [h[0] for h in hits] == [doc_id for doc_id, _ in expected]
    for hit, (_, score) in zip(hits, expected, strict=True):
        assert hit[5] == pytest.approx(score, abs=1e-4)


def test_rows_with_only_common_terms_still_fill_a_short_list(index) -> None:
    # "cell" alone finds 4; k=6 needs two documents that only hold "the".
    hits = index.search("the cell", 6)
    assert [h[0] for h in hits] == [doc_id for doc_id, _ in whole_query(index, "the cell", 6)]
    assert len(hits) == 6


def test_the_row_count_is_the_one_bm25_uses(tmp_path) -> None:
    index = SqliteFtsIndex(tmp_path / "many.db", create=True)
    index.upsert(Document(id=f"d{i}", text=f"note {i}") for i in range(300))  # 2-byte varint
    index.delete([f"d{i}" for i in range(10)])
    common = CommonTerms("documents_fts")
    common.informative(index._db, match_terms("note 5"))
    assert (
        common._rows == 290 == index._db.execute("SELECT count(*) FROM documents_fts").fetchone()[0]
    )
    index.close()
