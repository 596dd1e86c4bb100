"""A ``sqlite-fts`` knowledge base searched while vectors wait as rows (an ingest's batches
written, its end not reached): the recorded pack through its approximate index, the
waiting rows exactly, as exact search over both finds, decoding only the candidates."""

from __future__ import annotations

import numpy as np
import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.default_plugins.sqlite_vector_waiting import JoinedRows, WaitingIndex
from kairox.retrieval import Document
from kairox.retrieval.ann import AnnIndex, candidates_for
from kairox.retrieval.ann_ivf import IvfIndex
from kairox.retrieval.vectors import embed_unit, passage_scores
from kairox.workspace.vector_store import PackArrays
from tests.default_plugins.vector_helpers import build, ingest_passages, passages, two_sentences

pytest.importorskip("numkong")

K = 5
CHANGED = Document(  # was on the glad ending
    "p3", "Zebra quartz lantern drifting beyond Mercury at night. Line 9 was added by hand."
)
NEW = Document("n1", "Walrus tundra orchestra playing at dawn for all. Line 8 of this new one.")
DELETED = "p10"  # on the sea waves
QUERIES = [
    "zebra quartz lantern mercury",
    "walrus tundra orchestra",
    "Note 10 tells about the sea waves",
    "Note 3 tells about the glad ending",
    "physician clinic line 4",
]


def _rowids(source) -> dict[int, str]:
    return dict(source._open()._db.execute("SELECT rowid, id FROM documents").fetchall())


def _exact(vectors, query: np.ndarray) -> list[tuple[int, float]]:
    """Today's exact search over the pack and the waiting rows together, every tie broken
    by position (``top_k``'s partition picks any of those tied at the k-th place; the
    hashing embedder ties many passages)."""
    layout = vectors._from_rows(vectors._pack_store())
    matrix, sentences = PackArrays(layout, vectors.sentence_weight).exact()
    scores = passage_scores(matrix, query, sentences, vectors.sentence_weight)
    rows = np.lexsort((np.arange(len(scores)), -scores))[:K]
    rows = rows[scores[rows] > 0]
    return [(int(layout.ids[r]), float(scores[r])) for r in rows]


@pytest.mark.parametrize(
    ("form", "partition_from", "kind"),
    [("float16", None, AnnIndex), ("int8", None, AnnIndex), ("int8", 300, IvfIndex)],
)
@pytest.mark.parametrize("sentence_weight", [0.0, 0.5])
def test_waiting_rows_are_scored_exactly_beside_the_packs_index(
    tmp_path, form, partition_from, kind, sentence_weight
):
    embedder = HashingEmbedder(dim=64)
    options = {"vector_format": form, "sentence_weight": sentence_weight}
    source = build(tmp_path, embedder, ann_threshold=50, **options)
    source._open(create=True)
    source._vectors._index.partition_from = partition_from
    ingest_passages(source, tmp_path, two_sentences(600))
    # A batch of the next ingest written (a changed, a new and a deleted document), its
    # end not reached: their vectors wait as rows.
    source.upsert([CHANGED, NEW])
    source.delete([DELETED])
    vectors = source._vectors
    assert vectors is not None and vectors.unfinished()
    arrays, approximate = vectors._arrays()
    assert approximate is not None and isinstance(approximate.index, WaitingIndex)
    assert isinstance(approximate.index.index, kind)
    names = _rowids(source)
    assert sorted(names[int(arrays.ids[p])] for p in approximate.index.fresh) == ["n1", "p3"]
    packed = len(vectors._pack_store().vectors)
    for text in QUERIES:
        query = embed_unit(embedder, [text])[0]
        found, expected = vectors.search(query, K), _exact(vectors, query)
        assert [rowid for rowid, _ in found] == [rowid for rowid, _ in expected]
        np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-6)
        assert DELETED not in {names[rowid] for rowid, _ in found}
    # The changed document is scored by its new rows, the new one found at all.
    for text, best in zip(QUERIES[:2], ["p3", "n1"], strict=True):
        assert names[vectors.search(embed_unit(embedder, [text])[0], K)[0][0]] == best
    # The pack was never decoded whole: the candidates' rows and the waiting ones only.
    assert not arrays.decoded
    per_passage = 1 + (2 if sentence_weight else 0)
    searches = len(QUERIES) + 2
    each = (candidates_for(K) + len(approximate.index.fresh)) * per_passage
    assert arrays.decoded_rows == searches * each and each < packed


def test_joined_rows_read_the_pack_then_the_waiting_rows(tmp_path):
    embedder = HashingEmbedder(dim=64)
    source = build(tmp_path, embedder, vector_format="float16", sentence_weight=0.0)
    ingest_passages(source, tmp_path, passages(20))
    store = source._vectors._pack_store()
    waiting = np.arange(3 * 64, dtype=np.float32).reshape(3, 64)
    joined = JoinedRows(store, waiting)
    assert joined.shape == (len(store.vectors) + 3, 64) and len(joined) == joined.shape[0]
    every = joined[:]
    np.testing.assert_array_equal(every[: len(store.vectors)], store.rows())
    np.testing.assert_array_equal(every[len(store.vectors) :], waiting)
    rows = np.array([len(store.vectors) + 2, 1, len(store.vectors)])
    np.testing.assert_array_equal(joined[rows], every[rows])
    # Scored without copies: the waiting rows in one pass per query, as their copies score.
    query = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(joined.scores(rows, query), every[rows] @ query, rtol=1e-6)
