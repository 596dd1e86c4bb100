"""Where Kairox keeps its state, and which folder is the current workspace."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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


@contextlib.contextmanager
def state_lock(database: Path, kind: str, key: str, *, wait: bool) -> Iterator[None]:
    """Hold the ``kind`` lock of ``key`` (``"index"``, a workspace) next to ``database``,
    across processes.

    Without ``wait``, a lock another holder has raises :class:`BlockingIOError` at once.
    The kernel drops the lock when its process dies, even by SIGKILL; two holders in one
    process exclude each other too (each opens the file anew).
    """
    lock_dir = database.parent / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # state is owner-only
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = lock_dir / f"{kind}-{name}.lock"
    with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
