"""One large matrix-vector product shared with a helper thread, without ever waiting for it.

Next to other sources (``FAN_OUT`` above 1) a vector search's products get one BLAS
thread (:mod:`kairox.retrieval.blas`): a BLAS pool's second thread would spin on the core
another source needs. A large product (SciFact's 50,651 x 384 sentence vectors, 78 MB,
bound by memory) then takes one core's time even when the other core has gone idle, as it
usually has once the lexical half of a hybrid search answered while the query was being
embedded. :func:`shared_product` cuts the rows into chunks that the calling thread and one
helper thread take in turn; the helper blocks on a queue when idle (it never spins). The
caller never waits for the helper: once no chunk is left to take, it computes any chunk
the helper is still busy with itself (a helper that is not given a core costs at most
that repeated chunk), so the product is never slower than one thread by more than one
chunk.

The result is bit-for-bit the one call on one BLAS thread (what such a search computed
before): chunks start on multiples of :data:`ALIGN` rows, so OpenBLAS runs every row through
the same kernel path as in that call. (A call on several BLAS threads, as a search alone
makes, splits the rows elsewhere and can differ in the last bit of a few scores already.)
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

import numpy as np

from kairox.retrieval.blas import blas_threads
from kairox.retrieval.model import FAN_OUT

__all__ = ["ALIGN", "CHUNKS", "MIN_BYTES", "Helper", "search_product", "shared_product"]

#: Rows per chunk are a multiple of this (a kernel block's multiple), so that each row's
#: dot product is computed the same way as in one call over the whole matrix.
ALIGN = 256
#: How many chunks a product is cut into: small enough that a chunk the caller repeats
#: costs little, large enough that each is still one efficient BLAS call.
CHUNKS = 16
#: Below this many matrix bytes one call is cheaper than any hand-off.
MIN_BYTES = 8 * 1024 * 1024


class Helper:
    """One daemon thread that runs the jobs it is given, one at a time, in order."""

    def __init__(self, name: str = "kairox-scan") -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def _run(self) -> None:
        while True:
            self._jobs.get()()


_helper: Helper | None = None
_helper_lock = threading.Lock()


def _forget_helper() -> None:
    # A forked child (the benchmark's isolated runs) has none of the parent's threads.
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_helper)


def _shared_helper() -> Helper:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = Helper()
        return _helper


class _Product:
    """The chunks of one product and who has taken which."""

    def __init__(self, matrix: np.ndarray, vector: np.ndarray, chunks: int) -> None:
        rows = matrix.shape[0]
        step = max(ALIGN, -(-rows // chunks // ALIGN) * ALIGN)
        self.matrix = matrix
        self.vector = vector
        self.bounds = [(start, min(start + step, rows)) for start in range(0, rows, step)]
        self.out = np.empty(rows, dtype=np.result_type(matrix, vector))
        self.done = [False] * len(self.bounds)
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            if self._next >= len(self.bounds):
                return None
            self._next += 1
            return self._next - 1

    def compute(self, chunk: int) -> None:
        start, end = self.bounds[chunk]
        part = self.matrix[start:end] @ self.vector  # a fresh array: no shared writes
        with self._lock:
            if not self.done[chunk]:
                self.out[start:end] = part
                self.done[chunk] = True

    def help(self) -> None:
        """The helper's job: take chunks until none is left."""
        while (chunk := self.take()) is not None:
            self.compute(chunk)

    def finish(self) -> np.ndarray:
        """The caller's part: take chunks, then repeat any the helper has not finished."""
        self.help()
        for chunk in range(len(self.bounds)):
            with self._lock:
                finished = self.done[chunk]
            if not finished:
                self.compute(chunk)
        return self.out


def shared_product(
    matrix: np.ndarray, vector: np.ndarray, *, helper: Helper | None = None, chunks: int = CHUNKS
) -> np.ndarray:
    """``matrix @ vector`` (1-D), computed by this thread and a helper thread together.

    Bit-for-bit what ``matrix @ vector`` gives on one BLAS thread. A matrix under :data:`MIN_BYTES` is one
    call here. ``helper``: the thread to share with (default: one kept per process).
    """
    if matrix.ndim != 2 or vector.ndim != 1 or matrix.nbytes < MIN_BYTES or chunks < 2:
        return matrix @ vector
    product = _Product(matrix, vector, chunks)
    if len(product.bounds) < 2:
        return matrix @ vector
    (helper or _shared_helper()).submit(product.help)
    return product.finish()


def search_product(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` for a vector search: alone, on every BLAS thread; next to other
    sources, on one BLAS thread (:func:`~kairox.retrieval.blas.blas_threads`) shared with
    the helper thread (:func:`shared_product`)."""
    with blas_threads():
        if FAN_OUT.get() > 1:
            return shared_product(matrix, vector)
        return matrix @ vector
