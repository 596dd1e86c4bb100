"""Fixtures shared by the built-in plugins' tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kairox.retrieval import CompositeWorkspaceRetriever, Query, RetrievalResult
from kairox.retrieval.stages import StagedRetrieval


@pytest.fixture
def run_staged() -> Callable[..., RetrievalResult]:
    """``run_staged(source, text, **stages)``: ``text`` (k=5) searched through a
    :class:`StagedRetrieval` (given ``stages``: a transform, a reranker, deadlines) over
    ``source`` alone."""

    def search(source: Any, text: str, **stages: Any) -> RetrievalResult:
        composite = CompositeWorkspaceRetriever([source])
        try:
            return StagedRetrieval(composite, **stages).retrieve_sync(Query(text, k=5))
        finally:
            composite.close()

    return search
