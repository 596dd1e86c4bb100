"""kairox.support.paths: where state lives, and what happens when it cannot live there."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kairox.cli import build_cli
from kairox.plugin_host.manager import build_plugin_manager
from kairox.support.paths import (
    PRIVATE_FILE_MODE,
    PRIVATE_FOLDER_MODE,
    DiskFullError,
    StateError,
    database_path,
    disk_full_errors,
    is_disk_full,
    kairox_home,
    private_folder,
    state_lock,
)
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


#: Fills a new $KAIROX_HOME under umask 022 (index, a memory), then, with the database
#: still open (so its -wal and -shm files exist), prints the mode of everything in it.
FILL_HOME_UNDER_UMASK_022 = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    os.umask(0o022)
    from kairox.runtime.facade import AppFacade

    workspace, home = Path(sys.argv[1]), Path(sys.argv[2])
    facade = AppFacade(cwd=workspace)
    facade.index_workspace()
    facade.memory.set("user", "pin", "The vault code is 4711.", workspace_id=facade.workspace_id)
    modes = {
        str(path.relative_to(home.parent)): oct(path.stat().st_mode & 0o777)
        for path in [home, *home.rglob("*")]
        if not path.is_socket()
    }
    print(json.dumps(modes))
    facade.close()
    """
)


def _fill_home(workspace, home):
    (workspace / "notes.md").write_text("Rockets burn oxygen. Gardens need water.\n")
    # Vectors on, so that the vector pack's files are made and checked too.
    (workspace / "kairox.toml").write_text("[workspace]\nvectors = true\n")
    env = {**os.environ, "KAIROX_HOME": str(home), "KAIROX_NO_DAEMON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", FILL_HOME_UNDER_UMASK_022, str(workspace), str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_new_state_is_owner_only_under_umask_022(workspace, tmp_path):
    modes = _fill_home(workspace, tmp_path / "state")
    folders = {name for name in modes if (tmp_path / name).is_dir()}
    assert {"state", "state/locks", "state/vectors"} <= folders
    assert {"state/kairox.db", "state/kairox.db-wal", "state/kairox.db-shm"} <= set(modes)
    assert any(name.startswith("state/vectors/") for name in modes)  # the vector pack
    wider = {
        name: mode
        for name, mode in modes.items()
        if mode != (oct(PRIVATE_FOLDER_MODE) if name in folders else oct(PRIVATE_FILE_MODE))
    }
    assert not wider, wider


def test_an_existing_wider_home_is_tightened(workspace, tmp_path):
    home = tmp_path / "state"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    sqlite3.connect(home / "kairox.db").close()  # as an older Kairox left it
    (home / "kairox.db").chmod(0o644)
    modes = _fill_home(workspace, home)
    assert modes["state"] == oct(PRIVATE_FOLDER_MODE)
    assert modes["state/kairox.db"] == oct(PRIVATE_FILE_MODE)


def test_a_shared_sticky_folder_is_not_changed_but_warned_about(tmp_path, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    private_folder(shared)
    private_folder(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    warnings = [line for line in capsys.readouterr().err.splitlines() if str(shared) in line]
    assert len(warnings) == 1 and "cannot make it owner-only" in warnings[0]


@pytest.fixture
def second_user() -> Iterator[str]:
    """A throw-away Unix user (removed afterwards); skips unless root with useradd."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second Unix user")
    if not (shutil.which("useradd") and shutil.which("userdel") and shutil.which("runuser")):
        pytest.skip("useradd, userdel or runuser is not installed")
    name = f"kx{secrets.token_hex(4)}"
    made = subprocess.run(["useradd", "--no-create-home", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


def test_another_user_cannot_read_the_database(second_user, workspace):
    # A folder everyone may enter (pytest's own tmp folder is root's alone, which would
    # hide the database whatever its mode): only Kairox's modes can keep it private.
    base = Path(tempfile.mkdtemp(prefix="kairox-private-", dir="/tmp"))
    try:
        base.chmod(0o755)
        control = base / "readable.txt"
        control.write_text("anyone may read this")
        control.chmod(0o644)
        home = base / "state"
        _fill_home(workspace, home)

        def read_as_other(path):
            return subprocess.run(
                ["runuser", "-u", second_user, "--", "cat", str(path)],
                capture_output=True,
                timeout=60,
            )

        assert read_as_other(control).returncode == 0  # the user can read what is open
        for target in (home / "kairox.db", home / "vectors"):
            refused = read_as_other(target)
            assert refused.returncode != 0 and b"Permission denied" in refused.stderr
        copied = subprocess.run(
            ["runuser", "-u", second_user, "--", "ls", str(home)], capture_output=True
        )
        assert copied.returncode != 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def nested(tmp_path):
    """repo/ (a git checkout) holding repo/pkg/sub/."""
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / ".git").mkdir()
    return repo


def test_root_of_a_folder_given_inside_a_git_repository_is_that_folder(nested):
    from kairox.support.paths import ROOT_GIVEN, find_workspace_root

    assert find_workspace_root(nested / "pkg", given=True) == (nested / "pkg", ROOT_GIVEN)


def test_root_found_from_a_folder_is_the_git_root(nested):
    from kairox.support.paths import ROOT_GIT, find_workspace_root

    assert find_workspace_root(nested / "pkg" / "sub") == (nested, ROOT_GIT)


def test_a_kairox_toml_at_or_above_the_folder_given_wins(nested):
    from kairox.support.paths import ROOT_CONFIG, find_workspace_root

    (nested / "pkg" / "kairox.toml").write_text("")
    assert find_workspace_root(nested / "pkg" / "sub", given=True) == (nested / "pkg", ROOT_CONFIG)
    assert find_workspace_root(nested / "pkg", given=True) == (nested / "pkg", ROOT_CONFIG)
    assert find_workspace_root(nested / "pkg" / "sub") == (nested / "pkg", ROOT_CONFIG)


def test_without_config_or_git_the_current_folder_is_the_root(tmp_path):
    from kairox.support.paths import ROOT_CURRENT, find_workspace_root

    assert find_workspace_root(tmp_path) == (tmp_path, ROOT_CURRENT)
