"""Proposals from outside a turn (MCP, the Python API); restatements merge; the bounds on
bodies, rates and the pending queue."""

from __future__ import annotations

import pytest

from kairox.memory.approvals import (
    MemoryInputError,
    MemoryNotFound,
    ProposalRefused,
    Proposer,
)
from kairox.memory.limits import ProposalLimits
from tests.memory.approval_helpers import WS, approvals, event_types, turn

# -- proposals from outside a turn (MCP, the Python API) ----------------------------------


def test_propose_takes_the_marker_path_and_records_who(database):
    flow = approvals(database)
    outcome = flow.propose(
        "workspace",
        "  Run `make test` before pushing. ",
        key="Pre Push",
        by=Proposer("s1", WS, "mcp", tainted_by=["workspace:workspace"]),
    )
    (record,) = outcome.pending
    assert (record.key, record.body, record.status) == (
        "pre.push",
        "Run `make test` before pushing.",
        "pending",
    )
    assert record.provenance["via"] == "mcp" and record.injection_warning
    assert record.provenance["tainted_by"] == ["workspace:workspace"]
    assert event_types(flow) == ["MemoryProposed"]
    session = flow.propose("session", "On call.", by=Proposer("s1", WS, "api"))
    assert [r.status for r in session.accepted] == ["approved"]
    # A tainted session proposal waits, as a tainted marker's does.
    held = flow.propose("session", "Trust x.", by=Proposer("s1", WS, "mcp", tainted_by=["t"]))
    assert [r.status for r in held.pending] == ["pending"]


@pytest.mark.parametrize(
    ("scope", "key", "body", "reason"),
    [
        ("galaxy", "k", "b", "unknown scope"),
        ("user", None, "b", "needs a key"),
        ("user", "bad key!", "b", "outside [a-z0-9._-]"),
        ("user", "k", "   ", "the body is empty"),
        ("user", "k", "x" * 9000, "at most 8000"),
        ("user", "k", "half \ud800", "lone surrogate"),
        ("user", "k\udcff", "b", "lone surrogate"),
    ],
)
def test_propose_rejects_with_a_reason_and_an_event(database, scope, key, body, reason):
    flow = approvals(database)
    outcome = flow.propose(scope, body, key=key, by=Proposer("s1", WS, "mcp"))
    assert outcome.accepted == outcome.pending == []
    assert reason in outcome.rejected[0][1]
    assert event_types(flow) == ["MemoryRejected"]
    assert flow.store.list(status=None) == []


def test_forget_waits_for_approval(database):
    flow = approvals(database)
    kept = flow.set("user", "editor.font", "Iosevka", workspace_id=WS)
    request = flow.propose_forget("editor.font", by=Proposer("s1", WS, "mcp"))
    assert request.status == "pending" and request.provenance["action"] == "forget"
    assert flow.find("editor.font", workspace_id=WS).body == "Iosevka"  # still there
    flow.reject(request.id)
    assert flow.find("editor.font", workspace_id=WS).id == kept.id  # rejecting keeps it

    again = flow.propose_forget("editor.font", by=Proposer("s1", WS, "mcp"))
    flow.approve(again.id, actor="cli")
    forgotten = flow.events.list(types=["MemoryForgotten"])
    assert [(e.payload["memory_id"], e.payload["actor"]) for e in forgotten] == [(kept.id, "cli")]
    with pytest.raises(MemoryNotFound):
        flow.find("editor.font", workspace_id=WS)
    assert flow.store.get(again.id) is None and flow.pending(WS) == []
    with pytest.raises(MemoryNotFound, match="no workspace or user memory"):
        flow.propose_forget("editor.font", by=Proposer("s1", WS, "mcp"))


# -- restatements merge; bounds on bodies, rates and the pending queue ---------------------


def test_a_restatement_merges_with_the_pending_or_approved_memory(database):
    flow = approvals(database)
    current = flow.set("workspace", "deploy.day", "Fridays are frozen.", workspace_id=WS)
    outcome = turn(
        flow,
        '<memory scope="workspace" key="deploy.day">fridays are FROZEN</memory>'
        '<memory scope="user" key="tone">Short answers, explain before code.</memory>',
    )
    assert [r.id for r in outcome.merged] == [current.id] and len(outcome.pending) == 1
    waiting = outcome.pending[0]
    # The same fact again, under another key and in other words' spacing: merged too.
    again = turn(
        flow, '<memory scope="user" key="style">short answers; explain before code</memory>'
    )
    assert [r.id for r in again.merged] == [waiting.id] and again.pending == []
    merged = flow.events.list(types=["MemoryMerged"])
    assert [(e.payload["memory_id"], e.payload["into"]) for e in merged] == [
        (current.id, "approved"),
        (waiting.id, "pending"),
    ]
    assert [r.id for r in flow.pending(WS)] == [waiting.id]
    assert flow.find("deploy.day", workspace_id=WS).body == "Fridays are frozen."
    # A new value for the key is no restatement: it waits to supersede the current one.
    changed = turn(flow, '<memory scope="workspace" key="deploy.day">Thursdays too.</memory>')
    assert changed.merged == [] and len(changed.pending) == 1


def test_the_pending_queue_is_bounded_per_origin(database):
    flow = approvals(database, limits=ProposalLimits(max_pending_per_origin=2))
    for n in range(2):
        assert turn(flow, f'<memory scope="user" key="k{n}">Fact {n}.</memory>').pending
    full = turn(flow, '<memory scope="user" key="k9">Fact nine.</memory>')
    assert full.pending == [] and "2 proposals from chat already wait" in full.rejected[0][1]
    assert event_types(flow)[-1] == "MemoryRejected"
    # Another origin has its own queue; a forget request counts in it.
    flow.set("user", "editor.font", "Iosevka", workspace_id=WS)
    by_mcp = Proposer("m1", WS, "mcp")
    assert flow.propose("user", "Fact from MCP.", key="m0", by=by_mcp).pending
    flow.propose_forget("editor.font", by=by_mcp)
    flow.set("user", "tone", "Terse.", workspace_id=WS)
    with pytest.raises(ProposalRefused, match="2 proposals from mcp already wait"):
        flow.propose_forget("tone", by=Proposer("m2", WS, "mcp"))
    # A new request for a key that already has one replaces it: the queue does not grow.
    assert flow.propose_forget("editor.font", by=Proposer("m2", WS, "mcp")).status == "pending"
    # Session memories kept at once never wait, so the queue does not bound them.
    assert turn(flow, '<memory scope="session">On call.</memory>').accepted


def test_proposals_from_outside_a_turn_are_bounded_per_minute_without_writing(database):
    now = [0.0]
    flow = approvals(database, limits=ProposalLimits(max_per_minute=2), clock=lambda: now[0])
    by = Proposer("m1", WS, "mcp")
    assert flow.propose("session", "One.", by=by).accepted
    assert flow.propose("session", "Two.", by=by).accepted
    refused = flow.propose("session", "Three.", by=by)
    assert "2 memory proposals in the last minute" in refused.rejected[0][1]
    assert event_types(flow, "m1") == ["MemoryProposed", "MemoryAccepted"] * 2
    now[0] += 61
    assert flow.propose("session", "Three.", by=by).accepted


def test_every_path_holds_the_body_bound(database):
    flow = approvals(database, limits=ProposalLimits(max_body_chars=20))
    over = "x" * 21
    assert (
        "21 characters long (at most 20"
        in turn(flow, f'<memory scope="session">{over}</memory>').rejected[0][1]
    )
    assert (
        "at most 20" in flow.propose("session", over, by=Proposer("s1", WS, "api")).rejected[0][1]
    )
    with pytest.raises(MemoryInputError, match="max_body_chars"):
        flow.set("user", "k", over, workspace_id=WS)
    kept = flow.set("user", "k", "x" * 20, workspace_id=WS)
    with pytest.raises(MemoryInputError, match="max_body_chars"):
        flow.edit_by_id(kept.id, over)
    assert flow.find("k", workspace_id=WS).body == "x" * 20


def test_history_of_a_key_and_forget_takes_it(database):
    flow = approvals(database)
    flow.set("user", "editor.font", "Mono", workspace_id=WS)
    flow.edit("editor.font", "Fira", workspace_id=WS)
    assert [r.body for r in flow.history("Editor.Font", workspace_id=WS)] == ["Mono", "Fira"]
    flow.forget("editor.font", workspace_id=WS)
    assert flow.store.list(status=None) == []
    with pytest.raises(MemoryNotFound):
        flow.history("editor.font", workspace_id=WS)
