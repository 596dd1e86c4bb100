"""MCP memory tools: ``remember`` is bounded, and only a key's current value is served.

Driven by the official MCP client over stdio against ``kairox mcp`` as a real process. The
bounds (per session, per minute, and how many proposals may wait) are set small in the
workspace's ``kairox.toml``: one client once queued 3,300 pending proposals in 19 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from kairox.runtime.facade import AppFacade

pytestmark = pytest.mark.anyio


def _bounds(workspace: Path, **bounds: int) -> None:
    lines = "".join(f"{name} = {value}\n" for name, value in bounds.items())
    (workspace / "kairox.toml").write_text("[memory]\n" + lines)


async def _remember(client: Client, **arguments: str) -> tuple[bool, str]:
    result = await client.call_tool("remember", arguments)
    return result.is_error, result.content[0].text


async def test_the_pending_queue_per_origin_is_bounded_but_restating_merges(
    indexed_workspace, stdio_server, kairox_cli, payload
):
    _bounds(indexed_workspace, max_pending_per_origin=3, max_proposals_per_minute=100)
    async with Client(stdio_server) as client:
        for n in range(3):
            queued = await _remember(client, scope="user", key=f"fact.{n}", body=f"Fact {n}.")
            assert queued[0] is False and '"pending"' in queued[1]
        refused, message = await _remember(client, scope="user", key="fact.9", body="Fact 9.")
        assert refused
        assert "3 proposals from mcp already wait" in message
        assert "max_pending_per_origin = 3" in message and "kairox memory list --pending" in message
        # Restating a waiting proposal merges with it, full queue or not.
        merged = payload(
            await client.call_tool("remember", {"scope": "user", "key": "fact.1", "body": "fact 1"})
        )
        assert merged["status"] == "merged" and "nothing new was queued" in merged["message"]
        # A new body under a waiting key replaces that proposal: the queue does not grow.
        replaced = payload(
            await client.call_tool(
                "remember", {"scope": "user", "key": "fact.2", "body": "Fact two, revised."}
            )
        )
        assert replaced["status"] == "pending"
        # A session memory is kept at once: it never waits, so the queue does not bound it.
        kept = payload(
            await client.call_tool("remember", {"scope": "session", "body": "On call today."})
        )
        assert kept["status"] == "accepted"

    pending = json.loads(kairox_cli("memory", "list", "--pending", "--json").stdout)
    assert sorted((m["key"], m["body"]) for m in pending) == [
        ("fact.0", "Fact 0."),
        ("fact.1", "Fact 1."),
        ("fact.2", "Fact two, revised."),
    ]
    # Once the user decides one, the origin may queue again.
    assert kairox_cli("memory", "reject", str(pending[0]["id"])).returncode == 0
    async with Client(stdio_server) as client:
        again = payload(
            await client.call_tool("remember", {"scope": "user", "key": "fact.9", "body": "Nine."})
        )
        assert again["status"] == "pending"


async def test_proposals_per_session_and_per_minute_are_bounded(
    indexed_workspace, stdio_server, kairox_cli
):
    _bounds(indexed_workspace, max_proposals_per_session=5, max_proposals_per_minute=3)
    async with Client(stdio_server) as client:
        for n in range(3):
            assert (await _remember(client, scope="session", body=f"Note {n}."))[0] is False
        refused, message = await _remember(client, scope="session", body="Note 3.")
        assert refused and "3 memory proposals in the last minute" in message
        assert "max_proposals_per_minute = 3" in message and "try again in" in message

    _bounds(indexed_workspace, max_proposals_per_session=5, max_proposals_per_minute=100)
    async with Client(stdio_server) as client:  # a new server process: a new session
        results = [await _remember(client, scope="session", body=f"Fact {n}.") for n in range(7)]
    assert [refused for refused, _ in results] == [False] * 5 + [True] * 2
    assert "already made 5 memory proposals" in results[5][1]
    assert "max_proposals_per_session = 5" in results[5][1]
    # A refused flood writes nothing: 3 + 5 session memories, no rejection events.
    listed = json.loads(kairox_cli("memory", "list", "--scope", "session", "--json").stdout)
    assert len(listed) == 8
    assert AppFacade(cwd=indexed_workspace).events.list(types=["MemoryRejected"]) == []


async def test_only_the_current_value_of_a_key_is_listed_or_assembled(
    indexed_workspace, stdio_server, payload
):
    facade = AppFacade(cwd=indexed_workspace)
    for body in ("Deploys happen on Mondays.", "Deploys happen on Thursdays."):
        facade.memory.set("workspace", "deploy.day", body, workspace_id=facade.workspace_id)
    async with Client(stdio_server) as client:
        listed = payload(await client.call_tool("memories", {}))
        assert [m["body"] for m in listed["memories"]] == ["Deploys happen on Thursdays."]
        context = payload(await client.call_tool("context", {"prompt": "when do we deploy?"}))
        prompt = json.dumps(context["messages"])
        assert "Thursdays" in prompt and "Mondays" not in prompt
        resource = await client.read_resource("kairox://memories/workspace")
        assert "Thursdays" in resource.contents[0].text
        assert "Mondays" not in resource.contents[0].text
