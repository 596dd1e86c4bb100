"""``kairox tui``: the full-screen chat (Textual), with inline memory approval and a trace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kairox.cli.app import AppContext
from kairox.cli.chat_cmd import chat_options, chosen_backend

if TYPE_CHECKING:
    from kairox.facade import AppFacade
    from kairox.tui import KairoxApp


def build_app(
    facade: AppFacade,
    profile: str | None = None,
    backend: str | None = None,
    script: Path | None = None,
    session_id: str | None = None,
) -> KairoxApp:
    """The app for these options, with the backend built exactly as ``kairox chat`` does."""
    name = facade.resolve_profile(profile)
    model = chosen_backend(facade, name, backend, script)
    try:
        # Textual is imported here, not at module level: `kairox --help` must stay light.
        from kairox.tui import KairoxApp
    except ImportError as exc:  # pragma: no cover - textual is a dependency
        raise click.ClickException(
            f"the terminal UI needs Textual ({exc}); install it with `pip install textual`"
        ) from exc
    return KairoxApp(facade, profile=name, backend=model, session_id=session_id)


@click.command()
@chat_options
@click.pass_obj
def tui(
    app: AppContext,
    profile: str | None,
    backend: str | None,
    script: Path | None,
    session_id: str | None,
) -> None:
    """Chat in a full-screen terminal UI: approve proposed memories with a / r, see the trace.

    Keys: Enter send · Esc review proposals · a approve · r reject · ctrl+k compact ·
    ctrl+p switch profile · ctrl+t toggle the trace panel · ctrl+q quit.
    """
    build_app(app.facade(), profile, backend, script, session_id).run()
