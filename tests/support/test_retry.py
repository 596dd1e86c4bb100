"""Bounded exponential backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kairox.support.retry import RetryPolicy, async_call_with_retries, call_with_retries
from kairox.testing import run as kairox_run


class Flaky:
    def __init__(self, failures, error=None):
        self.failures = failures
        self.error = error or ConnectionError("503 Service Unavailable")
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.pauses = []

    def sleep(self, seconds):
        self.pauses.append(seconds)
        self.now += seconds

    def __call__(self):
        return self.now


class AsyncFlaky(Flaky):
    async def __call__(self):
        return super().__call__()


class AsyncFakeClock(FakeClock):
    async def sleep(self, seconds):
        self.pauses.append(seconds)
        self.now += seconds


def run(call, policy, clock=None, **kwargs):
    clock = clock or FakeClock()
    return call_with_retries(call, policy=policy, sleep=clock.sleep, clock=clock, **kwargs), clock


def run_async(call, policy, clock=None, **kwargs):
    clock = clock or AsyncFakeClock()
    coroutine = async_call_with_retries(
        call, policy=policy, sleep=clock.sleep, clock=clock, **kwargs
    )
    return kairox_run(coroutine), clock


@dataclass(frozen=True)
class Retrying:
    """One of the two retry loops, with its own flaky call, fake clock and runner."""

    flaky: type[Flaky]
    clock: type[FakeClock]
    run: Callable[..., Any]


@pytest.fixture(
    params=[Retrying(Flaky, FakeClock, run), Retrying(AsyncFlaky, AsyncFakeClock, run_async)],
    ids=["sync", "async"],
)
def retrying(request) -> Retrying:
    """The rules are the same for ``call_with_retries`` and ``async_call_with_retries``."""
    return request.param


def test_retries_retryable_errors_with_doubling_delays(retrying):
    flaky = retrying.flaky(2)
    result, clock = retrying.run(flaky, RetryPolicy(jitter=0), retryable=lambda e: True)
    assert result == "ok" and flaky.calls == 3
    assert clock.pauses == [0.05, 0.1]


def test_non_retryable_errors_raise_at_once(retrying):
    flaky = retrying.flaky(5, PermissionError("401 Unauthorized"))
    with pytest.raises(PermissionError):
        retrying.run(flaky, RetryPolicy(), retryable=lambda e: not isinstance(e, PermissionError))
    assert flaky.calls == 1


def test_attempts_are_bounded_and_the_last_error_surfaces(retrying):
    flaky = retrying.flaky(10)
    with pytest.raises(ConnectionError, match="503"):
        retrying.run(flaky, RetryPolicy(attempts=3, jitter=0), retryable=lambda e: True)
    assert flaky.calls == 3


def test_no_retry_starts_past_the_budget(retrying):
    flaky = retrying.flaky(10)
    clock = retrying.clock()
    with pytest.raises(ConnectionError):
        retrying.run(
            flaky,
            RetryPolicy(attempts=10, base_delay=0.4, budget=1.0, jitter=0),
            clock,
            retryable=lambda e: True,
        )
    assert clock.now <= 1.0 and flaky.calls == 2  # 0.4 then 0.8 would overrun


def test_retry_after_is_honoured_up_to_the_cap(retrying):
    flaky = retrying.flaky(1)
    _, clock = retrying.run(
        flaky,
        RetryPolicy(jitter=0, max_delay=0.5),
        retryable=lambda e: True,
        retry_after=lambda e: 2.0,
    )
    assert clock.pauses == [0.5]


def test_policy_within_a_deadline():
    assert RetryPolicy.within(1000).budget == pytest.approx(0.9)


# -- async_call_with_retries only ----------------------------------------------------


def test_async_cancellation_is_not_retried():
    calls = 0

    async def cancelled():
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        run_async(cancelled, RetryPolicy(), retryable=lambda e: True)
    assert calls == 1


def test_async_default_sleep_really_waits_on_the_event_loop():
    flaky = AsyncFlaky(1)
    policy = RetryPolicy(base_delay=0.001, jitter=0)
    assert kairox_run(async_call_with_retries(flaky, retryable=lambda e: True, policy=policy))
    assert flaky.calls == 2
