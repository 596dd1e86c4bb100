"""``kairox tui``: options build the app like ``kairox chat``; Textual is imported lazily."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from kairox.cli import build_cli, tui_cmd
from kairox.cli.app import AppContext
from kairox.cli.tui_cmd import tui
from kairox.default_plugins.scripted_model import ScriptedModel
from kairox.plugin_host.manager import build_plugin_manager

CONFIG = """\
[profiles.default]
[profiles.small]
context_window = 4000
aliases = ["mini"]
"""


def run_tui(monkeypatch, *args: str):
    """Invoke the command with ``KairoxApp.run`` replaced by a recorder; return the app."""
    from kairox.tui import KairoxApp

    made: list[KairoxApp] = []
    monkeypatch.setattr(KairoxApp, "run", lambda self, **kw: made.append(self))
    monkeypatch.setattr(tui_cmd, "on_a_terminal", lambda: True)  # CliRunner has no terminal
    obj = AppContext(pm=build_plugin_manager(entry_points=False))
    result = CliRunner().invoke(tui, list(args), obj=obj)
    assert result.exit_code == 0, result.output
    (app,) = made
    return app


def test_script_option_builds_the_scripted_backend(monkeypatch, workspace, tmp_path):
    (workspace / "kairox.toml").write_text(CONFIG)
    script = tmp_path / "replies.jsonl"
    script.write_text(json.dumps({"reply": "hi"}) + "\n" + json.dumps({"reply": "again"}) + "\n")
    app = run_tui(monkeypatch, "--script", str(script), "--profile", "mini", "--session", "s-9")
    assert isinstance(app.session.backend, ScriptedModel)
    assert [t.reply for t in app.session.backend.turns] == ["hi", "again"]
    assert app.session.profile_name == "small"  # the alias resolved
    assert app.session.session_id == "s-9"


def test_without_options_the_profile_backend_is_used(monkeypatch, workspace):
    (workspace / "kairox.toml").write_text('[profiles.default]\nbackend = "scripted"\n')
    app = run_tui(monkeypatch)
    assert app.session.profile_name == "default"
    backend = app.session.backend  # built from the profile on first use
    assert isinstance(backend, ScriptedModel) and backend.turns == []


def test_an_unknown_profile_is_a_clear_error(workspace):
    obj = AppContext(pm=build_plugin_manager(entry_points=False))
    result = CliRunner().invoke(tui, ["--profile", "nosuch"], obj=obj)
    assert result.exit_code != 0
    assert "nosuch" in str(result.exception or result.output)


NO_TERMINAL = "kairox tui needs a terminal; use kairox chat for line mode or pipes"


def test_without_a_terminal_the_tui_is_refused(workspace):
    (workspace / "kairox.toml").write_text(CONFIG)
    obj = AppContext(pm=build_plugin_manager(entry_points=False))
    result = CliRunner().invoke(tui, [], obj=obj)  # stdin and stdout: not terminals
    assert result.exit_code == 2 and NO_TERMINAL in result.output


def test_stdin_not_a_terminal_is_refused_even_with_stdout_one(workspace):
    (workspace / "kairox.toml").write_text(CONFIG)
    leader, follower = pty.openpty()
    try:
        with open(os.devnull, "rb") as nothing:
            done = subprocess.run(
                [sys.executable, "-m", "kairox", "tui"],
                cwd=workspace,
                stdin=nothing,
                stdout=follower,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2 and NO_TERMINAL in done.stderr


def test_help_lists_the_same_options_as_chat():
    result = CliRunner().invoke(tui, ["--help"])
    assert result.exit_code == 0
    for option in ("--profile", "--backend", "--script", "--session", "ctrl+k", "a approve"):
        assert option in result.output


def test_the_command_is_listed_once_registered():
    root = build_cli(build_plugin_manager(entry_points=False))
    commands = root.list_commands(click.Context(root))
    if "tui" not in commands:
        pytest.skip("`kairox tui` is not registered in kairox.cli.build_cli yet")
    result = CliRunner().invoke(
        build_cli(build_plugin_manager(entry_points=False)), ["tui", "--help"]
    )
    assert result.exit_code == 0
    for option in ("--profile", "--backend", "--script", "--session"):
        assert option in result.output


LIGHT_CHECK = """
import sys
{imports}
from kairox.cli import build_cli
try:
    build_cli()(args=['--help'], prog_name='kairox', standalone_mode=False)
except SystemExit:
    pass
print('TEXTUAL' if any(m.split('.')[0] == 'textual' for m in sys.modules) else 'LIGHT')
"""


@pytest.mark.parametrize(
    ("imports", "expected"),
    [
        ("import kairox.cli.tui_cmd", "LIGHT"),
        # Guard against a vacuous check: importing the UI package does pull Textual in.
        ("import kairox.tui", "TEXTUAL"),
    ],
)
def test_help_and_the_command_module_do_not_import_textual(workspace, imports, expected):
    result = subprocess.run(
        [sys.executable, "-c", LIGHT_CHECK.format(imports=imports)],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(expected)
