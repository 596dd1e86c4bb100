"""The sqlite-fts knowledge base's BM25 pack: written by ``finish``, read only while it
matches the documents and the weights, and ranking as FTS5 does."""

from __future__ import annotations

import apsw
import pytest

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.sqlite_fts import SqliteFtsIndex
from kairox.retrieval import Document, Query
from kairox.retrieval.bm25_pack import Weights
from kairox.retrieval.fts5 import match_terms
from kairox.testing import CORPUS, SourceConformance, build_source, run

QUERIES = ["saturn rings ice", "the planet", "volcano lava", "foo_bar", "python code"]


def build(tmp_path, **options):
    return build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path="kb.db", **options)


def documents():
    return [Document(d.id, d.text, title=d.title, uri=d.uri, metadata=d.metadata) for d in CORPUS]


@pytest.fixture
def packed(tmp_path):
    """A source over CORPUS whose pack is written (as at the end of `kb ingest`)."""
    source = build(tmp_path)
    source.upsert(documents())
    source.finish()
    return source


def uses_pack(source) -> bool:
    index = source._open()
    weights = Weights(source.title_weight, source.body_weight)
    return index.words.top(match_terms("saturn"), 3, weights) is not None


def ranking(source, text, k=10, **query):
    return [(h.id, h.score) for h in run(source.retrieve(Query(text, k=k, **query)))]


class TestPackedSqliteFtsConformance(SourceConformance):
    fuzz_examples, fuzz_max_size = 50, 200

    @pytest.fixture
    def conformance_source(self, packed):
        assert uses_pack(packed)
        return packed

    @pytest.fixture
    def broken_source(self, tmp_path):
        return build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path="missing.db")


def test_the_pack_ranks_as_fts5(packed, tmp_path):
    plain = build(tmp_path / "plain", words_pack=False)
    plain.upsert(documents())
    plain.finish()
    assert not uses_pack(plain)
    for text in QUERIES:
        for k in (1, 3, 10):
            got, expected = ranking(packed, text, k), ranking(plain, text, k)
            assert [i for i, _ in got] == [i for i, _ in expected], text
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-6)


def test_a_write_drops_the_pack_until_the_next_finish(packed):
    packed.upsert([Document("new", "saturn saturn saturn has rings", title="Saturn")])
    assert not uses_pack(packed)
    assert ranking(packed, "saturn")[0][0] == "new"  # FTS5 sees it at once
    packed.finish()
    assert uses_pack(packed)
    assert ranking(packed, "saturn")[0][0] == "new"
    packed.delete(["new"])
    assert not uses_pack(packed)
    assert "new" not in [i for i, _ in ranking(packed, "saturn")]


def test_a_failed_write_keeps_the_pack(packed):
    good = Document("good", "saturn saturn saturn")
    with pytest.raises(apsw.ConstraintError):
        packed.upsert([good, Document("bad", None)])  # body NOT NULL: the batch fails
    assert uses_pack(packed)  # the transaction rolled back, the record with it
    assert "good" not in [i for i, _ in ranking(packed, "saturn")]


def test_other_weights_search_fts5_until_packed_again(packed, tmp_path):
    heavier = build(tmp_path, title_weight=20.0)
    assert not uses_pack(heavier)
    before = ranking(heavier, "saturn rings")  # FTS5, with its weights
    heavier.finish()
    assert uses_pack(heavier)
    assert not uses_pack(packed)  # one pack at a time: the last weights packed
    assert [i for i, _ in ranking(heavier, "saturn rings")] == [i for i, _ in before]


def test_filtered_searches_ask_fts5_and_honour_the_filter(packed):
    tagged = {d.id for d in CORPUS if d.metadata.get("topic") == "astronomy"}
    assert tagged  # the corpus has such documents
    hits = ranking(packed, "saturn planet rings", filters={"topic": "astronomy"})
    assert hits and {i for i, _ in hits} <= tagged


def test_words_pack_false_removes_the_pack(packed, tmp_path):
    folder = tmp_path / "kb.db.words"
    assert any(folder.iterdir())
    off = build(tmp_path, words_pack=False)
    off.upsert([Document("new", "comet")])
    off.finish()
    assert not uses_pack(off)
    assert list(folder.iterdir()) == []


def test_a_schema_1_file_gains_the_pack_record(tmp_path):
    index = SqliteFtsIndex(tmp_path / "kb.db", create=True)
    index.upsert(documents())
    index._db.execute("DROP TABLE kb_words_packs")
    index._db.execute("PRAGMA user_version=1")
    index.close()
    source = build(tmp_path)
    assert ranking(source, "saturn")  # opened (and upgraded): FTS5 answers
    source.finish()
    assert uses_pack(source)


def test_finish_rewrites_a_pack_whose_files_are_gone(packed, tmp_path):
    for path in (tmp_path / "kb.db.words").iterdir():
        path.unlink()
    fresh = build(tmp_path)
    assert not uses_pack(fresh)  # recorded, but unreadable: FTS5 answers
    assert ranking(fresh, "saturn")
    fresh.finish()
    assert uses_pack(fresh)


def test_a_pack_over_replaced_and_deleted_rows_ranks_as_fts5(tmp_path):
    source = build(tmp_path)
    filler = [Document(f"filler{n}", f"ocean tide comet {n}") for n in range(30)]
    source.upsert(documents() + filler)
    source.finish()
    # A small run (under an eighth: no merge): the old versions of the replaced and
    # deleted rows stay in FTS5's older segment, and the pack must not read them.
    first, second = documents()[:2]
    source.upsert([Document(first.id, "volcano lava basalt", title="Replaced")])
    source.delete([second.id])
    # Their old words too: a pack that read the old entries would find them.
    texts = [*QUERIES, first.text, second.text]
    expected = {text: ranking(source, text) for text in texts}  # FTS5 answers
    source.finish()
    assert uses_pack(source)
    segments = source._open()._db.execute(
        "SELECT count(DISTINCT id >> 37) FROM documents_fts_data WHERE id > 10"
    )
    assert segments.fetchone()[0] > 1  # (not merged)
    for text, hits in expected.items():
        got = ranking(source, text)
        assert [i for i, _ in got] == [i for i, _ in hits], text
        assert [s for _, s in got] == pytest.approx([s for _, s in hits], rel=1e-6)
    assert second.id not in {i for hits in expected.values() for i, _ in hits}
    assert expected[first.text][0][0] != first.id  # (its old text is not its own now)
