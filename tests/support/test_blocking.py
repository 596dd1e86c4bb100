"""``run_blocking``: a sync call inside a running event loop runs on a worker thread."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading

import pytest

from kairox.support.blocking import blocking_twin, loop_running, run_blocking

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_without_a_loop_the_call_runs_here():
    assert not loop_running()
    assert run_blocking(threading.current_thread) is threading.current_thread()


def test_inside_a_loop_it_runs_on_a_worker_with_the_callers_context():
    async def inside() -> tuple[threading.Thread, threading.Thread, str, bool]:
        WHO.set("the notebook")
        worker, caller = run_blocking(threading.current_thread), threading.current_thread()
        return worker, caller, run_blocking(WHO.get), run_blocking(loop_running)

    worker, caller, who, nested_loop = asyncio.run(inside())
    assert worker is not caller and worker.name == "kairox-blocking-call"
    assert who == "the notebook"
    # The worker has no loop of its own, so the call may start one (asyncio.run).
    assert nested_loop is False


def test_the_workers_exception_is_raised_to_the_caller():
    def fails() -> None:
        raise LookupError("no such source")

    async def inside() -> None:
        run_blocking(fails)

    with pytest.raises(LookupError, match="no such source"):
        asyncio.run(inside())


class Greeter:
    async def agreet(self, name: str, *, punctuation: str = "!") -> str:
        """Greet ``name``."""
        return f"hello {name}{punctuation}"

    greet = blocking_twin(agreet)


def test_a_blocking_twin_has_its_verbs_parameters_and_docstring_and_runs_it():
    assert Greeter().greet("ann", punctuation="?") == "hello ann?"
    assert (Greeter.greet.__name__, Greeter.greet.__qualname__) == ("greet", "Greeter.greet")
    assert Greeter.greet.__doc__ == "Greet ``name``."
    # The coroutine's parameters, and what awaiting it returns.
    assert str(inspect.signature(Greeter().greet)) == (
        "(name: 'str', *, punctuation: 'str' = '!') -> 'str'"
    )

    async def inside() -> str:
        return Greeter().greet("bob")

    assert asyncio.run(inside()) == "hello bob!"
    with pytest.raises(TypeError, match="punctuaton"):
        Greeter().greet("ann", punctuaton="?")  # type: ignore[call-arg]
