"""Which root `kairox index` and `kairox search` use, the line saying why, and the pointer
to an indexed workspace nearby when the chosen root holds no index."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import kairox
from kairox.cli import build_cli
from kairox.plugin_host.manager import build_plugin_manager


@pytest.fixture
def invoke():
    pm = build_plugin_manager(entry_points=False)

    def run(*args):
        return CliRunner().invoke(build_cli(pm), [str(a) for a in args])

    return run


@pytest.fixture
def repo(workspace):
    """The current folder is a git checkout with a package folder inside it."""
    (workspace / ".git").mkdir()
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "retry.py").write_text("def retry_upload():\n    pass\n")
    (workspace / "notes.md").write_text("retry notes outside the package\n")
    return workspace


def test_index_path_inside_a_git_repository_indexes_that_folder(invoke, repo):
    result = invoke("index", "pkg", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["workspace"] == str(repo / "pkg")
    assert report["why"] == "the folder given"
    assert report["added"] == 1  # pkg/retry.py only, not notes.md
    plain = invoke("index", "pkg")
    assert f"workspace: {repo / 'pkg'} (the folder given)" in plain.stderr


def test_search_says_its_root_and_points_at_an_index_nearby(invoke, repo):
    assert invoke("index", "pkg").exit_code == 0
    result = invoke("search", "retry upload")
    assert result.exit_code == 0, result.output
    assert f"workspace: {repo} (git root)" in result.stderr
    assert f"no index for {repo} (git root)" in result.stderr
    assert f"kairox search --workspace {repo / 'pkg'} 'retry upload'" in result.stderr
    as_json = json.loads(invoke("search", "retry upload", "--json").stdout)
    assert as_json["workspace"] == {
        "root": str(repo),
        "why": "git root",
        "indexed_nearby": [str(repo / "pkg")],
    }


def test_search_workspace_searches_the_folder_given(invoke, repo):
    assert invoke("index", "pkg").exit_code == 0
    result = invoke("search", "retry upload", "--workspace", "pkg", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["workspace"] == {"root": str(repo / "pkg"), "why": "the folder given"}
    assert report["hits"][0]["metadata"]["path"] == "retry.py"


def test_a_kairox_toml_above_the_folder_given_makes_the_root(invoke, repo):
    (repo / "kairox.toml").write_text("")
    report = json.loads(invoke("index", "pkg", "--json").stdout)
    assert report["workspace"] == str(repo)
    assert report["why"] == "nearest kairox.toml"


def test_the_python_api_roots_at_the_folder_given(repo):
    with kairox.open(repo / "pkg") as kx:
        assert kx.workspace_root == repo / "pkg"
    with kairox.open() as kx:  # no folder: the current folder's workspace
        assert kx.workspace_root == repo
