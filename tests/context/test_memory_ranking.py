"""kairox.context.memory_ranking: key match first, then recency, then scope."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kairox.context.memory_ranking import PreparedMemories, memory_label, timestamp, words
from kairox.memory.store import MemoryRecord


def record(id: int, key: str | None, scope: str = "user", day: int = 1, status: str = "approved"):
    stamp = f"2024-01-{day:02d}T00:00:00+00:00"
    return MemoryRecord(
        id=id,
        scope=scope,
        key=key,
        body=f"body {id}",
        status=status,
        workspace_id="ws" if scope != "user" else None,
        session_id="s" if scope == "session" else None,
        created_at=stamp,
        updated_at=stamp,
        approved_at=stamp,
    )


def prepared(memories):
    headings = {f"memory:{s}": (f"## {s}\n", 3) for s in ("user", "workspace", "session")}

    def piece(order, text, label):
        return SimpleNamespace(order=order, text=text, tokens=len(text.split()), label=label)

    return PreparedMemories(memories, piece, headings)


def labels(ranked):
    return [piece.label for _, piece in ranked]


def test_the_prompt_s_key_words_come_first_then_recency_then_scope():
    memories = [
        record(1, "editor.theme", day=5),
        record(2, "language.preferred", day=1),
        record(3, "language.editor", day=2),
        record(4, "shell", scope="session", day=5),
    ]
    ready = prepared(memories)
    # No word matches: newest first, and the session scope wins a tie on recency.
    assert labels(ready.ranked(set())) == [
        "memory 4 (shell)",
        "memory 1 (editor.theme)",
        "memory 3 (language.editor)",
        "memory 2 (language.preferred)",
    ]
    # Two words of memory 3's key beat one of memory 1's and memory 2's.
    assert labels(ready.ranked(words("which editor language?"))) == [
        "memory 3 (language.editor)",
        "memory 1 (editor.theme)",
        "memory 2 (language.preferred)",
        "memory 4 (shell)",
    ]


def test_cost_counts_every_piece_and_each_heading_once():
    ready = prepared([record(1, "a.b"), record(2, "c.d"), record(3, "e", scope="session")])
    pieces = sum(piece.tokens for _, piece in ready.base)
    assert ready.cost == pieces + 3 + 3  # two sections: user and session


def test_not_approved_memories_are_set_aside_and_an_unknown_scope_is_an_error():
    ready = prepared([record(1, "a", status="pending"), record(2, "b")])
    assert ready.not_approved == [("memory:user", "memory 1 (a)")]
    assert labels(ready.base) == ["memory 2 (b)"]
    odd = record(3, "c").__class__(**{**record(3, "c").__dict__, "scope": "team"})
    with pytest.raises(ValueError, match="unknown scope 'team'"):
        prepared([odd])


def test_helpers():
    assert words("Preferred.language x 42") == {"preferred", "language", "42"}
    assert timestamp("not a date") < timestamp("2024-01-01")
    assert timestamp("2024-01-01").tzinfo is not None
    assert memory_label(record(7, None)) == "memory 7"
