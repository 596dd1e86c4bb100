"""The composite's local path: sources that all answer locally are asked in turn, then fused
once, with no thread hand-off per source.

When every source of a composite defines ``retrieve_local`` (its answer is local disk and
CPU work: :class:`~kairox.retrieval.model.Source`) and needs no query vector or one its
embedder makes locally, a retrieval asks them one after another:

* a synchronous one (``retrieve_sync``: the CLI, ``kx.search``, a session turn) in the
  calling thread, with no event loop at all;
* an ``async`` one (``await retrieve``: ``kx.asearch``) on the loop's own thread while the
  group's answers take less than ``loop_budget_ms`` of CPU time (a running average), else in
  one worker thread for the whole group (the first one too, as its cost is not known yet).

Beside sources that must be asked concurrently (a remote one, or one that overran its
deadline), the local ones, once known to be that cheap, are asked on the loop's thread
while the others' tasks run, instead of in worker threads of their own.

Why in turn: each such answer is a millisecond or two of SQLite and Python. A hand-off per
source (an executor submit and a loop wake-up for each) costs about as much as the answer,
and the overlap it buys is small: the Python half of every answer holds the GIL. Two
sqlite-fts knowledge bases of 1k or 10k SciFact passages each, asked concurrently: 1.3-1.9x
the time of asking them in turn (``benchmarks/facade_overhead.py --kbs 2``). Where the
answers mostly wait instead (every core busy with other processes, or a cold disk), threads
of their own finish sooner, as each gets its share of the machine: then, judged by
:class:`TurnCosts`, the sources are asked concurrently, and once in a while in turn again.

Why the loop may be held: for a few milliseconds (:data:`LOOP_BUDGET_MS`), a twentieth of
the 100 ms after which asyncio's debug mode calls a callback slow; a group that costs more
is asked in a worker thread instead.

Deadlines: a source asked in the calling thread cannot be abandoned at its deadline, which
counts from the start of the retrieval as on the loop (the caller waited for the sources
asked before it too). One that answers past it is reported ``timeout`` ("no answer within N
ms"), its late answer dropped as the loop would have; one whose deadline passed before its
turn is reported so without being asked; and from then on that source is asked in a worker
thread of its own, where its deadline holds. In the one worker
thread, the caller stops waiting at the longest deadline: the sources not answered by then
are reported ``timeout`` and the thread asks no more. Unlike the loop's, a report's latency
here is the source's own time (the sources before it excluded).
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox.retrieval.answers import Outcome, consume_outcome, filter_refusal
from kairox.retrieval.embedding import (
    QueryEmbeddingError,
    embed_query,
    embedding_failed,
    embeds_locally,
)
from kairox.retrieval.model import FAN_OUT, SourceReport, SourceStatus

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from kairox.retrieval.model import Query, RetrievalResult, Source

__all__ = ["LOOP_BUDGET_MS", "LocalPath", "TurnCosts"]

#: How long (ms of CPU time) the local sources' answers may take (a running average) for an
#: ``async`` retrieval to ask them on the event loop's thread rather than in one worker thread.
LOOP_BUDGET_MS = 5.0

_LATER = "later searches ask it in a worker thread"

#: Asking in turn is left for threads of their own while the local sources' answers
#: typically (the median of the last :data:`JUDGED_OVER` searches in turn) wait this long (ms)
#: beyond their CPU time, and more than twice it: a CPU every other process contends for (or
#: a cold disk), where each thread of its own gets a share.
WAITING_MS = 10.0
#: How many searches in turn the waiting is judged over (at least :data:`JUDGED_AFTER`);
#: while it lasts, one search in :data:`PROBE_EVERY` is asked in turn again, to see whether
#: it has passed.
JUDGED_OVER = 8
JUDGED_AFTER = 4
PROBE_EVERY = 16


@dataclass
class TurnCosts:
    """What asking the local sources in turn costs (in ms), and whether to ask them in turn
    this time."""

    #: the CPU time, a running average (None before the first)
    cpu_ms: float | None = None
    #: the wall time beyond the CPU time, of the last searches in turn
    waits: deque[float] = field(default_factory=lambda: deque(maxlen=JUDGED_OVER))
    passed: int = 0

    def note(self, cpu_ms: float, wall_ms: float) -> None:
        # A running average: one slow answer does not send the group off the loop's thread.
        self.cpu_ms = cpu_ms if self.cpu_ms is None else self.cpu_ms + (cpu_ms - self.cpu_ms) / 4
        self.waits.append(max(0.0, wall_ms - cpu_ms))

    def waiting(self) -> bool:
        """Whether the answers mostly wait (for a CPU or the disk) rather than compute; a
        median, so that one preempted search changes nothing."""
        if self.cpu_ms is None or len(self.waits) < JUDGED_AFTER:
            return False
        waited = statistics.median(self.waits)
        return waited > WAITING_MS and waited > 2 * self.cpu_ms

    def take_turn(self) -> bool:
        """Whether this search asks the local sources in turn (one call per search)."""
        if not self.waiting():
            self.passed = 0
            return True
        self.passed += 1
        if self.passed >= PROBE_EVERY:
            self.passed = 0
            return True
        return False


class LocalPath:
    """The local path of :class:`~kairox.retrieval.composite.CompositeWorkspaceRetriever`,
    mixed into it (the composite sets the attributes and provides the methods below)."""

    _sources: tuple[Source, ...]
    #: sources that overran their deadline on this path: each is asked in a worker thread
    #: of its own from then on (and the others beside it, concurrently).
    _demoted: set[str]
    #: what asking the local sources in turn costs
    _costs: TurnCosts
    #: the most (ms) an ``async`` retrieval may hold its loop's thread (see the module)
    loop_budget_ms: float = LOOP_BUDGET_MS
    #: False: ask the sources concurrently even when all answer locally (what a benchmark
    #: compares this path with)
    local_path: bool = True

    if TYPE_CHECKING:  # what the composite provides

        def timeout_ms(self, name: str) -> int: ...
        def _depth(self, query: Query) -> int: ...
        def _request(self, source: Source, asked: Query) -> Query: ...
        def _fused(self, query: Query, outcomes: Sequence[Outcome]) -> RetrievalResult: ...
        def _answer(
            self, name: str, latency_ms: float, depth: int, hits: Any, exc: BaseException | None
        ) -> Outcome: ...

    def answers_here(self) -> bool:
        """Whether every source answers locally: each has ``retrieve_local``, needs no
        query vector or one embedded locally (:func:`kairox.retrieval.embedding.
        embeds_locally`; another embedder may be remote or slow), and none has overrun
        its deadline on this path (nor is :attr:`local_path` switched off)."""
        return (
            self.local_path
            and not self._demoted
            and all(_answers_locally(source) for source in self._sources)
        )

    def _asked_on_the_loop(self, in_turn: bool) -> frozenset[str]:
        """In a retrieval that asks some sources concurrently (a remote one, or one that
        overran its deadline): the local ones to ask on the loop's thread meanwhile, once
        their cost is known and under ``loop_budget_ms``. Asked in worker threads of their
        own, their GIL-holding half delays the remote answers' hand-back just as much, and
        the hand-offs come on top. None when ``in_turn`` is False (:meth:`TurnCosts.
        take_turn`)."""
        cost = self._costs.cpu_ms
        if not (in_turn and self.local_path) or cost is None or cost >= self.loop_budget_ms:
            return frozenset()
        return frozenset(
            source.name
            for source in self._sources
            if source.name not in self._demoted and _answers_locally(source)
        )

    def _ask_on_the_loop(
        self, names: frozenset[str], asked: Query, depth: int, begun: float
    ) -> dict[str, Outcome]:
        """The sources named ``names`` asked in turn on this thread, while the others'
        tasks run; their deadlines count from ``begun``, the start of the retrieval."""
        vectors: dict[str, Any] = {}
        outcomes: dict[str, Outcome] = {}
        cpu, wall = time.thread_time(), time.perf_counter()
        fan_out = FAN_OUT.set(len(self._sources))
        try:
            for source in self._sources:
                if source.name in names:
                    outcome = self._ask_one_here(source, asked, depth, begun, vectors)
                    outcomes[source.name] = outcome
        finally:
            FAN_OUT.reset(fan_out)
        self._note_cost(cpu, wall)
        return outcomes

    def _note_cost_in_tasks(
        self, asked: Sequence[Source], answered_at: Mapping[str, float], started: float
    ) -> None:
        """Before anything else is known: note what the local sources asked in tasks cost
        (the sum of their times, hand-offs included: an upper bound of asking them in
        turn), once all of them answered."""
        local = [source.name for source in asked if _answers_locally(source)]
        if self._costs.cpu_ms is None and local and all(n in answered_at for n in local):
            # Says nothing of waiting: no sample of that.
            self._costs.cpu_ms = sum(answered_at[name] - started for name in local) * 1000

    def _note_cost(self, cpu: float, wall: float) -> None:
        """Note what asking the local sources in turn since ``cpu`` (``time.thread_time``)
        and ``wall`` (``time.perf_counter``) cost. The budget is on the CPU time: the wall
        time stretches on a busy machine for everything on it alike (a hand-off included)
        while the work holding the loop stays the same."""
        now_cpu, now_wall = time.thread_time(), time.perf_counter()
        self._costs.note((now_cpu - cpu) * 1000, (now_wall - wall) * 1000)

    def _retrieve_here(self, query: Query) -> RetrievalResult:
        """The retrieval with every source asked in turn in the calling thread."""
        outcomes: list[Outcome] = []
        self._ask_here(query, outcomes, None)
        return self._fused(query, outcomes)

    async def _retrieve_local(self, query: Query) -> RetrievalResult:
        """The local group for an ``async`` caller: on the loop's thread while it is
        cheap (``loop_budget_ms``), else in one worker thread."""
        cost = self._costs.cpu_ms
        if cost is not None and cost < self.loop_budget_ms:
            return self._retrieve_here(query)
        return await self._retrieve_in_one_thread(query)

    async def _retrieve_in_one_thread(self, query: Query) -> RetrievalResult:
        """Every source asked in turn in one worker thread, waited for until the longest
        deadline; the sources it has not answered for by then are reported late."""
        outcomes: list[Outcome] = []
        stop = threading.Event()
        started = time.perf_counter()
        work = asyncio.ensure_future(asyncio.to_thread(self._ask_here, query, outcomes, stop))
        work.add_done_callback(consume_outcome)  # read below, unless the caller gave up
        longest = max((self.timeout_ms(s.name) for s in self._sources), default=0)
        try:
            await asyncio.wait([work], timeout=longest / 1000)
        finally:
            stop.set()  # the caller stopped waiting (or gave up): ask no more
        if work.done():
            work.result()  # a fault of this path itself is raised, as on the loop
        answered = {outcome.report.source: outcome for outcome in list(outcomes)}
        waited_ms = (time.perf_counter() - started) * 1000
        reached = "the local sources asked in turn in one worker thread had not reached it"
        final = [
            answered.get(source.name) or self._late_here(source.name, waited_ms, reached)
            for source in self._sources
        ]
        return self._fused(query, final)

    def _ask_here(
        self, query: Query, outcomes: list[Outcome], stop: threading.Event | None
    ) -> None:
        """Ask each source in turn in this thread, appending its outcome to ``outcomes``
        as it comes (a caller that stopped waiting reads what is there); stop early once
        ``stop`` is set."""
        depth = self._depth(query)
        asked = dataclasses.replace(query, k=depth)
        begun, cpu = time.perf_counter(), time.thread_time()
        vectors: dict[str, Any] = {}
        fan_out = FAN_OUT.set(len(self._sources))  # as on the loop: answers stay the same
        try:
            for source in self._sources:
                if stop is not None and stop.is_set():
                    return
                outcomes.append(self._ask_one_here(source, asked, depth, begun, vectors))
        finally:
            FAN_OUT.reset(fan_out)
        self._note_cost(cpu, begun)

    def _ask_one_here(
        self, source: Source, asked: Query, depth: int, begun: float, vectors: dict[str, Any]
    ) -> Outcome:
        name = source.name
        mine = self._request(source, asked)
        refusal = filter_refusal(source, mine.filter)
        if refusal is not None:
            return Outcome(refusal, [])
        deadline_ms = self.timeout_ms(name)
        waited_ms = (time.perf_counter() - begun) * 1000
        if waited_ms > deadline_ms:
            return self._late_here(
                name, waited_ms, "its deadline passed while the local sources before it answered"
            )
        started = time.perf_counter()
        hits: Any = None
        failure: BaseException | None = None
        try:
            mine = self._with_vector_here(source, mine, vectors)
            hits = source.retrieve_local(mine)
        except Exception as exc:  # reported like an answer that raised
            failure = exc
        now = time.perf_counter()
        latency_ms = (now - started) * 1000
        if (now - begun) * 1000 > deadline_ms:
            return self._late_here(
                name,
                latency_ms,
                f"asked in turn without a worker thread, it answered "
                f"{(now - begun) * 1000:.0f} ms into the search",
            )
        return self._answer(name, latency_ms, depth, hits, failure)

    def _with_vector_here(self, source: Source, query: Query, vectors: dict[str, Any]) -> Query:
        """``query`` with the vector ``source`` needs, embedded in this thread once per
        backend (``vectors`` keeps each backend's vector, or why it could not embed)."""
        embedder = getattr(source, "embedder", None)
        if embedder is None or embedder.name in query.embeddings:
            return query
        backend = embedder.name
        if backend not in vectors:
            try:
                vectors[backend] = embed_query(embedder, query.embed_text or query.text)
            except Exception as exc:
                vectors[backend] = embedding_failed(backend, exc)
        vector = vectors[backend]
        if isinstance(vector, QueryEmbeddingError):
            raise vector
        return dataclasses.replace(query, embeddings={**query.embeddings, backend: vector})

    def _late_here(self, name: str, latency_ms: float, why: str) -> Outcome:
        """Source ``name`` past its deadline on this path: reported as the loop reports a
        late source (its answer, if any, dropped), and the path left for later searches."""
        self._demoted.add(name)
        error = f"no answer within {self.timeout_ms(name)} ms ({why}; {_LATER})"
        return Outcome(SourceReport(name, SourceStatus.TIMEOUT, latency_ms, error=error), [])


def _answers_locally(source: Source) -> bool:
    """Whether ``source`` can be asked in the calling thread: it has ``retrieve_local`` and
    needs no query vector or one embedded locally (:func:`kairox.retrieval.embedding.
    embeds_locally`; another embedder may be remote or slow)."""
    return callable(getattr(source, "retrieve_local", None)) and embeds_locally(
        getattr(source, "embedder", None)
    )
