"""Where Kairox keeps its state, and which folder is the current workspace."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from kairox.errors import KairoxError

WORKSPACE_CONFIG_NAME = "kairox.toml"


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


def database_path() -> Path:
    """The per-user SQLite database holding events, memories and workspace indexes."""
    return kairox_home() / "kairox.db"


def workspace_root(start: Path | None = None) -> Path:
    """The folder holding ``kairox.toml``, else the git root, else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for marker in (WORKSPACE_CONFIG_NAME, ".git"):
        for folder in (here, *here.parents):
            if (folder / marker).exists():
                return folder
    return here
