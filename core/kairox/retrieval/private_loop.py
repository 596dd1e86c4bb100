"""A private event loop for synchronous callers of the composite, over worker threads kept
between calls.

Starting a thread per source per call costs more than a fast local source's whole answer,
so the threads outlive each call; so does the loop. Not ``asyncio.run``: on exit it joins
the thread pool, so one source that ignored cancellation in a thread would hold the answer
up until that thread ends. Here, after a call in which a source or a stage timed out, the
pool and its loop are let go without waiting (a straggling thread finishes on its own and
its result is dropped) and the next call starts fresh ones.

Why the loop is kept too: a fresh one per call (a socket pair, an epoll descriptor, their
closing) made a call over two trivial sources in worker threads take 244 us at the median
against 168 us on a kept one. A kept loop runs its tasks' leftovers out before it
is handed on (every task is done or cancelled and awaited when a call returns); async
generators a call left open are closed when the loop is let go.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from kairox.retrieval.model import RetrievalResult, SourceStatus
from kairox.support.blocking import loop_running, run_blocking

__all__ = ["PrivateLoop"]

_POOL_NUMBERS = itertools.count(1)


class _ReusablePool(ThreadPoolExecutor):
    """The worker threads a :class:`PrivateLoop` keeps between calls: closing an event loop
    shuts its default executor down, which must not end these threads, so only
    :meth:`retire` does."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # the event loop closing; the pool outlives it

    def retire(self) -> None:
        """Let the threads go without waiting for them (one may be stuck in a source)."""
        super().shutdown(wait=False, cancel_futures=True)


class PrivateLoop:
    """Runs retrievals to completion on a private event loop whose default executor is a
    pool of ``workers`` threads, both kept from one call to the next.

    Calls from several threads at once each get a loop and pool of their own (one pair
    is kept, the surplus let go). :meth:`close` lets the kept threads and loop go.
    """

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._kept: tuple[_ReusablePool, asyncio.AbstractEventLoop] | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[], Awaitable[RetrievalResult]]) -> RetrievalResult:
        """``work()`` to completion on a private loop over the kept worker threads.

        Where a loop already runs in this thread (a notebook, an async framework calling
        a sync retriever), the private loop runs on a worker thread
        (:func:`kairox.support.blocking.run_blocking`)."""
        return run_blocking(lambda: self._run_here(work))

    def _run_here(self, work: Callable[[], Awaitable[RetrievalResult]]) -> RetrievalResult:
        pool, loop = self._take()
        result: RetrievalResult | None = None
        settled = False
        try:
            result = loop.run_until_complete(work())
            return result
        finally:
            try:
                leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in leftovers:
                    task.cancel()
                if leftovers:
                    loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
                settled = True
            finally:
                stuck = result is None or any(
                    report.status is SourceStatus.TIMEOUT
                    for report in (*result.reports, *result.stages)
                )
                self._give_back(pool, loop, keep=settled and not stuck)

    def _take(self) -> tuple[_ReusablePool, asyncio.AbstractEventLoop]:
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            return kept
        # Numbered so a thread dump tells one pool's threads from a retired one's.
        prefix = f"kairox-retrieve-{next(_POOL_NUMBERS)}"
        pool = _ReusablePool(max_workers=self._workers, thread_name_prefix=prefix)
        loop = asyncio.new_event_loop()
        loop.set_default_executor(pool)
        return pool, loop

    def _give_back(
        self, pool: _ReusablePool, loop: asyncio.AbstractEventLoop, *, keep: bool
    ) -> None:
        if keep:
            with self._lock:
                if self._kept is None:
                    self._kept = (pool, loop)
                    return
        # A source may still hold one of its threads, or another call already gave a
        # pair back: this one is not kept.
        _let_go(pool, loop)

    def close(self) -> None:
        """Let the kept worker threads (idle ones end at once) and loop go."""
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            _let_go(*kept)


def _let_go(pool: _ReusablePool, loop: asyncio.AbstractEventLoop) -> None:
    """Close ``loop`` (and the async generators left open on it) and retire ``pool``.
    From a thread where another loop runs (closing inside ``async`` code), no loop can
    run here: the generators are left to the garbage collector."""
    try:
        if not loop_running():
            loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
        pool.retire()
