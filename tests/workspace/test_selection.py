"""``[workspace] include``/``exclude`` and the folders Kairox owns, in the workspace walk."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox.workspace.files import iter_workspace_files
from kairox.workspace.selection import FileSelection, SelectionError


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for relpath in (
        "src/app.py",
        "src/app.min.js",
        "docs/guide.md",
        "build/out.txt",
        "kb/papers/meta.json",
        "state/kairox.db",
        "state/kairox.db-wal",
        "papers.db",
        "papers.db-wal",
        "notes.txt",
    ):
        path = tmp_path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("text\n")
    return tmp_path


def walk(root: Path, selection: FileSelection | None) -> list[str]:
    return [f.relpath for f in iter_workspace_files(root, selection=selection)]


def test_exclude_drops_files_and_whole_folders(tree):
    selection = FileSelection.for_workspace(tree, exclude=["build/", "*.min.js", "/state"])
    assert walk(tree, selection) == [
        "docs/guide.md",
        "kb/papers/meta.json",
        "notes.txt",
        "papers.db",
        "papers.db-wal",
        "src/app.py",
    ]


def test_include_keeps_only_what_it_matches_and_exclude_still_wins(tree):
    selection = FileSelection.for_workspace(tree, include=["src/", "*.md"], exclude=["*.js"])
    assert walk(tree, selection) == ["docs/guide.md", "src/app.py"]


def test_owned_folders_and_databases_are_never_walked(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere")
    selection = FileSelection.for_workspace(
        tree,
        include=["*"],
        owned=[tree / "state", tree / "kb" / "papers", tree / "papers.db", outside],
    )
    assert walk(tree, selection) == [
        "build/out.txt",
        "docs/guide.md",
        "notes.txt",
        "src/app.min.js",
        "src/app.py",
    ]
    # A folder outside the workspace is not part of the selection at all.
    assert all(not p.startswith(str(outside)) for p in selection.never)


def test_a_bad_pattern_says_which_setting_and_how_to_fix():
    with pytest.raises(SelectionError, match=r"\[workspace\] exclude.*gitignore"):
        FileSelection(exclude=("!",))
