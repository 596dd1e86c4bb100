"""Test doubles of the ``Source`` protocol for the composite retriever's tests: static lists,
a sleeper, a raiser, a thread-bound blocker, counting and broken embedders."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from kairox import testing
from kairox.retrieval import (
    CompositeWorkspaceRetriever,
    Hit,
    Query,
    RetrievalResult,
    ScoreKind,
    SourceReport,
)
from kairox.retrieval.filters import ALL_OPERATORS
from kairox.testing import run


class StaticSource:
    """Returns a fixed list of hits and records every query it is asked.

    A hit's text depends only on its id, so two sources returning one id return the same
    passage (and fusion merges them by text).
    """

    filter_support = ALL_OPERATORS  # it passes a filter through (to `received`)

    def __init__(
        self,
        name: str,
        ids: Sequence[str] = (),
        *,
        embedder: object | None = None,
        delay: float = 0.0,
        score_kind: ScoreKind = ScoreKind.BM25,
    ) -> None:
        self.name = name
        self.score_kind = score_kind
        self.hits = [
            Hit(id=i, text=f"text of {i}", score=float(len(ids) - n), source=name)
            for n, i in enumerate(ids)
        ]
        self.delay = delay
        self.received: list[Query] = []
        if embedder is not None:
            self.embedder = embedder

    async def retrieve(self, query: Query) -> list[Hit]:
        self.received.append(query)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.hits[: query.k]


class SlowSource(StaticSource):
    """Answers only after five seconds: always past any deadline used here."""

    async def retrieve(self, query: Query) -> list[Hit]:
        await asyncio.sleep(5)
        return self.hits


class RaisingSource(StaticSource):
    async def retrieve(self, query: Query) -> list[Hit]:
        raise RuntimeError("index file is corrupt")


class ThreadBoundSource(StaticSource):
    """Blocks in a worker thread, which cancellation cannot stop.

    The thread waits (up to 3 s) for ``release`` so a test can end it promptly once it
    has checked that the composite did not wait; ``finished`` is set as the thread ends.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release = threading.Event()
        self.finished = threading.Event()

    def _block(self) -> None:
        self.release.wait(3)
        self.finished.set()

    async def retrieve(self, query: Query) -> list[Hit]:
        await asyncio.to_thread(self._block)
        return self.hits


class CountingEmbedder(testing.CountingEmbedder):
    """kairox.testing's counting embedder, 4 wide, every vector filled with ``fill``."""

    def __init__(self, name: str, fill: float = 1.0, dim: int = 4) -> None:
        super().__init__(name=name, fill=fill, dim=dim)


class BrokenEmbedder(CountingEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        super().embed(texts)
        raise OSError("model file missing")


def report(result: RetrievalResult, name: str) -> SourceReport:
    return next(r for r in result.reports if r.source == name)


def retrieve(composite: CompositeWorkspaceRetriever, text: str = "q", k: int = 10):
    return run(composite.retrieve(Query(text, k=k)))
