"""Walking a workspace: which files are indexed, and reading them as text.

The walk follows git's idea of what is part of a project: ``.gitignore`` files at every
level (a nested one applies to its folder and below and overrides its parents, ``!``
patterns re-include), plus ``.git/info/exclude`` at the root, matched with ``pathspec``'s
``GitIgnoreSpec``. As in git, nothing inside an ignored folder can be re-included, because
the walk never enters it. ``.git`` and Kairox's own ``.kairox`` state are always skipped.

Symbolic links: a link to a file inside the workspace is listed under the link's path; a
link leading outside the workspace, a broken link, and any link to a folder are skipped.
Folder links are not followed because their target, when inside the workspace, is walked
under its real path anyway, and not following them rules out symlink cycles by
construction (like git, ripgrep and fd by default).
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pathspec import GitIgnoreSpec

if TYPE_CHECKING:
    from kairox.workspace.selection import FileSelection

__all__ = [
    "ALWAYS_SKIPPED",
    "DEFAULT_MAX_BYTES",
    "SNIFF_BYTES",
    "Skipped",
    "WorkspaceFile",
    "is_binary",
    "iter_workspace_files",
    "read_file_bytes",
    "read_file_text",
    "read_text",
]

#: Folder (or file) names never walked, at any depth: git's database (a file in worktrees
#: and submodules) and Kairox's own state.
ALWAYS_SKIPPED = frozenset({".git", ".kairox"})
#: How much of a file is inspected to decide whether it is binary (git sniffs 8000 bytes).
SNIFF_BYTES = 8192
#: The default size cap of the walk and of ``kairox kb ingest`` (``[workspace] max_file_bytes``).
DEFAULT_MAX_BYTES = 2_000_000

#: Why a file was skipped, as counted in index and ingest summaries.
BINARY = "binary"
TOO_LARGE = "too large"
UNREADABLE = "unreadable"
VANISHED = "vanished"
PATH_TOO_LONG = "path too long"
NOT_REGULAR = "not a regular file"

#: ``on_skip(relpath, reason)``: told about each file the walk or a read skipped.
SkipCallback = Callable[[str, str], None]


@dataclass(frozen=True)
class Skipped:
    """A file that was not read, and why (one of the reasons above, plus detail)."""

    reason: str
    detail: str = ""


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return PATH_TOO_LONG
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return VANISHED
    return UNREADABLE


@dataclass(frozen=True)
class WorkspaceFile:
    """A file the workspace index should consider.

    ``relpath`` is relative to the workspace root, with ``/`` separators on every platform
    (it is the file's identity in the index). ``size`` and ``mtime_ns`` are those of the
    file itself (of the target, for a symbolic link), for cheap change detection.
    """

    path: Path
    relpath: str
    size: int
    mtime_ns: int


# (folder relpath, its rules): "" is the root.
_Level = tuple[str, GitIgnoreSpec]


def _load_ignore_file(path: Path) -> GitIgnoreSpec | None:
    """The rules in one ignore file, or None when it is absent, unreadable or empty."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    try:
        spec = GitIgnoreSpec.from_lines(lines)
    except ValueError:
        # git silently ignores a pattern it cannot parse (a lone "!" or "\"); do the same
        # rather than dropping the whole file or failing the walk.
        spec = GitIgnoreSpec.from_lines([line for line in lines if _is_valid_pattern(line)])
    return spec if len(spec) else None


def _is_valid_pattern(line: str) -> bool:
    try:
        GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def _is_ignored(levels: list[_Level], relpath: str, is_dir: bool) -> bool:
    """Git's verdict on ``relpath``: the deepest ignore file with a matching pattern wins.

    Within one file the last matching pattern decides (``GitIgnoreSpec`` does that);
    across files a deeper ``.gitignore`` overrides its parents, and every ``.gitignore``
    overrides ``.git/info/exclude`` (listed first, so checked last).
    """
    for base, spec in reversed(levels):
        local = relpath[len(base) + 1 :] if base else relpath
        # A trailing slash is how pathspec knows it is a folder, so "build/" matches it.
        result = spec.check_file(local + "/" if is_dir else local)
        if result.include is not None:
            return result.include
    return False


def _sort_key(entry: os.DirEntry[str]) -> str:
    """Sort a folder's entries so the whole walk comes out in plain ``relpath`` order.

    A folder sorts as ``name/``: "a.txt" < "a/x" < "a-b" would otherwise interleave wrongly.
    """
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def _scan(folder: str) -> list[os.DirEntry[str]]:
    """The sorted entries of ``folder``; an unreadable folder is treated as empty."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=_sort_key)
    except OSError:
        return []


def _inside(root: Path, target: str) -> bool:
    """Whether the real path ``target`` lies in ``root`` and outside any skipped folder."""
    try:
        relative = Path(target).relative_to(root)
    except ValueError:
        return False
    return not ALWAYS_SKIPPED.intersection(relative.parts)


def iter_workspace_files(
    root: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_skip: SkipCallback | None = None,
    selection: FileSelection | None = None,
) -> Iterator[WorkspaceFile]:
    """Yield the workspace's files under ``root`` in sorted ``relpath`` order.

    Files ignored by the ``.gitignore`` files or ``.git/info/exclude``, anything under
    ``.git`` or ``.kairox``, non-regular files (sockets, FIFOs, devices), links leading
    outside ``root`` and files larger than ``max_bytes`` are skipped. Folders that cannot
    be read are skipped silently. ``on_skip(relpath, reason)`` hears of the files that
    are part of the workspace but cannot be taken: too large, or failing to ``stat``
    (unreadable, vanished, path too long). ``selection`` (``[workspace] include`` and
    ``exclude``, and the folders Kairox owns) narrows the walk further. ``root`` must be
    an existing folder.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must not be negative, got {max_bytes}")
    root = Path(root).resolve()
    if not root.is_dir():
        raise NotADirectoryError(f"workspace root {root} is not a folder")

    root_levels: list[_Level] = []
    for ignore_file in (root / ".git" / "info" / "exclude", root / ".gitignore"):
        spec = _load_ignore_file(ignore_file)
        if spec is not None:
            root_levels.append(("", spec))

    # Folders already walked, by identity: a bind mount looping back cannot recurse forever.
    root_stat = root.stat()
    visited = {(root_stat.st_dev, root_stat.st_ino)}
    # Depth-first with an explicit stack (no recursion limit on deep trees); each frame is
    # a folder's remaining entries, its relpath prefix and the rules in force there.
    stack: list[tuple[Iterator[os.DirEntry[str]], str, list[_Level]]] = [
        (iter(_scan(str(root))), "", root_levels)
    ]
    while stack:
        entries, prefix, levels = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if entry.name in ALWAYS_SKIPPED:
            continue
        relpath = prefix + entry.name
        try:
            if entry.is_symlink():
                if not _inside(root, os.path.realpath(entry.path)):
                    continue
                info = os.stat(entry.path)  # the target's; a broken link raises
                if not stat.S_ISREG(info.st_mode):
                    continue  # folder links are not followed (see module docstring)
            elif entry.is_dir(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                key = (info.st_dev, info.st_ino)
                if key in visited or _is_ignored(levels, relpath, is_dir=True):
                    continue
                if selection is not None and selection.skips_folder(entry.path, relpath):
                    continue
                visited.add(key)
                spec = _load_ignore_file(Path(entry.path) / ".gitignore")
                inner = [*levels, (relpath, spec)] if spec is not None else levels
                stack.append((iter(_scan(entry.path)), relpath + "/", inner))
                continue
            else:
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    # A FIFO, socket or device: never read (a FIFO would block), but counted.
                    if on_skip is not None and not _is_ignored(levels, relpath, is_dir=False):
                        on_skip(relpath, NOT_REGULAR)
                    continue
        except OSError as exc:
            # Vanished or unreadable mid-walk: not part of this snapshot, but said so.
            if on_skip is not None and not _is_ignored(levels, relpath, is_dir=False):
                on_skip(relpath, _os_reason(exc))
            continue
        if _is_ignored(levels, relpath, is_dir=False):
            continue
        if selection is not None and (
            not selection.takes_file(relpath) or selection.owns(entry.path)
        ):
            continue
        if info.st_size > max_bytes:
            if on_skip is not None:
                on_skip(relpath, TOO_LARGE)
            continue
        yield WorkspaceFile(
            path=Path(entry.path), relpath=relpath, size=info.st_size, mtime_ns=info.st_mtime_ns
        )


def _looks_binary(head: bytes, complete: bool) -> bool:
    """Sniff the first bytes: a NUL, or bytes that are not UTF-8, mean binary.

    When ``head`` is only the start of a longer file, a multi-byte character cut at its
    end is not an error: the incremental decoder keeps it pending instead of failing.
    """
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return True
    return False


def is_binary(path: Path) -> bool:
    """Whether ``path`` looks binary, judging by its first :data:`SNIFF_BYTES` bytes.

    Raises :class:`OSError` when the file cannot be read.
    """
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
        complete = not handle.read(1)
    return _looks_binary(head, complete)


def read_text(path: Path) -> str | None:
    """The UTF-8 text of ``path`` (a leading BOM removed), or None if it is not text.

    None means binary by :func:`is_binary`'s rule or not valid UTF-8 further in. Line
    endings are kept as they are, so offsets into the text match the file. Raises
    :class:`OSError` when the file cannot be read.
    """
    data = Path(path).read_bytes()
    if _looks_binary(data[:SNIFF_BYTES], complete=len(data) <= SNIFF_BYTES):
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def read_file_bytes(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | Skipped:
    """The bytes of the regular file ``path`` (at most ``max_bytes``), or why not.

    Never blocks and never reads more than ``max_bytes`` + 1 bytes: the file is opened
    without blocking and checked through its own descriptor, so a FIFO, a device such as
    ``/dev/zero``, or a file swapped for one after a walk is refused, not read. Unreadable,
    vanished and over-size files come back as :class:`Skipped`; nothing raises.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return Skipped(_os_reason(exc), exc.strerror or str(exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Skipped(NOT_REGULAR)
        if info.st_size > max_bytes:
            return Skipped(TOO_LARGE, f"{info.st_size:,} bytes, the cap is {max_bytes:,}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return Skipped(_os_reason(exc), exc.strerror or str(exc))
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since it was opened
        return Skipped(TOO_LARGE, f"over {max_bytes:,} bytes, the cap")
    return data


def read_file_text(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str | Skipped:
    """The UTF-8 text of the regular file ``path``, or why it was not read.

    Read as :func:`read_file_bytes` reads (never blocking, never past the cap); binary
    files come back as :class:`Skipped` too; nothing raises.
    """
    data = read_file_bytes(path, max_bytes=max_bytes)
    if isinstance(data, Skipped):
        return data
    if _looks_binary(data[:SNIFF_BYTES], complete=len(data) <= SNIFF_BYTES):
        return Skipped(BINARY)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return Skipped(BINARY, "not valid UTF-8")
