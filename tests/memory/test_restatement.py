"""The merge rule: which proposals restate a pending or approved memory."""

from __future__ import annotations

import pytest

from kairox.memory import MemoryMarker
from kairox.memory.restatement import (
    MIN_WORDS_ACROSS_KEYS,
    SIMILARITY,
    near_identical,
    normalised,
    restated,
)
from tests.conftest import memory_record


def marker(body: str, key: str | None = "editor.font", scope: str = "user") -> MemoryMarker:
    return MemoryMarker(scope=scope, key=key, body=body, raw="")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  Prefers TABS, not spaces!! ", "prefers tabs not spaces"),
        ("snake_case\tnames\n\nonly", "snake case names only"),
        ("ＦＵＬＬ width ﬁle", "full width file"),  # NFKC folds compatibility forms
        ("Straße", "strasse"),  # case-folding, not lower()
        ("...", ""),
    ],
)
def test_normalised_text(body, expected):
    assert normalised(body) == expected


def test_near_identical_is_equal_or_similar_enough():
    base = normalised("The deploy freeze starts every Friday at noon.")
    assert near_identical(base, normalised("the deploy freeze starts every friday at noon"))
    assert near_identical(base, normalised("The deploy freeze starts every Fridy at noon."))
    assert not near_identical(base, normalised("The deploy freeze starts every Monday at 9."))
    assert not near_identical(base, "")
    assert SIMILARITY == 0.9


def test_same_key_merges_the_same_value_and_not_a_new_one():
    current = memory_record(id=7, key="editor.font", body="JetBrains Mono 14px.", status="approved")
    assert restated(marker("jetbrains mono 14px"), [current]) is current
    assert restated(marker("Fira Code 13px."), [current]) is None


def test_another_key_merges_only_a_body_of_several_words():
    long_body = "Run the integration tests before every release."
    other = memory_record(id=3, key="release.checks", body=long_body, status="pending")
    assert restated(marker(long_body.upper(), key="qa.process"), [other]) is other
    short = memory_record(id=4, key="tabs", body="Yes.", status="approved")
    assert restated(marker("yes", key="dark.mode"), [short]) is None
    assert len(normalised(long_body).split()) >= MIN_WORDS_ACROSS_KEYS > 1


def test_a_keyless_session_memory_merges_with_its_restatement():
    kept = memory_record(id=9, scope="session", body="The user is on release duty this week.")
    again = marker("The user is on release duty this week", key=None, scope="session")
    assert restated(again, [kept]) is kept
    assert restated(marker("Something else entirely here.", key=None), [kept]) is None
