"""``kairox memory``: list, show, approve, reject, set, edit, history, forget."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

from kairox.memory import extract_memory_markers
from kairox.runtime.facade import AppFacade


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
    refused = invoke("memory", "forget", "editor.font", input="y\n")  # no terminal: no prompt
    assert refused.exit_code == 2 and "add --yes to confirm" in refused.output
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
    assert result.exit_code == 2  # bad input, like a bad option
    assert "'!'" in result.output and "editor.font" in result.output
    for blank in ("", "  "):
        empty = invoke("memory", "set", "--scope", "workspace", "--key", "k", blank)
        assert empty.exit_code == 2 and "the body is empty; write what" in empty.output
    assert invoke("memory", "list", "--json").output.strip() == "[]"  # nothing written


def test_setting_the_same_body_again_changes_nothing(invoke, workspace):
    assert invoke("memory", "set", "--scope", "workspace", "--key", "k", "Tabs.").exit_code == 0
    before = json.loads(invoke("memory", "list", "--json").output)
    again = invoke("memory", "set", "--scope", "workspace", "--key", "k", "Tabs.")
    assert again.exit_code == 0 and again.output.startswith("unchanged workspace memory k")
    assert json.loads(invoke("memory", "list", "--json").output) == before  # same `updated`
    history = json.loads(invoke("memory", "history", "k", "--json").output)
    changed = invoke("memory", "set", "--scope", "workspace", "--key", "k", "Spaces.")
    assert changed.output.startswith("saved workspace memory k")
    assert len(json.loads(invoke("memory", "history", "k", "--json").output)) > len(history)


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


# -- as another process: approval, history, bounds, confirmation, an upgraded database ------

V1_DATABASE = Path(__file__).parents[1] / "memory" / "data" / "memory_v1.sql"


def kairox(workspace, *args, stdin=subprocess.DEVNULL):
    """``kairox ARGS`` as a new process with no terminal (stdin from /dev/null by default)."""
    return subprocess.run(
        [sys.executable, "-m", "kairox", *args],
        cwd=workspace,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_approve_sets_approved_at_whatever_the_scope(workspace):
    facade = AppFacade(cwd=workspace)
    _, markers, rejected = extract_memory_markers(
        '<memory scope="session">Deploys go out on Tuesdays.</memory>'
        '<memory scope="user" key="tone">Be terse.</memory>'
    )
    outcome = facade.memory.handle_turn(  # a tainted turn: the session memory waits too
        markers,
        rejected,
        session_id="chat-1",
        workspace_id=facade.workspace_id,
        tainted_by=["tool output"],
    )
    for record in outcome.pending:
        approved = kairox(workspace, "memory", "approve", str(record.id))
        assert approved.returncode == 0, approved.stderr
        shown = json.loads(kairox(workspace, "memory", "show", str(record.id), "--json").stdout)
        assert shown["status"] == "approved"
        assert shown["approved_at"] is not None and shown["approved_at"] >= shown["created_at"]


def test_history_shows_every_value_with_its_validity(workspace):
    for body in ("JetBrains Mono 14px.", "Fira Code 13px.", "Iosevka 13."):
        assert (
            kairox(
                workspace, "memory", "set", "--scope", "user", "--key", "editor.font", body
            ).returncode
            == 0
        )
    shown = kairox(workspace, "memory", "history", "Editor.Font", "--json")
    assert shown.returncode == 0, shown.stderr
    history = json.loads(shown.stdout)
    assert [(h["body"], h["status"]) for h in history] == [
        ("JetBrains Mono 14px.", "superseded"),
        ("Fira Code 13px.", "superseded"),
        ("Iosevka 13.", "approved"),
    ]
    assert history[0]["valid_to"] == history[1]["valid_from"]
    assert history[1]["valid_to"] == history[2]["valid_from"] and history[2]["valid_to"] is None
    table = kairox(workspace, "memory", "history", "editor.font").stdout
    assert "JetBrains Mono 14px." in table and "current" in table
    # Only the current value is a memory; the earlier ones are history.
    listed = json.loads(kairox(workspace, "memory", "list", "--json").stdout)
    assert [m["body"] for m in listed] == ["Iosevka 13."]
    missing = kairox(workspace, "memory", "history", "never.set")
    assert missing.returncode == 1 and "no workspace or user memory" in missing.stderr


def test_a_body_over_the_bound_is_refused_with_the_setting_to_change(workspace):
    (workspace / "kairox.toml").write_text("[memory]\nmax_body_chars = 100\n")
    refused = kairox(workspace, "memory", "set", "--scope", "user", "--key", "k", "x" * 101)
    assert refused.returncode == 2
    assert "101 characters long (at most 100, [memory] max_body_chars)" in refused.stderr
    assert (
        kairox(workspace, "memory", "set", "--scope", "user", "--key", "k", "x" * 100).returncode
        == 0
    )
    too_long_edit = kairox(workspace, "memory", "edit", "k", "y" * 101)
    assert too_long_edit.returncode == 2 and "max_body_chars" in too_long_edit.stderr


def test_forget_without_a_terminal_says_yes_is_needed(workspace):
    assert (
        kairox(workspace, "memory", "set", "--scope", "user", "--key", "tone", "Terse.").returncode
        == 0
    )
    refused = kairox(workspace, "memory", "forget", "tone")
    assert refused.returncode == 2
    assert "no terminal" in refused.stderr and "add --yes to confirm" in refused.stderr
    assert "Aborted" not in refused.stderr
    assert [m["key"] for m in json.loads(kairox(workspace, "memory", "list", "--json").stdout)] == [
        "tone"
    ]
    assert kairox(workspace, "memory", "forget", "tone", "--yes").returncode == 0
    assert json.loads(kairox(workspace, "memory", "list", "--json").stdout) == []


def test_forget_at_a_terminal_still_asks(workspace):
    assert (
        kairox(workspace, "memory", "set", "--scope", "user", "--key", "tone", "Terse.").returncode
        == 0
    )
    controller, terminal = pty.openpty()
    try:
        os.write(controller, b"n\n")  # the answer waits in the terminal's input
        declined = kairox(workspace, "memory", "forget", "tone", stdin=terminal)
    finally:
        os.close(controller)
        os.close(terminal)
    assert declined.returncode == 1 and "[y/N]" in declined.stdout
    assert [m["key"] for m in json.loads(kairox(workspace, "memory", "list", "--json").stdout)] == [
        "tone"
    ]


def test_memories_in_a_version_1_database_survive_the_upgrade(workspace):
    state = Path(os.environ["KAIROX_HOME"])
    state.mkdir(parents=True, exist_ok=True)
    raw = sqlite3.connect(state / "kairox.db")
    raw.executescript(V1_DATABASE.read_text())
    raw.close()

    listed = kairox(workspace, "memory", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [font] = json.loads(listed.stdout)
    assert (font["id"], font["body"], font["valid_from"]) == (
        1,
        "JetBrains Mono 14px.",
        "2026-02-01T10:00:00.000000+00:00",
    )
    [pending] = json.loads(kairox(workspace, "memory", "list", "--pending", "--json").stdout)
    assert (pending["id"], pending["body"]) == (3, "Fira Code 13px.")
    assert kairox(workspace, "memory", "approve", "3").returncode == 0
    history = json.loads(kairox(workspace, "memory", "history", "editor.font", "--json").stdout)
    assert [h["body"] for h in history] == ["JetBrains Mono 14px.", "Fira Code 13px."]
