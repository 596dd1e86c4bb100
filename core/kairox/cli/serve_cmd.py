"""``kairox serve``: the web memory browser for the current workspace.

Starlette and uvicorn are imported only when the command runs, so ``kairox --help`` and
the other commands stay light.
"""

from __future__ import annotations

import sys
import webbrowser

import click

from kairox.cli.app import AppContext
from kairox.cli.listen_options import listen_options


@click.command()
@listen_options(
    port=8765,
    token_env="KAIROX_SERVE_TOKEN",
    token_help="Require this secret (16+ characters) on every request; visit /?token=... once.",
)
@click.option(
    "--origin",
    default=None,
    metavar="URL",
    help="The address browsers use, when it is not http://HOST:PORT (needed with 0.0.0.0); "
    "requests naming any other address are refused.",
)
@click.option(
    "--open/--no-open",
    "open_browser",
    default=False,
    show_default=True,
    help="Open the page in your web browser.",
)
@click.pass_obj
def serve(
    app: AppContext,
    host: str,
    port: int,
    token: str | None,
    origin: str | None,
    open_browser: bool,
) -> None:
    """Browse, approve, reject, edit and forget memories in a web page.

    Listens on 127.0.0.1 and needs no login by default. To serve on a network address,
    pass --token (or set KAIROX_SERVE_TOKEN): every request must then carry it.
    """
    try:
        import uvicorn

        from kairox.web import Origin, ServeError, bind_socket, check_bind, create_app
    except ImportError as exc:  # pragma: no cover - only with a broken install
        raise click.ClickException(
            f"the memory browser needs {exc.name or 'starlette and uvicorn'}: "
            "pip install starlette uvicorn (or reinstall kairox)"
        ) from exc

    token = token or None  # an empty KAIROX_SERVE_TOKEN means "no token", not "the empty one"
    check_bind(host, token)
    try:
        canonical = Origin.parse(origin) if origin else None
    except ValueError as exc:
        raise ServeError(f"--origin: {exc}") from None
    if canonical is None:
        Origin.for_bind(host, port)  # a wildcard address needs --origin: say so before binding

    # Load the configuration and open the database now, so their errors come before the URL.
    facade = app.facade()
    _ = facade.memory
    sock = bind_socket(host, port)
    if canonical is None:
        canonical = Origin.for_bind(host, sock.getsockname()[1])
    web_app = create_app(app.facade, token=token, allowed_origin=str(canonical))

    url = f"{canonical}/"
    click.echo(f"Kairox memory browser for {facade.workspace_root}")
    click.echo(f"  {url}")
    if token is not None:
        click.echo(f"  sign in once per browser at {url}?token=<your token>")
    click.echo("Press Ctrl+C to stop.")
    # uvicorn blocks from here on: a piped stdout (scripts, tests) must see the URL now.
    sys.stdout.flush()
    if open_browser:
        # The socket is already listening, so the browser's request waits in its backlog.
        webbrowser.open(f"{url}?token={token}" if token is not None else url)

    config = uvicorn.Config(
        web_app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        # No proxy in front: X-Forwarded-* headers from a client must not change the scheme.
        proxy_headers=False,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
