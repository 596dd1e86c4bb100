"""A private event loop for synchronous callers of the composite, over worker threads kept
between calls.

Starting a thread per source per call costs more than a fast local source's whole answer,
so the threads outlive each call's loop. Not ``asyncio.run``: on exit it joins the thread
pool, so one source that ignored cancellation in a thread would hold the answer up until
that thread ends. Here, after a call in which a source or a stage timed out, the pool is let
go without waiting (a straggling thread finishes on its own and its result is dropped) and
the next call starts a fresh one.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from kairox.retrieval.model import RetrievalResult, SourceStatus
from kairox.support.blocking import run_blocking

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
    """Runs retrievals to completion on a fresh event loop whose default executor is a
    pool of ``workers`` threads kept from one call to the next.

    :meth:`close` lets the kept threads go.
    """

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._pool: _ReusablePool | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[], Awaitable[RetrievalResult]]) -> RetrievalResult:
        """``work()`` to completion on a private loop over the kept worker threads.

        Where a loop already runs in this thread (a notebook, an async framework calling
        a sync retriever), the private loop runs on a worker thread
        (:func:`kairox.support.blocking.run_blocking`)."""
        return run_blocking(lambda: self._run_here(work))

    def _run_here(self, work: Callable[[], Awaitable[RetrievalResult]]) -> RetrievalResult:
        pool = self._take_pool()
        loop = asyncio.new_event_loop()
        loop.set_default_executor(pool)
        result: RetrievalResult | None = None
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
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                stuck = result is None or any(
                    report.status is SourceStatus.TIMEOUT
                    for report in (*result.reports, *result.stages)
                )
                self._give_back_pool(pool, retire=stuck)

    def _take_pool(self) -> _ReusablePool:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            # Numbered so a thread dump tells one pool's threads from a retired one's.
            prefix = f"kairox-retrieve-{next(_POOL_NUMBERS)}"
            pool = _ReusablePool(max_workers=self._workers, thread_name_prefix=prefix)
        return pool

    def _give_back_pool(self, pool: _ReusablePool, *, retire: bool) -> None:
        if not retire:
            with self._lock:
                if self._pool is None:
                    self._pool = pool
                    return
        # A source may still hold one of its threads, or another call already returned
        # a pool: this one is not kept.
        pool.retire()

    def close(self) -> None:
        """Let the kept worker threads go (idle ones end at once)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.retire()
