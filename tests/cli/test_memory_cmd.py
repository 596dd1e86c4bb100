"""``kairox memory``: list, show, approve, reject, set, edit, forget."""

from __future__ import annotations

import json

from kairox.facade import AppFacade
from kairox.memory import extract_memory_markers


def propose(workspace, text):
    facade = AppFacade(cwd=workspace)
    _, markers, rejected = extract_memory_markers(text)
    return facade.memory.handle_turn(
        markers, rejected, session_id="chat-1", workspace_id=facade.workspace_id
    )


def test_pending_approve_and_list(invoke, workspace):
    outcome = propose(
        workspace,
        '<memory scope="workspace" key="commit.style">Conventional Commits.</memory>'
        '<memory scope="user" key="tone">Be terse.</memory>',
    )
    pending = json.loads(invoke("memory", "list", "--pending", "--json").output)
    assert [(p["scope"], p["key"]) for p in pending] == [
        ("workspace", "commit.style"),
        ("user", "tone"),
    ]
    assert invoke("memory", "list").output.strip() == "no memories yet"
    first, second = (r.id for r in outcome.pending)
    approved = invoke("memory", "approve", str(first))
    assert approved.exit_code == 0 and "commit.style" in approved.output
    rejected = invoke("memory", "reject", str(second), "--reason", "not now")
    assert rejected.exit_code == 0
    listed = json.loads(invoke("memory", "list", "--json").output)
    assert [(m["key"], m["status"]) for m in listed] == [("commit.style", "approved")]
    again = invoke("memory", "approve", str(second))
    assert again.exit_code == 1 and "already rejected" in again.output


def test_set_edit_show_forget(invoke):
    assert invoke("memory", "set", "--scope", "user", "--key", "Editor Font", "Fira").exit_code == 0
    assert invoke("memory", "edit", "editor.font", "Fira Code 14").exit_code == 0
    [record] = json.loads(invoke("memory", "list", "--scope", "user", "--json").output)
    assert record["body"] == "Fira Code 14"
    shown = json.loads(invoke("memory", "show", str(record["id"]), "--json").output)
    assert shown["provenance"]["written_by"] == "user"
    refused = invoke("memory", "forget", "editor.font", input="n\n")
    assert refused.exit_code == 1
    assert invoke("memory", "forget", "editor.font", "--yes").exit_code == 0
    assert json.loads(invoke("memory", "list", "--json").output) == []
    missing = invoke("memory", "edit", "editor.font", "x")
    assert missing.exit_code == 1 and "no workspace or user memory" in missing.output


def test_injection_warning_is_shown(invoke, workspace):
    facade = AppFacade(cwd=workspace)
    _, markers, rejected = extract_memory_markers('<memory scope="user" key="x">y</memory>')
    facade.memory.handle_turn(
        markers,
        rejected,
        session_id="c",
        workspace_id=facade.workspace_id,
        context_had_tool_output=True,
    )
    assert "proposed after tool output" in invoke("memory", "list", "--pending").output


def test_bad_input_is_explained(invoke):
    result = invoke("memory", "set", "--scope", "user", "--key", "bad key!", "body")
    assert result.exit_code == 1
    assert "'!'" in result.output and "editor.font" in result.output
    empty = invoke("memory", "set", "--scope", "user", "--key", "k", "  ")
    assert empty.exit_code == 1 and "body is empty" in empty.output


def test_escape_sequences_in_a_body_are_shown_not_obeyed(invoke, workspace):
    facade = AppFacade(cwd=workspace)
    _, markers, rejected = extract_memory_markers(
        '<memory scope="user" key="x">visible \x1b[8mhidden \u202eevil</memory>'
    )
    outcome = facade.memory.handle_turn(
        markers,
        rejected,
        session_id="c",
        workspace_id=facade.workspace_id,
        context_had_tool_output=True,
    )
    listed = invoke("memory", "list", "--pending").output
    assert "\x1b" not in listed and "\u202e" not in listed
    assert "\\x1b[8mhidden" in listed and "proposed after tool output" in listed
    [record] = outcome.pending
    shown = invoke("memory", "show", str(record.id)).output
    assert "\x1b" not in shown and "\\u202eevil" in shown
    exact = json.loads(invoke("memory", "show", str(record.id), "--json").output)
    assert exact["body"] == "visible \x1b[8mhidden \u202eevil"
