"""Exact vector search and sentence-aware scoring (``kairox.retrieval.vectors``)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.retrieval import Query
from kairox.retrieval.vectors import (
    SENTENCE_WEIGHT,
    DecodedRows,
    SentenceVectors,
    VectorSource,
    normalise,
    passage_scores,
    top_k,
)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


@pytest.fixture
def passages() -> np.ndarray:
    # Row 0 leans towards the query as a whole; row 1 does not, but one of its
    # sentences says exactly what the query asks.
    return np.stack([unit(0.8, 0.6, 0.0), unit(0.2, 0.0, 1.0), unit(0.0, 0.0, 1.0)])


@pytest.fixture
def sentences() -> SentenceVectors:
    matrix = np.stack([unit(0.9, 0.4, 0.1), unit(0.0, 1.0, 0.0), unit(1.0, 0.0, 0.0)])
    return SentenceVectors(matrix, np.array([0, 1, 1]))


def test_best_sentence_per_row_and_nan_for_a_row_without_any(sentences) -> None:
    query = unit(1.0, 0.0, 0.0)
    best = sentences.best(query, rows=3)
    assert best[0] == pytest.approx(unit(0.9, 0.4, 0.1) @ query)
    assert best[1] == pytest.approx(1.0)
    assert np.isnan(best[2])


def test_owners_in_any_order_give_the_same_best(sentences) -> None:
    shuffled = SentenceVectors(sentences.matrix[[2, 0, 1]], np.array([1, 0, 1]))
    query = unit(0.3, 0.5, 0.2)
    np.testing.assert_allclose(shuffled.best(query, 3), sentences.best(query, 3))


@pytest.mark.parametrize("owners", [[0, 1, 1, 0, 2], [1, 0, 2, 1, 0]])
def test_sentences_sharing_a_vector_score_as_if_each_had_its_own(owners) -> None:
    distinct = np.stack([unit(0.9, 0.4, 0.1), unit(0.0, 1.0, 0.0), unit(1.0, 0.0, 0.3)])
    rows = np.array([0, 1, 2, 2, 1])  # two texts appear twice
    shared = SentenceVectors(distinct, np.array(owners), rows=rows)
    expanded = SentenceVectors(distinct[rows], np.array(owners))
    for query in (unit(1.0, 0.0, 0.0), unit(0.2, 0.7, 0.1), unit(0.0, 0.1, 1.0)):
        np.testing.assert_allclose(shared.best(query, 4), expanded.best(query, 4))


def test_shared_vector_rows_must_line_up() -> None:
    matrix = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="3 sentence owners but 2 vector rows"):
        SentenceVectors(matrix, np.array([0, 0, 1]), rows=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"rows must lie in 0\.\.1"):
        SentenceVectors(matrix, np.array([0, 1]), rows=np.array([0, 2]))


def test_blend_weights_the_best_sentence_and_keeps_rows_without_sentences(
    passages, sentences
) -> None:
    query = unit(1.0, 0.0, 0.0)
    plain = passages @ query
    blended = passage_scores(passages, query, sentences, 0.5)
    best = sentences.best(query, 3)
    assert blended[0] == pytest.approx(0.5 * plain[0] + 0.5 * best[0])
    assert blended[1] == pytest.approx(0.5 * plain[1] + 0.5 * 1.0)
    assert blended[2] == pytest.approx(plain[2])  # no sentences: its own cosine
    np.testing.assert_allclose(passage_scores(passages, query, sentences, 0.0), plain)
    np.testing.assert_allclose(passage_scores(passages, query, None), plain)


def test_a_passage_with_the_asked_sentence_outranks_a_closer_whole(passages, sentences) -> None:
    query = unit(1.0, 0.0, 0.0)
    rows, _ = top_k(passages, query, 2)
    assert rows.tolist() == [0, 1]
    rows, scores = top_k(passages, query, 2, sentences=sentences, sentence_weight=1.0)
    assert rows.tolist() == [1, 0]
    assert scores[0] == pytest.approx(1.0)


def test_mismatched_sentence_input_is_refused() -> None:
    with pytest.raises(ValueError, match="2 sentence vectors but 1 owners"):
        SentenceVectors(np.ones((2, 3), np.float32), np.array([0]))
    with pytest.raises(ValueError, match="row positions"):
        SentenceVectors(np.ones((1, 3), np.float32), np.array([-1]))
    vectors = SentenceVectors(np.ones((1, 4), np.float32), np.array([0]))
    with pytest.raises(ValueError, match="the sentence vectors have 4"):
        passage_scores(np.ones((1, 3), np.float32), unit(1.0, 0.0, 0.0), vectors)


@pytest.mark.parametrize("weight", [-0.1, 1.5, "0.5", True, float("nan")])
def test_a_bad_sentence_weight_names_the_range(weight) -> None:
    embedder = HashingEmbedder(16)
    with pytest.raises(ValueError, match="sentence_weight must be a number from 0"):
        VectorSource("v", embedder, ["a"], ["a"], embedder.embed(["a"]), sentence_weight=weight)


def test_vector_source_finds_a_document_by_one_of_its_sentences() -> None:
    embedder = HashingEmbedder(256)
    texts = [
        "Gardening tips. Tomatoes want sun. Water them every morning. Mulch keeps moisture.",
        "Orbital mechanics of the rocket engine and its liquid oxygen kerosene burn.",
    ]
    sentences = [s for text in texts for s in text.split(". ")]
    owners = [row for row, text in enumerate(texts) for _ in text.split(". ")]
    source = VectorSource(
        "dense",
        embedder,
        ["garden", "rocket"],
        texts,
        embedder.embed(texts),
        sentences=SentenceVectors(embedder.embed(sentences), np.array(owners)),
    )
    assert source.sentence_weight == SENTENCE_WEIGHT
    hits = asyncio.run(source.retrieve(Query("Tomatoes want sun", k=2)))
    assert hits[0].id == "garden"
    query_vector = embedder.embed(["Tomatoes want sun"])[0]
    whole = float(source.matrix[0] @ (query_vector / np.linalg.norm(query_vector)))
    assert hits[0].score == pytest.approx(0.5 * whole + 0.5 * 1.0, abs=1e-5)


@pytest.mark.parametrize("shared_rows", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_best_of_some_passages_equals_best_of_all_at_those_rows(grouped, shared_rows):
    rng = np.random.default_rng(3)
    owners = rng.integers(0, 12, 40)  # passages 0..11; some have none
    if grouped:
        owners = np.sort(owners)
    matrix = rng.standard_normal((25 if shared_rows else 40, 8)).astype(np.float32)
    rows = rng.integers(0, 25, 40) if shared_rows else None
    sentences = SentenceVectors(matrix, owners, rows=rows)
    query = normalise(rng.standard_normal(8))[0]
    positions = np.array([11, 0, 5, 3, 14])  # 14: beyond every owner
    whole = sentences.best(query, 15)
    np.testing.assert_allclose(sentences.best_of(query, positions), whole[positions], rtol=1e-6)


def test_sentence_vectors_decoded_as_read_score_as_the_whole_matrix_does():
    rng = np.random.default_rng(3)
    stored = normalise(rng.standard_normal((12, 8))).astype(np.float16)
    owners, rows = np.array([0, 0, 1, 3, 3, 3]), np.array([4, 5, 6, 7, 4, 11])
    whole = SentenceVectors(stored.astype(np.float32), owners, unit=True, rows=rows)
    lazy_rows = DecodedRows(lambda at: stored[at].astype(np.float32), stored.shape)
    lazy = SentenceVectors(lazy_rows, owners, unit=True, rows=rows)
    query = normalise(rng.standard_normal(8))[0]
    positions = np.array([0, 2, 3])
    np.testing.assert_array_equal(lazy.best_of(query, positions), whole.best_of(query, positions))
    assert lazy_rows.decoded == 5  # the sentences of passages 0 and 3 only
    np.testing.assert_array_equal(lazy.best(query, 4), whole.best(query, 4))


def test_top_k_breaks_a_tie_at_the_kth_place_by_row_as_any_subset_of_rows_does() -> None:
    rng = np.random.default_rng(3)
    distinct = normalise(rng.standard_normal((6, 16)))
    query = distinct[0]
    close = normalise(query + 0.5 * distinct[1])
    # Rows 1..60 are one vector (one score): 5 of them make the top 6 after row 0.
    matrix = np.vstack([distinct[:1], np.repeat(close, 60, axis=0), distinct[2:]])
    rows, scores = top_k(matrix, query, 6)
    assert rows.tolist() == [0, 1, 2, 3, 4, 5]
    subset = np.array([0, 3, 9, 40, 41, 42, 50, 61])
    sub_rows, sub_scores = top_k(matrix, query, 4, mask=np.isin(np.arange(len(matrix)), subset))
    assert sub_rows.tolist() == [0, 3, 9, 40] and sub_scores[1] == sub_scores[3] == scores[1]
