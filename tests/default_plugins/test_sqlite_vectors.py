"""``sqlite-fts`` with ``embedding_backend``: by meaning and by words in one source."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kairox.default_plugins import sqlite_fts
from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.ingest import ingest
from kairox.retrieval import Document, Query
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


def build(tmp_path, embedder, path="kb.db", **options):
    return build_source(
        sqlite_fts,
        "sqlite-fts",
        base_dir=tmp_path,
        embedders={embedder.name: embedder},
        path=path,
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
        return build(tmp_path, HashingEmbedder(), "missing.db")


# -- the approximate index of large collections -------------------------------------------


def _passages(count: int, start: int = 0) -> str:
    topics = ["sea waves", "car traffic", "physician clinic", "glad ending", "forest trail"]
    return "\n".join(
        f'{{"id": "p{n}", "text": "Note {n} on {topics[n % 5]}. Line {n % 7} of it."}}'
        for n in range(start, start + count)
    )


def _ingest_passages(source, tmp_path, passages: str, *, prune: bool = False) -> None:
    """Ingest ``passages`` (JSONL records) from the file ``docs.jsonl``."""
    records = tmp_path / "docs.jsonl"
    records.write_text(passages)
    ingest(source, [records], root=tmp_path, prune=prune)


def test_from_its_threshold_on_search_goes_through_the_graph_and_finds_what_exact_does(tmp_path):
    pytest.importorskip("usearch")
    embedder = HashingEmbedder(dim=64)
    graphed = build(tmp_path, embedder, ann_threshold=50)
    _ingest_passages(graphed, tmp_path, _passages(120))
    folder = tmp_path / "kb.db.vectors"
    assert len(list(folder.glob("*.usearch"))) == 1 and len(list(folder.glob("*.keys.npy"))) == 1
    exact = build(tmp_path, embedder, ann_threshold=10_000)
    fresh = build(tmp_path, embedder, ann_threshold=50)  # a new process maps the graph
    for text in ("sea waves", "physician", "line 3 of forest trail", "note 77"):
        query = Query(text, k=5)
        assert [h.id for h in run(fresh.retrieve(query))] == [
            h.id for h in run(exact.retrieve(query))
        ]
    assert fresh._vectors is not None and fresh._vectors._arrays()[3] is not None
    assert exact._vectors is not None and exact._vectors._arrays()[3] is None


def test_the_graph_follows_the_collection_across_ingests(tmp_path):
    pytest.importorskip("usearch")
    from kairox.retrieval.ann import AnnIndex

    embedder = HashingEmbedder(dim=64)
    source = build(tmp_path, embedder, ann_threshold=50)
    _ingest_passages(source, tmp_path, _passages(100))
    # p0..p39 leave, p100..p119 arrive
    _ingest_passages(source, tmp_path, _passages(80, start=40), prune=True)
    [path] = (tmp_path / "kb.db.vectors").glob("*.usearch")
    graph = AnnIndex.open(path, 64)
    assert graph is not None and len(graph) == 80
    assert len(list((tmp_path / "kb.db.vectors").glob("*.keys.npy"))) == 1  # the old one went
    hits = run(build(tmp_path, embedder, ann_threshold=50).retrieve(Query("note 12 sea", k=10)))
    assert hits and not {h.id for h in hits} & {f"p{n}" for n in range(40)}


def test_the_threshold_is_a_setting_of_at_least_one():
    with pytest.raises(ValueError, match="ann_threshold"):
        sqlite_fts.SqliteFtsConfig(kind="sqlite-fts", path="kb.db", ann_threshold=0)
