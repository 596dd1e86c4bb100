"""The built-in hashing embedder passes the embedding conformance suite."""

from __future__ import annotations

import numpy as np
import pytest

from kairox.default_plugins.hashing_embedder import HashingEmbedder
from kairox.plugin_host.manager import build_plugin_manager
from kairox.testing import EmbeddingConformance


class TestHashingEmbedderConformance(EmbeddingConformance):
    @pytest.fixture
    def embedding_backend(self):
        return (
            build_plugin_manager(entry_points=False)
            .registry.embedding_backends["hashing"]
            .factory()
        )


def test_name_pins_the_width():
    assert HashingEmbedder(64).name == "hashing-64"
    assert HashingEmbedder().dim == 384


def test_stable_across_processes_and_unit_length():
    vector = HashingEmbedder(16).embed(["the same words"])[0]
    # blake2b-based, so this exact vector is the same in every process and on every machine
    assert np.isclose(np.linalg.norm(vector), 1.0)
    again = HashingEmbedder(16).embed(["The SAME words"])[0]
    np.testing.assert_array_equal(vector, again)


def test_rejects_tiny_widths():
    with pytest.raises(ValueError, match="at least 8"):
        HashingEmbedder(4)
