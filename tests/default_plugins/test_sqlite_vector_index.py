"""The approximate index beside a ``sqlite-fts`` vector pack: which kind a pack gets (an
int8 pack's own codes scanned linearly, a partition from its size on), written beside
it, rebuilt from the previous pack's partition, and searched as exact search finds,
decoding only the candidates' vectors."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.sqlite_vector_index import PackIndex
from kairox.default_plugins.sqlite_vectors import DocumentVectors
from kairox.retrieval import Query
from kairox.retrieval.ann import AnnIndex, candidates_for, rescored_top_k
from kairox.retrieval.ann_ivf import IvfIndex
from kairox.retrieval.vectors import SentenceVectors, embed_unit, top_k
from kairox.testing import run
from kairox.workspace.reordered_rows import ReorderedRows
from kairox.workspace.vector_pack import PackWriter, VectorPack, read_pack
from kairox.workspace.vector_store import PackArrays
from tests.default_plugins.vector_helpers import build, ingest_passages, passages, two_sentences

pytest.importorskip("numkong")

DIM = 32
KEY = "kb"


def clustered(count: int, seed: int = 0) -> np.ndarray:
    centres = np.random.default_rng(99).standard_normal((30, DIM))
    rng = np.random.default_rng(seed)
    rows = centres[rng.integers(0, 30, count)] + 0.3 * rng.standard_normal((count, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def store(folder, vectors: np.ndarray, form: str) -> str:
    """A store's pack of ``vectors``: the first half passages, each owning one sentence
    of the second half."""
    passages = len(vectors) // 2
    digests = np.array(
        [hashlib.sha256(f"text {n}".encode()).digest() for n in range(len(vectors))], "S32"
    )
    index = VectorPack(
        ids=np.arange(passages),
        chunk_rows=np.arange(passages),
        owners=np.arange(passages),
        sentence_rows=np.arange(passages, 2 * passages),
        vectors=np.zeros((0, DIM)),
    )
    with PackWriter(folder, KEY, rows=len(vectors), dim=DIM, form=form, with_hashes=True) as writer:
        writer.add(vectors, digests)
        return writer.finish(index)


def searched_alike(approximate, pack: VectorPack) -> None:
    matrix = pack.rows(pack.chunk_rows)
    sentences = SentenceVectors(pack.rows(), pack.owners, unit=True, rows=pack.sentence_rows)
    for query in clustered(20, seed=5):
        exact, _ = top_k(matrix, query, 10, sentences=sentences, sentence_weight=0.5)
        found, _ = rescored_top_k(
            approximate.index,
            approximate.chunk_rows,
            matrix,
            query,
            10,
            sentences=sentences,
            sentence_weight=0.5,
        )
        assert found.tolist() == exact.tolist()


def test_an_int8_pack_below_the_partition_is_scanned_as_it_is_stored(tmp_path):
    token = store(tmp_path, clustered(2_000), "int8")
    packs = PackIndex(tmp_path, KEY, DIM, threshold=100, partition_from=100_000)
    packs.write(token)
    assert not list(tmp_path.glob("*.ann-*")) and not list(tmp_path.glob("*.ivf-*"))
    pack = read_pack(tmp_path, KEY, token, DIM)
    approximate = packs.stored(token, pack)
    assert isinstance(approximate.index, AnnIndex)
    assert approximate.index.codes is pack.vectors  # one copy of the vectors
    searched_alike(approximate, pack)


@pytest.mark.parametrize("form", ["int8", "float16"])
def test_from_its_size_on_a_pack_is_partitioned_and_finds_what_exact_does(tmp_path, form):
    vectors = clustered(2_000)
    token = store(tmp_path, vectors, form)
    stored = read_pack(tmp_path, KEY, token, DIM).rows()
    packs = PackIndex(tmp_path, KEY, DIM, threshold=100, partition_from=1_000)
    packs.write(token)
    assert len(list(tmp_path.glob("*.ivf-codes.npy"))) == 1
    # An int8 pack's codes are on disk once, the partition's; a float16 one's stay.
    assert (tmp_path / f"{KEY}-{token}.vectors.npy").exists() == (form == "float16")
    pack = read_pack(tmp_path, KEY, token, DIM)
    assert isinstance(pack.vectors, ReorderedRows) == (form == "int8")
    np.testing.assert_array_equal(pack.rows(), stored)
    packs.write(token)  # again: nothing changes
    np.testing.assert_array_equal(read_pack(tmp_path, KEY, token, DIM).rows(), stored)
    approximate = packs.stored(token, pack)
    assert isinstance(approximate.index, IvfIndex)
    approximate.index.probes = len(approximate.index.centroids) // 2
    searched_alike(approximate, pack)


def test_the_next_pack_keeps_the_partitions_centroids_and_assigns_only_new_rows(tmp_path):
    vectors = clustered(3_000)
    packs = PackIndex(tmp_path, KEY, DIM, threshold=100, partition_from=1_000)
    first = store(tmp_path, vectors[:2_000], "int8")
    packs.write(first)
    before = IvfIndex.open(packs.stem(first), DIM)
    second = store(tmp_path, vectors, "int8")
    packs.write(second)
    after = IvfIndex.open(packs.stem(second), DIM)
    assert before is not None and after is not None
    np.testing.assert_array_equal(after.centroids, before.centroids)
    assert after.trained == before.trained == 2_000
    # The rows both packs hold (the same texts) sit in the same clusters.
    np.testing.assert_array_equal(after.cluster_of()[:1_000], before.cluster_of()[:1_000])
    approximate = packs.stored(second, read_pack(tmp_path, KEY, second, DIM))
    assert approximate is not None and len(approximate.index) == 3_000


@dataclass
class Reopened:
    """The vectors of a knowledge base of 600 two-sentence passages (an approximate index
    from 50), opened anew as a new process would, with its pack and four queries."""

    form: str
    sentence_weight: float
    vectors: DocumentVectors
    pack: VectorPack
    queries: np.ndarray


@pytest.fixture(
    params=[(form, weight) for form in ("float16", "int8") for weight in (0.0, 0.5)],
    ids=lambda param: f"{param[0]}-{param[1]}",
)
def reopened(request, tmp_path) -> Reopened:
    form, weight = request.param
    embedder = HashingEmbedder(dim=64)
    options = {"ann_threshold": 50, "vector_format": form, "sentence_weight": weight}
    ingest_passages(build(tmp_path, embedder, **options), tmp_path, two_sentences(600))
    fresh = build(tmp_path, embedder, **options)
    fresh._open()
    assert fresh._vectors is not None
    token, pack = fresh._vectors._search_pack()
    assert token is not None and pack.vectors.dtype == {"float16": "<f2", "int8": "i1"}[form]
    queries = embed_unit(embedder, ["sea waves", "physician", "line 3 of forest trail", "note 7"])
    return Reopened(form, weight, fresh._vectors, pack, queries)


def test_a_search_through_the_index_decodes_only_its_candidates_rows(reopened) -> None:
    vectors, pack, queries = reopened.vectors, reopened.pack, reopened.queries
    sentence_weight = reopened.sentence_weight
    found = [vectors.search(query, 5) for query in queries]
    arrays, approximate = vectors._arrays()
    assert approximate is not None
    assert not arrays.decoded  # the pack's float32 matrix was never made
    # Each query decoded its candidates' rows (and their sentences'), not the pack's.
    per_passage = 1 + (2 if sentence_weight else 0)
    assert arrays.decoded_rows == len(queries) * candidates_for(5) * per_passage
    assert len(pack.owners) == (1_200 if sentence_weight else 0)
    assert candidates_for(5) * per_passage < len(pack.vectors)
    # The same candidates scored from the whole decoded pack: the same hits and scores.
    matrix, sentences = PackArrays(pack, sentence_weight).exact()
    for query, hits in zip(queries, found, strict=True):
        rows, scores = rescored_top_k(
            approximate.index,
            approximate.chunk_rows,
            matrix,
            query,
            5,
            sentences=sentences,
            sentence_weight=sentence_weight,
        )
        assert hits and hits == [
            (int(pack.ids[r]), float(s)) for r, s in zip(rows, scores, strict=True)
        ]
    # A search allowing most passages is exact: it decodes the pack, once.
    vectors.search(queries[0], 5, allowed=pack.ids[:500])
    assert arrays.decoded


def test_a_filtered_search_decodes_only_the_allowed_passages_rows_when_they_are_few(
    reopened,
) -> None:
    vectors, pack, queries = reopened.vectors, reopened.pack, reopened.queries
    sentence_weight = reopened.sentence_weight
    selective, broad = pack.ids[::10], pack.ids[: 2 * len(pack.ids) // 3]  # 10%, 67%
    matrix, sentences = PackArrays(pack, sentence_weight).exact()

    def exact(query, allowed):  # what every filtered search computed before
        rows, scores = top_k(
            matrix,
            query,
            10,
            mask=np.isin(pack.ids, allowed),
            sentences=sentences,
            sentence_weight=sentence_weight,
        )
        return [(int(pack.ids[r]), float(s)) for r, s in zip(rows, scores, strict=True)]

    for query in queries:
        found = vectors.search(query, 10, allowed=selective)
        assert found and found == exact(query, selective)
        assert {rowid for rowid, _ in found} <= set(selective.tolist())
    arrays, _ = vectors._arrays()
    assert not arrays.decoded  # the pack's float32 matrix was never made
    # Each query decoded its allowed passages' rows and their sentences', no more.
    per_passage = 1 + (2 if sentence_weight else 0)
    assert arrays.decoded_rows == len(queries) * len(selective) * per_passage
    for query in queries:
        found = vectors.search(query, 10, allowed=broad)
        assert found and found == exact(query, broad)
    assert arrays.decoded  # most passages allowed: the whole pack, as before


def test_a_partitioned_int8_knowledge_base_searches_as_exact_across_ingests(tmp_path):
    """Its codes handed over to the partition: merged into the next pack, searched
    (filtered too), copied, and back below the partition's size, as exact search finds."""
    embedder = HashingEmbedder(dim=64)
    options = {"vector_format": "int8", "sentence_weight": 0.5}
    folder = tmp_path / "kb.db.vectors"

    def source(path="kb.db", threshold=50):
        opened = build(tmp_path, embedder, path=path, ann_threshold=threshold, **options)
        opened._open(create=True)
        opened._vectors._index.partition_from = 300
        return opened

    def searched_as_exact(path="kb.db") -> None:
        approximate, exact = source(path), source(path, threshold=10_000)
        # Queries whose top 5 tie no other passage (the partition may order ties otherwise).
        for text in ("sea waves", "physician clinic", "note 77", "glad ending 12"):
            query = Query(text, k=5)
            found, expected = run(approximate.retrieve(query)), run(exact.retrieve(query))
            assert found and [(h.id, h.score) for h in found] == [(h.id, h.score) for h in expected]
            assert approximate._vectors is not None
            arrays, index = approximate._vectors._arrays()
            assert index is not None  # through the approximate index
            rowids = arrays.ids[:40]
            vector = embed_unit(embedder, [text])[0]
            assert approximate._vectors.search(vector, 5, rowids) == exact._vectors.search(
                vector, 5, rowids
            )

    writer = source()
    ingest_passages(writer, tmp_path, passages(400))
    [first] = folder.glob("*.ivf-codes.npy")
    assert not list(folder.glob("*.vectors.npy"))  # handed over
    searched_as_exact()
    ingest_passages(writer, tmp_path, passages(500))  # merged from the handed-over pack
    [second] = folder.glob("*.ivf-codes.npy")
    assert second != first and not list(folder.glob("*.vectors.npy"))
    index = IvfIndex.open(Path(str(second)[: -len(".ivf-codes.npy")]), 64)
    assert index is not None and index.trained < len(index)  # new rows assigned, no retrain
    searched_as_exact()
    writer._open().close()
    shutil.copytree(folder, tmp_path / "copy.db.vectors")
    shutil.copy(tmp_path / "kb.db", tmp_path / "copy.db")
    searched_as_exact("copy.db")
    # The copy's vectors back into database rows (read through the partition's order).
    unpacked = build(tmp_path, embedder, path="copy.db", vector_pack=False, **options)
    expected = run(source("copy.db", threshold=10_000).retrieve(Query("sea waves", k=5)))
    ingest_passages(unpacked, tmp_path, passages(500))
    assert not list((tmp_path / "copy.db.vectors").glob("*.npy"))
    assert run(unpacked.retrieve(Query("sea waves", k=5))) == expected
    ingest_passages(source(), tmp_path, passages(60), prune=True)  # below the partition
    assert not list(folder.glob("*.ivf-*")) and len(list(folder.glob("*.vectors.npy"))) == 1
    searched_as_exact()
