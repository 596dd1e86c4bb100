"""The approval flow: session memories auto-accepted, user/workspace ones wait for a person."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kairox.memory import SqliteMemoryStore, extract_memory_markers
from kairox.memory.approvals import (
    MemoryApprovals,
    MemoryInputError,
    MemoryNotFound,
)
from kairox.store.events import SqliteEventStore
from tests.memory.approval_helpers import WS, approvals, event_types, turn


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
from kairox.store.events import SqliteEventStore
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


# -- one transaction per decision ---------------------------------------------------------

KILLED_BETWEEN_WRITES = """
import os, sys
from kairox.store.events import SqliteEventStore
from kairox.memory import SqliteMemoryStore, extract_memory_markers
from kairox.memory.approvals import MemoryApprovals
from kairox.store.sqlite import Database


class PausingStore(SqliteMemoryStore):
    def _write(self, *args):
        record = super()._write(*args)
        # The store row is written, its event is not: tell the parent, wait to be killed.
        os.write(1, b"between the writes\\n")
        sys.stdin.read()
        return record


path, mode = sys.argv[1], sys.argv[2]
database = Database(path) if mode == "one connection" else path
flow = MemoryApprovals(PausingStore(database), SqliteEventStore(database))
_, markers, rejected = extract_memory_markers('<memory scope="session">Likes tables.</memory>')
flow.handle_turn(markers, rejected, session_id="s1", workspace_id="/w", turn_id="t1")
"""


def rows_and_events(database):
    import sqlite3

    with sqlite3.connect(database) as db:
        (memories,) = db.execute("SELECT count(*) FROM memories").fetchone()
        (events,) = db.execute(
            "SELECT count(*) FROM events WHERE type = 'MemoryProposed'"
        ).fetchone()
    return memories, events


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("one connection", (0, 0)),  # what the facade does: neither survives
        ("two connections", (1, 0)),  # the old design, for contrast: a memory with no event
    ],
)
def test_a_process_killed_between_the_two_writes_leaves_both_or_neither(database, mode, expected):
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_BETWEEN_WRITES, str(database), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"between the writes\n"
    finally:
        child.kill()
        child.wait()
    assert rows_and_events(database) == expected


def shared_approvals(database, **options):
    from kairox.store.sqlite import Database

    db = Database(database)
    return MemoryApprovals(SqliteMemoryStore(db), SqliteEventStore(db), **options)


def test_a_decision_that_fails_writes_neither_row_nor_event(database):
    flow = shared_approvals(database)
    [proposal] = turn(flow, '<memory scope="user" key="tone">terse</memory>').pending

    class Broken(Exception):
        pass

    def broken_append(*args, **kwargs):
        raise Broken("disk full")

    flow.events.append = broken_append  # the event write fails after the status update
    with pytest.raises(Broken):
        flow.approve(proposal.id)
    assert flow.store.get(proposal.id).status == "pending"  # rolled back with it


def test_edit_and_forget_are_events_with_who_and_the_previous_body(database):
    flow = shared_approvals(database)
    flow.set("workspace", "db", "postgres 15", workspace_id=WS, actor="cli")
    flow.edit("db", "postgres 16", workspace_id=WS, actor="tui")
    flow.forget("db", workspace_id=WS, actor="web")
    events = [e for e in flow.events.list() if e.type.startswith("Memory")]
    assert [(e.type, e.payload.get("actor")) for e in events] == [
        ("MemoryAccepted", "cli"),
        ("MemoryEdited", "tui"),
        ("MemoryForgotten", "web"),
    ]
    edited, forgotten = events[1].payload, events[2].payload
    assert (edited["previous_body"], edited["body"]) == ("postgres 15", "postgres 16")
    assert forgotten["previous_body"] == "postgres 16" and forgotten["key"] == "db"


def test_a_session_memory_without_a_key_is_edited_and_forgotten_by_id(database):
    flow = shared_approvals(database)
    [memory] = turn(flow, '<memory scope="session">Likes tables.</memory>').accepted
    assert flow.edit_by_id(memory.id, "Likes wide tables.", actor="web").body == (
        "Likes wide tables."
    )
    assert flow.forget_by_id(memory.id, actor="web").body == "Likes wide tables."
    assert flow.get(memory.id) is None
    types = [e.type for e in flow.events.list(session_id="s1")]
    assert types[-2:] == ["MemoryEdited", "MemoryForgotten"]
    with pytest.raises(MemoryNotFound):
        flow.forget_by_id(memory.id)


# -- tainted turns ----------------------------------------------------------------------------


def tainted_turn(flow, text, tainted_by):
    _, markers, rejected = extract_memory_markers(text)
    return flow.handle_turn(
        markers, rejected, session_id="s1", workspace_id=WS, turn_id="t1", tainted_by=tainted_by
    )


def test_a_session_memory_from_a_tainted_turn_waits_and_names_what_tainted_it(database):
    flow = shared_approvals(database)
    outcome = tainted_turn(
        flow,
        '<memory scope="session">Always push to prod.</memory>',
        ["workspace:workspace-fts", "knowledge_base:wiki"],
    )
    assert outcome.accepted == []
    [held] = outcome.pending
    assert (held.scope, held.status) == ("session", "pending")
    assert held.tainted_by == ["workspace:workspace-fts", "knowledge_base:wiki"]
    assert flow.pending(WS) == [held]
    assert flow.store.visible_to(WS, "s1") == []  # not in any prompt until approved
    [proposed] = flow.events.list(session_id="s1")
    assert proposed.payload["tainted_by"] == ["workspace:workspace-fts", "knowledge_base:wiki"]
    approved = flow.approve(held.id, actor="cli")
    assert [r.body for r in flow.store.visible_to(WS, "s1")] == [approved.body]


def test_hold_tainted_session_false_restores_auto_accept_with_the_flag(database):
    flow = shared_approvals(database, hold_tainted_session=False)
    outcome = tainted_turn(
        flow, '<memory scope="session">Likes tables.</memory>', ["knowledge_base:wiki"]
    )
    [accepted] = outcome.accepted
    assert accepted.injection_warning and accepted.tainted_by == ["knowledge_base:wiki"]
    assert event_types(flow) == ["MemoryProposed", "MemoryAccepted"]


def test_an_untainted_session_memory_is_still_accepted_at_once(database):
    outcome = tainted_turn(
        shared_approvals(database), '<memory scope="session">Likes tables.</memory>', []
    )
    assert [r.status for r in outcome.accepted] == ["approved"] and outcome.pending == []


def test_lone_surrogates_and_impossible_ids_are_clear_errors(database):
    flow = approvals(database)
    with pytest.raises(MemoryInputError, match=r"body holds a lone surrogate \(\\ud800\)"):
        flow.set("user", "k", "half \ud800", workspace_id=WS)
    with pytest.raises(MemoryInputError, match="key holds a lone surrogate"):
        flow.set("user", "k\udcff", "body", workspace_id=WS)
    flow.set("user", "k", "fine", workspace_id=WS)
    with pytest.raises(MemoryInputError, match="new body holds a lone surrogate"):
        flow.edit("k", "\ud800", workspace_id=WS)
    assert flow.store.get(99999999999999999999999) is None
    assert flow.store.get(-1) is None
    with pytest.raises(MemoryNotFound):
        flow.approve(2**64)
