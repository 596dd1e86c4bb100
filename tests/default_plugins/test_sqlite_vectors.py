"""``sqlite-fts`` with ``embedding_backend``: by meaning and by words in one source."""

from __future__ import annotations

import hashlib
import shutil
import sys

import apsw
import numpy as np
import pytest

from kairox.default_plugins import sqlite_fts, sqlite_vectors
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Document, Query
from kairox.retrieval.ann import ANN_THRESHOLD
from kairox.retrieval.vectors import embed_unit
from kairox.runtime.ingest import ingest
from kairox.testing import CORPUS, SourceConformance, build_source, run
from kairox.workspace import vector_store
from kairox.workspace.vector_pack import write_pack
from tests.default_plugins.vector_helpers import (
    DOCS,
    ConceptEmbedder,
    as_main_layout,
    build,
    ingest_passages,
    pack_files,
    passages,
    waiting_rows,
)


def test_finds_by_meaning_what_words_alone_miss(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)
    words_only = build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path="kb.db")
    assert run(words_only.retrieve(Query("automobile"))) == []
    hits = run(source.retrieve(Query("automobile", k=2)))
    assert hits[0].id == "d3" and hits[0].source == "papers"
    assert hits[0].metadata["title"] == "Commute"
    # Words still count: an exact term ranks its document first.
    assert run(source.retrieve(Query("waves shore", k=1)))[0].id == "d2"


def test_vector_weight_sets_how_much_meaning_counts(tmp_path):
    source = build(tmp_path, ConceptEmbedder(), vector_weight=0)
    source.upsert(DOCS)
    assert run(source.retrieve(Query("automobile"))) == []  # words only
    words = build_source(sqlite_fts, "sqlite-fts", base_dir=tmp_path, path="kb.db")
    query = Query("the sea and the car")
    assert [h.id for h in run(source.retrieve(query))] == [h.id for h in run(words.retrieve(query))]


def test_ingest_is_incremental_and_deletes_vectors(tmp_path):
    embedder = ConceptEmbedder()
    source = build(tmp_path, embedder)
    records = tmp_path / "docs.jsonl"
    records.write_text(
        "\n".join(f'{{"id": "{d.id}", "title": "{d.title}", "text": "{d.text}"}}' for d in DOCS)
    )
    first = ingest(source, [records], root=tmp_path)
    assert first.added == 3 and embedder.embedded
    embedder.embedded.clear()
    again = ingest(source, [records], root=tmp_path)
    assert again.unchanged == 3 and embedder.embedded == []  # nothing embedded twice
    records.write_text(f'{{"id": "d1", "title": "Clinic", "text": "{DOCS[0].text}"}}')
    ingest(source, [records], root=tmp_path, prune=True)
    assert run(source.retrieve(Query("automobile"))) == []
    # The vectors of the pruned documents left the file with them.
    vectors = source._vectors
    assert vectors is not None and vectors.embedded_ids() == {"d1"}


def test_a_new_embedder_re_embeds_on_the_next_ingest(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)
    other = HashingEmbedder(dim=32)
    switched = build(tmp_path, other)
    assert switched.fingerprints() == {}  # no vectors of this model yet: all to write
    switched.upsert(DOCS)
    assert set(switched.fingerprints()) == {"d1", "d2", "d3"}
    assert run(switched.retrieve(Query("sea waves", k=1)))[0].id == "d2"


def test_vectors_are_stored_once_in_the_pack_and_used_by_a_new_source(tmp_path):
    embedder = ConceptEmbedder()
    source = build(tmp_path, embedder)
    records = tmp_path / "docs.jsonl"
    records.write_text("\n".join(f'{{"id": "{d.id}", "text": "{d.text}"}}' for d in DOCS))
    ingest(source, [records], root=tmp_path)
    assert pack_files(tmp_path) == ["hashes.npy", "index.npz", "vectors.npy"]
    assert waiting_rows(source) == 0  # the pack is the only copy
    db = source._open()._db
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    pack = source._vectors._pack_store()
    assert pack is not None and pack.vectors.dtype == np.float16
    assert list(pack.hashes) == sorted(pack.hashes)
    fresh = build(tmp_path, embedder)
    assert set(fresh.fingerprints()) == {"d1", "d2", "d3"}  # embedded: nothing to redo
    assert run(fresh.retrieve(Query("physician", k=1)))[0].id == "d1"
    off = build(tmp_path, embedder, vector_pack=False)
    assert off.unfinished()  # switched off: the vectors move back into the database
    ingest(off, [records], root=tmp_path, prune=True)  # even with nothing new
    assert not any((tmp_path / "kb.db.vectors").iterdir()) and not off.unfinished()
    assert waiting_rows(off) == 3  # one vector a passage (each is one sentence)
    off.upsert([Document("d4", "A glad ending.")])
    off.finish()
    assert set(build(tmp_path, embedder).fingerprints()) == {"d1", "d2", "d3", "d4"}
    assert run(off.retrieve(Query("automobile", k=1)))[0].id == "d3"


@pytest.mark.parametrize("form", ["float32", "float16", "int8"])
def test_the_pack_is_merged_in_blocks_and_searched_as_the_rows_are(tmp_path, monkeypatch, form):
    monkeypatch.setattr(vector_store, "_BLOCK", 2)  # vectors merged two at a time
    source = build(tmp_path, ConceptEmbedder(), vector_format=form)
    long = Document(
        "d4",
        "The sea is calm and quiet along the coast this morning. The car needs fresh oil "
        "before the long drive north. A physician will check the driver at the border.",
    )
    source.upsert([*DOCS, long])
    source.finish()
    vectors = source._vectors
    assert vectors is not None
    token, packed = vectors._search_pack()
    rows = vectors._from_rows(vectors._pack_store())  # the path of an unfinished ingest
    assert token is not None and len(packed.vectors) > 4 and len(packed.owners) == 3
    assert packed.vectors.dtype == np.dtype({"float32": "<f4", "float16": "<f2"}.get(form, "i1"))
    for name in ("ids", "owners"):
        assert np.array_equal(getattr(packed, name), getattr(rows, name)), name
    assert np.array_equal(packed.rows(packed.chunk_rows), rows.rows(rows.chunk_rows))
    assert np.array_equal(packed.rows(packed.sentence_rows), rows.rows(rows.sentence_rows))
    exact = ConceptEmbedder().embed(["Clinic\nThe physician examined the patient's lungs."])
    exact /= np.linalg.norm(exact)
    d1 = packed.rows(packed.chunk_rows[:1])[0]
    assert float(d1 @ exact[0]) > {"float32": 0.99999, "float16": 0.9999}.get(form, 0.999)
    fresh = build(tmp_path, ConceptEmbedder(), vector_format=form)
    query = Query("automobile traffic", k=3)
    assert run(fresh.retrieve(query)) == run(source.retrieve(query))


def test_a_second_ingest_merges_and_a_pruned_vector_leaves_the_pack(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS[:2])
    source.finish()
    first = len(source._vectors._pack_store().vectors)
    source.upsert(DOCS[2:])
    # Before the run's end the new vectors wait in the database and are searched too.
    assert waiting_rows(source) == 1
    assert run(source.retrieve(Query("automobile", k=1)))[0].id == "d3"
    source.finish()
    assert waiting_rows(source) == 0 and len(source._vectors._pack_store().vectors) == first + 1
    source.delete(["d3"])
    assert "d3" not in {h.id for h in run(source.retrieve(Query("automobile", k=3)))}
    source.finish()
    assert len(source._vectors._pack_store().vectors) == first
    assert len(list((tmp_path / "kb.db.vectors").iterdir())) == 3  # old packs removed


def test_a_crash_before_the_new_pack_is_recorded_loses_nothing(tmp_path, monkeypatch):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS[:2])
    source.finish()
    token = source._vectors._search_pack()[0]
    source.upsert(DOCS[2:])
    query = Query("automobile sea", k=3)
    before = run(source.retrieve(query))

    def crash(*args):
        raise RuntimeError("power cut")

    # The new pack's files are in place, then the transaction recording it fails.
    monkeypatch.setattr(sqlite_vectors, "record_store", crash)
    with pytest.raises(RuntimeError):
        source.finish()
    monkeypatch.undo()
    fresh = build(tmp_path, ConceptEmbedder())
    fresh._open()
    assert fresh._vectors._pack_store() is not None and waiting_rows(fresh) == 1
    assert run(fresh.retrieve(query)) == before
    assert sqlite_vectors.current_store(fresh._open()._db, fresh._vectors._kind).token == token
    fresh.finish()  # the next run's end merges, and the orphaned files go
    assert waiting_rows(fresh) == 0 and len(list((tmp_path / "kb.db.vectors").iterdir())) == 3
    assert run(fresh.retrieve(query)) == before


def test_a_knowledge_base_of_the_old_layout_is_read_then_upgraded_in_place(tmp_path, monkeypatch):
    """Before the pack was the store, every vector was a float32 row of kb_embeddings
    and the pack (float32, no hashes) a copy recorded in kb_vector_packs."""
    made = apsw.Connection(str(tmp_path / "kb.db"))  # as the old code made files:
    made.execute("CREATE TABLE x (a)")  # no incremental vacuum (fixed by a first table)
    made.execute("DROP TABLE x")
    made.close()
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(DOCS)  # the rows, as the old code wrote them
    vectors = source._vectors
    db = source._open()._db
    old = vectors._from_rows()
    old_token = write_pack(vectors._pack_folder, vectors._pack_key, old)
    db.execute("INSERT INTO kb_vector_packs VALUES (?, ?, ?)", (*vectors._kind, old_token))
    as_main_layout(tmp_path / "kb.db")  # a hex row a passage and a sentence
    query = Query("automobile physician", k=3)
    expected = run(source.retrieve(query))
    reader = build(tmp_path, ConceptEmbedder())
    assert run(reader.retrieve(query)) == expected
    assert reader._vectors._search_pack()[0] == old_token  # the old copy is mapped
    assert set(reader.fingerprints()) == {"d1", "d2", "d3"}
    records = tmp_path / "docs.jsonl"
    records.write_text(
        "\n".join(f'{{"id": "{d.id}", "title": "{d.title}", "text": "{d.text}"}}' for d in DOCS)
    )
    # A few vectors free a few pages; a real knowledge base frees most of its file.
    monkeypatch.setattr(vector_store, "RECLAIM_SHARE", 0.0)
    ingest(reader, [records], root=tmp_path)  # nothing new, but the upgrade is pending
    assert waiting_rows(reader) == 0 and not reader.unfinished()
    # The rows' pages were given back: the file was rewritten once, vacuumed from now on.
    upgraded = reader._open()._db
    pragmas = ("auto_vacuum", "freelist_count")
    assert [upgraded.execute(f"PRAGMA {p}").fetchone()[0] for p in pragmas] == [2, 0]
    reader.upsert([Document("d4", "A glad ending.")])
    assert reader.unfinished()
    reader.finish()
    assert db.execute("SELECT count(*) FROM kb_vector_packs").fetchone()[0] == 0
    assert pack_files(tmp_path) == ["hashes.npy", "index.npz", "vectors.npy"]
    assert [h.id for h in run(reader.retrieve(query))] == [h.id for h in expected]
    assert run(reader.retrieve(Query("happy", k=1)))[0].id == "d4"


def test_repeated_sentences_are_embedded_once(tmp_path):
    embedder = ConceptEmbedder()
    source = build(tmp_path, embedder)
    repeated = "See the maintenance manual for every further detail of this procedure."
    source.upsert(
        [
            Document(
                "a", f"{repeated} The sea is calm and quiet along the coast today. {repeated}"
            ),
            Document("b", f"The car needs fresh oil before the long drive north. {repeated}"),
        ]
    )
    assert embedder.embedded.count(repeated) == 1
    assert run(source.retrieve(Query("ocean", k=1)))[0].id == "a"


def test_filters_apply_to_the_meaning_side_too(tmp_path):
    source = build(tmp_path, ConceptEmbedder())
    source.upsert(
        [
            Document("a", "A car for the city.", metadata={"lang": "en"}),
            Document("b", "Another car, for the road.", metadata={"lang": "de"}),
        ]
    )
    hits = run(source.retrieve(Query("automobile", filters={"lang": "de"})))
    assert [h.id for h in hits] == ["b"]


class TestHybridConformance(SourceConformance):
    @pytest.fixture
    def conformance_source(self, tmp_path):
        source = build(tmp_path, HashingEmbedder())
        source.upsert([Document(d.id, d.text, title=d.title, metadata=d.metadata) for d in CORPUS])
        return source

    @pytest.fixture
    def broken_source(self, tmp_path):
        return build(tmp_path, HashingEmbedder(), "missing.db")


# -- the approximate index of large collections -------------------------------------------


def test_from_its_threshold_on_search_goes_through_the_index_and_finds_what_exact_does(
    tmp_path,
):
    pytest.importorskip("numkong")
    embedder = HashingEmbedder(dim=64)
    indexed = build(tmp_path, embedder, ann_threshold=50)
    ingest_passages(indexed, tmp_path, passages(120))
    folder = tmp_path / "kb.db.vectors"
    assert len(list(folder.glob("*.ann-codes.npy"))) == 1
    assert len(list(folder.glob("*.ann-keys.npy"))) == 1
    exact = build(tmp_path, embedder, ann_threshold=10_000)
    fresh = build(tmp_path, embedder, ann_threshold=50)  # a new process maps the codes
    for text in ("sea waves", "physician", "line 3 of forest trail", "note 77"):
        query = Query(text, k=5)
        found, expected = run(fresh.retrieve(query)), run(exact.retrieve(query))
        assert [(h.id, h.score) for h in found] == [(h.id, h.score) for h in expected]
    assert fresh._vectors is not None
    approximate = fresh._vectors._arrays()[1]
    assert approximate is not None and isinstance(approximate.index.codes, np.memmap)
    assert exact._vectors is not None and exact._vectors._arrays()[1] is None


def test_the_index_follows_the_collection_across_ingests(tmp_path):
    pytest.importorskip("numkong")
    from kairox.retrieval.ann import AnnIndex, key_of

    embedder = HashingEmbedder(dim=64)
    source = build(tmp_path, embedder, ann_threshold=50)
    ingest_passages(source, tmp_path, passages(100))
    folder = tmp_path / "kb.db.vectors"
    [first] = folder.glob("*.ann-keys.npy")
    before = np.load(first)
    # Codes no quantising makes (each row negated), to tell reused rows from requantised.
    first_codes = first.with_name(first.name.replace("-keys", "-codes"))
    marked = -np.load(first_codes)
    np.save(first_codes, marked)
    # p0..p39 leave, p100..p119 arrive
    ingest_passages(source, tmp_path, passages(80, start=40), prune=True)
    [keys] = folder.glob("*.ann-keys.npy")  # the old one went with its pack
    assert keys != first
    index = AnnIndex.open(keys.with_name(keys.name.replace("-keys", "-codes")), keys, 64)
    assert index is not None
    # The vectors kept were not quantised again: their codes come from the old index.
    earlier_row = {key: row for row, key in enumerate(before.tolist())}
    kept = [
        (row, earlier_row[key]) for row, key in enumerate(index.keys.tolist()) if key in earlier_row
    ]
    assert len(kept) >= 60
    for row, old_row in kept:
        np.testing.assert_array_equal(index.codes[row], marked[old_row])

    def passage_key(n: int) -> int:
        topic = ["sea waves", "car traffic", "physician clinic", "glad ending", "forest trail"]
        text = f"Note {n} on {topic[n % 5]}. Line {n % 7} of it."
        return key_of(hashlib.sha256(text.encode()).hexdigest())

    held, earlier = set(index.keys.tolist()), set(before.tolist())
    assert {passage_key(n) for n in range(40, 100)} <= held & earlier  # kept
    assert {passage_key(n) for n in range(100, 120)} <= held - earlier  # arrived
    assert not {passage_key(n) for n in range(40)} & held  # left
    hits = run(build(tmp_path, embedder, ann_threshold=50).retrieve(Query("note 12 sea", k=10)))
    assert hits and not {h.id for h in hits} & {f"p{n}" for n in range(40)}


def test_without_numkong_searches_are_exact_after_one_hint(tmp_path, monkeypatch, capsys):
    embedder = HashingEmbedder(dim=64)
    records = tmp_path / "docs.jsonl"
    records.write_text(passages(60))
    monkeypatch.setitem(sys.modules, "numkong", None)
    source = build(tmp_path, embedder, ann_threshold=50)
    ingest(source, [records], root=tmp_path)
    assert not list((tmp_path / "kb.db.vectors").glob("*.ann-*"))
    for _ in range(2):
        assert run(source.retrieve(Query("sea waves", k=3)))
    hint = capsys.readouterr().err
    assert hint.count("pip install 'kairox[ann]'") == 1 and "60 passages" in hint


def test_the_index_is_on_by_default_from_its_threshold_and_0_turns_it_off(tmp_path):
    config = sqlite_fts.SqliteFtsConfig
    assert config(kind="sqlite-fts", path="kb.db").ann_threshold == ANN_THRESHOLD
    with pytest.raises(ValueError, match="ann_threshold"):
        config(kind="sqlite-fts", path="kb.db", ann_threshold=-1)
    off = build(tmp_path, HashingEmbedder(dim=64), ann_threshold=0)
    assert off._vector_options["ann_threshold"] is None


def test_sentence_vectors_follow_the_embedder_unless_configured(tmp_path):
    long = Document(
        "d4",
        "The sea is calm and quiet along the coast this morning. The car needs fresh oil "
        "before the long drive north. A physician will check the driver at the border.",
    )
    default = build(tmp_path / "a", HashingEmbedder(dim=32))
    default.upsert([long])
    # hashing declares no sentence vectors (they did not pay on SciFact).
    assert default._vectors.sentence_weight == 0 and waiting_rows(default) == 1
    asked = build(tmp_path / "b", HashingEmbedder(dim=32), sentence_weight=0.5)
    asked.upsert([long])
    assert waiting_rows(asked) == 4  # the passage and its three sentences
    other = build(tmp_path / "c", ConceptEmbedder())  # declares nothing: the default 0.5
    other.upsert([long])
    assert other._vectors.sentence_weight == 0.5 and waiting_rows(other) == 4


def _records(folder, docs):
    folder.mkdir(exist_ok=True)
    records = folder / "docs.jsonl"
    lines = (f'{{"id": "{d.id}", "title": "{d.title}", "text": "{d.text}"}}' for d in docs)
    records.write_text("\n".join(lines))
    return records


def _ingested(folder, embedder, docs=DOCS):
    """A knowledge base ``folder/kb.db`` with ``docs`` ingested, and the records file."""
    records = _records(folder, docs)
    source = build(folder, embedder)
    ingest(source, [records], root=folder)
    return source, records


def test_a_moved_or_copied_knowledge_base_keeps_its_vectors(tmp_path):
    query = Query("automobile physician", k=3)
    source, _ = _ingested(tmp_path / "a", ConceptEmbedder())
    before = run(source.retrieve(query))
    source._open().close()
    (tmp_path / "a").rename(tmp_path / "b")  # the folder renamed: db, .vectors, .words
    embedder = ConceptEmbedder()
    moved = build(tmp_path / "b", embedder)
    assert run(moved.retrieve(query)) == before
    assert moved._vectors._search_pack()[0] is not None  # from the pack, not rows
    assert embedder.embedded == [query.text]  # nothing re-embedded
    assert set(moved.fingerprints()) == {"d1", "d2", "d3"}  # nor by the next ingest
    moved._open().close()
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    changed = [*DOCS[:2], Document("d3", "Everyone was glad.", title="Commute")]
    copy, _ = _ingested(tmp_path / "c", ConceptEmbedder(), changed)
    assert run(copy.retrieve(Query("happy", k=1)))[0].id == "d3"
    assert run(copy.retrieve(query)) != before
    # The original is untouched by the copy's write: same hits, from its own pack.
    original = build(tmp_path / "b", ConceptEmbedder())
    assert run(original.retrieve(query)) == before
    assert original._vectors._search_pack()[0] != copy._vectors._search_pack()[0]


@pytest.mark.parametrize("moved", [False, True])
def test_packs_named_after_the_old_absolute_path_are_adopted(tmp_path, moved):
    """Packs were named after the file's absolute path: renamed at the next open, found
    by the token the database records even when the folder moved since."""
    query = Query("automobile physician", k=3)
    source, _ = _ingested(tmp_path / "a", ConceptEmbedder())
    before = run(source.retrieve(query))
    vectors = source._vectors
    old_key = sqlite_vectors._path_key(tmp_path / "a" / "kb.db", vectors.embedder)
    folder = vectors._pack_folder
    for path in folder.iterdir():  # as the code before named them
        path.rename(folder / path.name.replace(vectors._pack_key, old_key))
    (folder / f"{old_key}-0123456789abcdef.vectors.npy").write_bytes(b"an older pack")
    source._open().close()
    if moved:
        (tmp_path / "a").rename(tmp_path / "b")
    embedder = ConceptEmbedder()
    reader = build(tmp_path / ("b" if moved else "a"), embedder)
    assert run(reader.retrieve(query)) == before and embedder.embedded == [query.text]
    assert reader._vectors._search_pack()[0] is not None
    names = {p.name.split("-")[0] for p in reader._vectors._pack_folder.iterdir()}
    # Not moved, the older pack under the old key goes too (moved, it is not found).
    assert names == ({vectors._pack_key, old_key} if moved else {vectors._pack_key})


def test_a_write_cut_short_leaves_a_document_and_its_vector_both_old(tmp_path):
    """A changed document's text and the record of its vector are one transaction: a
    failure injected between the two writes (a trigger on the vectors' rows, which run
    after the documents') leaves both as they were, and the next ingest embeds it."""
    embedder = ConceptEmbedder()
    source, _ = _ingested(tmp_path, embedder)
    db = source._open()._db
    db.execute(
        "CREATE TEMP TRIGGER cut AFTER INSERT ON kb_texts "
        "BEGIN SELECT RAISE(ABORT, 'cut short here'); END"
    )
    changed = Document("d3", "Everyone was glad.", title="Commute")
    records = _records(tmp_path, [*DOCS[:2], changed])
    with pytest.raises(apsw.ConstraintError, match="cut short here"):
        ingest(source, [records], root=tmp_path)
    assert source.documents(["d3"])[0].text == DOCS[2].text  # not new text, old vector
    db.execute("DROP TRIGGER cut")
    embedder.embedded.clear()
    assert ingest(source, [records], root=tmp_path).updated == 1
    assert embedder.embedded == [sqlite_vectors.passage_text(changed)]
    rowid = db.execute("SELECT rowid FROM documents WHERE id = 'd3'").fetchone()[0]
    arrays, _ = source._vectors._arrays()
    ids, (matrix, _) = arrays.ids, arrays.exact()
    expected = embed_unit(ConceptEmbedder(), [sqlite_vectors.passage_text(changed)])[0]
    np.testing.assert_allclose(matrix[list(ids).index(rowid)], expected, atol=1e-3)
    assert run(source.retrieve(Query("happy", k=1)))[0].id == "d3"


class WeightedEmbedder(ConceptEmbedder):
    """An embedder that declares how much its vectors count (as hashing does)."""

    fusion_weight = 0.05


def test_vector_weight_unset_follows_the_embedders_fusion_weight(tmp_path):
    for folder in ("declared", "undeclared", "set"):
        (tmp_path / folder).mkdir()
    assert build(tmp_path / "declared", WeightedEmbedder()).vector_weight == 0.05
    assert build(tmp_path / "undeclared", ConceptEmbedder()).vector_weight == 1.0
    assert build(tmp_path / "set", WeightedEmbedder(), vector_weight=0.5).vector_weight == 0.5
