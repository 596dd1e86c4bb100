"""Safe FTS5 queries from anything a user can type (shared by every FTS5-backed source)."""

from __future__ import annotations

import re
from collections.abc import Set

_TOKEN = re.compile(r"\w+", re.UNICODE)


def match_terms(text: str, stop_words: Set[str] = frozenset()) -> list[str]:
    """The distinct terms of ``text``, each quoted for FTS5, in order; without the
    ``stop_words`` (lower-case) unless ``text`` holds nothing else."""
    terms = list(dict.fromkeys(_TOKEN.findall(text.casefold())))
    kept = [term for term in terms if term not in stop_words] or terms
    return [f'"{term}"' for term in kept]


def match_expression(text: str) -> str | None:
    """Turn anything a user can type into a safe FTS5 query: an OR of quoted terms.

    Quoting every term makes FTS5 read ``AND``, ``NOT``, ``:``, ``-``, ``*`` and
    parentheses as plain words instead of syntax. ``None`` when there is no term at all.
    """
    terms = match_terms(text)
    return " OR ".join(terms) if terms else None
