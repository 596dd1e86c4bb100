"""kairox.bench.cached_embedder: a source text's cached vector, a perturbed copy's the
same plus noise of its own (cosine about 0.98), and texts traced to nothing counted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kairox.bench.cached_embedder import COSINE, CachedEmbedder
from kairox.bench.scale_corpus import perturbed

TEXTS = [
    "Alpha cells secrete glucagon when blood glucose falls in the fasting state.",
    "Beta cells release insulin after a meal raises the blood glucose level.",
    "Title of a study\nMice lacking the receptor gained weight on a normal diet.",
]


@pytest.fixture
def embedder(tmp_path):
    vectors = np.eye(3, 16, dtype=np.float16)
    cache = tmp_path / "cache.npz"
    np.savez(cache, texts=np.array(json.dumps(TEXTS)), vectors=vectors)
    return CachedEmbedder(cache)


def test_a_source_text_gets_its_cached_vector(embedder):
    np.testing.assert_array_equal(embedder.embed(TEXTS), np.eye(3, 16, dtype=np.float32))
    assert embedder.unmatched == 0


@pytest.mark.parametrize("round_", [1, 2, 7])
def test_a_perturbed_copy_gets_the_sources_vector_and_its_own_noise(embedder, round_):
    copies = [perturbed(text, round_) for text in TEXTS]
    copies[2] = copies[2].replace("Title of a study", f"Title of a study {round_}")
    vectors = embedder.embed(copies)
    cosines = np.sum(vectors * np.eye(3, 16), axis=1)
    np.testing.assert_allclose(cosines, COSINE, atol=0.01)  # noise not quite orthogonal
    # The same text, the same vector; another round's copy another one.
    np.testing.assert_array_equal(embedder.embed(copies), vectors)
    other = embedder.embed([perturbed(TEXTS[0], round_ + 10)])[0]
    assert not np.array_equal(other, vectors[0]) and embedder.unmatched == 0


def test_a_text_traced_to_nothing_gets_noise_and_is_counted(embedder):
    [vector] = embedder.embed(["Nothing like any cached text at all."])
    assert np.max(np.abs(vector[:3])) < 0.9 and embedder.unmatched == 1
    assert embedder.embedded == 1
