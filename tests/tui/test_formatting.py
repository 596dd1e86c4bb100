"""The wording of the trace and the cards (pure functions, no Textual)."""

from __future__ import annotations

from kairox.runtime.session import CompactionResult
from kairox.store.events import StoredEvent
from kairox.tui.formatting import (
    accounting_lines,
    compaction_note,
    provenance_line,
    scope_reach,
    trace_event_lines,
)
from tests.conftest import memory_record

TRACE = {
    "budget": 3500,
    "used_tokens": 1234,
    "had_tool_output": True,
    "sources": [
        {"source": "system", "tokens": 20, "included": 1, "dropped": 0, "reasons": []},
        {"source": "memory:user", "tokens": 0, "included": 0, "dropped": 0, "reasons": []},
        {
            "source": "history",
            "tokens": 900,
            "included": 3,
            "dropped": 2,
            "reasons": ["budget: older history dropped"],
        },
    ],
}


def stored(kind: str, **payload) -> StoredEvent:
    return StoredEvent(1, "s", "/ws", "2026-01-01T00:00:00+00:00", kind, payload)


def test_accounting_names_used_budget_sources_and_reasons():
    lines = [text for text, _ in accounting_lines(TRACE, "turn 2")]
    assert lines[0] == "context · turn 2 · 1,234 / 3,500 tokens"
    assert any("tool output" in line for line in lines)
    history = next(line for line in lines if line.strip().startswith("history"))
    assert "900 tok" in history and "3 in" in history and "2 dropped" in history
    assert "      ↳ budget: older history dropped" in lines
    assert lines[-1] == "  nothing from: memory:user"
    styles = dict(accounting_lines(TRACE))
    assert styles[history] == "red"  # what lost something stands out


def test_trace_lines_for_memory_compaction_and_profile_events():
    def text(event: StoredEvent) -> str:
        return "\n".join(t for t, _ in trace_event_lines(event))

    assert text(stored("MemoryAccepted", scope="workspace", key="deploy.day", memory_id=4)) == (
        "MemoryAccepted  workspace · deploy.day  #4"
    )
    assert "auto" in text(stored("MemoryAccepted", scope="session", auto=True))
    assert text(stored("MemoryRejected", reason="empty body", raw="<memory")) == (
        "MemoryRejected  malformed marker: empty body"
    )
    assert "1,200 → 300" in text(
        stored("ContextCompactionCompleted", tokens_before=1200, tokens_after=300)
    )
    assert "events 3..9 by extractive" in text(
        stored(
            "CompactionSummary",
            summary="s",
            first_event_id=3,
            last_event_id=9,
            summarizer="extractive",
        )
    )
    assert text(stored("ProfileSwitched", to_profile="small", from_profile="default")) == (
        "ProfileSwitched  default → small"
    )
    assert trace_event_lines(stored("ModelTokenDelta", text="x")) == []


def test_compaction_note_reads_like_the_line_chat():
    assert compaction_note(CompactionResult("skipped", reason="nothing to compact")) == (
        "compaction skipped: nothing to compact"
    )
    done = CompactionResult(
        "completed", summarizer="extractive", tokens_before=5000, tokens_after=900
    )
    assert compaction_note(done) == "compaction completed (5,000 → 900 tokens, extractive)"


def test_card_lines_say_who_a_memory_reaches_and_where_it_came_from():
    proposed = "2026-03-04T05:06:07.000000+00:00"
    record = memory_record(
        key="editor.font",
        body="Mono",
        created_at=proposed,
        updated_at=proposed,
        provenance={"session_id": "s-1", "turn_id": "t-9"},
    )
    assert "all your sessions" in scope_reach(record)
    assert provenance_line(record, "s-1") == (
        "proposed in this session · turn t-9 · 2026-03-04 05:06 UTC"
    )
    assert provenance_line(record, "other").startswith("proposed in session s-1")
