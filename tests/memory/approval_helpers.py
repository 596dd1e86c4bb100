"""What the approval flow's tests share: a flow over one database, a turn's markers handed to it."""

from __future__ import annotations

from kairox.memory import SqliteMemoryStore, extract_memory_markers
from kairox.memory.approvals import (
    MemoryApprovals,
)
from kairox.store.events import SqliteEventStore

WS = "/home/me/project"


def approvals(database, **options):
    return MemoryApprovals(SqliteMemoryStore(database), SqliteEventStore(database), **options)


def turn(flow, text, *, tool_output=False, session="s1"):
    _, markers, rejected = extract_memory_markers(text)
    return flow.handle_turn(
        markers,
        rejected,
        session_id=session,
        workspace_id=WS,
        turn_id="t1",
        context_had_tool_output=tool_output,
    )


def event_types(flow, session="s1"):
    return [e.type for e in flow.events.list(session_id=session)]
