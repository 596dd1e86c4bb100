"""The ``kairox`` command line: a click group built per invocation, plus plugin commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kairox.cli.app import AppContext, KairoxGroup, console_err

#: The built-in commands but ``plugins``/``install`` (plugin commands are checked against
#: them), each imported when it runs: a command does not pay for the others' imports.
BUILT_IN_COMMANDS = {
    "config": "kairox.cli.config_cmd:config",
    "index": "kairox.cli.index_cmd:index",
    "search": "kairox.cli.search_cmd:search",
    "kb": "kairox.cli.kb_cmd:kb",
    "bench": "kairox.cli.bench_cmd:bench",
    "memory": "kairox.cli.memory_cmd:memory",
    "context": "kairox.cli.context_cmd:context",
    "chat": "kairox.cli.chat_cmd:chat",
    "session": "kairox.cli.session_cmd:session",
    "serve": "kairox.cli.serve_cmd:serve",
    "daemon": "kairox.cli.daemon_cmd:daemon",
    "mcp": "kairox.cli.mcp_cmd:mcp",
    "tui": "kairox.cli.tui_cmd:tui",
}


def build_cli(
    pm: Any = None, app: Callable[[Path | None], AppContext] | None = None
) -> click.Group:
    """A fresh root group with the built-in commands and every plugin's commands.

    :param app: makes each invocation's :class:`AppContext` from ``--config`` (the daemon
        hands out its warm facades this way); a plain one by default.
    """
    from kairox import __version__
    from kairox.cli import plugins_cmd
    from kairox.support.secrets import install_log_scrubbing

    @click.group(cls=KairoxGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, "--version", prog_name="kairox")
    @click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Use this kairox.toml instead of searching upwards from the current folder.",
    )
    @click.pass_context
    def cli(ctx: click.Context, config_path: Path | None) -> None:
        """Kairox: retrieval and context assembly for LLM agents."""
        ctx.obj = AppContext(config_path=config_path, pm=pm) if app is None else app(config_path)
        # Sources, the workspace index and the database are closed when the command ends.
        ctx.call_on_close(ctx.obj.close)

    cli.build = build_cli  # type: ignore[attr-defined]  # a KairoxGroup (cls= above)
    install_log_scrubbing()
    cli.add_command(plugins_cmd.plugins)
    cli.add_command(plugins_cmd.install)
    for name, target in BUILT_IN_COMMANDS.items():
        cli.add_lazy_command(name, target)  # type: ignore[attr-defined]  # a KairoxGroup
    plugins_cmd.add_plugin_commands(cli, pm)
    return cli


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    try:
        return build_cli()(args=argv, prog_name="kairox")
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        console_err.print("interrupted")
        sys.exit(130)
