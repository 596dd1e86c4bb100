"""kairox.paths: where state lives, and what happens when it cannot live there."""

from __future__ import annotations

import os
import sqlite3

import pytest
from click.testing import CliRunner

from kairox.cli import build_cli
from kairox.paths import (
    DiskFullError,
    StateError,
    database_path,
    disk_full_errors,
    is_disk_full,
    kairox_home,
)
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


def test_a_full_disk_is_recognised_from_the_os_and_from_sqlite(tmp_path):
    assert is_disk_full(OSError(28, "No space left on device"))
    assert not is_disk_full(OSError(13, "Permission denied"))
    # SQLite's own error, from a database that may not grow past one page
    db = sqlite3.connect(tmp_path / "small.db")
    db.execute("CREATE TABLE t (x)")
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    full = pytest.raises(DiskFullError, match=rf"the disk holding {tmp_path} is full")
    with full as info, disk_full_errors(tmp_path):
        db.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    assert is_disk_full(info.value.__cause__)
    with pytest.raises(sqlite3.OperationalError), disk_full_errors(tmp_path):
        db.execute("SELECT * FROM no_such_table")  # other errors pass through
