"""``kairox mcp``: serve Kairox's tools to an MCP client over stdio or streamable HTTP.

The SDK is imported only when the command runs, so ``kairox --help`` stays light and a
missing ``mcp`` package gets an install hint instead of a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kairox.cli.app import AppContext
from kairox.cli.listen_options import listen_options
from kairox.support.listening import ServeError

TOKEN_ENV = "KAIROX_MCP_TOKEN"


@click.command()
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@listen_options(
    port=8766,
    token_env=TOKEN_ENV,
    token_help="require 'Authorization: Bearer TOKEN' (16+ characters) on every request.",
    when="With --http: ",
)
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="The workspace to serve (default: the current folder, as the client starts it).",
)
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Session id for context and session memories (default: a new one per server).",
)
@click.pass_obj
def mcp(
    app: AppContext,
    use_http: bool,
    host: str,
    port: int,
    token: str | None,
    workspace: Path | None,
    session_id: str | None,
) -> None:
    """Serve search, context and memory to an MCP client (Claude Code, Cursor, Codex...).

    Stdio by default: the client starts `kairox mcp` itself. Memories the client proposes
    wait for your approval (`kairox memory list --pending`), as a model's do in chat.
    """
    from kairox.support.listening import check_bind

    try:
        from kairox.mcp import build_server, run_stdio
    except ImportError as exc:
        raise ServeError(
            f"`kairox mcp` needs the MCP SDK ({exc.name or 'mcp'} is missing): "
            "pip install 'kairox[mcp]'"
        ) from None

    token = token or None  # an empty KAIROX_MCP_TOKEN means "no token"
    if use_http:  # stdio has no address: --host, --port and --token apply to --http only
        check_bind(host, token, token_env=TOKEN_ENV)
    # Load the configuration and open the database now, so their errors come first.
    facade = app.facade(workspace)
    _ = facade.memory
    server = build_server(facade, session_id=session_id)
    try:
        if use_http:
            _serve_http(server, facade, host, port, token)
        else:
            run_stdio(server)
    finally:
        facade.close()  # the sources and the database, once the client is gone


def _serve_http(server: Any, facade: Any, host: str, port: int, token: str | None) -> None:
    from kairox.mcp import run_http
    from kairox.support.listening import bind_socket
    from kairox.support.terminal import printable

    sock = bind_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    # stdout is the protocol channel only for stdio; with --http it is free for the address.
    root = f"{facade.workspace_root} ({facade.workspace_root_why})"
    click.echo(f"Kairox MCP server for {printable(root)}")
    click.echo(f"  http://{shown}:{bound}/mcp")
    if token is not None:
        click.echo("  every request needs: Authorization: Bearer <token>")
    click.echo("Press Ctrl+C to stop.")
    sys.stdout.flush()
    try:
        run_http(server, sock, host=host, token=token)
    finally:
        sock.close()
