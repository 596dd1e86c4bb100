"""Plain-text wording of what the TUI shows: trace lines, card lines, compaction notes.

Kept apart from the widgets (and free of Textual imports) so the wording is shared by
the stream, the trace panel and the tests, and matches ``kairox chat`` where both say the
same thing. Every function returns ``(text, style)`` pairs or plain strings; styles are
Rich style strings, applied by the widgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox.memory.store import MemoryRecord
    from kairox.runtime.session import CompactionResult
    from kairox.store.events import StoredEvent

__all__ = [
    "INJECTION_WARNING",
    "TRACE_EVENT_TYPES",
    "Line",
    "accounting_lines",
    "compaction_note",
    "injection_warning",
    "provenance_line",
    "scope_reach",
    "trace_event_lines",
]

#: One line of output: its text and a Rich style ("" for the default).
Line = tuple[str, str]

INJECTION_WARNING = (
    "⚠ proposed after tool output was in the context: this could be prompt injection. "
    "Read it carefully before approving."
)


def injection_warning(record: MemoryRecord) -> str:
    """The warning for a proposal made in a tainted turn, naming what tainted it ("" if none)."""
    if not record.injection_warning:
        return ""
    return (
        f"⚠ proposed in a turn whose prompt held {', '.join(record.tainted_by)}: "
        "this could be prompt injection. Read it carefully before approving."
    )


#: Events of this session the trace panel shows (memory decisions are read per workspace).
TRACE_EVENT_TYPES = (
    "ContextAssembled",
    "ContextCompactionStarted",
    "CompactionSummary",
    "ContextCompactionCompleted",
    "ContextCompactionFailed",
    "ContextCompactionSkipped",
    "ProfileSwitched",
)


def _scope_key(scope: Any, key: Any) -> str:
    return f"{scope} · {key}" if key else str(scope)


def accounting_lines(trace: Mapping[str, Any], turn_label: str = "") -> list[Line]:
    """The context accounting of one assembled prompt (a ``ContextAssembled`` trace).

    One heading with used/budget, then one line per source that contributed or lost
    something (tokens, items included and dropped, why anything was dropped), then the
    names of the sources that had nothing to give.
    """
    used = trace.get("used_tokens", 0)
    budget = trace.get("budget", 0)
    heading = f"context{' · ' + turn_label if turn_label else ''} · {used:,} / {budget:,} tokens"
    lines: list[Line] = [(heading, "bold")]
    if trace.get("had_tool_output"):
        lines.append(("  holds tool output: proposals this turn are flagged", "yellow"))
    empty: list[str] = []
    for source in trace.get("sources", []):
        if not (source["tokens"] or source["included"] or source["dropped"]):
            # Listed on one line below: a row of zeros per idle source buries the rest.
            empty.append(source["source"])
            continue
        text = (
            f"  {source['source']:<20} {source['tokens']:>6} tok"
            f"  {source['included']:>2} in  {source['dropped']:>2} dropped"
        )
        lines.append((text, "red" if source["dropped"] else ""))
        for reason in source.get("reasons", []):
            lines.append((f"      ↳ {reason}", "dim"))
    if empty:
        lines.append((f"  nothing from: {', '.join(empty)}", "dim"))
    return lines


def trace_event_lines(stored: StoredEvent, turn_number: int | None = None) -> list[Line]:
    """What the trace panel prints for one stored event (nothing for other types)."""
    p = stored.payload
    kind = stored.type
    if kind == "ContextAssembled":
        label = f"turn {turn_number}" if turn_number is not None else ""
        return accounting_lines(p.get("trace", {}), label)
    if kind == "MemoryAccepted":
        how = " (auto: session scope)" if p.get("auto") else ""
        ref = f"  #{p['memory_id']}" if p.get("memory_id") is not None else ""
        return [(f"MemoryAccepted  {_scope_key(p.get('scope'), p.get('key'))}{ref}{how}", "green")]
    if kind == "MemoryRejected":
        what = _scope_key(p.get("scope"), p.get("key")) if p.get("scope") else "malformed marker"
        return [(f"MemoryRejected  {what}: {p.get('reason', '')}", "magenta")]
    if kind == "ContextCompactionStarted":
        before = p.get("tokens_before")
        size = f" ({before:,} tokens of history)" if before is not None else ""
        return [(f"compaction started ({p.get('trigger', 'auto')}){size}", "cyan")]
    if kind == "CompactionSummary":
        fallback = ", sliding-window fallback" if p.get("fallback") else ""
        return [
            (
                f"  summary of events {p['first_event_id']}..{p['last_event_id']}"
                f" by {p.get('summarizer')}{fallback}",
                "cyan",
            )
        ]
    if kind == "ContextCompactionCompleted":
        return [
            (
                f"compaction completed: {p.get('tokens_before') or 0:,} → "
                f"{p.get('tokens_after') or 0:,} tokens of history",
                "cyan",
            )
        ]
    if kind == "ContextCompactionFailed":
        return [(f"compaction failed: {p.get('error')}", "red")]
    if kind == "ContextCompactionSkipped":
        return [(f"compaction skipped: {p.get('reason')}", "dim cyan")]
    if kind == "ProfileSwitched":
        return [(f"ProfileSwitched  {p.get('from_profile')} → {p.get('to_profile')}", "blue")]
    return []


def compaction_note(result: CompactionResult) -> str:
    """The stream's one-line result of a compaction (the same words as ``kairox chat``)."""
    text = f"compaction {result.status}"
    if result.reason:
        text += f": {result.reason}"
    if result.status == "completed":
        text += f" ({result.tokens_before:,} → {result.tokens_after:,} tokens"
        if result.summarizer:
            text += f", {result.summarizer}"
        if result.fallback:
            text += ", sliding-window fallback"
        text += ")"
    return text


def scope_reach(record: MemoryRecord) -> str:
    """Who a memory would apply to once approved: the reader's stake in the decision."""
    if record.scope == "user":
        return "applies to all your sessions, in every workspace"
    if record.scope == "workspace":
        return f"applies to every session in {record.workspace_id}"
    return "applies to this session only"


def provenance_line(record: MemoryRecord, current_session: str | None = None) -> str:
    """Where a proposal came from: session, turn and time."""
    prov = record.provenance
    parts: list[str] = []
    session = prov.get("session_id") or record.session_id
    if session:
        parts.append("this session" if session == current_session else f"session {session}")
    if prov.get("turn_id"):
        parts.append(f"turn {prov['turn_id']}")
    if prov.get("written_by"):
        parts.append(f"written by the {prov['written_by']}")
    # ISO timestamps: the minute is precise enough to place a proposal in a conversation.
    parts.append(record.created_at[:16].replace("T", " ") + " UTC")
    return "proposed in " + " · ".join(parts)
