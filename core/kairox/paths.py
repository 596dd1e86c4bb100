"""Where Kairox keeps its state, and which folder is the current workspace."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

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
