"""Synchronous calls that work whether or not an event loop runs in the calling thread.

Kairox's sync verbs (``kx.search``, ``kx.context``, the framework retrievers, closing
sources) drive coroutines on an event loop of their own. A thread where a loop is already
running cannot start another (a Jupyter kernel, an async web framework calling a sync
retriever): :func:`run_blocking` then runs the call on a worker thread of its own, with
the caller's context variables, and waits for it. The caller's loop is blocked meanwhile,
as by any blocking call; ``await`` the ``a``-twins (``kx.asearch``...) to keep it running.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["blocking_twin", "loop_running", "run_blocking", "run_coroutine"]

_Result = TypeVar("_Result")
_Owner = TypeVar("_Owner")
_Params = ParamSpec("_Params")


def loop_running() -> bool:
    """Whether an event loop is running in the calling thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(call: Callable[[], _Result]) -> _Result:
    """``call()`` to completion: here, or on a worker thread when a loop runs here.

    The worker is a fresh thread per call, not a shared pool: the call may hold the
    thread for as long as a source's deadline, and a second caller must not queue
    behind it. Its exception is raised here, with its traceback. An interrupt while
    waiting (Ctrl-C, a kernel interrupt) stops the wait; the worker finishes on its own
    and its result is dropped.
    """
    if not loop_running():
        return call()
    context = contextvars.copy_context()
    outcome: Future[_Result] = Future()

    def work() -> None:
        try:
            outcome.set_result(context.run(call))
        except BaseException as exc:  # handed to the waiting caller, raised there
            outcome.set_exception(exc)

    threading.Thread(target=work, name="kairox-blocking-call", daemon=True).start()
    return outcome.result()


def run_coroutine(make: Callable[[], Coroutine[Any, Any, _Result]]) -> _Result:
    """The coroutine ``make()`` builds, run to completion on an event loop of its own:
    here, or on a worker thread when a loop runs here (:func:`run_blocking`). The
    coroutine is built where it runs, so none is left unawaited."""
    return run_blocking(lambda: asyncio.run(make()))


def blocking_twin(
    verb: Callable[Concatenate[_Owner, _Params], Coroutine[Any, Any, _Result]],
) -> Callable[Concatenate[_Owner, _Params], _Result]:
    """The blocking twin of the ``async`` method ``verb`` (``arecord_reply`` gives
    ``record_reply``): the same parameters and docstring, its coroutine run by
    :func:`run_coroutine`, so the two cannot drift apart. Bind it in the class body:
    ``record_reply = blocking_twin(arecord_reply)``.
    """

    @functools.wraps(verb)
    def twin(owner: _Owner, /, *args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        return run_coroutine(lambda: verb(owner, *args, **kwargs))

    twin.__name__ = verb.__name__.removeprefix("a")
    twin.__qualname__ = f"{verb.__qualname__.rpartition('.')[0]}.{twin.__name__}".lstrip(".")
    return twin
