"""kairox.paths: where state lives, and what happens when it cannot live there."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

from kairox.cli import build_cli
from kairox.paths import StateError, database_path, kairox_home, state_lock
from kairox.plugins import build_plugin_manager
from kairox.testing.unprivileged import require_permissions, run_unprivileged


def test_kairox_home_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KAIROX_HOME", str(tmp_path / "state"))
    assert database_path() == tmp_path / "state" / "kairox.db"
    monkeypatch.delenv("KAIROX_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert kairox_home() == tmp_path / "data" / "kairox"


@pytest.mark.parametrize("command", [["memory", "list"], ["index", "."], ["memory", "show", "1"]])
def test_a_kairox_home_that_is_a_file_is_a_message(monkeypatch, tmp_path, command):
    home = tmp_path / "not-a-folder"
    home.write_text("")
    monkeypatch.setenv("KAIROX_HOME", str(home))
    result = CliRunner().invoke(build_cli(build_plugin_manager(entry_points=False)), command)
    assert result.exit_code == 1, result.output
    assert not isinstance(result.exception, StateError | OSError)  # handled, not raised
    assert f"{home} is a file, not a folder" in result.output
    assert "set KAIROX_HOME" in result.output


def test_an_unwritable_kairox_home_is_a_message(tmp_path):
    require_permissions(tmp_path)
    home = tmp_path / "read-only"
    home.mkdir()
    home.chmod(0o555)
    env = {**os.environ, "KAIROX_HOME": str(home), "HOME": str(tmp_path)}
    done = run_unprivileged(
        "import sys; from kairox.cli import main; main(sys.argv[1:])",
        "memory",
        "list",
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot open Kairox's database {home / 'kairox.db'}" in done.stderr


def test_state_lock_excludes_a_second_holder_and_is_owner_only(tmp_path):
    database = tmp_path / "state" / "kairox.db"
    with state_lock(database, "session", "s1", wait=False):
        with pytest.raises(BlockingIOError), state_lock(database, "session", "s1", wait=False):
            pass
        with state_lock(database, "session", "s2", wait=False):  # another key: free
            pass
    with state_lock(database, "session", "s1", wait=False):  # released
        pass
    folder = database.parent / "locks"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()} == {0o600}
