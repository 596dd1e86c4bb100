"""What one source's answer becomes: its report, and its hits when they are usable.

The composite asks sources in two ways (tasks on an event loop, or in the calling thread
for sources that answer locally); both turn what came back into a
:class:`~kairox.retrieval.model.SourceReport` here, so a malformed answer, an exception or
a filter the source cannot apply is reported alike whichever way it was asked.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kairox.retrieval.filters import FilterExpr, FilterUnsupportedError, describe
from kairox.retrieval.model import Hit, Source, SourceReport, SourceStatus
from kairox.support.secrets import scrub

__all__ = ["Outcome", "answer", "consume_outcome", "filter_refusal"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One source's report, plus its hits when it answered."""

    report: SourceReport
    hits: list[Hit]


def answer(
    name: str,
    latency_ms: float,
    hits: Any,
    exc: BaseException | None,
    *,
    depth: int,
    finite_scores: bool,
) -> Outcome:
    """The outcome of source ``name`` that answered in time with ``hits`` or raised ``exc``.

    ``depth``: how many hits it was asked for; ``finite_scores``: the fusion reads scores,
    so a non-finite one fails the answer.
    """
    if exc is None:
        try:
            checked = checked_hits(hits, depth, finite_scores=finite_scores)
        except (TypeError, ValueError) as bad:
            exc = bad
        else:
            return Outcome(SourceReport(name, SourceStatus.OK, latency_ms, len(checked)), checked)
    # A server may echo the request's headers in its error body: mask the key.
    error = scrub(f"{type(exc).__name__}: {exc}")
    return Outcome(SourceReport(name, SourceStatus.ERROR, latency_ms, error=error), [])


def checked_hits(hits: object, depth: int, *, finite_scores: bool) -> list[Hit]:
    """The source's hits, truncated to ``depth``; a malformed answer raises."""
    if not isinstance(hits, list | tuple):
        raise TypeError(f"retrieve() returned {type(hits).__name__}, expected a list of Hit")
    for hit in hits:
        if not isinstance(hit, Hit):
            raise TypeError(f"retrieve() returned a {type(hit).__name__} among its hits")
        # Fusion hashes text and reads span metadata; a malformed hit must fail this
        # source's report, not the whole retrieval inside fuse().
        if not (
            isinstance(hit.id, str)
            and isinstance(hit.text, str)
            and isinstance(hit.metadata, Mapping)
        ):
            raise TypeError(f"hit {hit.id!r} needs a str id, str text and mapping metadata")
        # Score fusion cannot place a NaN; rank fusion never looks at scores, and
        # ``convex`` falls back on ranks for a source with unreadable scores.
        if finite_scores and not math.isfinite(hit.score):
            raise ValueError(f"hit {hit.id!r} has a non-finite score {hit.score!r}")
    # A source may return more than asked; only the first ``depth`` are its answer.
    return list(hits[:depth])


def filter_refusal(source: Source, expr: FilterExpr | None) -> SourceReport | None:
    """The report of a source that must not be asked ``expr``, or ``None`` to ask it.

    A source without ``filter_support`` is ``skipped`` for a filtered query, and one whose
    support lacks an operator the filter uses reports ``error``: neither may answer with
    hits the filter did not select.
    """
    if expr is None:
        return None
    support = getattr(source, "filter_support", None)
    if support is None:
        return SourceReport(
            source.name,
            SourceStatus.SKIPPED,
            error=f"source {source.name!r} declares no filter support; the query has the "
            f"filter {describe(expr)}",
        )
    missing = support.first_unsupported(expr)
    if missing is None:
        return None
    error = FilterUnsupportedError(source.name, missing, support)
    return SourceReport(source.name, SourceStatus.ERROR, error=f"{type(error).__name__}: {error}")


def consume_outcome(future: asyncio.Future[Any]) -> None:
    """Mark a task's (or future's) exception as seen: its outcome is reported another way or
    not needed (else asyncio logs "exception was never retrieved")."""
    if not future.cancelled():
        future.exception()
