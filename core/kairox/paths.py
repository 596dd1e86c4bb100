"""Where Kairox keeps its state, and which folder is the current workspace."""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_CONFIG_NAME = "kairox.toml"


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
