"""``kairox kb``: work with local knowledge bases."""

from __future__ import annotations

from pathlib import Path

import click

from kairox.cli.app import AppContext, console, console_err, print_json, skipped_summary
from kairox.cli.embed_progress_view import embed_progress
from kairox.cli.options import json_option
from kairox.support.embed_progress import EmbedProgress


@click.group()
def kb() -> None:
    """Fill knowledge bases: ingest documents, sync the workspace's vectors."""


@kb.command()
@click.argument("kb_id")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--prune", is_flag=True, help="Delete stored documents these inputs no longer hold.")
@click.option(
    "--no-chunk",
    is_flag=True,
    help="Store every document whole (data already passage-sized, such as a BEIR corpus).",
)
@json_option("Print the counts as JSON.")
@click.pass_obj
def ingest(
    app: AppContext,
    kb_id: str,
    inputs: tuple[Path, ...],
    prune: bool,
    no_chunk: bool,
    as_json: bool,
) -> None:
    """Fill knowledge base KB_ID from files, folders or JSONL records, incrementally.

    JSONL lines hold "id" and "text", optionally "title", "uri", "metadata" and "chunk"
    (false: keep this record whole). Documents longer than the knowledge base's
    chunk_tokens (default 256) are stored as chunks along their headings and pages.
    PDF, HTML, Office files and notebooks are converted to text (HTML, PDF and Office
    need `pip install 'kairox[documents]'`). Unchanged documents are not rewritten.
    Only regular files are read, up to [workspace] max_file_bytes (default 2 MB); each
    skipped input gets a line on stderr. The inputs are checked in full before anything
    is written (a bad record changes nothing), then streamed in batches.
    """
    facade = app.facade()
    with embed_progress(f"ingesting into {kb_id}", disabled=as_json) as counts:
        counts.verb = "ingested"
        counts.set_stage("checking inputs")
        stats = facade.ingest(
            kb_id,
            list(inputs),
            prune=prune,
            progress=lambda n: counts.advance(documents=n),
            planned=lambda n: counts.plan(documents=n),
            stage=counts.set_stage,
            checked=lambda n: counts.set_stage(f"checking inputs: {n:,} documents"),
            chunk=False if no_chunk else None,
        )
    if as_json:
        print_json({"knowledge_base": kb_id, **stats.as_json()})
        return
    for path, why in stats.skipped:
        console_err.print(f"skipped {path}: {why}", markup=False)
    console.print(
        f"{kb_id}: {stats.added} added, {stats.updated} updated, {stats.unchanged} unchanged"
        + (f", {stats.reembedded} re-embedded" if stats.reembedded else "")
        + (f", {stats.deleted} deleted" if prune else "")
        + f"; {stats.chunks_written} chunks written"
        + skipped_summary(stats.skipped_reasons),
        markup=False,
    )


@kb.command()
@click.argument("kb_id")
@click.option("--full", is_flag=True, help="Push every chunk again, not only what changed.")
@json_option("Print the counts as JSON.")
@click.pass_obj
def sync(app: AppContext, kb_id: str, full: bool, as_json: bool) -> None:
    """Push the workspace index (chunks, vectors, metadata) into knowledge base KB_ID.

    Only changed chunks are sent; chunks of deleted files are deleted remotely. Ids are
    stable, so a sync that failed half-way is finished by running it again.
    """
    facade = app.facade()
    with embed_progress(f"syncing {kb_id}", disabled=as_json) as counts:
        counts.unit, counts.verb = "chunks", "sent"
        counts.set_stage("comparing the index with the store")
        stats = facade.sync(kb_id, full=full, progress=_SyncCounts(counts), embedding=counts)
    if as_json:
        print_json({"knowledge_base": kb_id, **stats.as_json()})
        return
    console.print(
        f"{kb_id}: {stats.upserted} chunks pushed, {stats.deleted} deleted, "
        f"{stats.unchanged} unchanged"
        + (f" ({stats.embedded} chunks embedded for this store's model)" if stats.embedded else ""),
        markup=False,
    )


class _SyncCounts:
    """Turns ``progress(done, total)`` from a sync into :class:`EmbedProgress` counts."""

    def __init__(self, counts: EmbedProgress) -> None:
        self.counts = counts
        self.done = self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.counts.plan(documents=total - self.total)
        self.counts.advance(documents=done - self.done)
        self.done, self.total = done, total
