"""The MCP ``recall`` tool through the official client: earlier sessions, tool output's taint."""

from __future__ import annotations

import pytest
from mcp import Client

from kairox.runtime.facade import AppFacade

pytestmark = pytest.mark.anyio


async def test_recall_finds_an_earlier_session_and_keeps_tool_output_unvetted(
    stdio_server, indexed_workspace, payload
):
    with AppFacade(cwd=indexed_workspace) as facade:
        messages = [
            {"role": "user", "content": "Which port does staging use?", "name": "Ann"},
            {"role": "tool", "content": "staging listens on port 8443", "name": "kubectl"},
            {"role": "assistant", "content": "Staging is on 8443.", "time": "2026-11-30T09:00:00Z"},
        ]
        await facade.append_messages("last-week", messages)
    async with Client(stdio_server) as client:
        found = payload(await client.call_tool("recall", {"query": "staging port", "k": 3}))
        shown = [m for hit in found["hits"] for m in hit["messages"] if m["hit"]]
        assert {m["session"] for m in shown} == {"last-week"}
        tool = next(m for m in shown if m["speaker"] == "kubectl")
        assert tool["tool_output"] is True and tool["text"] == "staging listens on port 8443"
        reply = next(m for m in shown if m["text"] == "Staging is on 8443.")
        assert reply["time"] == "2026-11-30T09:00:00+00:00"
        # What the agent was handed is as unvetted as tool output: its proposals wait.
        held = payload(
            await client.call_tool("remember", {"scope": "session", "body": "Use port 8443."})
        )
        assert held["status"] == "pending" and held["memory"]["tainted_by"] == ["tool output"]
        refused = await client.call_tool("recall", {"query": "port", "k": 500})
        assert refused.is_error
