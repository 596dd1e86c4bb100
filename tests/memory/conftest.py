"""Helpers for the ``<memory>`` marker tests: feeding an extractor, expecting one result."""

from __future__ import annotations

import itertools

import pytest

from kairox.memory import MarkerExtractor, MemoryMarker, RejectedMarker, extract_memory_markers

#: A well-formed session marker, for placing in and around code.
MARK = '<memory scope="session">secret</memory>'


def stream(chunks: list[str]) -> tuple[str, list[MemoryMarker], list[RejectedMarker], list[str]]:
    """Feed chunks one by one; also return what each feed() call released."""
    ex = MarkerExtractor()
    released = [ex.feed(chunk) for chunk in chunks]
    released.append(ex.close())
    return "".join(released), ex.markers, ex.rejected, released


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def one_char_at_a_time(text: str) -> tuple[str, list[MemoryMarker], list[RejectedMarker]]:
    visible, markers, rejected, _ = stream(list(text))
    return visible, markers, rejected


def only_marker(text: str) -> MemoryMarker:
    _, markers, rejected = extract_memory_markers(text)
    assert rejected == []
    assert len(markers) == 1
    return markers[0]


def only_rejection(text: str) -> RejectedMarker:
    visible, markers, rejected = extract_memory_markers(text)
    assert markers == []
    assert len(rejected) == 1
    assert "<memory" not in visible.lower()
    return rejected[0]


@pytest.fixture
def database(tmp_path):
    """The one SQLite file an approval flow's store and events share."""
    return tmp_path / "kairox.db"
