"""``kairox kb sync``: push the workspace index into a remote vector store, resumably.

A journal in the state database records, per knowledge base and workspace, which
record ids were pushed with which fingerprint (chunk-text hash + embedder). A sync
pushes only what changed, deletes remotely what left the workspace, and writes the
journal after every batch the store acknowledged: a sync that fails half-way resumes
where it stopped, and ids are stable so nothing is ever duplicated remotely.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from kairox.retrieval import VectorRecord, VectorSyncTarget
from kairox.store.sqlite import ensure_component_schema
from kairox.support.run_stats import RunStats
from kairox.workspace.filtering import language_of
from kairox.workspace.rag_index import open_database

if TYPE_CHECKING:
    from kairox.support.embed_progress import EmbedProgress
    from kairox.workspace.rag_index import WorkspaceRagIndex

_JOURNAL = (
    """CREATE TABLE IF NOT EXISTS kb_sync_journal (
        kb_id TEXT NOT NULL,
        workspace TEXT NOT NULL,
        record_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        PRIMARY KEY (kb_id, workspace, record_id)
    )""",
)

BATCH_SIZE = 100


@dataclass
class SyncStats(RunStats):
    """What one sync did."""

    upserted: int = 0
    deleted: int = 0
    unchanged: int = 0
    embedded: int = 0


def record_id(workspace_id: str, relpath: str, chunk_index: int) -> str:
    """A stable, readable id: the chunk's place, tagged with its workspace."""
    tag = hashlib.sha256(workspace_id.encode()).hexdigest()[:8]
    return f"{relpath}#{chunk_index}@{tag}"


def sync_workspace(
    index: WorkspaceRagIndex,
    target: VectorSyncTarget,
    *,
    kb_id: str,
    full: bool = False,
    progress: Callable[[int, int], None] | None = None,
    embedding: EmbedProgress | None = None,
) -> SyncStats:
    """Make the remote store hold exactly this workspace's chunks.

    :param index: the workspace index, opened with the target's embedding backend.
    :param full: ignore the journal and push every chunk again (after the remote store
        was wiped or edited by hand).
    :param progress: ``progress(done, total)`` after each acknowledged batch.
    :param embedding: counts the chunks embedded first for the target's model.
    """
    stats = SyncStats(embedded=index.embed_missing(embedding))
    # Its own connection: the journal lives in the same database as the chunks it
    # describes, and WAL lets both connections work side by side.
    db = open_database(index.database)
    try:
        return _sync(db, index, target, kb_id, full, progress, stats)
    finally:
        db.close()


def _sync(
    db: sqlite3.Connection,
    index: WorkspaceRagIndex,
    target: VectorSyncTarget,
    kb_id: str,
    full: bool,
    progress: Callable[[int, int], None] | None,
    stats: SyncStats,
) -> SyncStats:
    ensure_component_schema(db, "kb_sync", 1, _JOURNAL)
    key = (kb_id, index.workspace_id)
    journal = dict(
        db.execute(
            "SELECT record_id, fingerprint FROM kb_sync_journal WHERE kb_id=? AND workspace=?",
            key,
        )
    )
    if full:
        journal = {}
    current: dict[str, VectorRecord] = {}
    for chunk in index.iter_chunk_vectors():
        rid = record_id(index.workspace_id, chunk.relpath, chunk.chunk_index)
        fingerprint = f"{chunk.text_hash}:{index.embedder.name}"
        current[rid] = VectorRecord(
            id=rid,
            vector=chunk.vector.tolist(),
            text=chunk.text,
            metadata={
                "path": chunk.relpath,
                # filterable remotely as in the workspace index (kairox.workspace.filtering)
                "ext": PurePosixPath(chunk.relpath).suffix,
                "language": language_of(chunk.relpath),
                "chunk": chunk.chunk_index,
                "start": chunk.start,
                "end": chunk.end,
                "uri": str(index.root / chunk.relpath),
                "workspace": index.workspace_id,
                "fingerprint": fingerprint,
            },
        )
    changed = [r for rid, r in current.items() if journal.get(rid) != r.metadata["fingerprint"]]
    gone = sorted(set(journal) - set(current))
    stats.unchanged = len(current) - len(changed)
    total = len(changed) + len(gone)
    done = 0
    for start in range(0, len(changed), BATCH_SIZE):
        batch = changed[start : start + BATCH_SIZE]
        target.upsert_vectors(batch)  # raises on failure: the journal keeps what landed
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO kb_sync_journal VALUES (?, ?, ?, ?)",
                [(*key, r.id, r.metadata["fingerprint"]) for r in batch],
            )
        stats.upserted += len(batch)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    for start in range(0, len(gone), BATCH_SIZE):
        batch_ids = gone[start : start + BATCH_SIZE]
        target.delete_vectors(batch_ids)
        with db:
            db.executemany(
                "DELETE FROM kb_sync_journal WHERE kb_id=? AND workspace=? AND record_id=?",
                [(*key, rid) for rid in batch_ids],
            )
        stats.deleted += len(batch_ids)
        done += len(batch_ids)
        if progress is not None:
            progress(done, total)
    return stats
