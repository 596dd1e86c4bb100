from __future__ import annotations

import pytest
from kairox_sentence_transformers import MiniLMEmbedder


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """One loaded all-MiniLM-L6-v2 for the whole session (loading takes seconds)."""
    backend = MiniLMEmbedder()
    backend.load()
    return backend
