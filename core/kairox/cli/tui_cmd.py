"""``kairox tui``: the full-screen chat (Textual), with inline memory approval and a trace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kairox.cli.app import AppContext

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
    model = None
    if backend is not None or script is not None:
        chosen = facade.config.profiles[name].model_copy(update={"backend": backend or "scripted"})
        model = facade.model_backend(chosen, **({"script": script} if script else {}))
    try:
        # Textual is imported here, not at module level: `kairox --help` must stay light.
        from kairox.tui import KairoxApp
    except ImportError as exc:  # pragma: no cover - textual is a dependency
        raise click.ClickException(
            f"the terminal UI needs Textual ({exc}); install it with `pip install textual`"
        ) from exc
    return KairoxApp(facade, profile=name, backend=model, session_id=session_id)


@click.command()
@click.option("-p", "--profile", default=None, help="Profile name or alias.")
@click.option("--backend", default=None, help="Model backend (default: the profile's).")
@click.option(
    "--script",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replies for the scripted backend (JSONL or '---'-separated text).",
)
@click.option("--session", "session_id", default=None, help="Continue this session.")
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
