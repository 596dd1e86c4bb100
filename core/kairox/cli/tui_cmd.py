"""``kairox tui``: the full-screen chat (Textual), with inline memory approval and a trace."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from kairox.cli.app import AppContext
from kairox.cli.chat_cmd import ChatOptions, chat_options

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade
    from kairox.tui import KairoxApp


def build_app(facade: AppFacade, options: ChatOptions | None = None) -> KairoxApp:
    """The app for these options, with the backend built exactly as ``kairox chat`` does."""
    options = options or ChatOptions()
    name, model = options.resolved(facade)
    try:
        # Textual is imported here, not at module level: `kairox --help` must stay light.
        from kairox.tui import KairoxApp
    except ImportError as exc:  # pragma: no cover - textual is a dependency
        raise click.ClickException(
            f"the terminal UI needs Textual ({exc}); install it with `pip install textual`"
        ) from exc
    return KairoxApp(facade, profile=name, backend=model, session_id=options.session_id)


def on_a_terminal() -> bool:
    """Whether standard input and output are both a terminal, as a full-screen UI needs."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


@click.command()
@chat_options
@click.pass_obj
def tui(app: AppContext, options: ChatOptions) -> None:
    """Chat in a full-screen terminal UI: approve proposed memories with a / r, see the trace.

    Keys: Enter send · Esc review proposals · a approve · r reject · ctrl+k compact ·
    ctrl+p switch profile · ctrl+t toggle the trace panel · ctrl+q quit.
    """
    tui_app = build_app(app.facade(), options)
    if not on_a_terminal():
        # Without one, Textual would write full-screen escape codes into a pipe until killed.
        raise click.UsageError(
            "kairox tui needs a terminal; use kairox chat for line mode or pipes"
        )
    tui_app.run()
