"""Filling a local knowledge base from files, folders and JSONL records, incrementally.

A text file becomes one document whose id is its path (relative to the workspace root
when it lies inside it, so ``docs/`` and ``./docs`` name the same documents). A
``.jsonl`` file holds one record per line: ``id`` and ``text`` required, ``title``,
``uri`` and ``metadata`` optional. Only documents whose fingerprint changed are
written; ``prune`` deletes stored documents this run did not produce.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox.errors import KairoxError
from kairox.retrieval import Document, IngestableSource
from kairox.workspace.files import iter_workspace_files, read_text

BATCH_SIZE = 500


class IngestError(KairoxError, ValueError):
    """An input cannot be ingested; the message names the file (and line) and the fix."""


@dataclass
class IngestStats:
    """What one ingest run did."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped_files: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "skipped_files": self.skipped_files,
        }


def _document_id(path: Path, root: Path) -> str:
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def read_jsonl(path: Path) -> Iterator[Document]:
    """The records of a JSONL file; a bad line raises :class:`IngestError` naming it."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise IngestError(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise IngestError(f"{where}: expected a JSON object, got {type(record).__name__}")
            missing = [key for key in ("id", "text") if key not in record]
            if missing:
                raise IngestError(
                    f"{where}: missing {', '.join(missing)}; every record needs 'id' and 'text'"
                )
            metadata = record.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise IngestError(f"{where}: 'metadata' must be an object")
            yield Document(
                id=str(record["id"]),
                text=str(record["text"]),
                title=str(record.get("title") or ""),
                uri=record.get("uri"),
                metadata=metadata,
            )


def collect_documents(
    paths: Sequence[Path], *, root: Path, stats: IngestStats | None = None
) -> Iterator[Document]:
    """Documents from files, folders (walked like a workspace) and ``.jsonl`` files."""
    for given in paths:
        if not given.exists():
            raise IngestError(f"{given}: no such file or folder")
        files = [f.path for f in iter_workspace_files(given)] if given.is_dir() else [given]
        for path in files:
            if path.suffix == ".jsonl":
                yield from read_jsonl(path)
                continue
            text = read_text(path)
            if text is None:
                if stats is not None:
                    stats.skipped_files.append(str(path))
                continue
            doc_id = _document_id(path, root)
            yield Document(
                id=doc_id,
                text=text,
                title=path.name,
                uri=str(path.resolve()),
                metadata={"path": doc_id, "ext": path.suffix},
            )


def ingest(
    target: IngestableSource,
    paths: Sequence[Path],
    *,
    root: Path,
    prune: bool = False,
    progress: Callable[[int], None] | None = None,
) -> IngestStats:
    """Write the documents of ``paths`` into ``target``; only changed ones are written.

    Everything is read and validated before the first write, so a malformed input
    changes nothing. ``progress(n)`` is called with the number of documents written.
    """
    stats = IngestStats()
    documents: dict[str, Document] = {}
    for doc in collect_documents(paths, root=root, stats=stats):
        documents[doc.id] = doc  # a later copy of an id wins, as it would on disk
    stored = target.fingerprints()
    changed = [d for d in documents.values() if stored.get(d.id) != d.fingerprint]
    stats.unchanged = len(documents) - len(changed)
    stats.added = sum(1 for d in changed if d.id not in stored)
    stats.updated = len(changed) - stats.added
    for start in range(0, len(changed), BATCH_SIZE):
        part = changed[start : start + BATCH_SIZE]
        target.upsert(part)
        if progress is not None:
            progress(len(part))
    if prune:
        gone = sorted(set(stored) - set(documents))
        if gone:
            target.delete(gone)
        stats.deleted = len(gone)
    return stats
