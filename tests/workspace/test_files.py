"""Walking a workspace: .gitignore rules, skipped folders, binaries, symlinks, order."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kairox.workspace.files import (
    SNIFF_BYTES,
    WorkspaceFile,
    is_binary,
    iter_workspace_files,
    read_text,
)


def write(root: Path, relpath: str, content: str | bytes = "text\n") -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def relpaths(root: Path, **kwargs: int) -> list[str]:
    return [f.relpath for f in iter_workspace_files(root, **kwargs)]


def git_listing(root: Path) -> list[str] | None:
    """What git itself considers untracked-but-not-ignored, if git is available."""
    try:
        subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(p for p in out.decode().split("\0") if p)


def test_yields_workspace_files_with_metadata(tmp_path: Path) -> None:
    path = write(tmp_path, "docs/readme.md", "hello\n")
    [found] = list(iter_workspace_files(tmp_path))
    assert found == WorkspaceFile(
        path=path,
        relpath="docs/readme.md",
        size=6,
        mtime_ns=path.stat().st_mtime_ns,
    )
    assert found.path.is_absolute()


def test_nested_gitignore_with_negation(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.log\nsecret*\n")
    write(tmp_path, "app.log")
    write(tmp_path, "main.py")
    write(tmp_path, "secret.txt")
    write(tmp_path, "sub/.gitignore", "!keep.log\n!secret_ok.txt\n*.tmp\n")
    write(tmp_path, "sub/keep.log")
    write(tmp_path, "sub/other.log")
    write(tmp_path, "sub/secret_ok.txt")
    write(tmp_path, "sub/scratch.tmp")
    write(tmp_path, "sub/deeper/keep.log")  # a nested rule applies below its folder too
    write(tmp_path, "scratch.tmp")  # ...but not above it
    expected = [
        ".gitignore",
        "main.py",
        "scratch.tmp",
        "sub/.gitignore",
        "sub/deeper/keep.log",
        "sub/keep.log",
        "sub/secret_ok.txt",
    ]
    assert relpaths(tmp_path) == expected
    from_git = git_listing(tmp_path)
    if from_git is not None:
        assert relpaths(tmp_path) == from_git


def test_directory_patterns(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "build/\nnode_modules\n")
    write(tmp_path, "build/out.js")
    write(tmp_path, "src/build/nested.js")  # no leading slash: matches at any depth
    write(tmp_path, "node_modules/pkg/index.js")
    write(tmp_path, "build.py")  # a file named like the folder pattern, without the slash
    write(tmp_path, "src/app.js")
    assert relpaths(tmp_path) == [".gitignore", "build.py", "src/app.js"]


def test_file_pattern_with_slash_does_not_match_a_file(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "logs/\n")
    write(tmp_path, "logs", "a file called logs\n")
    assert relpaths(tmp_path) == [".gitignore", "logs"]


def test_anchored_patterns(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "/root_only.txt\n/docs/generated/\n")
    write(tmp_path, "root_only.txt")
    write(tmp_path, "sub/root_only.txt")
    write(tmp_path, "docs/generated/api.md")
    write(tmp_path, "docs/guide.md")
    write(tmp_path, "other/docs/generated/kept.md")
    write(tmp_path, "pkg/.gitignore", "/local.txt\n")  # anchored to pkg/
    write(tmp_path, "pkg/local.txt")
    write(tmp_path, "pkg/inner/local.txt")
    write(tmp_path, "local.txt")
    assert relpaths(tmp_path) == [
        ".gitignore",
        "docs/guide.md",
        "local.txt",
        "other/docs/generated/kept.md",
        "pkg/.gitignore",
        "pkg/inner/local.txt",
        "sub/root_only.txt",
    ]


def test_no_reinclusion_inside_an_ignored_folder(tmp_path: Path) -> None:
    """As in git: once a folder is excluded, a negation cannot bring back its files."""
    write(tmp_path, ".gitignore", "vendor/\n!vendor/keep.txt\nout/*\n!out/keep.txt\n")
    write(tmp_path, "vendor/keep.txt")
    write(tmp_path, "out/keep.txt")  # out/* ignores the contents, not the folder
    write(tmp_path, "out/drop.txt")
    assert relpaths(tmp_path) == [".gitignore", "out/keep.txt"]


def test_git_info_exclude_and_precedence(tmp_path: Path) -> None:
    write(tmp_path, ".git/info/exclude", "*.bak\nlocal-notes.md\n")
    write(tmp_path, ".gitignore", "!important.bak\n")  # .gitignore beats info/exclude
    write(tmp_path, "a.bak")
    write(tmp_path, "important.bak")
    write(tmp_path, "local-notes.md")
    write(tmp_path, "code.py")
    assert relpaths(tmp_path) == [".gitignore", "code.py", "important.bak"]


def test_git_and_kairox_state_are_always_skipped(tmp_path: Path) -> None:
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, ".git/objects/ab/cdef", b"\x78\x9c")
    write(tmp_path, ".kairox/state.db", "x")
    write(tmp_path, "sub/.git", "gitdir: ../.git/modules/sub\n")  # a submodule's .git file
    write(tmp_path, "sub/.kairox/cache")
    write(tmp_path, "sub/code.py")
    write(tmp_path, ".github/workflows/ci.yml")  # only the exact names are special
    assert relpaths(tmp_path) == [".github/workflows/ci.yml", "sub/code.py"]


def test_unparseable_patterns_are_ignored_like_git(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "!\n\\\n*.log\n# comment\n\n")
    write(tmp_path, "a.log")
    write(tmp_path, "a.txt")
    assert relpaths(tmp_path) == [".gitignore", "a.txt"]


def test_gitignore_with_bom_and_crlf(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", b"\xef\xbb\xbf*.log\r\nbuild/\r\n")
    write(tmp_path, "a.log")
    write(tmp_path, "build/x")
    write(tmp_path, "a.txt")
    assert relpaths(tmp_path) == [".gitignore", "a.txt"]


def test_large_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "small.txt", "x" * 100)
    write(tmp_path, "exact.txt", "x" * 1000)
    write(tmp_path, "big.txt", "x" * 1001)
    assert relpaths(tmp_path, max_bytes=1000) == ["exact.txt", "small.txt"]
    assert len(relpaths(tmp_path)) == 3  # the default limit is 2 MB
    with pytest.raises(ValueError, match="max_bytes"):
        relpaths(tmp_path, max_bytes=-1)


def test_order_is_sorted_and_deterministic(tmp_path: Path) -> None:
    for relpath in ["b.txt", "a/z.txt", "a.txt", "a-b.txt", "a/b/c.txt", "A.txt", "é.txt", "_x"]:
        write(tmp_path, relpath)
    found = relpaths(tmp_path)
    assert found == sorted(found)
    assert found == relpaths(tmp_path)
    assert found == ["A.txt", "_x", "a-b.txt", "a.txt", "a/b/c.txt", "a/z.txt", "b.txt", "é.txt"]


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        list(iter_workspace_files(tmp_path / "missing"))
    with pytest.raises(NotADirectoryError):
        list(iter_workspace_files(write(tmp_path, "file.txt")))


def test_relative_root_gives_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "ws/a.txt")
    monkeypatch.chdir(tmp_path)
    [found] = list(iter_workspace_files(Path("ws")))
    assert found.path == (tmp_path / "ws" / "a.txt").resolve()
    assert found.relpath == "a.txt"


@pytest.mark.timeout(20)
def test_symlink_cycles_do_not_hang(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "a/file.txt")
    os.symlink(root, root / "a" / "loop_to_root")
    os.symlink(root / "a", root / "a" / "loop_to_self")
    os.symlink("b_link", root / "b_link")  # points at itself
    os.symlink(root / "c2", root / "c1")
    os.symlink(root / "c1", root / "c2")  # a two-link cycle
    assert relpaths(root) == ["a/file.txt"]


def test_symlinks_outside_root_are_skipped(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/secret.txt")
    root = tmp_path / "ws"
    target = write(root, "real/notes.md", "notes\n")
    os.symlink(outside, root / "leak.txt")
    os.symlink(outside.parent, root / "leak_dir")
    os.symlink(target, root / "alias.md")  # inside: listed under the link's own path
    os.symlink(root / "real", root / "real_alias")  # folder link: target is walked already
    os.symlink(root / "missing.txt", root / "broken.txt")
    (root / "x").mkdir()
    os.symlink(root / "x" / ".." / "real" / "notes.md", root / "dotted.md")
    write(root, ".git/config", "[core]\n")
    os.symlink(root / ".git" / "config", root / "git_config")
    files = {f.relpath: f for f in iter_workspace_files(root)}
    assert sorted(files) == ["alias.md", "dotted.md", "real/notes.md"]
    assert files["alias.md"].path == root.resolve() / "alias.md"
    assert files["alias.md"].size == len("notes\n")


def test_special_files_are_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # reading a FIFO would block forever
    write(tmp_path, "ok.txt")
    assert relpaths(tmp_path) == ["ok.txt"]


def test_special_files_are_counted_as_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    os.mkfifo(tmp_path / "ignored-pipe")
    (tmp_path / ".gitignore").write_text("ignored-pipe\n")
    write(tmp_path, "ok.txt")
    skipped: list[tuple[str, str]] = []
    found = [
        f.relpath for f in iter_workspace_files(tmp_path, on_skip=lambda *s: skipped.append(s))
    ]
    assert "ok.txt" in found
    assert skipped == [("pipe", "not a regular file")]


def test_unreadable_folder_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "locked/a.txt")
    write(tmp_path, "ok.txt")
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        # chmod 0 would not stop root, so refuse the way a permission check would.
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert relpaths(tmp_path) == ["ok.txt"]


# --- binary sniffing and reading ------------------------------------------------------

PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"


@pytest.mark.parametrize(
    ("content", "binary"),
    [
        (PNG_HEADER + b"\x00" * 100, True),
        (b"plain text with a \x00 NUL", True),
        (b"\xff\xfe\x00h\x00i", True),  # UTF-16: NULs
        (b"latin-1 caf\xe9 text", True),  # not UTF-8
        (b"", False),
        (b"plain ascii\n", False),
        ("ünïcode 日本語 🎉\n".encode(), False),
        (b"\xef\xbb\xbfwith a BOM", False),
    ],
)
def test_is_binary(tmp_path: Path, content: bytes, binary: bool) -> None:
    path = write(tmp_path, "f", content)
    assert is_binary(path) is binary
    assert (read_text(path) is None) is binary


def test_multibyte_character_cut_at_the_sniff_boundary_is_not_binary(tmp_path: Path) -> None:
    emoji = "🎉".encode()  # 4 bytes
    content = b"a" * (SNIFF_BYTES - 2) + emoji + b" more text after the boundary\n"
    assert content[:SNIFF_BYTES].endswith(emoji[:2])  # the sniff window halves the emoji
    path = write(tmp_path, "text.txt", content)
    assert not is_binary(path)
    assert read_text(path) == content.decode()


def test_truncated_character_at_the_very_end_is_binary(tmp_path: Path) -> None:
    """A short file ending mid-character is not valid UTF-8, boundary or not."""
    path = write(tmp_path, "broken.txt", b"text" + "🎉".encode()[:2])
    assert is_binary(path)
    assert read_text(path) is None
    exact = write(tmp_path, "exact.txt", b"a" * (SNIFF_BYTES - 2) + "🎉".encode()[:2])
    assert is_binary(exact)  # exactly SNIFF_BYTES long: nothing follows the cut


def test_invalid_utf8_after_the_sniff_window(tmp_path: Path) -> None:
    path = write(tmp_path, "late.txt", b"a" * (SNIFF_BYTES * 2) + b"\xff")
    assert not is_binary(path)  # the sniff only looks at the start...
    assert read_text(path) is None  # ...but reading as text still refuses it


def test_read_text_strips_the_bom_and_keeps_line_endings(tmp_path: Path) -> None:
    path = write(tmp_path, "bom.txt", b"\xef\xbb\xbfline one\r\nline two\n")
    assert read_text(path) == "line one\r\nline two\n"


def test_read_text_errors_on_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(OSError):
        is_binary(tmp_path / "missing.txt")


def test_package_reexports_lazily() -> None:
    import kairox.workspace as workspace
    from kairox.workspace import chunking, files

    for name in workspace.__all__:
        module = chunking if hasattr(chunking, name) else files
        assert getattr(workspace, name) is getattr(module, name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = workspace.nope


# -- read_file_text: never blocks, never reads past the cap ----------------------------


def test_read_file_text_refuses_what_is_not_a_small_regular_text_file(tmp_path):
    from kairox.workspace.files import Skipped, read_file_text

    (tmp_path / "ok.txt").write_text("\ufeffhello")
    (tmp_path / "big.txt").write_text("x" * 100)
    (tmp_path / "blob").write_bytes(b"\x00\x01")
    os.mkfifo(tmp_path / "pipe")
    assert read_file_text(tmp_path / "ok.txt") == "hello"
    assert read_file_text(tmp_path / "big.txt", max_bytes=99) == Skipped(
        "too large", "100 bytes, the cap is 99"
    )
    assert read_file_text(tmp_path / "blob") == Skipped("binary")
    assert read_file_text(tmp_path / "pipe") == Skipped("not a regular file")
    assert read_file_text(Path("/dev/zero")) == Skipped("not a regular file")
    assert read_file_text(tmp_path / "gone.txt").reason == "vanished"


def test_the_walk_reports_files_over_the_cap(tmp_path):
    (tmp_path / "small.txt").write_text("s")
    (tmp_path / "large.txt").write_text("l" * 50)
    (tmp_path / ".gitignore").write_text("ignored.txt\n")
    (tmp_path / "ignored.txt").write_text("i" * 50)
    heard: list[tuple[str, str]] = []
    walked = iter_workspace_files(tmp_path, max_bytes=20, on_skip=lambda *a: heard.append(a))
    assert [f.relpath for f in walked] == [".gitignore", "small.txt"]
    assert heard == [("large.txt", "too large")]  # ignored files are not "skipped"
