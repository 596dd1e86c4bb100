r"""The checks every configuration table goes through: a valid id, a table (not a value), no
inline secret, and its schema. Each failure is collected as a
:class:`~kairox.config.errors.ConfigProblem`, so a user sees every problem at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kairox.config.errors import ConfigProblem
from kairox.config.files import ConfigFileReader, Table
from kairox.config.problems import translate_error
from kairox.config.schema import _ID_RE, _URL_CREDENTIALS_RE, SECRET_KEY_SUFFIXES
from kairox.support.secrets import ENV_NAME_RE

__all__ = ["TableChecks", "sanitize_id", "table_name"]


class TableChecks(ConfigFileReader):
    """The table checks of the loader (:mod:`kairox.config.loader`), which holds
    ``problems`` and adds the checks of each section."""

    problems: list[ConfigProblem]

    def add(
        self, file: Path | None, table: str | None, key: str | None, problem: str, fix: str
    ) -> None:
        self.problems.append(ConfigProblem(file, table, key, problem, fix))

    # -- tables --------------------------------------------------------

    def check_id(self, section: str, ident: str, origin: Path) -> None:
        if not _ID_RE.fullmatch(ident):
            what = "profile name" if section == "profiles" else "knowledge-base id"
            self.add(
                origin,
                table_name(section, ident),
                None,
                f"invalid {what} {ident!r}: it must be non-empty and use only letters, "
                "digits, '_', '.' and '-'",
                f"rename the table, e.g. [{section}.{sanitize_id(ident)}]",
            )

    def check_is_table(self, section: str, ident: str | None, t: Table) -> bool:
        if isinstance(t.raw, dict):
            return True
        if ident is None:
            self.add(t.origin, None, section, f"{section!r} must be a table", f"use [{section}]")
        else:
            self.add(
                t.origin,
                section,
                ident,
                f"{ident!r} must be a table, not a {type(t.raw).__name__}",
                f"write it as a table: [{table_name(section, ident)}]",
            )
        return False

    def check_secrets(self, raw: dict[str, Any], origin: Path, table: str) -> set[str]:
        """Report inline secrets and bad ``*_env`` names; return the flagged keys."""
        flagged: set[str] = set()
        for key, value, dotted in _walk_keys(raw):
            lower = key.lower()
            if lower.endswith("_env"):
                if not isinstance(value, str) or not ENV_NAME_RE.fullmatch(value):
                    flagged.add(dotted)
                    example = key[: -len("_env")].upper() or "NAME"
                    self.add(
                        origin,
                        table,
                        dotted,
                        "must be the name of an environment variable (letters, digits "
                        "and '_', not starting with a digit), not its value",
                        f'name the variable that holds the value, e.g. {key} = "{example}"',
                    )
            elif lower.endswith(SECRET_KEY_SUFFIXES) and not isinstance(value, (dict, bool)):
                flagged.add(dotted)
                self.add(
                    origin,
                    table,
                    dotted,
                    "secrets are not stored in config files",
                    "set the secret in an environment variable and reference it: "
                    f'{key}_env = "NAME"',
                )
            elif isinstance(value, str) and _URL_CREDENTIALS_RE.match(value.strip()):
                flagged.add(dotted)
                self.add(
                    origin,
                    table,
                    dotted,
                    "the URL holds credentials (user:password@ before the host); secrets "
                    "are not stored in config files",
                    "remove them from the URL and give the secret through an environment "
                    'variable named by the table\'s *_env key, e.g. api_key_env = "NAME"',
                )
        return flagged

    def validate(
        self,
        model: type[BaseModel],
        data: dict[str, Any],
        origin: Path,
        table: str,
        *,
        skip: set[str] | frozenset[str] = frozenset(),
        plugin: str | None = None,
        kind: str | None = None,
    ) -> BaseModel | None:
        """Validate ``data`` with ``model``; report errors and return ``None`` on failure."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                problem = translate_error(err, model, origin, table, plugin=plugin, kind=kind)
                if problem is not None and problem.key not in skip:
                    self.problems.append(problem)
            return None
        except Exception as exc:
            who = f"plugin {plugin!r}" if plugin else "its plugin"
            self.add(
                origin,
                table,
                None,
                f"the config schema of kind {kind!r} from {who} failed with "
                f"{type(exc).__name__}: {exc} (a bug in the plugin, not in your file)",
                f"report it to the authors of {who}; until it is fixed, remove this table "
                "or stop loading the plugin with KAIROX_LOAD_PLUGINS",
            )
            return None


def table_name(section: str, ident: str) -> str:
    """``section.ident`` as TOML writes it (the id quoted when it needs quotes)."""
    if _ID_RE.fullmatch(ident):
        return f"{section}.{ident}"
    escaped = ident.replace("\\", "\\\\").replace('"', '\\"')
    return f'{section}."{escaped}"'


def sanitize_id(ident: str) -> str:
    """``ident`` made a valid id (for the fix a problem suggests)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", ident).strip("-")
    return cleaned or "name"


def _walk_keys(raw: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any, str]]:
    """Yield ``(key, value, dotted_key)`` for every key, descending into sub-tables."""
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        yield key, value, dotted
        if isinstance(value, dict):
            yield from _walk_keys(value, f"{dotted}.")
