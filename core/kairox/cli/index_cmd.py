"""``kairox index [PATH]``: index a workspace's files, incrementally."""

from __future__ import annotations

from pathlib import Path

import click

from kairox.cli.app import AppContext, console, console_err, print_json, skipped_summary
from kairox.cli.embed_progress_view import embed_progress
from kairox.cli.options import json_option
from kairox.cli.workspace_root import say_root


@click.command()
@click.argument(
    "path", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option("--no-wait", is_flag=True, help="Fail at once if another index run is busy.")
@json_option("Print the counts as JSON.")
@click.pass_obj
def index(app: AppContext, path: Path | None, no_wait: bool, as_json: bool) -> None:
    """Index the workspace at PATH (default: the current workspace) for search.

    Unchanged files are not re-read or re-embedded; deleted files leave the index.
    """
    facade = app.facade(cwd=path)
    root = facade.workspace_root
    if not as_json:
        say_root(facade)
    if facade.workspace_index().is_busy() and not no_wait:
        console_err.print("another `kairox index` is running here; waiting for it...")
    with embed_progress(f"indexing {root}", disabled=as_json) as embedding:
        stats = facade.index_workspace(wait=not no_wait, embedding=embedding)
    if as_json:
        print_json({"workspace": str(root), "why": facade.workspace_root_why, **stats.as_json()})
        return
    for relpath, why in stats.skipped_details:
        console_err.print(f"skipped {relpath}: {why}", markup=False)
    console.print(
        f"indexed {root}: {stats.added} added, {stats.updated} updated, "
        f"{stats.removed} removed, {stats.unchanged} unchanged"
        + skipped_summary(stats.skipped_reasons)
        + f"; {stats.chunks_embedded} chunks"
        + (f" and {stats.sentences_embedded} sentences" if stats.sentences_embedded else "")
        + f" embedded, {stats.chunks_total} chunks in the index"
        + (
            f"; vectors packed for fast loading ({stats.pack_bytes / 1e6:.1f} MB)"
            if stats.pack_bytes
            else ""
        ),
        markup=False,
    )
