"""kairox.retrieval.ann: the HNSW graph (usearch), kept in step, saved, rescored exactly."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest

from kairox.retrieval.ann import AnnIndex, key_of, keys_of, rescored_top_k
from kairox.retrieval.vectors import SentenceVectors, top_k

pytest.importorskip("usearch")

DIM = 32


def clustered(count: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 20 centres: structure like real embeddings have."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, DIM))
    rows = centres[rng.integers(0, 20, count)] + 0.6 * rng.standard_normal((count, DIM))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def hashes(count: int, start: int = 0) -> list[str]:
    return [hashlib.sha256(f"text {n}".encode()).hexdigest() for n in range(start, start + count)]


@pytest.fixture
def collection():
    matrix = clustered(3_000)
    keys = keys_of(hashes(len(matrix)))
    index = AnnIndex(DIM)
    added, removed = index.sync(keys, lambda positions: matrix[positions])
    assert (added, removed, len(index)) == (len(matrix), 0, len(matrix))
    order = np.argsort(keys)
    return index, matrix, keys[order], order


def test_rescored_candidates_find_what_exact_search_finds(collection):
    index, matrix, sorted_keys, rows_of_sorted = collection
    queries = clustered(50, seed=1)
    recall = []
    for query in queries:
        exact, _ = top_k(matrix, query, 10)
        rows, scores = rescored_top_k(index, sorted_keys, rows_of_sorted, matrix, query, 10)
        recall.append(len(set(rows.tolist()) & set(exact.tolist())) / 10)
        # Scores are the exact cosines of the rows returned, best first.
        np.testing.assert_allclose(scores, matrix[rows] @ query, rtol=1e-5)
        assert list(scores) == sorted(scores, reverse=True)
    assert np.mean(recall) >= 0.98


def test_sync_adds_only_new_vectors_and_removes_those_that_left(collection):
    index, matrix, _, _ = collection
    kept = keys_of(hashes(2_000))  # texts 1000..2999 left
    new_matrix = clustered(500, seed=2)
    new = keys_of(hashes(500, start=10_000))
    asked: list[int] = []

    def vectors_of(positions):
        asked.extend(positions.tolist())
        return np.concatenate([matrix[:2_000], new_matrix])[positions]

    added, removed = index.sync(np.concatenate([kept, new]), vectors_of)
    assert (added, removed, len(index)) == (500, 1_000, 2_500)
    assert sorted(asked) == list(range(2_000, 2_500))  # only the new ones were read
    found = index.candidates(matrix[2_500], 50)
    assert not set(found.tolist()) & set(keys_of(hashes(1_000, start=2_000)).tolist())


def test_a_saved_graph_opens_mapped_and_of_its_own_width_only(collection, tmp_path):
    index, matrix, sorted_keys, rows_of_sorted = collection
    path = tmp_path / "vectors.usearch"
    index.save(path)
    opened = AnnIndex.open(path, DIM)
    assert opened is not None and len(opened) == len(index)
    query = matrix[7]
    rows, _ = rescored_top_k(opened, sorted_keys, rows_of_sorted, matrix, query, 5)
    assert rows[0] == 7
    assert AnnIndex.open(path, DIM * 2) is None
    assert AnnIndex.open(tmp_path / "missing.usearch", DIM) is None
    (tmp_path / "broken.usearch").write_bytes(b"not a graph")
    assert AnnIndex.open(tmp_path / "broken.usearch", DIM) is None


def test_a_key_is_the_hash_s_first_64_bits():
    digest = hashes(1)[0]
    assert key_of(digest) == int(digest[:16], 16)
    assert keys_of([digest]).dtype == np.uint64


def test_without_usearch_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    with pytest.raises(ImportError, match=r"pip install 'kairox\[ann\]'"):
        AnnIndex(DIM)


def test_rescoring_is_sentence_aware_as_exact_search_is():
    matrix = clustered(80, seed=4)  # fewer rows than candidates: every row is rescored
    sentence_matrix = clustered(200, seed=5)
    owners = np.sort(np.random.default_rng(6).integers(0, 80, 200))
    sentences = SentenceVectors(sentence_matrix, owners, unit=True)
    keys = keys_of(hashes(80))
    index = AnnIndex(DIM)
    index.sync(keys, lambda positions: matrix[positions])
    order = np.argsort(keys)
    for query in clustered(5, seed=7):
        exact = top_k(matrix, query, 10, sentences=sentences, sentence_weight=0.5)
        found = rescored_top_k(
            index, keys[order], order, matrix, query, 10, sentences=sentences, sentence_weight=0.5
        )
        assert found[0].tolist() == exact[0].tolist()
        np.testing.assert_allclose(found[1], exact[1], rtol=1e-5)
