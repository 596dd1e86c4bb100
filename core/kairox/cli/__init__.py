"""The ``kairox`` command line: a click group built per invocation, plus plugin commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kairox.cli.app import AppContext, KairoxGroup, console_err


def build_cli(
    pm: Any = None, app: Callable[[Path | None], AppContext] | None = None
) -> click.Group:
    """A fresh root group with the built-in commands and every plugin's commands.

    :param app: makes each invocation's :class:`AppContext` from ``--config`` (the daemon
        hands out its warm facades this way); a plain one by default.
    """
    from kairox import __version__
    from kairox.cli import (
        bench_cmd,
        chat_cmd,
        config_cmd,
        context_cmd,
        daemon_cmd,
        index_cmd,
        kb_cmd,
        mcp_cmd,
        memory_cmd,
        plugins_cmd,
        search_cmd,
        serve_cmd,
        session_cmd,
        tui_cmd,
    )
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
    cli.add_command(config_cmd.config)
    cli.add_command(index_cmd.index)
    cli.add_command(search_cmd.search)
    cli.add_command(kb_cmd.kb)
    cli.add_command(bench_cmd.bench)
    cli.add_command(memory_cmd.memory)
    cli.add_command(context_cmd.context)
    cli.add_command(chat_cmd.chat)
    cli.add_command(session_cmd.session)
    cli.add_command(serve_cmd.serve)
    cli.add_command(daemon_cmd.daemon)
    cli.add_command(mcp_cmd.mcp)
    cli.add_command(tui_cmd.tui)
    plugins_cmd.add_plugin_commands(cli, pm)
    return cli


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    try:
        return build_cli()(args=argv, prog_name="kairox")
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        console_err.print("interrupted")
        sys.exit(130)
