"""The approval flow: session memories auto-accepted, user/workspace ones wait for a person."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kairox.events import SqliteEventStore
from kairox.memory import SqliteMemoryStore, extract_memory_markers
from kairox.memory.approvals import MemoryApprovals, MemoryInputError, MemoryNotFound

WS = "/home/me/project"


@pytest.fixture
def database(tmp_path):
    return tmp_path / "kairox.db"


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


def test_session_memory_is_accepted_at_once(database):
    flow = approvals(database)
    outcome = turn(flow, 'Noted. <memory scope="session">User prefers tables.</memory>')
    assert [r.body for r in outcome.accepted] == ["User prefers tables."]
    assert outcome.pending == []
    assert event_types(flow) == ["MemoryProposed", "MemoryAccepted"]
    assert flow.store.list(scope="session", session_id="s1")[0].status == "approved"


def test_user_and_workspace_memories_wait_for_approval(database):
    flow = approvals(database)
    outcome = turn(
        flow,
        '<memory scope="user" key="editor.font">JetBrains Mono 14px.</memory>'
        "<memory scope='workspace' key='commit.style'>Conventional Commits.</memory>",
    )
    assert [(r.scope, r.status) for r in outcome.pending] == [
        ("user", "pending"),
        ("workspace", "pending"),
    ]
    assert event_types(flow) == ["MemoryProposed", "MemoryProposed"]
    assert flow.store.list(status="approved") == []
    approved = flow.approve(outcome.pending[0].id)
    assert approved.status == "approved" and approved.approved_at
    flow.reject(outcome.pending[1].id)
    assert event_types(flow)[-2:] == ["MemoryAccepted", "MemoryRejected"]
    assert [r.key for r in flow.store.list(status="approved")] == ["editor.font"]
    with pytest.raises(MemoryNotFound, match="already rejected"):
        flow.approve(outcome.pending[1].id)


def test_unknown_scope_or_missing_key_is_rejected_never_stored(database):
    flow = approvals(database)
    outcome = turn(
        flow,
        '<memory scope="global">everything</memory><memory scope="user">no key</memory>',
    )
    assert outcome.accepted == outcome.pending == []
    reasons = [reason for _, reason in outcome.rejected]
    assert len(reasons) == 2 and all(reasons)
    assert flow.store.list(status=None) == []  # not even as a session memory
    stored = flow.events.list(session_id="s1")
    assert [e.type for e in stored] == ["MemoryRejected", "MemoryRejected"]
    assert stored[0].payload["raw"].startswith("<memory")


def test_proposals_over_the_cap_are_rejected_with_a_reason(database):
    flow = approvals(database, max_proposals_per_turn=2)
    text = "".join(f'<memory scope="user" key="k{i}">body {i}</memory>' for i in range(4))
    outcome = turn(flow, text)
    assert len(outcome.pending) == 2
    assert [reason for _, reason in outcome.rejected] == [
        "more than 2 memory proposals in one turn; the rest were not kept"
    ] * 2


def test_injection_warning_follows_tool_output(database):
    flow = approvals(database)
    outcome = turn(
        flow, '<memory scope="user" key="deploy.target">prod-1</memory>', tool_output=True
    )
    assert outcome.pending[0].injection_warning is True
    proposed = flow.events.list(session_id="s1")[0]
    assert proposed.payload["injection_warning"] is True


def test_pending_proposals_survive_a_restart(database):
    first = approvals(database)
    turn(first, '<memory scope="workspace" key="lint">ruff</memory>')
    again = approvals(database)  # new store objects, as after a restart
    [waiting] = again.pending(WS)
    assert waiting.key == "lint"
    again.approve(waiting.id)
    assert again.find("lint", workspace_id=WS).body == "ruff"


def test_set_edit_and_forget(database):
    flow = approvals(database)
    flow.set("user", "Editor Font", "Fira Code", workspace_id=WS)
    assert flow.find("editor.font", workspace_id=WS).body == "Fira Code"
    flow.set("user", "editor.font", "Iosevka", workspace_id=WS)  # same key overwrites
    assert [r.body for r in flow.store.list(scope="user")] == ["Iosevka"]
    flow.edit("editor.font", "Iosevka 13", workspace_id=WS)
    assert flow.find("editor.font", workspace_id=WS).body == "Iosevka 13"
    flow.forget("editor.font", workspace_id=WS)
    with pytest.raises(MemoryNotFound, match="no workspace or user memory"):
        flow.find("editor.font", workspace_id=WS)
    with pytest.raises(MemoryInputError, match="'user' or 'workspace'"):
        flow.set("session", "k", "b", workspace_id=WS)


def test_workspace_memory_stays_in_its_workspace(database):
    flow = approvals(database)
    flow.set("workspace", "db", "postgres", workspace_id=WS)
    assert flow.find("db", workspace_id=WS).body == "postgres"
    with pytest.raises(MemoryNotFound):
        flow.find("db", workspace_id="/other/project")


APPROVER = """
import sys
from kairox.events import SqliteEventStore
from kairox.memory import SqliteMemoryStore
from kairox.memory.approvals import MemoryApprovals

flow = MemoryApprovals(SqliteMemoryStore(sys.argv[1]), SqliteEventStore(sys.argv[1]))
flow.approve(int(sys.argv[2]))
"""


def test_an_approval_in_another_process_is_seen_on_the_next_read(database):
    flow = approvals(database)
    [proposal] = turn(flow, '<memory scope="user" key="tone">terse</memory>').pending
    assert flow.store.list(scope="user") == []
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(APPROVER), str(database), str(proposal.id)],
        check=True,
    )
    assert [r.body for r in flow.store.list(scope="user")] == ["terse"]  # same objects
