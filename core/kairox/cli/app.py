"""Shared CLI plumbing: the per-invocation context, error handling and consoles."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from kairox.config import KairoxConfig
    from kairox.plugins import KairoxPluginManager


def _console(stderr: bool = False) -> Console:
    made = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        # Piped output is read by grep and scripts, not eyes: don't fold it at 80 columns.
        made.width = 160
    return made


console = _console()
console_err = _console(stderr=True)

CONFIG_ERROR_EXIT = 2


@dataclass
class AppContext:
    """What every command can reach: the plugin manager and the loaded configuration."""

    config_path: Path | None = None
    pm: Any = None
    _config: KairoxConfig | None = field(default=None, repr=False)

    def plugin_manager(self) -> KairoxPluginManager:
        if self.pm is None:
            from kairox.plugins import get_plugin_manager

            self.pm = get_plugin_manager()
        return self.pm

    def config(self) -> KairoxConfig:
        if self._config is None:
            from kairox.config import load_config

            self._config = load_config(
                config_path=self.config_path, registry=self.plugin_manager().registry
            )
        return self._config


class KairoxGroup(click.Group):
    """Turns configuration errors into a clear message and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        from kairox.config import ConfigError

        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            console_err.print("[bold red]configuration error[/]")
            console_err.print(str(exc), markup=False)
            ctx.exit(CONFIG_ERROR_EXIT)


def warn_plugin_failures(app: AppContext) -> None:
    """One stderr line per failed plugin, so a broken install is never silent."""
    for info in app.plugin_manager().failures():
        console_err.print(
            f"warning: plugin {info.name} failed: {info.error} (see `kairox plugins`)",
            markup=False,
        )


def fold_long_values(table: Table) -> None:
    """Wrap long names instead of cutting them with an ellipsis (output gets piped)."""
    for column in table.columns:
        column.overflow = "fold"
