"""The built-in ``sqlite-fts`` knowledge base: conformance, bm25 orientation, updates, errors."""

from __future__ import annotations

import itertools

import pytest

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.sqlite_fts import SqliteFtsError, SqliteFtsIndex
from kairox.retrieval import Document, IngestableSource, Query, sqlite_engine
from kairox.retrieval.fts5 import match_expression
from kairox.retrieval.fts5_merge import CRISIS_MERGE, DEFERRED_CRISIS_MERGE
from kairox.testing import (
    CORPUS,
    FILTER_CORPUS,
    FilterConformance,
    SourceConformance,
    build_source,
    run,
)


def build(tmp_path, filename="kb.db", **options):
    return build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path=filename, **options)


@pytest.fixture
def filled(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    index.upsert(
        Document(d.id, d.text, title=d.title, uri=d.uri, metadata=d.metadata) for d in CORPUS
    )
    yield index
    index.close()


@pytest.fixture(scope="module")
def filter_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("filters")
    index = SqliteFtsIndex(folder / "kb.db", create=True)
    index.upsert(
        Document(d.id, d.text, title=d.title, uri=d.uri, metadata=d.metadata) for d in FILTER_CORPUS
    )
    index.close()
    return folder


class TestSqliteFtsFilters(FilterConformance):
    @pytest.fixture
    def filter_source(self, filter_folder):
        return build(filter_folder)


class TestSqliteFtsConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 300, 200

    @pytest.fixture
    def conformance_source(self, filled, tmp_path):
        return build(tmp_path)

    @pytest.fixture
    def broken_source(self, tmp_path):
        return build(tmp_path, "missing.db")


def test_scores_are_negated_bm25_so_higher_is_better(filled, tmp_path):
    hits = run(build(tmp_path).retrieve(Query("saturn rings ice", k=3)))
    assert hits[0].id == "astro-1"
    assert hits[0].score > 0
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_update_and_delete_by_id(filled, tmp_path):
    source = build(tmp_path)
    filled.upsert([Document("astro-1", "Jupiter has a great red spot.", title="Jupiter")])
    assert filled.count() == len(CORPUS)
    assert [h.id for h in run(source.retrieve(Query("saturn rings")))] == []
    assert [h.id for h in run(source.retrieve(Query("jupiter")))] == ["astro-1"]
    assert filled.delete(["astro-1"]) == 1
    assert run(source.retrieve(Query("jupiter"))) == []


def test_title_weight_changes_the_ranking(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    index.upsert(
        [
            Document("in-title", "unrelated words here and more words", title="volcano"),
            Document("in-body", "a volcano volcano erupts near the volcano", title="news"),
        ]
    )
    body_first = run(build(tmp_path, title_weight=1.0).retrieve(Query("volcano")))
    title_first = run(build(tmp_path, title_weight=20.0).retrieve(Query("volcano")))
    assert body_first[0].id == "in-body"
    assert title_first[0].id == "in-title"


def _segments(index: SqliteFtsIndex) -> int:
    # FTS5 keys a segment's pages by segment id << 37 (ids up to 10 are its own records).
    rows = index._db.execute(
        "SELECT count(DISTINCT id >> 37) FROM documents_fts_data WHERE id > 10"
    )
    return rows.fetchone()[0]


def _batches(count, size):
    words = ["saturn", "rings", "ice", "volcano", "lava", "ocean", "tide", "comet", "dust"]
    documents = [
        Document(f"d{i}", f"{words[i % 9]} {words[(i * 4) % 9]} and {words[(i * 7) % 9]} {i}")
        for i in range(count)
    ]
    return [documents[start : start + size] for start in range(0, count, size)]


def test_finish_merges_a_large_runs_segments_into_one_with_rankings_unchanged(tmp_path):
    source = build(tmp_path, words_pack=False)  # FTS5 before and after, to the last bit
    for batch in _batches(40, 8):
        source.upsert(batch)  # a transaction each: FTS5 keeps several segments
    index = source._open()
    assert _segments(index) > 1
    queries = [Query(text, k=50) for text in ("saturn ice", "lava tide comet", "dust 7")]
    before = [[(h.id, h.score) for h in run(source.retrieve(q))] for q in queries]
    source.finish()
    assert _segments(index) == 1
    assert [[(h.id, h.score) for h in run(source.retrieve(q))] for q in queries] == before
    assert all(before)


def test_compact_waits_until_a_share_of_the_documents_was_written(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    assert index.compact() is False  # nothing written
    (first,) = _batches(40, 40)
    index.upsert(first)
    assert index.compact() is True
    assert index.compact() is False  # nothing written since
    index.upsert(first[:4])  # 4 of 40: under an eighth
    segments = _segments(index)
    assert segments > 1
    assert index.compact() is False
    assert _segments(index) == segments
    index.delete([d.id for d in first[4:6]])  # 6 writes of 38 documents: an eighth and more
    assert index.compact() is True
    assert _segments(index) == 1
    index.close()


def _fts5_setting(index: SqliteFtsIndex, name: str):
    row = index._db.execute("SELECT v FROM documents_fts_config WHERE k = ?", (name,))
    return (row.fetchone() or [None])[0]


def _automerge(index: SqliteFtsIndex):
    return _fts5_setting(index, "automerge")


def test_a_bulk_run_leaves_fts5s_merging_to_compact(tmp_path):
    indexes = {bulk: SqliteFtsIndex(tmp_path / f"{bulk}.db", create=True) for bulk in (0, 1)}
    for bulk, index in indexes.items():
        for batch in _batches(90, 10):
            index.upsert(batch, bulk=bool(bulk))
    assert _automerge(indexes[1]) == 0
    assert _automerge(indexes[0]) is None  # FTS5's default (4)
    # Fewer, larger crisis merges meanwhile: the final merge rewrites everything anyway.
    assert _fts5_setting(indexes[1], "crisismerge") == DEFERRED_CRISIS_MERGE
    assert _fts5_setting(indexes[0], "crisismerge") is None  # FTS5's default (16)
    # Without automerge, nothing folded the batches' segments together.
    assert _segments(indexes[1]) > _segments(indexes[0])
    for index in indexes.values():
        assert index.compact() is True
        assert _segments(index) == 1
    assert _automerge(indexes[1]) == 4
    assert _fts5_setting(indexes[1], "crisismerge") == CRISIS_MERGE == 16
    for index in indexes.values():
        index.close()


def test_compact_resumes_merges_a_run_cut_short_deferred(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    (batch,) = _batches(40, 40)
    index.upsert(batch, bulk=True)
    index.close()  # cut short: no compact
    reopened = SqliteFtsIndex(tmp_path / "kb.db")
    assert _automerge(reopened) == 0
    assert reopened.compact() is False  # nothing written by this one...
    assert _automerge(reopened) == 4  # ...but FTS5 merges again
    assert _fts5_setting(reopened, "crisismerge") == CRISIS_MERGE
    reopened.close()


def test_match_expression_quotes_every_term():
    assert (
        match_expression('title:"saturn" AND -rings*') == '"title" OR "saturn" OR "and" OR "rings"'
    )
    assert match_expression(" -- ") is None


def test_missing_index_says_how_to_fix(tmp_path):
    with pytest.raises(SqliteFtsError, match="kairox kb ingest papers"):
        run(build(tmp_path, "nope.db").retrieve(Query("x")))


def test_not_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SqliteFtsError, match="not a readable SQLite FTS index"):
        SqliteFtsIndex(tmp_path / "junk.db")


def test_bad_filter_value_is_a_clear_error(filled, tmp_path):
    with pytest.raises(ValueError, match=r"filter\.topic.*unknown operator"):
        run(build(tmp_path).retrieve(Query("water", filters={"topic": {"a": 1}})))


def test_relative_path_resolves_against_the_config_folder(tmp_path):
    assert build(tmp_path, "sub/kb.db").path == tmp_path / "sub" / "kb.db"


def test_opening_an_existing_index_writes_nothing(filled, tmp_path):
    # Another connection holds the write lock (as `kairox kb ingest` does mid-batch): a
    # reader must open and search at once, not wait for the lock and then fail.
    writer = sqlite_engine.connect(tmp_path / "kb.db")
    writer.set_busy_timeout(0)
    writer.execute("BEGIN IMMEDIATE")
    try:
        reader = SqliteFtsIndex(tmp_path / "kb.db")
        assert reader.search("saturn rings", 1)[0][0] == "astro-1"
        reader.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_file_locked_past_the_timeout_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_engine, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite_engine.connect(tmp_path / "kb.db", create=True)
    holder.execute("BEGIN EXCLUSIVE; CREATE TABLE t(x)")  # a new file, not yet in WAL mode
    try:
        with pytest.raises(SqliteFtsError, match="stayed locked by another connection"):
            SqliteFtsIndex(tmp_path / "kb.db")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    index = SqliteFtsIndex(tmp_path / "kb.db")  # usable once the lock is gone
    assert index.count() == 0
    index.close()


def test_indexes_opened_together_on_a_new_file_all_open(tmp_path, all_at_once):
    for attempt in range(10):
        path = tmp_path / f"new-{attempt}.db"
        indexes = all_at_once(*[lambda path=path: SqliteFtsIndex(path, create=True)] * 4)
        try:
            assert [index.count() for index in indexes] == [0, 0, 0, 0]
        finally:
            for index in indexes:
                index.close()


def test_first_queries_from_threads_at_once_all_answer(filled, tmp_path, all_at_once):
    for _ in range(10):
        source = build(tmp_path)
        hits = all_at_once(*[lambda s=source: run(s.retrieve(Query("saturn rings")))] * 8)
        assert [hit_list[0].id for hit_list in hits] == ["astro-1"] * 8


def test_threads_opening_a_source_at_once_share_one_index(filled, tmp_path, all_at_once):
    for _ in range(10):
        source = build(tmp_path)
        opened = all_at_once(*[source._open] * 8)
        assert len({id(index) for index in opened}) == 1
        opened[0].close()


@pytest.fixture(scope="module")
def shared_source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fts")
    index = SqliteFtsIndex(folder / "kb.db", create=True)
    index.upsert(Document(d.id, d.text, title=d.title, metadata=d.metadata) for d in CORPUS)
    return build(folder)


def test_source_is_ingestable_and_creates_its_file(tmp_path):
    source = build(tmp_path, "new/kb.db")
    assert isinstance(source, IngestableSource)
    assert source.fingerprints() == {}
    doc = Document("a", "alpha text", title="A")
    source.upsert([doc])
    assert source.fingerprints() == {"a": doc.fingerprint}
    assert [h.id for h in run(source.retrieve(Query("alpha")))] == ["a"]
    changed = Document("a", "alpha text, revised", title="A")
    source.upsert([changed])
    assert source.fingerprints() == {"a": changed.fingerprint} != {"a": doc.fingerprint}
    source.delete(["a"])
    assert source.fingerprints() == {}
