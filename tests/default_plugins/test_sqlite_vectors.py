"""``sqlite-fts`` with ``embedding_backend``: by meaning and by words in one source."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence

import numpy as np
import pytest

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.ingest import ingest
from kairox.retrieval import Document, Query
from kairox.retrieval.ann import ANN_THRESHOLD
from kairox.testing import CORPUS, SourceConformance, build_source, run

#: Words that mean one thing, for an embedder that knows synonyms and FTS5 does not.
CONCEPTS = {
    "car": 0, "automobile": 0, "vehicle": 0,
    "doctor": 1, "physician": 1,
    "ocean": 2, "sea": 2,
    "happy": 3, "glad": 3,
}  # fmt: skip


class ConceptEmbedder:
    """A real (if tiny) embedding backend: words map to concepts, the rest is hashed."""

    name = "concepts-test"
    dim = 64

    def __init__(self) -> None:
        self.embedded: list[str] = []
        self._hashing = HashingEmbedder(dim=self.dim - len(set(CONCEPTS.values())))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        rest = self._hashing.embed(list(texts))
        concepts = np.zeros((len(texts), len(set(CONCEPTS.values()))), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                if word in CONCEPTS:
                    concepts[row, CONCEPTS[word]] += 3.0
        return np.hstack([concepts, rest]).astype(np.float32)


def build(tmp_path, embedder, **options):
    return build_source(
        sqlite_fts,
        "sqlite-fts",
        base_dir=tmp_path,
        embedders={embedder.name: embedder},
        path="kb.db",
        embedding_backend=embedder.name,
        **options,
    )


DOCS = [
    Document("d1", "The physician examined the patient's lungs.", title="Clinic"),
    Document("d2", "Waves crashed on the shore of the sea.", title="Coast"),
    Document("d3", "She drove her car to work. Traffic was heavy.", title="Commute"),
]


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


def test_vectors_are_packed_after_an_ingest_and_used_by_a_new_source(tmp_path):
    embedder = ConceptEmbedder()
    source = build(tmp_path, embedder)
    records = tmp_path / "docs.jsonl"
    records.write_text("\n".join(f'{{"id": "{d.id}", "text": "{d.text}"}}' for d in DOCS))
    ingest(source, [records], root=tmp_path)
    packs = sorted(p.name for p in (tmp_path / "kb.db.vectors").iterdir())
    assert len(packs) == 2
    assert packs[0].endswith(".index.npz") and packs[1].endswith(".vectors.npy")
    fresh = build(tmp_path, embedder)
    fresh._open()
    assert fresh._vectors is not None and fresh._vectors._stored_pack() is not None
    assert run(fresh.retrieve(Query("physician", k=1)))[0].id == "d1"
    off = build(tmp_path, embedder, vector_pack=False)
    ingest(off, [records], root=tmp_path, prune=True)  # nothing changed: packs stay
    off.upsert([Document("d4", "A glad ending.")])
    off.finish()
    assert not any((tmp_path / "kb.db.vectors").iterdir())


def test_the_pack_is_copied_in_blocks_and_equals_the_rows(tmp_path, monkeypatch):
    from kairox.default_plugins import sqlite_vectors

    monkeypatch.setattr(sqlite_vectors, "_COPY_ROWS", 2)  # vectors copied two at a time
    source = build(tmp_path, ConceptEmbedder())
    long = Document(
        "d4",
        "The sea is calm and quiet along the coast this morning. The car needs fresh oil "
        "before the long drive north. A physician will check the driver at the border.",
    )
    source.upsert([*DOCS, long])
    source.finish()
    vectors = source._vectors
    assert vectors is not None
    packed, rows = vectors._stored_pack(), vectors._from_rows()
    assert packed is not None and len(packed.vectors) > 4 and len(packed.owners) == 3
    for name in ("ids", "chunk_rows", "owners", "sentence_rows", "vectors"):
        assert np.array_equal(getattr(packed, name), getattr(rows, name)), name
    fresh = build(tmp_path, ConceptEmbedder())
    query = Query("automobile traffic", k=3)
    assert run(fresh.retrieve(query)) == run(source.retrieve(query))


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
        return build_source(
            sqlite_fts,
            "sqlite-fts",
            base_dir=tmp_path,
            embedders={"hashing-384": HashingEmbedder()},
            path="missing.db",
            embedding_backend="hashing-384",
        )


# -- the approximate index of large collections -------------------------------------------


def _passages(count: int, start: int = 0) -> str:
    topics = ["sea waves", "car traffic", "physician clinic", "glad ending", "forest trail"]
    return "\n".join(
        f'{{"id": "p{n}", "text": "Note {n} on {topics[n % 5]}. Line {n % 7} of it."}}'
        for n in range(start, start + count)
    )


def test_from_its_threshold_on_search_goes_through_the_index_and_finds_what_exact_does(
    tmp_path,
):
    pytest.importorskip("numkong")
    embedder = HashingEmbedder(dim=64)
    records = tmp_path / "docs.jsonl"
    records.write_text(_passages(120))
    indexed = build(tmp_path, embedder, ann_threshold=50)
    ingest(indexed, [records], root=tmp_path)
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
    approximate = fresh._vectors._arrays()[3]
    assert approximate is not None and isinstance(approximate.index.codes, np.memmap)
    assert exact._vectors is not None and exact._vectors._arrays()[3] is None


def test_the_index_follows_the_collection_across_ingests(tmp_path):
    pytest.importorskip("numkong")
    from kairox.retrieval.ann import AnnIndex, key_of

    embedder = HashingEmbedder(dim=64)
    records = tmp_path / "docs.jsonl"
    records.write_text(_passages(100))
    source = build(tmp_path, embedder, ann_threshold=50)
    ingest(source, [records], root=tmp_path)
    folder = tmp_path / "kb.db.vectors"
    [first] = folder.glob("*.ann-keys.npy")
    before = np.load(first)
    records.write_text(_passages(80, start=40))  # p0..p39 leave, p100..p119 arrive
    ingest(source, [records], root=tmp_path, prune=True)
    [keys] = folder.glob("*.ann-keys.npy")  # the old one went with its pack
    assert keys != first
    index = AnnIndex.open(keys.with_name(keys.name.replace("-keys", "-codes")), keys, 64)
    assert index is not None

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
    records.write_text(_passages(60))
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
