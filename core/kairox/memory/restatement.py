"""When a proposal restates a memory that is already pending or approved (the merge rule).

A proposal is merged with a pending or approved memory of the same scope and place, instead
of being queued (or kept) again, when their bodies are *near-identical*: once each is
normalised (Unicode NFKC, case-folded, every run of characters other than letters and
digits made one space), the two texts are equal, or at least :data:`SIMILARITY` alike by
:class:`difflib.SequenceMatcher` ratio (a typo, a missing article, a changed full stop).

* Same key: a near-identical body is the same value (same key, same meaning) and merges;
  a different body is a new value, queued to supersede the current one.
* Another key (or none): a near-identical body merges only when it has at least
  :data:`MIN_WORDS_ACROSS_KEYS` words; "yes" under two keys says two different things.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from difflib import SequenceMatcher
from typing import Final

from kairox.memory.markers import MemoryMarker
from kairox.memory.records import MemoryRecord

__all__ = ["MIN_WORDS_ACROSS_KEYS", "SIMILARITY", "near_identical", "normalised", "restated"]

SIMILARITY: Final = 0.9
MIN_WORDS_ACROSS_KEYS: Final = 4
_NOT_WORD: Final = re.compile(r"[\W_]+")


def normalised(body: str) -> str:
    """``body`` as the merge rule compares it: NFKC, case-folded, words split by one space."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", body).casefold()).strip()


def near_identical(a: str, b: str) -> bool:
    """Whether two normalised bodies are equal or at least :data:`SIMILARITY` alike."""
    return _Comparison(b).matches(a)


class _Comparison:
    """One normalised body compared with many: its matcher is built once (the costly part)."""

    def __init__(self, body: str) -> None:
        self.body = body
        self._matcher = SequenceMatcher(None, autojunk=False)
        self._matcher.set_seq2(body)

    def matches(self, other: str) -> bool:
        if other == self.body:
            return True
        shorter, longer = sorted((len(other), len(self.body)))
        if not shorter or 2 * shorter / (shorter + longer) < SIMILARITY:
            return False  # the ratio can be no higher than this
        self._matcher.set_seq1(other)
        # The cheap upper bound first: most pairs are told apart without the full comparison.
        return self._matcher.quick_ratio() >= SIMILARITY and self._matcher.ratio() >= SIMILARITY


def restated(marker: MemoryMarker, candidates: Iterable[MemoryRecord]) -> MemoryRecord | None:
    """The pending or approved memory ``marker`` restates, if any (same key first).

    ``candidates`` are the live records of the marker's scope and place.
    """
    proposed = _Comparison(normalised(marker.body))
    same_key: list[MemoryRecord] = []
    other: list[MemoryRecord] = []
    for record in candidates:
        if marker.key is not None and record.key == marker.key:
            same_key.append(record)
        else:
            other.append(record)
    for record in same_key:
        if proposed.matches(normalised(record.body)):
            return record
    if len(proposed.body.split()) < MIN_WORDS_ACROSS_KEYS:
        return None
    for record in other:
        if proposed.matches(normalised(record.body)):
            return record
    return None
