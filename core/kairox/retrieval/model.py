"""The retrieval data model: what a query is, what a hit is, and how a source reports back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class ScoreKind(StrEnum):
    """How to read a source's ``Hit.score``; fusion needs this to normalise fairly.

    Every kind is oriented so that higher is better once it reaches a ``Hit``: a source
    whose engine reports "lower is better" (FTS5 ``bm25()``, vector distances) flips the
    sign before returning.
    """

    BM25 = "bm25"
    COSINE = "cosine"
    DISTANCE = "distance"
    PROBABILITY = "probability"


@dataclass(frozen=True, slots=True)
class Query:
    """One retrieval request.

    :param text: what the user typed, verbatim. Sources must accept any string,
        including quotes, colons, parentheses, boolean words and the empty string.
    :param k: how many hits to return at most.
    :param filters: metadata equality filters (``{"lang": "en"}``); a list value means
        "any of these".
    """

    text: str
    k: int = 10
    filters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Query.text must be a str, got {type(self.text).__name__}")
        if self.k < 1:
            raise ValueError(f"Query.k must be at least 1, got {self.k}")


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved passage, as a source returns it (best first).

    :param id: the source's stable id for the passage.
    :param text: the passage text.
    :param score: the source's score, higher is better (see :class:`ScoreKind`).
    :param source: the name of the source that produced the hit.
    :param uri: where the passage lives (a path, an ``s3://`` url, ...), if known.
    :param metadata: anything else the source knows about the passage.
    """

    id: str
    text: str
    score: float
    source: str
    uri: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


class SourceStatus(StrEnum):
    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class SourceReport:
    """What happened to one source during one retrieval."""

    source: str
    status: SourceStatus
    latency_ms: float = 0.0
    hit_count: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    """Fused hits plus one report per source that was asked (or skipped)."""

    hits: list[Hit]
    reports: list[SourceReport]


@runtime_checkable
class WorkspaceRetriever(Protocol):
    """A source of hits: a workspace retriever or a knowledge base.

    ``name`` is unique within one composite; ``score_kind`` says how to read scores.
    ``retrieve`` returns at most ``query.k`` hits, best first. Sync engines run their
    blocking work in a thread (``asyncio.to_thread``) so one source never stalls the others.
    """

    name: str
    score_kind: ScoreKind

    async def retrieve(self, query: Query) -> list[Hit]: ...
