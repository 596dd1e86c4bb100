"""How many BLAS threads a vector search's matrix products may use.

A search over a large vector matrix is one matrix-vector product, bound by memory. Alone,
it runs on every core numpy's BLAS has; next to other sources (``FAN_OUT`` above 1, set by
the composite), on one: the BLAS pool's other thread would take the core a lexical
source or the query embedding is running on, and keeps spinning after the product ends.
On SciFact (50,651 sentence vectors) the product alone takes 2.3 ms on two threads and
3.5 ms on one, yet the hybrid's p50 went from 21.8-24.2 to 18.4 ms with one
(benchmarks/README.md, "BM25 engines at native speed").
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from kairox.retrieval.model import FAN_OUT

__all__ = ["blas_threads"]


@functools.cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads() -> Iterator[None]:
    """Inside: one BLAS thread when other sources run next to this one, else no limit."""
    if FAN_OUT.get() <= 1:
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield
