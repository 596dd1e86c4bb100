"""Reading the configuration files and layering their tables.

Each file is read as UTF-8 TOML; a file that is missing, a folder, unreadable or not TOML
is a :class:`~kairox.config.errors.ConfigProblem`, not an exception. Layering keeps, for every
``[profiles.<name>]``, ``[knowledge_bases.<id>]``, ``[workspace]`` and ``[memory]``
table, the one from the last file that defines it, with that file as its origin.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kairox.config.errors import _rename_or
from kairox.config.schema import ALLOWED_TOP_LEVEL
from kairox.support.paths import WORKSPACE_CONFIG_NAME

__all__ = ["ConfigFileReader", "Table", "same_file"]


@dataclass
class Table:
    """A table after layering: its raw content and the file it came from."""

    raw: Any
    origin: Path


class ConfigFileReader:
    """Reads and layers config files, reporting problems through ``add`` (a subclass's)."""

    def add(
        self, file: Path | None, table: str | None, key: str | None, problem: str, fix: str
    ) -> None:
        raise NotImplementedError

    def read(self, path: Path) -> dict[str, Any] | None:
        if path.is_dir():
            self.add(
                path,
                None,
                None,
                "is a folder, not a config file",
                f"rename or remove the folder, or put the settings in a file named "
                f"{WORKSPACE_CONFIG_NAME}",
            )
            return None
        if path.exists() and not path.is_file():
            # A device, FIFO or socket (`--config /dev/zero`) would be read forever.
            self.add(
                path,
                None,
                None,
                "is not a regular file (a device, pipe or socket)",
                "point the config path (--config / config_path=) at a TOML file",
            )
            return None
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            self.add(path, None, None, "config file not found", "check the path, or create it")
            return None
        except UnicodeDecodeError as exc:
            self.add(path, None, None, f"not UTF-8 text ({exc.reason})", "save it as UTF-8")
            return None
        except OSError as exc:
            self.add(
                path,
                None,
                None,
                f"cannot read the file ({exc.strerror or exc})",
                "check that it is a readable file",
            )
            return None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            self.add(
                path,
                None,
                None,
                f"invalid TOML: {exc}",
                "correct the syntax there (strings need quotes; tables look like "
                "[knowledge_bases.<id>])",
            )
            return None

    def layer(
        self,
        docs: list[tuple[Path, dict[str, Any]]],
    ) -> tuple[dict[str, Table], dict[str, Table], dict[str, Table]]:
        profiles: dict[str, Table] = {}
        kbs: dict[str, Table] = {}
        singles: dict[str, Table] = {}  # [workspace], [memory]: one table each
        for path, doc in docs:
            for top, value in doc.items():
                if top not in ALLOWED_TOP_LEVEL:
                    self._unknown_top_level(path, top)
                    continue
                if top in ("workspace", "memory", "recall"):
                    singles[top] = Table(value, path)
                    continue
                if not isinstance(value, dict):
                    self.add(
                        path,
                        None,
                        top,
                        f"{top!r} must be a table of tables",
                        f"write each entry as its own table, e.g. [{top}.<name>]",
                    )
                    continue
                target = profiles if top == "profiles" else kbs
                for ident, table in value.items():
                    target[ident] = Table(table, path)
        return profiles, kbs, singles

    def _unknown_top_level(self, path: Path, top: str) -> None:
        problem, fix = _rename_or(
            f"unknown top-level table or key {top!r}",
            top,
            ALLOWED_TOP_LEVEL,
            "remove it; the allowed tables are [profiles.<name>], "
            "[knowledge_bases.<id>], [workspace] and [memory]",
        )
        self.add(path, top, None, problem, fix)

    # -- per-table checks -------------------------------------------------


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
