"""The options every search call takes, and the check that refuses what it cannot take.

:meth:`AppFacade.search`, its sync twin and ``Kairox.search`` take them as keywords; a
misspelt one is refused here, naming ``search()`` and what it accepts, rather than deep
inside (a ``TypeError`` about an internal method); the Python API refuses an empty query
as the CLI does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from kairox.support.errors import KairoxError

__all__ = ["EmptyQueryError", "SearchOptions", "checked_options", "checked_query"]


class SearchOptions(TypedDict, total=False):
    """The keyword options of every search call (:meth:`AppFacade.search`, its sync twin
    and ``Kairox.search``); each may be left out."""

    profile: str | None  # whose sources to search; the ``default`` profile when unset
    k: int  # how many hits (10)
    filters: Mapping[str, Any] | Any  # a metadata filter (none)
    fusion: str  # how the sources' rankings are fused (the default fusion)
    only: set[str] | None  # search only these sources (all of them)
    rerank: str | None  # a reranker instead of the profile's; "none" for no stage
    query_transform: str | None  # a query transform instead of the profile's; "none" too
    by_file: bool  # one hit per workspace file, its best chunk (False: every chunk hit)


class EmptyQueryError(KairoxError, ValueError):
    """A search for an empty (or blank) query: there is nothing to look for."""


def checked_options(options: Mapping[str, Any]) -> SearchOptions:
    """``options`` when ``search()`` takes each of them.

    :raises TypeError: for an option ``search()`` does not take, listing those it does.
    """
    unknown = sorted(set(options) - SearchOptions.__optional_keys__)
    if unknown:
        accepted = ", ".join(sorted(SearchOptions.__optional_keys__))
        raise TypeError(
            f"search() got an unexpected keyword argument {unknown[0]!r}; it accepts: {accepted}"
        )
    return SearchOptions(**options)  # type: ignore[typeddict-item]


def checked_query(text: str) -> str:
    """``text`` when it says what to look for (a person's search, not a chat prompt,
    which may be empty and still assemble a context).

    :raises EmptyQueryError: for an empty or blank query.
    """
    if not isinstance(text, str) or not text.strip():
        raise EmptyQueryError("the query is empty; say what to look for")
    return text
