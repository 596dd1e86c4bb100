"""kairox.retrieval.ann_ivf: the partitioned int8 index (k-means on a sample, numkong
scans of the nearest clusters), rebuilt incrementally, saved, rescored exactly."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kairox.retrieval.ann import quantise, rescored_top_k
from kairox.retrieval.ann_ivf import (
    IvfIndex,
    RowUsers,
    assign,
    build_ivf,
    probes_for,
    train_centroids,
)
from kairox.retrieval.vectors import SentenceVectors, top_k

pytest.importorskip("numkong")

DIM = 32
CENTRES = 40


def clustered(count: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 40 centres (fixed ones: every call draws around the same)."""
    centres = np.random.default_rng(99).standard_normal((CENTRES, DIM))
    rng = np.random.default_rng(seed)
    rows = centres[rng.integers(0, CENTRES, count)] + 0.3 * rng.standard_normal((count, DIM))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def with_codes(index: IvfIndex, matrix: np.ndarray) -> IvfIndex:
    index.codes = quantise(matrix)[index.order]
    return index


def partition(matrix: np.ndarray, **options) -> IvfIndex:
    index, _ = build_ivf(lambda rows: matrix[rows], len(matrix), **options)
    return with_codes(index, matrix)


@pytest.fixture
def collection():
    """3,000 vectors: 1,000 passages, each with two sentences of its own."""
    matrix = clustered(3_000)
    passages = np.arange(1_000)
    owners = np.repeat(passages, 2)
    sentences = SentenceVectors(matrix, owners, unit=True, rows=np.arange(1_000, 3_000))
    return matrix, passages, sentences


def recall(index, matrix, passages, sentences, queries) -> float:
    found_share = []
    for query in queries:
        exact, _ = top_k(matrix[passages], query, 10, sentences=sentences, sentence_weight=0.5)
        rows, _ = rescored_top_k(
            index, passages, matrix[passages], query, 10, sentences=sentences, sentence_weight=0.5
        )
        found_share.append(len(set(rows.tolist()) & set(exact.tolist())) / len(exact))
    return float(np.mean(found_share))


def test_a_generous_probe_count_finds_what_exact_search_finds(collection):
    matrix, passages, sentences = collection
    index = partition(matrix, clusters=32)
    assert len(index.centroids) == 32 and len(index) == len(matrix)
    # Every row sits in exactly one cluster, ascending within it.
    assert sorted(index.order.tolist()) == list(range(len(matrix)))
    index.probes = 16
    assert recall(index, matrix, passages, sentences, clustered(30, seed=1)) == 1.0
    index.probes = 1  # one cluster of 32 misses some
    assert recall(index, matrix, passages, sentences, clustered(30, seed=1)) < 1.0


def test_a_scan_reads_the_probed_clusters_and_a_read_estimates_any_row_alike(collection):
    matrix, _, _ = collection
    index = partition(matrix, clusters=16)
    index.probes = 2
    query = clustered(1, seed=3)[0]
    scanned, estimates = index.scan(query)
    probed = index.probed(query)
    assert len(probed) == 2
    expected = np.flatnonzero(np.isin(index.cluster_of(), probed))
    np.testing.assert_array_equal(np.sort(scanned), expected)
    np.testing.assert_allclose(estimates, matrix[scanned] @ query, atol=0.03)
    np.testing.assert_allclose(index.read(query, scanned), estimates, rtol=1e-6)
    others = np.setdiff1d(np.arange(len(matrix)), scanned)[:50]
    np.testing.assert_allclose(index.read(query, others), matrix[others] @ query, atol=0.03)


def test_passages_reached_through_a_shared_sentence_are_ranked_by_their_own_rows():
    # 300 passages (copies of one text, each with noise of its own) share one sentence,
    # the query's nearest row; their own rows all sit in one cluster the query does not
    # probe. Estimated by that cluster's centroid they would tie, and 100 of them picked
    # at random miss most of the 10 best: their rows are read instead.
    rng = np.random.default_rng(7)
    query, text = clustered(2, seed=5)
    copies = text + 0.05 * rng.standard_normal((300, DIM))
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    rows = np.concatenate(([query], copies, clustered(2_000, seed=6))).astype(np.float32)
    passages = np.arange(1, 301)
    sentences = SentenceVectors(rows, passages - 1, unit=True, rows=np.zeros(300, dtype=np.int64))
    index = partition(rows, clusters=16)
    index.probes = 1
    assert not np.isin(index.cluster_of()[passages], index.probed(query)).any()
    exact, _ = top_k(rows[passages], query, 10, sentences=sentences, sentence_weight=0.5)
    found, _ = rescored_top_k(
        index, passages, rows[passages], query, 10, sentences=sentences, sentence_weight=0.5
    )
    np.testing.assert_array_equal(found, exact)


@pytest.mark.parametrize(
    ("clusters", "probes"), [(10, 10), (100, 32), (490, 32), (1_429, 90), (4_000, 250)]
)
def test_a_query_scans_a_share_of_the_clusters_and_at_least_32(clusters, probes):
    assert probes_for(clusters) == probes


def test_an_incremental_rebuild_assigns_only_new_rows_and_equals_a_fresh_one(collection):
    matrix, passages, sentences = collection
    keys = np.arange(len(matrix), dtype=np.uint64) * 7 + 1
    first = partition(matrix[:2_000], clusters=24)
    grown, assigned = build_ivf(
        lambda rows: matrix[rows], len(matrix), previous=(first, keys[:2_000]), keys=keys
    )
    grown = with_codes(grown, matrix)
    assert assigned == 1_000 and grown.trained == 2_000
    np.testing.assert_array_equal(grown.centroids, first.centroids)
    # As a fresh assignment of every row to those centroids.
    fresh = assign(first.centroids, lambda rows: matrix[rows], np.arange(len(matrix)))
    np.testing.assert_array_equal(grown.cluster_of(), fresh)
    retrained = partition(matrix, clusters=24)
    for index in (grown, retrained):
        index.probes = 12
    for query in clustered(20, seed=2):
        ours = rescored_top_k(grown, passages, matrix[passages], query, 10, sentences=sentences)
        theirs = rescored_top_k(
            retrained, passages, matrix[passages], query, 10, sentences=sentences
        )
        np.testing.assert_array_equal(ours[0], theirs[0])


def test_a_collection_grown_past_twice_its_training_is_trained_anew(collection):
    matrix, _, _ = collection
    keys = np.arange(len(matrix), dtype=np.uint64)
    small = partition(matrix[:1_000], clusters=16)
    grown, assigned = build_ivf(
        lambda rows: matrix[rows], len(matrix), previous=(small, keys[:1_000]), keys=keys
    )
    assert assigned == len(matrix) and grown.trained == len(matrix)


def test_saved_and_opened_it_scans_alike(collection, tmp_path):
    matrix, _, _ = collection
    index = partition(matrix, clusters=16)
    stem = tmp_path / "pack"
    index.save(stem, lambda rows: quantise(matrix[rows]))
    opened = IvfIndex.open(stem, DIM)
    assert opened is not None and isinstance(opened.codes, np.memmap)
    query = clustered(1, seed=4)[0]
    np.testing.assert_array_equal(opened.scan(query)[1], index.scan(query)[1])
    assert IvfIndex.open(stem, DIM + 1) is None
    assert IvfIndex.open(tmp_path / "missing", DIM) is None


def test_its_files_are_owner_only_whatever_the_umask(collection, tmp_path):
    matrix, _, _ = collection
    stem = tmp_path / "pack"
    previous = os.umask(0o022)
    try:
        partition(matrix, clusters=16).save(stem, lambda rows: quantise(matrix[rows]))
    finally:
        os.umask(previous)
    files = sorted(tmp_path.glob("pack.*"))
    assert {path.name for path in files} >= {"pack.ivf-meta.json", "pack.ivf-codes.npy"}
    assert {path.stat().st_mode & 0o777 for path in files} == {0o600}


def test_row_users_know_each_rows_passages_and_each_passages_sentences():
    # Passages 0 and 1 share a sentence (row 3); passage 2 has none.
    sentences = SentenceVectors(
        np.eye(6, dtype=np.float32), np.array([0, 0, 1]), unit=True, rows=np.array([3, 4, 3])
    )
    users = RowUsers.of(6, np.array([0, 1, 2]), sentences)
    assert users.passages[users.starts[3] : users.starts[4]].tolist() == [0, 1]
    estimates = np.array([0.1, 0.2, 0.3, 0.9, 0.5, 0.0], dtype=np.float32)
    best = users.best_sentence(estimates, np.array([0, 1, 2]))
    np.testing.assert_allclose(best[:2], [0.9, 0.9])
    assert np.isnan(best[2])


def test_training_reads_a_bounded_sample():
    matrix = clustered(5_000)
    asked: list[int] = []

    def rows_of(rows: np.ndarray) -> np.ndarray:
        asked.append(len(rows))
        return matrix[rows]

    centroids = train_centroids(rows_of, len(matrix), 8)
    assert sum(asked) == 8 * 64 and centroids.shape == (8, DIM)
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, rtol=1e-5)
