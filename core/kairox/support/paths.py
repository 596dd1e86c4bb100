"""Where Kairox keeps its state, and which folder is the current workspace.

Kairox's state (``$KAIROX_HOME``: the database with its ``-wal``/``-shm`` files, vector
packs, locks, exported models, caches) holds the user's memories and an index of their
files, so it is owner-only whatever the umask: folders 0700, files 0600. Each is made so
when Kairox creates it, and one that exists with a wider mode (made by an older Kairox,
or by hand) is tightened when Kairox opens it. A folder Kairox cannot tighten (another
user's, or a shared one with the sticky bit such as ``/tmp``) is left as it is, with one
warning per process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kairox.support.errors import KairoxError

WORKSPACE_CONFIG_NAME = "kairox.toml"

#: The modes of Kairox's state: owner-only.
PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: The files SQLite keeps next to a database, private like it.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")

_warned: set[str] = set()


class StateError(KairoxError):
    """Kairox's state folder or database cannot be created, opened or written."""


@contextlib.contextmanager
def state_errors(database: Path | str) -> Iterator[None]:
    """Turn an OS or SQLite failure to create or open ``database`` into a :class:`StateError`
    that names the file and what to do (an unwritable or non-folder ``KAIROX_HOME``)."""
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        folder = Path(database).parent
        reason = getattr(exc, "strerror", None) or str(exc)
        if folder.exists() and not folder.is_dir():
            reason = f"{folder} is a file, not a folder"
        raise StateError(
            f"cannot open Kairox's database {database}: {reason}. Kairox keeps its state in "
            f"{folder}; make that a folder you can write to, or set KAIROX_HOME to one."
        ) from exc


class DiskFullError(StateError):
    """The disk holding Kairox's state (or a knowledge base's files) ran out of space."""


#: SQLite's primary result code for "database or disk is full".
_SQLITE_FULL = 13


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full: ``ENOSPC``/``EDQUOT`` from the OS, or SQLite's
    ``SQLITE_FULL`` (``sqlite3``'s ``sqlite_errorcode`` or apsw's ``result``)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        code = getattr(exc, "result", None)
    return isinstance(code, int) and code & 0xFF == _SQLITE_FULL


def disk_full_message(folder: Path | str) -> str:
    """One line: which folder's disk is full, and what to free."""
    return (
        f"the disk holding {folder} is full; free some space on it (the files this run "
        "adds need about their own size again, plus their vectors), or set KAIROX_HOME to "
        "a folder on a disk with room, then run the command again: the database stays "
        "consistent (the write that failed was rolled back) and the next run goes on from it."
    )


@contextlib.contextmanager
def disk_full_errors(folder: Path | str) -> Iterator[None]:
    """Turn a full disk under ``folder`` (an OS or SQLite error) into a
    :class:`DiskFullError` that names ``folder`` and what to free."""
    try:
        yield
    except Exception as exc:
        if is_disk_full(exc):
            raise DiskFullError(disk_full_message(folder)) from exc
        raise


def kairox_home() -> Path:
    """``$KAIROX_HOME``, else ``$XDG_DATA_HOME/kairox``, else ``~/.local/share/kairox``."""
    explicit = os.environ.get("KAIROX_HOME")
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "kairox"


def _tighten(path: Path, mode: int) -> None:
    """Take from ``path`` every permission bit ``mode`` does not grant (group and others),
    if it is ours and not a shared sticky folder; else warn, once per process."""
    try:
        info = os.stat(path)
    except OSError:
        return
    current = stat.S_IMODE(info.st_mode)
    if not current & ~mode:
        return
    if info.st_uid == os.getuid() and not info.st_mode & stat.S_ISVTX:
        with contextlib.suppress(OSError):
            os.chmod(path, current & mode)
            return
    if str(path) not in _warned:
        _warned.add(str(path))
        print(
            f"warning: {path} can be reached by other users (mode {current:o}) and Kairox "
            f"cannot make it owner-only; keep Kairox's state in a folder of your own "
            f"(KAIROX_HOME) or run `chmod go-rwx {path}`",
            file=sys.stderr,
        )


def private_folder(folder: Path | str) -> Path:
    """``folder`` created if missing (its missing parents too) and made owner-only (0700);
    an existing one with a wider mode is tightened. For Kairox's state folders only."""
    folder = Path(folder)
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    # One by one: mkdir(parents=True) would give the parents the umask's mode.
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):
            each.mkdir(mode=PRIVATE_FOLDER_MODE)
        _tighten(each, PRIVATE_FOLDER_MODE)
    _tighten(folder, PRIVATE_FOLDER_MODE)
    return folder


def private_file(path: Path | str, *, companions: tuple[str, ...] = ()) -> Path:
    """``path`` created empty if missing, owner-only (0600) whatever the umask; an existing
    one, and its ``companions`` (``SQLITE_COMPANIONS`` for a database), tightened. Its
    folder must exist. SQLite gives a database's ``-wal`` and ``-shm`` files the database
    file's own mode, so a database made private here stays private."""
    path = Path(path)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    for each in (path, *(path.with_name(path.name + suffix) for suffix in companions)):
        _tighten(each, PRIVATE_FILE_MODE)
    return path


def private_tree(folder: Path | str) -> None:
    """Tighten ``folder`` and everything under it to owner-only, for files a library wrote
    with the umask's mode (an ONNX export, a Tantivy index inside ``$KAIROX_HOME``)."""
    root = Path(folder)
    _tighten(root, PRIVATE_FOLDER_MODE)
    for parent, folders, files in os.walk(root):
        for name in folders:
            _tighten(Path(parent, name), PRIVATE_FOLDER_MODE)
        for name in files:
            _tighten(Path(parent, name), PRIVATE_FILE_MODE)


def in_kairox_home(path: Path | str) -> bool:
    """Whether ``path`` lies inside ``$KAIROX_HOME`` (so it is state, kept private)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(kairox_home()))
    except OSError:
        return False


def database_path() -> Path:
    """The per-user SQLite database holding events, memories and workspace indexes."""
    return kairox_home() / "kairox.db"


#: Why a folder is the workspace root (the ``why`` of :func:`find_workspace_root`).
ROOT_CONFIG = "nearest kairox.toml"
ROOT_GIVEN = "the folder given"
ROOT_GIT = "git root"
ROOT_CURRENT = "current folder"


class WorkspaceRoot(NamedTuple):
    """The workspace's root folder and why it was chosen (one of the ``ROOT_*`` reasons)."""

    path: Path
    why: str


def find_workspace_root(start: Path | None = None, *, given: bool = False) -> WorkspaceRoot:
    """The workspace ``start`` (default: the current folder) belongs to, and why.

    The nearest folder at or above ``start`` holding ``kairox.toml`` (its configuration
    defines the workspace, and its ``include``/``exclude`` patterns are relative to it);
    else ``start`` itself when it was given (``kairox index PATH``, ``kairox.open(PATH)``,
    ``--workspace PATH``), so a folder inside a larger git repository is indexed alone;
    else the git root above ``start``; else ``start``.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / WORKSPACE_CONFIG_NAME).exists():
            return WorkspaceRoot(folder, ROOT_CONFIG)
    if given:
        return WorkspaceRoot(here, ROOT_GIVEN)
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return WorkspaceRoot(folder, ROOT_GIT)
    return WorkspaceRoot(here, ROOT_CURRENT)


def workspace_root(start: Path | None = None, *, given: bool = False) -> Path:
    """The folder of :func:`find_workspace_root`."""
    return find_workspace_root(start, given=given).path


@contextlib.contextmanager
def state_lock(database: Path, kind: str, key: str, *, wait: bool) -> Iterator[None]:
    """Hold the ``kind`` lock of ``key`` (``"index"``, a workspace) next to ``database``,
    across processes.

    Without ``wait``, a lock another holder has raises :class:`BlockingIOError` at once.
    The kernel drops the lock when its process dies, even by SIGKILL; two holders in one
    process exclude each other too (each opens the file anew).
    """
    lock_dir = private_folder(database.parent / "locks")
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = private_file(lock_dir / f"{kind}-{name}.lock")
    with open(path, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
