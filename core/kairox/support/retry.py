"""Bounded exponential backoff for calls to remote services, inside a time budget.

Cloud sources retry throttling (429) and server errors (5xx) a few times, but never past
their own deadline: a retry that could not finish in time is not started. Errors that a
retry cannot fix (bad credentials, a missing index) are raised at once.

:func:`call_with_retries` blocks between attempts; :func:`async_call_with_retries` is the
same loop for coroutines (model backends), pausing with ``asyncio.sleep`` so the event
loop keeps serving other work.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How to retry: attempts, delays (seconds) and the overall time budget.

    :param attempts: the most calls made, the first included.
    :param base_delay: the delay before the first retry; it doubles each time.
    :param max_delay: the cap on one delay.
    :param budget: seconds from the first call after which no retry starts.
    :param jitter: a fraction of each delay added at random, so clients spread out.
    """

    attempts: int = 4
    base_delay: float = 0.05
    max_delay: float = 1.0
    budget: float = 5.0
    jitter: float = 0.2

    @classmethod
    def within(cls, timeout_ms: int, **overrides: float) -> RetryPolicy:
        """A policy whose retries all fit in a source's deadline."""
        return cls(budget=timeout_ms / 1000 * 0.9, **overrides)  # type: ignore[arg-type]

    def delay(self, retry: int, suggested: float | None = None) -> float:
        """The pause before retry number ``retry`` (1-based); honours ``Retry-After``."""
        base = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        if suggested is not None:
            base = min(self.max_delay, max(base, suggested))
        return base * (1 + self.jitter * random.random())


def _pauses(
    policy: RetryPolicy,
    retryable: Callable[[Exception], bool],
    retry_after: Callable[[Exception], float | None],
    clock: Callable[[], float],
) -> Callable[[int, Exception], float | None]:
    """The rule both retry loops follow, with the budget's clock started now.

    The returned function gives the pause before retrying after attempt ``attempt`` failed
    with ``exc``, or ``None`` when the error is to be raised: the last attempt, an error a
    retry cannot fix, or a pause that would overrun the budget.
    """
    started = clock()

    def pause_after(attempt: int, exc: Exception) -> float | None:
        if attempt == policy.attempts or not retryable(exc):
            return None
        pause = policy.delay(attempt, retry_after(exc))
        if clock() - started + pause > policy.budget:
            return None
        return pause

    return pause_after


def call_with_retries(
    call: Callable[[], T],
    *,
    retryable: Callable[[Exception], bool],
    policy: RetryPolicy,
    retry_after: Callable[[Exception], float | None] = lambda exc: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call()``, retried while ``retryable(error)`` and the budget allows.

    The last error is raised unchanged when attempts or time run out, so callers see
    the service's own message.
    """
    pause_after = _pauses(policy, retryable, retry_after, clock)
    for attempt in range(1, policy.attempts + 1):
        try:
            return call()
        except Exception as exc:
            pause = pause_after(attempt, exc)
            if pause is None:
                raise
            sleep(pause)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


async def async_call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retryable: Callable[[Exception], bool],
    policy: RetryPolicy,
    retry_after: Callable[[Exception], float | None] = lambda exc: None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``await call()``, retried while ``retryable(error)`` and the budget allows.

    The asynchronous twin of :func:`call_with_retries`, with the same rules: at most
    ``policy.attempts`` calls, no retry whose pause would overrun ``policy.budget``, and
    the last error raised unchanged. Cancellation is never retried: ``CancelledError``
    is not an ``Exception``, so it passes straight through.
    """
    pause_after = _pauses(policy, retryable, retry_after, clock)
    for attempt in range(1, policy.attempts + 1):
        try:
            return await call()
        except Exception as exc:
            pause = pause_after(attempt, exc)
            if pause is None:
                raise
            await sleep(pause)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
