"""kairox.retrieval.ann: the int8 index (numkong), rebuilt incrementally, saved, rescored."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest

from kairox.retrieval.ann import (
    AnnIndex,
    candidates_for,
    key_of,
    keys_of,
    quantise,
    rescored_top_k,
    write_index,
)
from kairox.retrieval.vectors import SentenceVectors, top_k

pytest.importorskip("numkong")

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


def built(matrix: np.ndarray, keys: np.ndarray, previous: AnnIndex | None = None):
    return AnnIndex.build(keys, lambda positions: matrix[positions], DIM, previous=previous)


@pytest.fixture
def collection():
    matrix = clustered(3_000)
    index, quantised = built(matrix, keys_of(hashes(len(matrix))))
    assert (quantised, len(index), index.dim) == (len(matrix), len(matrix), DIM)
    return index, matrix


def test_rescored_candidates_find_what_exact_search_finds(collection):
    index, matrix = collection
    owners = np.arange(len(matrix))
    recall = []
    for query in clustered(50, seed=1):
        exact, _ = top_k(matrix, query, 10)
        rows, scores = rescored_top_k(index, owners, matrix, query, 10)
        recall.append(len(set(rows.tolist()) & set(exact.tolist())) / 10)
        # Scores are the exact cosines of the rows returned, best first.
        np.testing.assert_allclose(scores, matrix[rows] @ query, rtol=1e-5)
        assert list(scores) == sorted(scores, reverse=True)
    assert np.mean(recall) >= 0.98


def test_quantised_rows_keep_their_cosines():
    rows = clustered(200, seed=3)
    rows[7] = 0  # an all-zero row stays zero
    codes = quantise(rows)
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127 and not codes[7].any()
    unit = codes[:, :].astype(np.float32)
    unit[:7] /= np.linalg.norm(unit[:7], axis=1, keepdims=True)
    np.testing.assert_allclose(unit[:7] @ unit[:7].T, rows[:7] @ rows[:7].T, atol=0.02)


def test_a_rebuild_quantises_only_new_vectors_and_drops_those_that_left(collection):
    index, matrix = collection
    new_matrix = clustered(500, seed=2)
    keys = np.concatenate([keys_of(hashes(2_000)), keys_of(hashes(500, start=10_000))])
    vectors = np.concatenate([matrix[:2_000], new_matrix])  # texts 2000..2999 left
    asked: list[int] = []

    def vectors_of(positions):
        asked.extend(positions.tolist())
        return vectors[positions]

    rebuilt, quantised = AnnIndex.build(keys, vectors_of, DIM, previous=index)
    assert (quantised, len(rebuilt)) == (500, 2_500)
    assert sorted(asked) == list(range(2_000, 2_500))  # only the new ones were read
    np.testing.assert_array_equal(rebuilt.codes, quantise(vectors))
    estimates = rebuilt.scores(new_matrix[0])
    assert estimates.shape == (2_500,) and np.argmax(estimates) == 2_000
    np.testing.assert_allclose(estimates, vectors @ new_matrix[0], atol=0.02)


def test_a_saved_index_opens_mapped_and_of_its_own_width_only(collection, tmp_path):
    index, matrix = collection
    codes, keys = tmp_path / "v.ann-codes.npy", tmp_path / "v.ann-keys.npy"
    index.save(codes, keys)
    opened = AnnIndex.open(codes, keys, DIM)
    assert opened is not None and isinstance(opened.codes, np.memmap)
    np.testing.assert_array_equal(opened.keys, index.keys)
    rows, _ = rescored_top_k(opened, np.arange(len(matrix)), matrix, matrix[7], 5)
    assert rows[0] == 7
    assert AnnIndex.open(codes, keys, DIM * 2) is None
    assert AnnIndex.open(tmp_path / "missing.npy", keys, DIM) is None
    (tmp_path / "broken.npy").write_bytes(b"not an array")
    assert AnnIndex.open(tmp_path / "broken.npy", keys, DIM) is None
    assert not list(tmp_path.glob("*.partial*"))
    assert {path.stat().st_mode & 0o777 for path in (codes, keys)} == {0o600}


def test_an_index_written_block_by_block_is_the_one_built_in_memory(tmp_path):
    # More rows than one block holds, so the file is written in several.
    matrix = clustered(40_000, seed=8)
    keys = keys_of(hashes(len(matrix)))
    codes, keys_path = tmp_path / "v.ann-codes.npy", tmp_path / "v.ann-keys.npy"
    mapped = tmp_path / "vectors.npy"
    np.save(mapped, matrix)
    vectors = np.load(mapped, mmap_mode="r")
    quantised = write_index(codes, keys_path, keys, lambda at: vectors[at], DIM, mapped=(vectors,))
    written = AnnIndex.open(codes, keys_path, DIM)
    assert quantised == len(matrix) and written is not None
    expected, _ = built(matrix, keys)
    np.testing.assert_array_equal(written.keys, expected.keys)
    np.testing.assert_array_equal(written.codes, expected.codes)
    # Rebuilt from it: only the new vectors are read; those that left are dropped.
    new_keys = np.concatenate([keys[5_000:], keys_of(hashes(300, start=90_000))])
    new_matrix = np.concatenate([matrix[5_000:], clustered(300, seed=9)])
    asked: list[int] = []

    def vectors_of(positions):
        asked.extend(positions.tolist())
        return new_matrix[positions]

    again = tmp_path / "w.ann-codes.npy", tmp_path / "w.ann-keys.npy"
    assert write_index(*again, new_keys, vectors_of, DIM, previous=written) == 300
    assert sorted(asked) == list(range(35_000, 35_300))
    rebuilt = AnnIndex.open(*again, DIM)
    assert rebuilt is not None
    np.testing.assert_array_equal(rebuilt.codes, quantise(new_matrix))
    assert {path.stat().st_mode & 0o777 for path in again} == {0o600}


def test_an_index_whose_build_fails_leaves_no_codes_behind(tmp_path):
    codes, keys_path = tmp_path / "v.ann-codes.npy", tmp_path / "v.ann-keys.npy"

    def failing(positions):
        raise OSError("the pack went away")

    with pytest.raises(OSError, match="went away"):
        write_index(codes, keys_path, keys_of(hashes(500, start=50_000)), failing, DIM)
    assert not codes.exists() and not list(tmp_path.glob("*.partial*"))
    assert AnnIndex.open(codes, keys_path, DIM) is None  # so searches stay exact


def test_the_candidates_rescored_can_be_widened_up_to_every_row(collection):
    index, matrix = collection
    owners = np.arange(len(matrix))
    assert candidates_for(10) == 100 and candidates_for(30) == 300
    for query in clustered(10, seed=10):
        exact, _ = top_k(matrix, query, 10)
        every, _ = rescored_top_k(index, owners, matrix, query, 10, candidates=len(matrix))
        assert every.tolist() == exact.tolist()  # every row rescored: exact search
        one, _ = rescored_top_k(index, owners, matrix, query, 10, candidates=1)
        assert len(one) == 1


def test_a_key_is_the_hash_s_first_64_bits():
    digest = hashes(1)[0]
    assert key_of(digest) == int(digest[:16], 16)
    assert keys_of([digest]).dtype == np.uint64


def test_without_numkong_the_error_says_what_to_install(collection, monkeypatch):
    index, matrix = collection
    monkeypatch.setitem(sys.modules, "numkong", None)
    with pytest.raises(ImportError, match=r"pip install 'kairox\[ann\]'"):
        index.scores(matrix[0])


def test_rescoring_is_sentence_aware_as_exact_search_is():
    rng = np.random.default_rng(6)
    passages = clustered(2_000, seed=4)
    owners = np.sort(rng.integers(0, len(passages), 6_000))
    vectors = np.concatenate([passages, clustered(6_000, seed=5)])  # passages, then sentences
    sentence_rows = np.arange(len(passages), len(vectors))
    sentences = SentenceVectors(vectors, owners, unit=True, rows=sentence_rows)
    index, _ = built(vectors, keys_of(hashes(len(vectors))))
    for query in clustered(30, seed=7):
        exact = top_k(passages, query, 10, sentences=sentences, sentence_weight=0.5)
        found = rescored_top_k(
            index,
            np.arange(len(passages)),
            passages,
            query,
            10,
            sentences=sentences,
            sentence_weight=0.5,
        )
        assert found[0].tolist() == exact[0].tolist()
        np.testing.assert_allclose(found[1], exact[1], rtol=1e-5)
