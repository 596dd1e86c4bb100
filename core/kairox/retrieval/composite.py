"""The composite retriever: ask every source at once, each under its own deadline, then fuse.

One slow or broken source costs at most its own deadline and shows up as a report; it never
fails the retrieval or holds it up. The query is embedded once per embedding backend in
use, not once per source, and handed to dense sources in ``Query.embeddings``. Sources
that all answer locally are asked in turn instead, with no thread hand-off each
(:mod:`kairox.retrieval.composite_local`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kairox.retrieval.answers import Outcome, answer, consume_outcome, filter_refusal
from kairox.retrieval.composite_local import LocalPath, TurnCosts
from kairox.retrieval.embedding import QueryEmbeddingError, embed_query, embedding_failed
from kairox.retrieval.filters import FilterExpr, all_of
from kairox.retrieval.fusion import (
    DEFAULT_FUSION,
    SCORE_METHODS,
    check_method,
    check_weights,
    fuse,
)
from kairox.retrieval.model import (
    FAN_OUT,
    FusedHit,
    Hit,
    Query,
    RetrievalResult,
    ScoreKind,
    Source,
    SourceReport,
    SourceStatus,
)
from kairox.retrieval.private_loop import PrivateLoop

__all__ = ["CANDIDATE_DEPTH", "CompositeWorkspaceRetriever", "QueryEmbeddingError", "Rescore"]

#: How many hits each source is asked for when ``candidates`` is not given (``k`` when
#: larger): the fused ranking is cut to ``k`` afterwards, so its top ranks are the same
#: for every ``k`` up to this depth (``kairox search -k 5`` and ``-k 100`` agree).
CANDIDATE_DEPTH = 100

#: ``rescore(query, fused)``: the fused candidates re-scored and re-ordered, best first,
#: before the cut to ``k`` (e.g. :class:`kairox.workspace.file_ranking.FileRanking`).
Rescore = Callable[[str, list[FusedHit]], list[FusedHit]]


class CompositeWorkspaceRetriever(LocalPath):
    """Fans a query out to several sources concurrently and fuses their hits.

    :param sources: the retrievers to ask (workspace retrievers and knowledge bases
        alike). Names must be unique.
    :param timeouts_ms: per-source deadlines by name; others get ``default_timeout_ms``.
    :param default_timeout_ms: the deadline for a source not in ``timeouts_ms``.
    :param weights: per-source fusion weights by name (default 1.0; 0 switches a source's
        hits off without skipping the call).
    :param fusion: ``"convex"`` (default: min-max scores weighted by score kind, tuned on
        SciFact train), ``"rrf"``, ``"minmax"`` or ``"dbsf"`` (see
        :mod:`kairox.retrieval.fusion`).
    :param rrf_k: the RRF constant.
    :param candidates: how many hits to ask each source for, fused before the cut to
        ``k``; default ``max(query.k, CANDIDATE_DEPTH)``: a fixed depth keeps the top ranks
        independent of ``k``, and deeper lists fuse better than exactly ``k``.
    :param rescore: re-scores the fused candidates (all of them, before the cut to ``k``).
    :param skipped: sources that are configured but cannot be used, name -> reason (for
        example ``"kind 'tantivy' is not installed: kairox install kairox-tantivy"``).
        Each retrieval reports them as ``skipped`` with that reason.

    Reports come in the order of ``sources``, then the skipped sources in the order given.

    Sources that block (a synchronous client library in ``asyncio.to_thread``) run on
    the event loop's default executor: :meth:`retrieve_sync` brings its own with a worker
    per source; an ``async`` caller with many blocking sources should give its loop one
    too (``loop.set_default_executor(ThreadPoolExecutor(2 * len(sources) + 1))``), as the
    default of ``min(32, CPUs + 4)`` workers makes the surplus wait for a free thread.
    :meth:`close` lets the kept threads go.

    :raises ValueError: for a duplicate source name (naming it), an unknown fusion method,
        a bad weight or timeout, or a weight/timeout for a name that is not configured.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        timeouts_ms: Mapping[str, int] | None = None,
        default_timeout_ms: int = 800,
        weights: Mapping[str, float] | None = None,
        fusion: str = DEFAULT_FUSION,
        rrf_k: int = 60,
        candidates: int | None = None,
        skipped: Mapping[str, str] | None = None,
        source_filters: Mapping[str, FilterExpr | None] | None = None,
        rescore: Rescore | None = None,
    ) -> None:
        self._sources: tuple[Source, ...] = tuple(sources)
        # A knowledge base's own `filter` (kairox.toml), ANDed into every query it gets.
        self._source_filters = {k: v for k, v in (source_filters or {}).items() if v}
        self._skipped: dict[str, str] = dict(skipped or {})
        seen: set[str] = set()
        for name in [source.name for source in self._sources] + list(self._skipped):
            if name in seen:
                raise ValueError(f"two retrieval sources are named {name!r}; names must be unique")
            seen.add(name)

        check_method(fusion)
        self._weights: dict[str, float] = dict(weights or {})
        check_weights(self._weights)
        self._timeouts_ms: dict[str, int] = dict(timeouts_ms or {})
        for name, ms in [*self._timeouts_ms.items(), ("default", default_timeout_ms)]:
            if not ms > 0:
                raise ValueError(f"timeout for {name!r} must be > 0 ms, got {ms!r}")
        # A weight or timeout for a name nobody configured is almost always a typo;
        # silently ignoring it would leave the user wondering why it has no effect.
        for label, names in (("weights", self._weights), ("timeouts_ms", self._timeouts_ms)):
            unknown = sorted(set(names) - seen)
            if unknown:
                raise ValueError(
                    f"{label} mentions unknown sources {unknown}; configured: {sorted(seen) or 'none'}"
                )
        if rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
        if candidates is not None and candidates < 1:
            raise ValueError(f"candidates must be >= 1 or None, got {candidates}")

        self._default_timeout_ms = default_timeout_ms
        self._fusion = fusion
        self._rrf_k = rrf_k
        self._candidates = candidates
        self._rescore = rescore
        # One worker per source, one per query embedding, one spare.
        self._private_loop = PrivateLoop(workers=2 * len(self._sources) + 1)
        self._demoted: set[str] = set()
        self._costs = TurnCosts()

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources that are asked, in report order."""
        return self._sources

    @property
    def skipped(self) -> Mapping[str, str]:
        """Configured sources that cannot be used, name -> reason."""
        return dict(self._skipped)

    def timeout_ms(self, name: str) -> int:
        """The deadline for source ``name``."""
        return self._timeouts_ms.get(name, self._default_timeout_ms)

    async def retrieve(self, query: Query) -> RetrievalResult:
        """Ask every source and return the fused hits plus one report each.

        Returns within the largest source deadline (plus scheduling noise), whatever the
        sources do: a source past its deadline is not waited for. When every source
        answers locally (:meth:`answers_here`) they are asked in turn, on this loop's
        thread while that is cheap, else in one worker thread
        (:mod:`kairox.retrieval.composite_local`); otherwise concurrently.
        """
        in_turn = self._costs.take_turn()
        if in_turn and self.answers_here():
            return await self._retrieve_local(query)
        return await self._retrieve_concurrently(query, in_turn)

    def _depth(self, query: Query) -> int:
        """How many hits each source is asked for (see ``candidates``)."""
        return max(query.k, self._candidates or CANDIDATE_DEPTH)

    async def _retrieve_concurrently(self, query: Query, in_turn: bool) -> RetrievalResult:
        """Ask every source at once, each in a task of its own under its deadline: a
        source past its deadline is cancelled and not waited for. Sources that answer
        locally are asked on this loop's thread meanwhile, once known to be cheap
        (:meth:`_asked_on_the_loop`)."""
        depth = self._depth(query)
        here = self._asked_on_the_loop(in_turn)
        in_tasks = [source for source in self._sources if source.name not in here]
        # Tasks copy the context as they are made, and worker threads copy it from them:
        # every source (and query embedding) sees how many run next to it.
        fan_out = FAN_OUT.set(len(self._sources))
        try:
            embeddings = self._start_embeddings(query, in_tasks)
            # Every source that needs no query vector gets this same request.
            asked = dataclasses.replace(query, k=depth)
            started = time.perf_counter()
            answered_at: dict[str, float] = {}
            tasks: list[asyncio.Task[list[Hit]]] = []
            refused: dict[str, Outcome] = {}
            for source in in_tasks:
                mine = self._request(source, asked)
                refusal = filter_refusal(source, mine.filter)
                if refusal is not None:
                    refused[source.name] = Outcome(refusal, [])
                    continue
                task = asyncio.create_task(
                    self._call(source, mine, embeddings, answered_at),
                    name=f"kairox-source-{source.name}",
                )
                # A source past its deadline is cancelled and its outcome never read.
                task.add_done_callback(consume_outcome)
                tasks.append(task)
        finally:
            FAN_OUT.reset(fan_out)
        asked_sources = [s for s in in_tasks if s.name not in refused]
        expired: dict[asyncio.Task[list[Hit]], float] = {}
        answered_here: dict[str, Outcome] = {}
        try:
            if here:
                await asyncio.sleep(0)  # the tasks start: their answers come meanwhile
                answered_here = self._ask_on_the_loop(here, asked, depth, started)
            expired = await self._wait(tasks, started, asked_sources)
        finally:
            # Past every deadline, or the caller gave up: nobody waits for these any
            # more. A source (or an embedding) busy in a thread finishes on its own.
            for task in [*tasks, *embeddings.values()]:
                task.cancel()
        if not here:
            self._note_cost_in_tasks(asked_sources, answered_at, started)
        by_name = {**refused, **answered_here}
        for source, task in zip(asked_sources, tasks, strict=True):
            answered = answered_at.get(source.name)
            by_name[source.name] = self._outcome(source, task, depth, answered, started, expired)
        return self._fused(query, [by_name[source.name] for source in self._sources])

    def _request(self, source: Source, asked: Query) -> Query:
        """``asked`` as ``source`` gets it: with its own ``filter`` ANDed in, if it has one."""
        own = self._source_filters.get(source.name)
        if own is None:
            return asked
        return dataclasses.replace(asked, filters=all_of(asked.filter, own))

    def _fused(self, query: Query, outcomes: Sequence[Outcome]) -> RetrievalResult:
        """One report per source (then the skipped ones) and the answers fused, cut to k."""
        reports = [outcome.report for outcome in outcomes]
        reports += [
            SourceReport(name, SourceStatus.SKIPPED, error=reason)
            for name, reason in self._skipped.items()
        ]
        ranked = {o.report.source: o.hits for o in outcomes if o.report.status is SourceStatus.OK}
        kinds: dict[str, ScoreKind] = {
            source.name: source.score_kind
            for source in self._sources
            if isinstance(getattr(source, "score_kind", None), ScoreKind)
        }
        hits = fuse(
            ranked,
            method=self._fusion,
            weights=self._weights,
            rrf_k=self._rrf_k,
            score_kinds=kinds,
            limit=None if self._rescore is not None else query.k,
        )
        if self._rescore is not None:
            hits = self._rescore(query.text, hits)[: query.k]
        return RetrievalResult(hits=hits, reports=reports)

    def retrieve_sync(self, query: Query) -> RetrievalResult:
        """:meth:`retrieve` for synchronous callers (the CLI, a session turn).

        When every source answers locally (:meth:`answers_here`), they are asked in turn
        in the calling thread: no event loop, no thread hand-off. Otherwise the
        retrieval runs on a private event loop (:meth:`run_sync`) whose worker threads are
        kept from one call to the next (starting a thread per source per call costs more
        than a fast local source's whole answer), at least one per source so that none
        waits for another.
        """
        in_turn = self._costs.take_turn()
        if in_turn and self.answers_here():
            return self._retrieve_here(query)
        return self.run_sync(lambda: self._retrieve_concurrently(query, in_turn))

    def run_sync(self, work: Callable[[], Awaitable[RetrievalResult]]) -> RetrievalResult:
        """Run ``work()`` (one or more :meth:`retrieve` calls, e.g. a staged search) on a
        private loop over the kept worker threads (:class:`~kairox.retrieval.private_loop.
        PrivateLoop`); from a thread where a loop already runs, on a worker thread."""
        return self._private_loop.run(work)

    def close(self) -> None:
        """Let the kept worker threads go (idle ones end at once; also done on exit)."""
        self._private_loop.close()

    def _start_embeddings(
        self, query: Query, sources: Sequence[Source]
    ) -> dict[str, asyncio.Task[Any]]:
        """Start one query embedding per backend name that one of ``sources`` needs.

        Backends are grouped by ``name`` because the name identifies the model: two
        sources over the same model share one vector. A name the caller already put in
        ``query.embeddings`` is not embedded again.
        """
        backends: dict[str, Any] = {}
        for source in sources:
            embedder = getattr(source, "embedder", None)
            if embedder is None:
                continue
            name = embedder.name
            if name not in query.embeddings and name not in backends:
                backends[name] = embedder
        tasks: dict[str, asyncio.Task[Any]] = {}
        for name, backend in backends.items():
            task = asyncio.create_task(
                asyncio.to_thread(embed_query, backend, query.embed_text or query.text),
                name=f"kairox-embed-{name}",
            )
            # If every source needing it timed out, no one reads the outcome; say so, or
            # asyncio logs "exception was never retrieved".
            task.add_done_callback(consume_outcome)
            tasks[name] = task
        return tasks

    async def _wait(
        self,
        tasks: Sequence[asyncio.Task[list[Hit]]],
        started: float,
        sources: Sequence[Source],
    ) -> dict[asyncio.Task[list[Hit]], float]:
        """Wait until every source has answered or its deadline has passed; cancel the
        tasks of the sources that ran out of time and return them, with when.

        One wait per distinct deadline rather than one per source: sources usually share
        the default deadline, and per-source waiting costs more than a local source's
        whole answer.
        """
        deadline_of = {
            task: self.timeout_ms(source.name) for source, task in zip(sources, tasks, strict=True)
        }
        expired: dict[asyncio.Task[list[Hit]], float] = {}
        for deadline_ms in sorted(set(deadline_of.values())):
            pending = [task for task in tasks if not task.done() and task not in expired]
            if not pending:
                break
            remaining = started + deadline_ms / 1000 - time.perf_counter()
            if remaining > 0:
                # asyncio.wait, not wait_for: wait_for would wait for a cancelled task to
                # finish, and a source blocked in a thread cannot finish early.
                await asyncio.wait(pending, timeout=remaining)
            now = time.perf_counter()
            for task in pending:
                if not task.done() and deadline_of[task] <= deadline_ms:
                    task.cancel()
                    expired[task] = now
        return expired

    def _outcome(
        self,
        source: Source,
        task: asyncio.Task[list[Hit]],
        depth: int,
        answered_at: float | None,
        started: float,
        expired: Mapping[asyncio.Task[list[Hit]], float],
    ) -> Outcome:
        """Turn whatever happened to one source into its report (and hits)."""
        name = source.name
        if task in expired or answered_at is None or not task.done():
            # Past its deadline (every task is done or expired once _wait returns).
            latency_ms = (expired.get(task, time.perf_counter()) - started) * 1000
            error = f"no answer within {self.timeout_ms(name)} ms"
            return Outcome(SourceReport(name, SourceStatus.TIMEOUT, latency_ms, error=error), [])
        latency_ms = (answered_at - started) * 1000
        if task.cancelled():
            # Cancelled before its deadline and not by us: the source cancelled itself.
            error = "CancelledError: the source cancelled its own retrieval"
            return Outcome(SourceReport(name, SourceStatus.ERROR, latency_ms, error=error), [])
        exc = task.exception()
        return self._answer(name, latency_ms, depth, None if exc else task.result(), exc)

    def _answer(
        self, name: str, latency_ms: float, depth: int, hits: Any, exc: BaseException | None
    ) -> Outcome:
        finite = self._fusion in SCORE_METHODS
        return answer(name, latency_ms, hits, exc, depth=depth, finite_scores=finite)

    async def _call(
        self,
        source: Source,
        query: Query,
        embeddings: Mapping[str, asyncio.Task[Any]],
        answered_at: dict[str, float],
    ) -> Any:
        """Wait for this source's query vector (if any) and ask it; note when it answered."""
        try:
            embedder = getattr(source, "embedder", None)
            if embedder is not None and embedder.name not in query.embeddings:
                backend = embedder.name
                try:
                    # shield: this source timing out must not cancel the embedding that
                    # other sources on the same backend are still waiting for.
                    vector = await asyncio.shield(embeddings[backend])
                except Exception as exc:
                    raise embedding_failed(backend, exc) from exc
                query = dataclasses.replace(query, embeddings={**query.embeddings, backend: vector})
            return await source.retrieve(query)
        finally:
            answered_at[source.name] = time.perf_counter()
