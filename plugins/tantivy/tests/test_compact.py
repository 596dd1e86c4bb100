"""compact(): many small segments become one, with the same hits, scores and filters."""

from __future__ import annotations

from kairox_tantivy import TantivyIndex
from kairox_tantivy.compact import segment_sizes, worth_compacting

from kairox.retrieval import Document, Query
from kairox.testing import run


def batches(count: int, size: int) -> list[list[Document]]:
    return [
        [
            Document(f"d{b}-{i}", f"word{i} shared text batch{b}", metadata={"n": i, "b": b})
            for i in range(size)
        ]
        for b in range(count)
    ]


def test_small_segments_become_one_with_the_same_results(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    for batch in batches(6, 40):
        index.upsert(batch)
    index.delete(["d0-0"])
    assert len(segment_sizes(index.path)) > 1 and worth_compacting(index.path)
    before = [(h.id, h.score) for h in index.search("shared word3 batch2", 300)]
    fingerprints = index.fingerprints()
    assert index.compact() is True
    assert segment_sizes(index.path) == [239] and index._searcher().num_segments == 1
    after = [(h.id, h.score) for h in index.search("shared word3 batch2", 300)]
    # The deleted document no longer counts in BM25's statistics, so scores may move
    # in the last digits; the ranking and the documents do not.
    assert [i for i, _ in after] == [i for i, _ in before]
    assert all(abs(a - b) < 0.05 for (_, a), (_, b) in zip(after, before, strict=True))
    assert index.fingerprints() == fingerprints and index.count() == 239
    hits = index.search("shared", 300, {"b": 3, "n": {"$gte": 38}})
    assert sorted(h.id for h in hits) == ["d3-38", "d3-39"]
    assert index.compact() is False  # one segment: nothing to do


def test_one_large_segment_and_a_small_one_are_left_alone(tmp_path):
    index = TantivyIndex(tmp_path / "index", create=True)
    for batch in batches(4, 100):
        index.upsert(batch)
    index.compact()
    index.upsert([Document("late", "one more shared text")])
    assert sorted(segment_sizes(index.path)) == [1, 400]
    assert index.compact() is False  # rewriting 401 documents for 1 would not pay


def test_the_source_compacts_when_an_ingest_run_finishes(tmp_path, make_source):
    source = make_source(tmp_path)
    source.finish()  # before any write: no index, nothing to do
    assert not (tmp_path / "index").exists()
    for batch in batches(5, 30):
        source.upsert(batch)
    source.finish()
    assert len(segment_sizes(tmp_path / "index")) == 1
    hits = run(source.retrieve(Query("word7 batch4", k=3)))
    assert hits[0].id == "d4-7"


def test_rows_a_crash_left_behind_go_with_the_rewrite(tmp_path):
    import sqlite3

    index = TantivyIndex(tmp_path / "index", create=True)
    for batch in batches(3, 20):
        index.upsert(batch)
    # What a crash between the rows' commit and tantivy's leaves: rows nothing refers to.
    index._store.add([("ghost", "", "never committed", None, "f", "{}")])
    assert index.compact() is True
    with sqlite3.connect(index.path / "documents.sqlite") as db:
        ids = {row[0] for row in db.execute("SELECT id FROM documents")}
    assert "ghost" not in ids and len(ids) == index.count() == 60


def test_the_benchmark_fill_ends_like_kb_ingest_with_one_segment(tmp_path, make_source):
    from types import SimpleNamespace

    from kairox.bench.profile import fill

    corpus = {f"d{i}": (f"title {i}", f"shared body text number{i}") for i in range(2500)}
    progress: list[int] = []
    harness = SimpleNamespace(
        dataset=SimpleNamespace(corpus=corpus),
        _report=lambda what, done, total: progress.append(done),
    )
    source, _seconds, cached = fill(harness, make_source(tmp_path), "tantivy", "tantivy")
    assert progress == [1000, 2000, 3000] and not cached  # three commits of 1,000
    assert segment_sizes(tmp_path / "index") == [2500]  # finish() compacted them
    assert run(source.retrieve(Query("number7", k=1)))[0].id == "d7"
