"""Shared CLI plumbing: the per-invocation context, error handling and consoles."""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from kairox.support.secrets import scrub
from kairox.support.terminal import SafeConsole

if TYPE_CHECKING:
    from kairox.config.loaded import KairoxConfig
    from kairox.plugin_host.manager import KairoxPluginManager
    from kairox.runtime.facade import AppFacade


def _console(stderr: bool = False, *, file: Any = None, environ: Any = None) -> Console:
    """A console for the command's output; the daemon (``kairox.cli.daemon_server``) makes
    one with a client's ``file`` and terminal ``environ`` to print exactly what it would."""
    environ = os.environ if environ is None else environ
    # SafeConsole: what commands print comes from files, models and servers (see terminal.py).
    made = SafeConsole(stderr=stderr, highlight=False, soft_wrap=True, file=file, _environ=environ)
    if not made.is_terminal and "COLUMNS" not in environ:
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
    _facade: AppFacade | None = field(default=None, repr=False)
    _others: list[AppFacade] = field(default_factory=list, repr=False)

    def plugin_manager(self) -> KairoxPluginManager:
        if self.pm is None:
            from kairox.plugin_host.manager import get_plugin_manager

            self.pm = get_plugin_manager()
        return self.pm

    def config(self) -> KairoxConfig:
        return self.facade().config

    def facade(self, cwd: Path | None = None) -> AppFacade:
        """The facade for the current folder (or the folder ``cwd`` the user named, the
        workspace root unless a ``kairox.toml`` above it says otherwise), sharing this
        plugin manager.

        Every facade made here is closed when the command ends (:meth:`close`).
        """
        from kairox.runtime.facade import AppFacade

        if cwd is not None:
            made = AppFacade(
                cwd=cwd, config_path=self.config_path, pm=self.plugin_manager(), root_given=True
            )
            self._others.append(made)
            return made
        if self._facade is None:
            self._facade = AppFacade(config_path=self.config_path, pm=self.plugin_manager())
        return self._facade

    def close(self) -> None:
        """Close the facades of this invocation (their sources, index and database)."""
        facades = [f for f in (self._facade, *self._others) if f is not None]
        self._facade, self._others = None, []
        for facade in facades:
            facade.close()


class KairoxGroup(click.Group):
    """Turns known errors into a clear message: configuration errors exit 2, others 1;
    a full disk no store has named a folder for is one line naming ``$KAIROX_HOME``, not a
    traceback.

    :attr:`build` is the function that built the group (:func:`kairox.cli.build_cli`): the
    daemon builds its own CLI with it, so no command module imports the root back.
    """

    build: Callable[..., click.Group] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Commands imported when first looked up, ``name -> "module:attribute"``: a run of
        #: ``kairox kb ingest`` does not import what ``kairox chat`` or ``kairox index`` needs.
        self.lazy_commands: dict[str, str] = {}

    def add_lazy_command(self, name: str, target: str) -> None:
        """Register command ``name``, the ``attribute`` of ``module`` (``target`` is
        ``"module:attribute"``), imported only when it is looked up."""
        self.lazy_commands[name] = target

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is not None:
            module, _, attribute = target.partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
            del self.lazy_commands[cmd_name]
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        from kairox.config.errors import ConfigError
        from kairox.support.errors import KairoxError
        from kairox.support.paths import disk_full_message, is_disk_full, kairox_home

        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            console_err.print("[bold red]configuration error[/]")
            console_err.print(str(exc), markup=False)
            ctx.exit(CONFIG_ERROR_EXIT)
        except KairoxError as exc:
            console_err.print("[bold red]error:[/] ", end="")
            console_err.print(str(exc), markup=False)
            ctx.exit(1)
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            # Where no store said which folder (kairox index does): Kairox's own home.
            console_err.print("[bold red]error:[/] ", end="")
            console_err.print(disk_full_message(kairox_home()), markup=False)
            ctx.exit(1)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def print_json(data: Any, **options: Any) -> None:
    """Print ``data`` as strict JSON: ASCII only, so no control or bidi character reaches the
    terminal unescaped, a non-finite float (which JSON cannot spell) as ``null``, and known
    secrets masked."""
    click.echo(scrub(json.dumps(_finite(data), indent=2, allow_nan=False, **options)))


def skipped_summary(reasons: dict[str, int]) -> str:
    """``", 3 skipped (2 binary, 1 too large)"``, or ``""`` when nothing was skipped."""
    if not reasons:
        return ""
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f", {sum(reasons.values())} skipped ({parts})"


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


#: Seconds between plain progress lines when stderr is not a terminal.
PLAIN_PROGRESS_EVERY_S = 3.0


@contextlib.contextmanager
def progress_bars(
    every_s: float = PLAIN_PROGRESS_EVERY_S,
) -> Iterator[Callable[[str, int, int], None]]:
    """Transient progress bars on stderr; yields ``advance(what, done, total)``.

    Piped (CI logs, ``| tee``): a plain ``what: done/total`` line when a task starts, at
    most every ``every_s`` seconds after, and when it completes, so a long benchmark run
    never looks like a hang.
    """
    if not console_err.is_terminal:
        yield _plain_progress(every_s)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),  # the ETA of long benchmark and indexing runs
        console=console_err,
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def advance(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bars.add_task(what, total=total)
        bars.update(tasks[what], completed=done, total=total)

    with bars:
        yield advance


def _plain_progress(every_s: float) -> Callable[[str, int, int], None]:
    # Printed from the caller's thread, not a ticker: a benchmark's forked child (its
    # isolated run) reports through the same callback and has no threads of the parent.
    started: dict[str, float] = {}
    shown: dict[str, float] = {}
    finished: set[str] = set()
    lock = threading.Lock()

    def advance(what: str, done: int, total: int) -> None:
        now = time.monotonic()
        with lock:
            first = what not in started
            started.setdefault(what, now)
            complete = done >= total and what not in finished
            if complete:
                finished.add(what)
            elif what in finished or not (first or now - shown[what] >= every_s):
                return
            shown[what] = now
            elapsed = now - started[what]
        console_err.print(
            f"{what}: {done}/{total} · {elapsed:.0f} s elapsed", markup=False, highlight=False
        )

    return advance
