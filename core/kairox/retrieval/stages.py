"""Search stages around the composite: a query transform before it, a reranker after it.

:class:`StagedRetrieval` wraps a :class:`~kairox.retrieval.CompositeWorkspaceRetriever`:

1. a **query transform** (``kairox_register_query_transforms``) turns the user's query into
   one or more texts to search for, and optionally a text that dense sources embed instead
   (HyDE). Each text runs through the composite; several rankings are merged by reciprocal
   rank fusion, so a passage every rephrasing finds rises.
2. a **reranker** (``kairox_register_rerankers``) reorders the best ``rerank_depth`` fused
   candidates.

Each stage runs under its own deadline. A stage that times out, raises or answers with
something it was not asked for is reported (``timeout``/``error``, in
``RetrievalResult.stages``) and skipped: the search goes on with the user's query, or keeps
the fused order. A stage never takes a search down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

from kairox.retrieval.model import (
    FusedHit,
    Query,
    RetrievalResult,
    SourceReport,
    SourceStatus,
)

__all__ = [
    "MAX_TRANSFORMED_QUERIES",
    "QueryTransform",
    "Reranker",
    "StageFailed",
    "StagedRetrieval",
    "TransformedQuery",
]

#: At most this many texts of one transform are searched (the user's included).
MAX_TRANSFORMED_QUERIES = 8
_RRF_K = 60


@dataclass(frozen=True, slots=True)
class TransformedQuery:
    """What a query transform asks for.

    :param texts: the texts to search for, each through every source; keep the user's own
        text among them unless the transform means to replace it.
    :param embed_text: a text dense sources embed instead of each searched text (HyDE's
        hypothetical passage); lexical sources keep searching ``texts``.
    :param note: a few words for the stage report (``"3 rephrasings"``).
    """

    texts: tuple[str, ...]
    embed_text: str | None = None
    note: str = ""


@runtime_checkable
class QueryTransform(Protocol):
    """Rewrites a query before the sources are asked; ``transform`` may be async."""

    name: str

    def transform(self, query: Query) -> TransformedQuery | Awaitable[TransformedQuery]: ...


@runtime_checkable
class Reranker(Protocol):
    """Reorders fused candidates; returns some of the given hits, best first (may be async).

    Hits it leaves out keep their fused order after the ones it returned: a reranker
    reorders, it never loses a candidate.
    """

    name: str

    def rerank(
        self, query: Query, hits: Sequence[FusedHit]
    ) -> Sequence[FusedHit] | Awaitable[Sequence[FusedHit]]: ...


class StageFailed(Exception):
    """A stage's answer was unusable; the message says how (raised inside the runner)."""


@dataclass(eq=False)
class StagedRetrieval:
    """A composite with an optional query transform and reranker, each under a deadline.

    :param composite: the sources and their fusion.
    :param transform: the query transform, or ``None``.
    :param reranker: the reranker, or ``None``.
    :param rerank_depth: how many fused candidates the reranker sees (the composite is asked
        for at least that many).
    """

    composite: Any
    _: KW_ONLY
    transform: QueryTransform | None = None
    transform_timeout_ms: int = 3000
    reranker: Reranker | None = None
    rerank_depth: int = 30
    rerank_timeout_ms: int = 2000

    def __post_init__(self) -> None:
        if self.rerank_depth < 1:
            raise ValueError(f"rerank_depth must be at least 1, not {self.rerank_depth}")

    async def retrieve(self, query: Query) -> RetrievalResult:
        """The composite's answer, with the stages applied and reported."""
        stages: list[SourceReport] = []
        planned = await self._transformed(query, stages)
        depth = max(query.k, self.rerank_depth) if self.reranker is not None else query.k
        asked = [
            dataclasses.replace(query, text=text, k=depth, embed_text=planned.embed_text)
            for text in planned.texts
        ]
        results = await asyncio.gather(*(self.composite.retrieve(q) for q in asked))
        first = results[0]
        hits = first.hits if len(results) == 1 else _rrf([r.hits for r in results])
        hits = [dataclasses.replace(hit, fused_rank=rank) for rank, hit in enumerate(hits, 1)]
        if self.reranker is not None:
            hits = await self._reranked(query, hits, stages)
        return dataclasses.replace(first, hits=hits[: query.k], stages=stages)

    def retrieve_sync(self, query: Query) -> RetrievalResult:
        """:meth:`retrieve` for synchronous callers, on the composite's kept worker threads."""
        return self.composite.run_sync(lambda: self.retrieve(query))

    # -- the stages -------------------------------------------------------------------

    async def _transformed(self, query: Query, stages: list[SourceReport]) -> TransformedQuery:
        unchanged = TransformedQuery((query.text,))
        if self.transform is None:
            return unchanged
        name = f"transform:{self.transform.name}"
        transform = self.transform
        outcome = await _run_stage(
            name, transform.transform, (query,), self.transform_timeout_ms, stages
        )
        if outcome is None:
            return unchanged
        try:
            planned = _checked_transform(outcome)
        except StageFailed as exc:
            _fail(stages, name, str(exc))
            return unchanged
        stages[-1] = dataclasses.replace(
            stages[-1], hit_count=len(planned.texts), error=planned.note or None
        )
        return planned

    async def _reranked(
        self, query: Query, hits: list[FusedHit], stages: list[SourceReport]
    ) -> list[FusedHit]:
        assert self.reranker is not None
        candidates, rest = hits[: self.rerank_depth], hits[self.rerank_depth :]
        if not candidates:
            return hits
        name = f"rerank:{self.reranker.name}"
        reranker = self.reranker
        ranked_query = dataclasses.replace(query, k=len(candidates))
        outcome = await _run_stage(
            name, reranker.rerank, (ranked_query, list(candidates)), self.rerank_timeout_ms, stages
        )
        if outcome is None:
            return hits
        try:
            order = _checked_order(outcome, candidates)
        except StageFailed as exc:
            _fail(stages, name, str(exc))
            return hits
        stages[-1] = dataclasses.replace(stages[-1], hit_count=len(candidates))
        chosen = {id(hit) for hit in order}
        reordered = order + [hit for hit in candidates if id(hit) not in chosen]
        return [
            dataclasses.replace(hit, reranked_rank=rank) for rank, hit in enumerate(reordered, 1)
        ] + rest


async def _run_stage(
    name: str,
    method: Callable[..., Any],
    args: tuple[Any, ...],
    timeout_ms: int,
    stages: list[SourceReport],
) -> Any:
    """``method(*args)`` under a deadline (in a worker thread unless it is a coroutine
    function); ``None`` after a failure, which is reported. The report appended on success
    is completed by the caller."""
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000.0

    async def run() -> Any:
        if inspect.iscoroutinefunction(method):
            return await method(*args)
        outcome = await asyncio.to_thread(method, *args)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome

    try:
        outcome = await asyncio.wait_for(run(), timeout_ms / 1000.0)
    except TimeoutError:
        stages.append(
            SourceReport(
                name,
                SourceStatus.TIMEOUT,
                latency_ms=elapsed(),
                error=f"no answer within {timeout_ms} ms; kept the search as it was",
            )
        )
        return None
    except Exception as exc:  # a stage never takes the search down
        stages.append(
            SourceReport(
                name,
                SourceStatus.ERROR,
                latency_ms=elapsed(),
                error=f"{type(exc).__name__}: {exc}; kept the search as it was",
            )
        )
        return None
    stages.append(SourceReport(name, SourceStatus.OK, latency_ms=elapsed()))
    return outcome


def _fail(stages: list[SourceReport], name: str, why: str) -> None:
    latency = stages[-1].latency_ms if stages and stages[-1].source == name else 0.0
    report = SourceReport(
        name, SourceStatus.ERROR, latency_ms=latency, error=f"{why}; kept the search as it was"
    )
    if stages and stages[-1].source == name:
        stages[-1] = report
    else:
        stages.append(report)


def _checked_transform(outcome: object) -> TransformedQuery:
    if not isinstance(outcome, TransformedQuery):
        raise StageFailed(f"returned {type(outcome).__name__}, not a TransformedQuery")
    texts = [t for t in dict.fromkeys(outcome.texts) if isinstance(t, str) and t.strip()]
    if not texts:
        raise StageFailed("returned no text to search for")
    if outcome.embed_text is not None and not (
        isinstance(outcome.embed_text, str) and outcome.embed_text.strip()
    ):
        raise StageFailed("returned an empty text to embed")
    return dataclasses.replace(outcome, texts=tuple(texts[:MAX_TRANSFORMED_QUERIES]))


def _checked_order(outcome: object, candidates: Sequence[FusedHit]) -> list[FusedHit]:
    if isinstance(outcome, (str, bytes)) or not isinstance(outcome, Sequence):
        raise StageFailed(f"returned {type(outcome).__name__}, not a list of the given hits")
    given = {id(hit) for hit in candidates}
    seen: set[int] = set()
    order: list[FusedHit] = []
    for hit in outcome:
        if id(hit) not in given:
            raise StageFailed("returned a hit it was not given")
        if id(hit) in seen:
            raise StageFailed(f"returned hit {hit.id!r} twice")
        seen.add(id(hit))
        order.append(hit)
    return order


def _rrf(rankings: Sequence[Sequence[FusedHit]]) -> list[FusedHit]:
    """Reciprocal rank fusion of several fused rankings (one per searched text)."""
    scores: dict[tuple[str, str | None], float] = {}
    first_copy: dict[tuple[str, str | None], FusedHit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, 1):
            key = (hit.id, hit.uri)
            scores[key] = scores.get(key, 0.0) + 1.0 / (_RRF_K + rank)
            first_copy.setdefault(key, hit)
    order = sorted(scores, key=lambda key: -scores[key])
    return [dataclasses.replace(first_copy[key], score=scores[key]) for key in order]
