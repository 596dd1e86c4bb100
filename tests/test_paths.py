"""kairox.paths: where state lives, and what happens when it cannot live there."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from kairox.cli import build_cli
from kairox.paths import StateError, database_path, kairox_home
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


@pytest.fixture
def nested(tmp_path):
    """repo/ (a git checkout) holding repo/pkg/sub/."""
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / ".git").mkdir()
    return repo


def test_root_of_a_folder_given_inside_a_git_repository_is_that_folder(nested):
    from kairox.paths import ROOT_GIVEN, find_workspace_root

    assert find_workspace_root(nested / "pkg", given=True) == (nested / "pkg", ROOT_GIVEN)


def test_root_found_from_a_folder_is_the_git_root(nested):
    from kairox.paths import ROOT_GIT, find_workspace_root

    assert find_workspace_root(nested / "pkg" / "sub") == (nested, ROOT_GIT)


def test_a_kairox_toml_at_or_above_the_folder_given_wins(nested):
    from kairox.paths import ROOT_CONFIG, find_workspace_root

    (nested / "pkg" / "kairox.toml").write_text("")
    assert find_workspace_root(nested / "pkg" / "sub", given=True) == (nested / "pkg", ROOT_CONFIG)
    assert find_workspace_root(nested / "pkg", given=True) == (nested / "pkg", ROOT_CONFIG)
    assert find_workspace_root(nested / "pkg" / "sub") == (nested / "pkg", ROOT_CONFIG)


def test_without_config_or_git_the_current_folder_is_the_root(tmp_path):
    from kairox.paths import ROOT_CURRENT, find_workspace_root

    assert find_workspace_root(tmp_path) == (tmp_path, ROOT_CURRENT)
